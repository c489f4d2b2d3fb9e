"""Snapshots that do not wait for the device: ``snapshot.take(..., wait=False)`` queues the copies
behind the kernels that wrote the state and returns; the guard completes them later (at the next
snapshot, at a recovery), so a snapshot never drains the device's queue. When the copies of the
newest snapshot fail, the guard falls back to the one before it and replays every step since."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hetero
from hetero import f32
from hetero.fault import snapshot
from tests.conftest import DEVICE_NAMES
from tests.test_guard import Faulty, assert_same_state, fault_free, new_state, run_loop

QUEUED = [name for name in DEVICE_NAMES if name.startswith(("opencl", "oneapi"))]
pytestmark = pytest.mark.usefixtures("state_dir")


@hetero.kernel
def fill(w: hetero.Array[f32], value: f32):
    i = hetero.global_id(0)
    if i < w.shape[0]:
        w[i] = value


def _state(device: hetero.Device) -> dict[str, Any]:
    w = hetero.asarray(np.arange(64, dtype=np.float32), device=device, copy=True)
    return {"w": w, "row": w[8:16], "b": hetero.full((5,), 3.0, device=device), "n": 7}


@pytest.mark.parametrize("name", DEVICE_NAMES)
def test_a_snapshot_taken_without_waiting_holds_the_state_as_it_was_then(name: str) -> None:
    device = hetero.device(name)
    state = _state(device)
    taken = snapshot.take(state, 0, wait=False)
    assert taken.pending == (name in QUEUED)  # host-memory devices copy at once
    fill[64](state["w"], 5.0)  # queued after the snapshot's copies: they must not see it
    taken.complete()
    assert not taken.pending
    np.testing.assert_array_equal(taken.values["w"].data, np.arange(64, dtype=np.float32))
    np.testing.assert_array_equal(taken.values["b"].data, np.full(5, 3.0, np.float32))
    assert taken.values["row"].data[0] is taken.values["w"].data and taken.values["n"].data == 7
    taken.complete()  # twice: nothing more to do


@pytest.mark.parametrize("name", QUEUED)
def test_restore_completes_a_pending_snapshot_first(name: str) -> None:
    device = hetero.device(name)
    state = _state(device)
    taken = snapshot.take(state, 0, wait=False)
    fill[64](state["w"], -1.0)
    snapshot.restore(taken, state, device)
    np.testing.assert_array_equal(state["w"].numpy(), np.arange(64, dtype=np.float32))
    np.testing.assert_array_equal(state["row"].numpy(), np.arange(8, 16, dtype=np.float32))


@pytest.mark.parametrize("name", QUEUED)
def test_the_guards_snapshots_do_not_wait(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """After its first snapshot, the guard asks for the copies without waiting, and completes each
    snapshot when it takes the next (so the newest may still be on its way)."""
    asked: list[bool] = []
    real = snapshot.take

    def take(values: Any, step: int, **options: Any) -> snapshot.Snapshot:
        asked.append(options.get("wait", True))
        return real(values, step, **options)

    monkeypatch.setattr(snapshot, "take", take)
    state = new_state(name)
    g = run_loop(state, 12, Faulty(state, {}), snapshot_every=5)
    assert asked == [True, False, False]  # steps 0 (the first: waited for), 5, 10
    assert g.snapshots_taken == 3
    assert_same_state(state, fault_free(name, 12))


def _others(name: str) -> list[str]:
    return [other for other in DEVICE_NAMES if other != name]


@pytest.mark.parametrize("name", QUEUED)
def test_a_fault_after_a_pending_snapshot_restores_it(name: str) -> None:
    if not _others(name):
        pytest.skip("needs two devices")
    other = _others(name)[0]
    state = new_state(name)
    g = run_loop(state, 14, Faulty(state, {(7, name): "lost"}), snapshot_every=5, devices=[name, other])
    (event,) = g.recoveries
    assert (event["snapshot_step"], event["steps_replayed"], event["device"]) == (5, 2, other)
    assert_same_state(state, fault_free(name, 14))


def _failing_copies(monkeypatch: pytest.MonkeyPatch, name: str, at_step: int) -> None:
    """The copies of the snapshot taken at ``at_step`` fail when waited for (the device's error)."""
    device = hetero.device(name)
    real_take, real_many = snapshot.take, type(device.runtime).download_many
    now = {"step": -1}

    def take(values: Any, step: int, **options: Any) -> snapshot.Snapshot:
        now["step"] = step
        return real_take(values, step, **options)

    def download_many(self: Any, copies: Any, wait: bool = True) -> Any:
        waiter = real_many(self, copies, wait)
        if self is not device.runtime or now["step"] != at_step or waiter is None:
            return waiter

        def failing() -> None:
            waiter()
            raise device.runtime.fault_error("sticky", doing="download")

        return failing

    monkeypatch.setattr(snapshot, "take", take)
    monkeypatch.setattr(type(device.runtime), "download_many", download_many)


@pytest.mark.parametrize("name", QUEUED)
def test_copies_that_fail_fall_back_to_the_snapshot_before(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if not _others(name):
        pytest.skip("needs two devices")
    other = _others(name)[0]
    _failing_copies(monkeypatch, name, at_step=10)
    state = new_state(name)
    g = run_loop(state, 17, Faulty(state, {}), snapshot_every=5, devices=[name, other])
    (event,) = g.recoveries  # found when the snapshot of step 15 completes the one of step 10
    assert (event["step"], event["snapshot_step"], event["steps_replayed"]) == (15, 5, 10)
    assert event["device"] == other
    assert_same_state(state, fault_free(name, 17))


@pytest.mark.parametrize("name", QUEUED)
def test_a_fault_then_failing_copies_replay_from_the_snapshot_before(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if not _others(name):
        pytest.skip("needs two devices")
    other = _others(name)[0]
    _failing_copies(monkeypatch, name, at_step=10)
    state = new_state(name)
    g = run_loop(state, 16, Faulty(state, {(12, name): "lost"}), snapshot_every=5, devices=[name, other])
    (event,) = g.recoveries
    assert (event["step"], event["snapshot_step"], event["steps_replayed"]) == (12, 5, 7)
    assert_same_state(state, fault_free(name, 16))


@pytest.mark.parametrize("name", QUEUED)
def test_failing_copies_of_a_change_between_steps_are_refused(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """A boundary snapshot whose copies fail cannot be replaced by the one before: that one lacks
    the change made between steps, which no replay redoes."""
    if not _others(name):
        pytest.skip("needs two devices")
    _failing_copies(monkeypatch, name, at_step=3)
    state = new_state(name)
    with hetero.guard(state, snapshot_every=5, devices=[name, _others(name)[0]]) as g:
        for step in range(3):
            g.run(Faulty(state, {}), step)
        state["count"] += 100  # between steps: the snapshot at step 3 keeps it
        g.run(Faulty(state, {}), 3)
        assert g.boundary_snapshots == 1
        with pytest.raises(hetero.RecoveryFailedError, match="changed outside g.run"):
            for step in range(4, 6):
                g.run(Faulty(state, {}), step)


@pytest.mark.parametrize("name", QUEUED)
def test_last_snapshot_is_complete_when_read(name: str) -> None:
    state = new_state(name)
    with hetero.guard(state, snapshot_every=5) as g:
        for step in range(7):
            g.run(Faulty(state, {}), step)
        last = g.last_snapshot
        assert last is not None and last.step == 5 and not last.pending
        np.testing.assert_array_equal(last.values["count"].data, 5)
