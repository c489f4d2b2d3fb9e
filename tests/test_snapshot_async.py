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
from hetero.recovery import snapshot
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
    """After its first snapshot, the guard asks for the copies without waiting; a snapshot whose
    copies have arrived becomes the restore point when the guard next looks (the next snapshot, a
    recovery, ``g.last_snapshot``)."""
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


def _failing_copies(monkeypatch: pytest.MonkeyPatch, name: str, at_step: int, known: str = "at once") -> None:
    """The copies of the snapshot taken at ``at_step`` fail: the device's error as soon as the guard
    asks (``known="at once"``), or "not yet" the first time it asks without waiting and the error
    after that (``"later"``), or "not yet" unless it waits (``"never"``, a device that hangs). The
    copies of the device's other snapshots have arrived whenever the guard asks."""
    device = hetero.device(name)
    real_take, real_many = snapshot.take, type(device.runtime).download_many
    now = {"step": -1}

    def take(values: Any, step: int, **options: Any) -> snapshot.Snapshot:
        now["step"] = step
        return real_take(values, step, **options)

    def download_many(self: Any, copies: Any, wait: bool = True) -> Any:
        waiter = real_many(self, copies, wait)
        if self is not device.runtime or waiter is None:
            return waiter
        if now["step"] != at_step:  # the others: arrived whenever asked (so the test does not hang on timing)
            return lambda block=True: waiter(True)

        asked = []

        def failing(block: bool = True) -> bool:
            waiter(True)
            asked.append(block)
            if not block and (known == "never" or (known == "later" and len(asked) == 1)):
                return False
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
    # Known as soon as the guard asks about them: at the next snapshot, step 15 (copies just
    # queued are not asked about at once: they have not run yet on a real device)
    (event,) = g.recoveries
    assert (event["step"], event["snapshot_step"], event["steps_replayed"]) == (15, 5, 10)
    assert event["device"] == other
    assert_same_state(state, fault_free(name, 17))


@pytest.mark.parametrize("name", QUEUED)
def test_a_fault_then_failing_copies_replay_from_the_snapshot_before(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if not _others(name):
        pytest.skip("needs two devices")
    other = _others(name)[0]
    _failing_copies(monkeypatch, name, at_step=10, known="later")
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
    _failing_copies(monkeypatch, name, at_step=3, known="later")
    state = new_state(name)
    faulty = Faulty(state, {(6, name): "lost"})
    with hetero.guard(state, snapshot_every=5, devices=[name, _others(name)[0]]) as g:
        for step in range(3):
            g.run(faulty, step)
        state["count"] += 100  # between steps: the snapshot at step 3 keeps it
        g.run(faulty, 3)
        assert g.boundary_snapshots == 1
        with pytest.raises(hetero.RecoveryFailedError, match="changed outside g.run"):
            for step in range(4, 7):  # found when the guard next asks (step 5's snapshot), else at the fault
                g.run(faulty, step)


@pytest.mark.parametrize("name", QUEUED)
def test_last_snapshot_is_complete_when_read(name: str) -> None:
    state = new_state(name)
    with hetero.guard(state, snapshot_every=5) as g:
        for step in range(7):
            g.run(Faulty(state, {}), step)
        last = g.last_snapshot
        assert last is not None and last.step == 5 and not last.pending
        np.testing.assert_array_equal(last.values["count"].data, 5)


@pytest.mark.parametrize("name", QUEUED)
def test_a_device_far_behind_keeps_a_few_snapshots_on_their_way(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Copies not yet arrived are not waited for when the next snapshot is taken, up to
    MAX_PENDING of them; a recovery then restores the newest that arrives."""
    from hetero.recovery import guard as guard_module

    device = hetero.device(name)
    real_many = type(device.runtime).download_many
    behind = [True]

    def slow(self: Any, copies: Any, wait: bool = True) -> Any:  # "not yet" unless waited for, while behind
        waiter = real_many(self, copies, wait)
        if waiter is None:
            return None
        return lambda block=True: waiter(True) if block or not behind[0] else False

    monkeypatch.setattr(type(device.runtime), "download_many", slow)
    if not _others(name):
        pytest.skip("needs two devices")
    state = new_state(name)
    with hetero.guard(state, snapshot_every=2, devices=[name, _others(name)[0]]) as g:
        faulty = Faulty(state, {(9, name): "lost"})
        for step in range(9):
            g.run(faulty, step)
            assert len(g._pending) <= guard_module.MAX_PENDING
        assert len(g._pending) == guard_module.MAX_PENDING  # 2, 4, 6, 8 taken; 2 waited for to make room
        assert g._snapshot is not None and g._snapshot.step == 2
        behind[0] = False  # the device catches up: the recovery finds every copy arrived
        g.run(faulty, 9)
        (event,) = g.recoveries
        assert (event["snapshot_step"], event["steps_replayed"]) == (8, 1)
        for step in range(10, 12):
            g.run(faulty, step)
    assert_same_state(state, fault_free(name, 12))


@pytest.mark.parametrize("name", QUEUED)
def test_copies_that_never_arrive_are_given_up_on(name: str, monkeypatch: pytest.MonkeyPatch,
                                                  caplog: pytest.LogCaptureFixture) -> None:
    """A recovery never blocks on a device that may hang: after PENDING_WAIT_SECONDS it restores
    the last snapshot that arrived, and keeps the abandoned copies referenced."""
    from hetero.recovery import guard as guard_module

    if not _others(name):
        pytest.skip("needs two devices")
    monkeypatch.setattr(guard_module, "PENDING_WAIT_SECONDS", 0.05)
    _failing_copies(monkeypatch, name, at_step=10, known="never")
    abandoned = len(guard_module._ABANDONED)
    state = new_state(name)
    g = run_loop(state, 14, Faulty(state, {(12, name): "lost"}), snapshot_every=5, devices=[name, _others(name)[0]])
    (event,) = g.recoveries
    assert (event["snapshot_step"], event["steps_replayed"]) == (5, 7)
    assert len(guard_module._ABANDONED) == abandoned + 1 and guard_module._ABANDONED[-1].step == 10
    assert "did not arrive" in caplog.text
    assert_same_state(state, fault_free(name, 14))


@pytest.mark.parametrize("name", QUEUED)
def test_a_snapshot_just_queued_is_not_asked_about_until_the_next(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Asking a device whether copies queued a moment ago have arrived costs a snapshot more than
    the copies (an event query that contends with the kernels running; benchmarks/guard_overhead.py),
    and they never have behind a step's kernels: the guard asks at the next snapshot, not at once."""
    device = hetero.device(name)
    real_many = type(device.runtime).download_many
    asked: list[list[bool]] = []

    def counted(self: Any, copies: Any, wait: bool = True) -> Any:
        waiter = real_many(self, copies, wait)
        if waiter is None:
            return None
        calls: list[bool] = []
        asked.append(calls)

        def ask(block: bool = True) -> bool:
            calls.append(block)
            return bool(waiter(block))

        return ask

    monkeypatch.setattr(type(device.runtime), "download_many", counted)
    state = new_state(name)
    with hetero.guard(state, snapshot_every=3, standby=False, device=device) as g:
        for step in range(4):  # the first snapshot waits; step 3's is queued
            g.run(Faulty(state, {}), step)
        assert len(asked) == 1 and asked[0] == []
        for step in range(4, 7):  # step 6 takes the next: step 3's copies are asked about then
            g.run(Faulty(state, {}), step)
        assert len(asked) == 2 and asked[0] and asked[1] == []
        last = g.last_snapshot
        assert last is not None and last.step == 6
    assert_same_state(state, fault_free(name, 7))
