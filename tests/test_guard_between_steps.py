"""hetero.guard and the work a loop does between two g.run calls, without torch: a change to the
state there (a hetero array written, a generator object drawn from, a plain value or an
attribute set) takes a snapshot at the next step; draws from the process-wide generators there
are skipped by a replay, which ends where a fault-free run ends; and a device failing while the
snapshot that keeps such a change is taken is refused, not recovered without the change."""

from __future__ import annotations

import dataclasses
import random
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.recovery import fingerprint, snapshot

pytestmark = pytest.mark.usefixtures("state_dir")  # quarantine entries go to a private store

NON_HOST = [d.name for d in hetero.devices() if not d.runtime.host_memory]


@dataclasses.dataclass
class Counter:
    seen: int = 0
    totals: list[float] = dataclasses.field(default_factory=list)
    note: object = dataclasses.field(default_factory=object)  # an object attribute: skipped by the walk


def guarded(state: dict[str, Any], **options: Any) -> Any:
    return hetero.guard(state, **{"snapshot_every": 100, "device": "cpu", "devices": ["cpu"], "standby": False, **options})


@pytest.mark.parametrize("where", ["cpu", *NON_HOST[:1]])
def test_a_hetero_array_written_between_steps_takes_a_snapshot(where: str) -> None:
    w = hetero.asarray(np.zeros(4, np.float32), device=where)
    with guarded({"w": w}, device=where, devices=[where]) as g:
        g.run(lambda: None)
        g.run(lambda: None)
        assert g.boundary_snapshots == 0
        hetero.copyto(w, np.ones(4, np.float32))  # a host write into the array, between steps
        g.run(lambda: None)
        assert (g.boundary_snapshots, g.last_snapshot.step) == (1, 2)
        np.testing.assert_array_equal(g.last_snapshot.values["w"].data, np.ones(4, np.float32))


def test_generators_plain_values_and_attributes_changed_between_steps_are_seen() -> None:
    state: dict[str, Any] = {"gen": np.random.default_rng(1), "own": random.Random(2), "epoch": 0,
                             "counter": Counter(), "table": np.zeros(3)}
    changes = {
        "a draw from a generator object": lambda: state["gen"].random(),
        "a draw from a random.Random": lambda: state["own"].random(),
        "a plain value": lambda: state.__setitem__("epoch", 1),
        "a scalar attribute": lambda: setattr(state["counter"], "seen", 3),
        "a list attribute": lambda: state["counter"].totals.append(0.5),
        "a NumPy array": lambda: state["table"].__setitem__(0, 2.0),
    }
    for what, change in changes.items():
        before = fingerprint.of(state)
        change()
        assert fingerprint.of(state) != before, what
    before = fingerprint.of(state)
    state["counter"].note = object()  # the known blind spot: an attribute that is an object
    random.random(), np.random.random()  # the process-wide generators are no state
    assert fingerprint.of(state) == before


def test_draws_between_steps_are_skipped_by_the_replay() -> None:
    """NumPy's and Python's global generators drawn between steps (augmentation in the loop):
    a replay from a snapshot before them ends bit-identical to a fault-free run."""
    def run(fault_at: int | None) -> tuple[list[float], Any]:
        np.random.seed(3)
        random.seed(4)
        state: dict[str, Any] = {"w": np.zeros(1)}
        faults = {fault_at}

        def step(k: int, noise: float) -> None:
            state["w"] += noise * np.random.standard_normal() + random.random()
            if k in faults:
                faults.discard(k)
                raise hetero.device().runtime.fault_error("oom")

        with hetero.guard(state, snapshot_every=4, device="cpu", devices=["cpu"], standby=False) as g:
            for k in range(10):
                noise = float(np.random.standard_normal()) + random.gauss(0, 1)  # drawn between steps
                g.run(step, k, noise)
        return [float(state["w"][0]), np.random.random(), random.random()], g

    want, _ = run(None)
    got, g = run(6)
    assert got == want
    assert [(r["snapshot_step"], r["steps_replayed"], r["snapshot_reason"]) for r in g.recoveries] == [(4, 2, "every")]


def test_a_device_failing_while_a_change_between_steps_is_kept_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    state: dict[str, Any] = {"epoch": 0}
    real_take = snapshot.take

    def take(values: Any, step: int, **options: Any) -> Any:
        if values["epoch"] == 1:
            raise hetero.device("cpu").runtime.fault_error("oom")
        return real_take(values, step, **options)

    monkeypatch.setattr(snapshot, "take", take)
    with guarded(state) as g:
        g.run(lambda: None)
        state["epoch"] = 1  # between steps: the next step's snapshot must keep it
        with pytest.raises(hetero.RecoveryFailedError, match="changed outside g.run"):
            g.run(lambda: None)
