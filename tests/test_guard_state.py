"""What hetero.guard's state may hold, beyond arrays: generator objects and the process-wide
random generators (restored, so a replay draws the same numbers; ``rng=False`` leaves the
process-wide ones alone), objects with state_dict/load_state_dict, plain values, and the clear
error for a value no snapshot can copy."""

from __future__ import annotations

import dataclasses
import random
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.recovery import snapshot
from hetero.recovery.guard import Guard
from hetero.recovery.snapshot import UnsnapshottableError

pytestmark = pytest.mark.usefixtures("state_dir")  # quarantine entries go to a private store


def new_state() -> dict[str, Any]:
    return {"gen": np.random.default_rng(5), "legacy": np.random.RandomState(6), "own": random.Random(7),
            "draws": []}


def draw(state: dict[str, Any], faults: set[int], step: int) -> None:
    """Draws from every generator into ``state["draws"]``, then fails once at each step in ``faults``."""
    state["draws"].append((random.random(), float(np.random.random()), float(state["gen"].random()),
                           int(state["legacy"].randint(1 << 30)), state["own"].random()))
    if step in faults:
        faults.discard(step)
        raise hetero.device().runtime.fault_error("oom")


@pytest.fixture
def seeded() -> Iterator[None]:
    saved = random.getstate(), np.random.get_state()
    yield
    random.setstate(saved[0])
    np.random.set_state(saved[1])


def run(faults: set[int], **options: Any) -> tuple[dict[str, Any], Guard]:
    random.seed(1)
    np.random.seed(2)
    state = new_state()
    with hetero.guard(state, snapshot_every=4, device="cpu", devices=["cpu"], standby=False, **options) as g:
        for step in range(10):
            g.run(draw, state, faults, step)
    return state, g


@pytest.mark.usefixtures("seeded")
def test_a_replay_draws_what_the_first_run_drew() -> None:
    want, _ = run(set())
    got, g = run({6, 9})
    assert [r["steps_replayed"] for r in g.recoveries] == [2, 1]
    assert got["draws"] == want["draws"]  # global random, np.random, Generator, RandomState, random.Random
    assert got["gen"] is not want["gen"] and len(got["draws"]) == 10


@pytest.mark.usefixtures("seeded")
def test_rng_false_leaves_the_process_generators_alone() -> None:
    want, _ = run(set())
    got, g = run({6}, rng=False)
    assert g.snapshots_taken == 3 and len(g.recoveries) == 1
    by_source = list(zip(*got["draws"], strict=True)), list(zip(*want["draws"], strict=True))
    # random and np.random went on from where the failed step left them: steps 4.. draw other numbers
    for column in (0, 1):
        assert by_source[0][column][:4] == by_source[1][column][:4]
        assert by_source[0][column][4:] != by_source[1][column][4:]
    for column in (2, 3, 4):  # generator objects in state are state: restored all the same
        assert by_source[0][column] == by_source[1][column]


def test_generator_objects_are_restored_into_the_same_objects() -> None:
    state = new_state()
    state["bits"] = np.random.PCG64(8)
    taken = snapshot.take(state, 0)
    want = [state["gen"].random(), state["legacy"].rand(), state["own"].random(), state["bits"].random_raw()]
    objects = dict(state)
    snapshot.restore(taken, state, hetero.device("cpu"))
    assert all(state[key] is objects[key] for key in objects)
    assert [state["gen"].random(), state["legacy"].rand(), state["own"].random(), state["bits"].random_raw()] == want


class Counter:
    """A user class following the state_dict protocol; its lock could not be copied."""

    def __init__(self) -> None:
        self.count, self.lock = 0, threading.Lock()

    def state_dict(self) -> dict[str, Any]:
        return {"count": self.count}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.count = state["count"]


def test_a_state_dict_object_is_restored_through_its_protocol() -> None:
    counter = Counter()
    counter.count = 3
    state: dict[str, Any] = {"counter": counter}
    taken = snapshot.take(state, 0)
    counter.count = 10
    snapshot.restore(taken, state, hetero.device("cpu"))
    assert state["counter"] is counter and counter.count == 3
    counter.count = 11
    snapshot.restore(taken, state, hetero.device("cpu"))  # a second fault restores the same snapshot again
    assert counter.count == 3


@dataclasses.dataclass
class Progress:
    epoch: int
    losses: list[float]


def test_plain_values_are_accepted_and_restored() -> None:
    state: dict[str, Any] = {"n": 1, "lr": 0.5, "name": "run", "none": None, "pair": (1, "a"),
                             "progress": Progress(2, [0.5]), "nested": {"a": [1, {"b": 2.0}]}}
    with hetero.guard(state, device="cpu", standby=False) as g:
        g.run(lambda: None)
        state["progress"].losses.append(0.25)
        state["nested"]["a"][1]["b"] = 3.0
        state["n"] = 2
        assert g.last_snapshot is not None
        snapshot.restore(g.last_snapshot, state, g.device)
    assert state["progress"] == Progress(2, [0.5]) and state["nested"] == {"a": [1, {"b": 2.0}]} and state["n"] == 1


def _gen() -> Iterator[int]:
    yield 1


@pytest.mark.parametrize("what", ["open file", "generator", "lock", "socket"])
def test_a_value_no_snapshot_can_copy_is_refused_when_the_guard_is_made(what: str, tmp_path: Path) -> None:
    made: dict[str, Any] = {}
    if what == "open file":
        made["value"], expected = (tmp_path / "log.txt").open("w"), "TextIOWrapper"
    elif what == "generator":
        made["value"], expected = _gen(), "generator"
    elif what == "lock":
        made["value"], expected = threading.Lock(), "lock"
    else:
        made["value"], expected = socket.socket(), "socket"
    try:
        with pytest.raises(UnsnapshottableError) as caught:
            hetero.guard({"w": np.zeros(2), "handle": made["value"]})
    finally:
        if hasattr(made["value"], "close"):
            made["value"].close()
    message = str(caught.value)
    assert "state['handle']" in message and expected in message and caught.value.path == ("handle",)
    assert "state_dict()" in message and "keep it out of state" in message  # the remedy
    assert isinstance(caught.value, TypeError)


def test_the_error_names_where_inside_a_nested_value_and_at_a_later_snapshot() -> None:
    lock = threading.Lock()
    with pytest.raises(UnsnapshottableError, match=r"state\['run'\]\['parts'\]\[1\], a _thread\.lock"):
        hetero.guard({"run": {"parts": [1, lock]}})
    state: dict[str, Any] = {"n": 0}
    with hetero.guard(state, device="cpu", standby=False) as g:
        g.run(lambda: None)
        state["later"] = lock  # put there after the guard was made: refused at the next snapshot
        with pytest.raises(UnsnapshottableError, match=r"state\['later'\]"):
            snapshot.take(state, 1)
