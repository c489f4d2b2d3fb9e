"""hetero.guard: snapshots, migration and replay after device faults, on every device this machine has.

Faults come from the backend's own ``fault_error`` (what its real path raises), raised by a step
when it runs on a chosen device at a chosen step, or from ``hetero.fault.inject`` rules."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hetero
from hetero import f32, i32
from hetero.recovery import snapshot
from hetero.recovery.guard import Guard

N = 256
DEVICES = [d.name for d in hetero.devices()]


@hetero.kernel
def decay(w: hetero.Array[f32], step: i32):
    i = hetero.global_id(0)
    if i < w.shape[0]:
        w[i] = w[i] * 0.9 + 0.1 * hetero.math.sin(f32(i + step))


pytestmark = pytest.mark.usefixtures("state_dir")  # quarantine entries go to a private store


def new_state(device: str | hetero.Device) -> dict[str, Any]:
    start = np.linspace(-1, 1, N, dtype=np.float32)
    return {"w": hetero.asarray(start, device=device, copy=True), "total": np.zeros(1), "count": 0}


def train_step(state: dict[str, Any], step: int) -> float:
    """Changes all three kinds of state: a device array (in place, by a kernel), a NumPy array, an int."""
    w = state["w"]
    assert w.device is hetero.device(), "a step runs on the guard's device"
    decay[w.shape[0]](w, step)
    state["total"] += step
    state["count"] += 1
    return float(step)


class Faulty:
    """A step that raises ``kind`` (the device backend's own error) when it runs at ``step`` on a
    device in ``on`` (each (step, device) once), after doing part of its work."""

    def __init__(self, state: dict[str, Any], faults: dict[tuple[int, str], str]) -> None:
        self.state, self.faults = state, dict(faults)

    def __call__(self, step: int) -> float:
        train_step(self.state, step)
        kind = self.faults.pop((step, hetero.device().name), None)
        if kind is not None:
            raise hetero.device().runtime.fault_error(kind)
        return float(step)


def run_loop(state: dict[str, Any], steps: int, step_fn: Callable[[int], Any], **options: Any) -> Guard:
    with hetero.guard(state, **options) as g:
        for step in range(steps):
            assert g.run(step_fn, step) == float(step)
    return g


def fault_free(device: str, steps: int) -> dict[str, Any]:
    # the reference run names the device the faulty run's (non-injected) fault quarantined: allowed
    state = new_state(hetero.device(device, allow_quarantined=True))
    run_loop(state, steps, lambda k: train_step(state, k), snapshot_every=5)
    return state


def assert_same_state(got: dict[str, Any], want: dict[str, Any]) -> None:
    np.testing.assert_allclose(got["w"].numpy(), want["w"].numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_array_equal(got["total"], want["total"])
    assert got["count"] == want["count"]


def test_fault_at_the_first_step_moves_and_matches_fault_free() -> None:
    if len(DEVICES) < 2:
        pytest.skip("needs two devices")
    a, b = DEVICES[0], DEVICES[1]
    state = new_state(a)
    g = run_loop(state, 12, Faulty(state, {(0, a): "lost"}), snapshot_every=5, devices=[a, b])
    assert g.device.name == b and state["w"].device.name == b
    (event,) = g.recoveries
    assert (event["step"], event["failed_device"], event["device"]) == (0, a, b)
    assert event["fault_class"] == "device-lost" and event["steps_replayed"] == 0
    assert_same_state(state, fault_free(a, 12))


@pytest.mark.parametrize("where", ["in the step", "while snapshotting"])
def test_fault_at_a_snapshot_step(where: str, monkeypatch: pytest.MonkeyPatch) -> None:
    if len(DEVICES) < 2:
        pytest.skip("needs two devices")
    a, b = DEVICES[0], DEVICES[1]
    state = new_state(a)
    faults = {(10, a): "sticky"} if where == "in the step" else {}
    if where == "while snapshotting":  # the snapshot of step 10 cannot read the device
        real_take = snapshot.take

        def failing_take(values: Any, step: int, **options: Any) -> snapshot.Snapshot:
            if step == 10 and hetero.device().name == a:
                raise hetero.device().runtime.fault_error("sticky", doing="download")
            return real_take(values, step, **options)

        monkeypatch.setattr(snapshot, "take", failing_take)
    g = run_loop(state, 17, Faulty(state, faults), snapshot_every=5, devices=[a, b])
    (event,) = g.recoveries
    assert event["device"] == b
    # in the step: the snapshot of step 10 was taken, nothing to replay; while snapshotting: back to step 5's
    assert (event["snapshot_step"], event["steps_replayed"]) == ((10, 0) if where == "in the step" else (5, 5))
    assert_same_state(state, fault_free(a, 17))


@pytest.mark.parametrize("second", ["while replaying", "at the next step"])
def test_two_faults_in_a_row_move_twice(second: str) -> None:
    if len(DEVICES) < 3:
        pytest.skip("needs three devices")
    a, b, c = DEVICES[:3]
    state = new_state(a)
    # a fails at step 7; b fails while replaying step 5 (the snapshot is of step 5), or at step 8
    faults = {(7, a): "lost", (5, b) if second == "while replaying" else (8, b): "sticky"}
    g = run_loop(state, 12, Faulty(state, faults), snapshot_every=5, devices=[a, b, c])
    assert g.device.name == c
    assert [h["device"] for h in g.history] == [a, b]
    assert [r["device"] for r in g.recoveries] == ([c] if second == "while replaying" else [b, c])
    # the snapshot is of step 5: replayed 5, 6 (7 failed) or 5, 6, 7 (8 failed)
    assert g.recoveries[-1]["steps_replayed"] == (2 if second == "while replaying" else 3)
    assert_same_state(state, fault_free(a, 12))


def test_last_device_left_raises_recovery_failed_with_history() -> None:
    a = DEVICES[0]
    state = new_state(a)
    with pytest.raises(hetero.RecoveryFailedError) as caught:
        run_loop(state, 10, Faulty(state, {(3, a): "lost"}), devices=[a])
    error = caught.value
    assert "no healthy device is left" in str(error) and a in str(error)
    assert isinstance(error.__cause__, hetero.DeviceLostError)
    (entry,) = error.history
    assert (entry["step"], entry["device"], entry["error_type"], entry["fault_class"]) == (3, a, "DeviceLostError",
                                                                                         "device-lost")


def test_recoveries_exhausted_raises() -> None:
    a = DEVICES[0]
    state = new_state(a)
    faults = {(2, a): "oom"}
    with pytest.raises(hetero.RecoveryFailedError, match="max_recoveries=0"):
        run_loop(state, 5, Faulty(state, faults), devices=[a], max_recoveries=0)


def test_out_of_memory_is_retried_in_place_without_quarantine() -> None:
    a = DEVICES[0]
    state = new_state(a)
    g = run_loop(state, 9, Faulty(state, {(7, a): "oom"}), snapshot_every=5, devices=[a])
    (event,) = g.recoveries
    assert event["in_place"] and event["device"] == a and event["fault_class"] == "recoverable"
    assert event["steps_replayed"] == 2
    assert not hetero.fault.quarantine.is_quarantined(hetero.device(a).stable_id)
    assert_same_state(state, fault_free(a, 9))


def test_a_retry_in_place_first_frees_the_failed_steps_garbage_cycles() -> None:
    """What the failed step left in reference cycles (device memory an out-of-memory retry needs)
    is collected before the retry, even with automatic collection off; and without the full
    collection that costs 100+ ms with torch loaded (the young generations hold it)."""
    import gc
    import weakref

    seen: list[bool] = []
    left: list[Any] = []

    def step(k: int) -> None:
        if k == 1 and not left:
            cycle: list[Any] = [hetero.zeros(1024, device="cpu")]
            cycle.append(cycle)  # only the cycle collector frees it
            left.append(weakref.ref(cycle[0]))
            raise hetero.DeviceOutOfMemoryError("cpu: injected out of memory (test)", device="cpu", backend="cpu")
        if k == 1:
            seen.append(left[0]() is None)

    enabled = gc.isenabled()
    gc.disable()
    try:
        with hetero.guard({}, device="cpu", devices=["cpu"], standby=False) as g:
            for k in range(3):
                g.run(step, k)
    finally:
        if enabled:
            gc.enable()
    assert seen == [True] and g.recoveries[0]["in_place"]


def test_lost_device_is_quarantined_and_the_recovery_published() -> None:
    if len(DEVICES) < 2:
        pytest.skip("needs two devices")
    a, b = DEVICES[0], DEVICES[1]
    state = new_state(a)
    with hetero.fault.events(kind="recovery", timeout=0) as sub:
        g = run_loop(state, 4, Faulty(state, {(2, a): "lost"}), devices=[a, b])
        published = sub.pending()
    assert hetero.fault.quarantine.is_quarantined(hetero.device(a, allow_quarantined=True).stable_id)
    with pytest.raises(hetero.DeviceQuarantinedError, match=f"hetero quarantine release {a}"):
        hetero.device(a)  # named again after a real fault, it is refused
    assert len(published) == 1 and published[0]["device"] == b and published[0]["failed_device"] == a
    for key in ("detected_at", "fault_class", "steps_replayed", "recovery_seconds"):
        assert key in published[0] and published[0][key] == g.recoveries[0][key]


def test_replay_matches_fault_free_on_every_device_pair(device_pair: tuple[hetero.Device, hetero.Device]) -> None:
    a, b = device_pair
    state = new_state(a)
    kind = "oom" if a is b else "lost"  # one device: retried in place; two: moved
    g = run_loop(state, 13, Faulty(state, {(8, a.name): kind}), snapshot_every=5, devices=[a, b])
    assert g.device is b and state["w"].device is b
    assert g.recoveries[0]["steps_replayed"] == 3
    assert_same_state(state, fault_free(a.name, 13))


def test_injected_fault_end_to_end() -> None:
    """A real hetero.fault.inject rule: the backend's own error from its launch path."""
    if len(DEVICES) < 2:
        pytest.skip("needs two devices")
    a, b = DEVICES[0], DEVICES[1]
    state = new_state(a)
    with hetero.fault.inject(f"{a}:launch:nth=6:lost"):
        g = run_loop(state, 10, lambda k: train_step(state, k), snapshot_every=4, devices=[a, b])
    (event,) = g.recoveries
    assert event["injected"] and event["step"] == 5 and event["device"] == b
    # the failed launch came first in the step: nothing else of step 5 ran on a before it
    assert_same_state(state, fault_free(a, 10))


def test_a_step_that_leaves_lazy_arrays_in_the_state_is_recovered_when_they_are_made() -> None:
    """A step whose results are fused expressions not made yet (``x = x * 2``): their kernels run when
    the guard reads the state after the step. A device fault there is the step's, and is recovered
    (it escaped the guard before: found running a guarded step in a Ray task)."""
    if len(DEVICES) < 2:
        pytest.skip("needs two devices")
    a = next((d for d in DEVICES if d != "cpu"), DEVICES[1])  # where elementwise expressions fuse lazily
    b = "cpu" if a != "cpu" else DEVICES[1]

    def run(rule: str | None) -> tuple[np.ndarray, list[dict[str, Any]]]:
        state = {"x": hetero.asarray(np.arange(16, dtype=np.float32), device=a)}
        float(hetero.sum(state["x"]))  # made before the rule is on

        def step() -> None:
            state["x"] = state["x"] * 2 + 1  # lazy: made when read

        context = hetero.fault.inject(rule) if rule else contextlib.nullcontext()
        with context, hetero.guard(state, devices=[a, b]) as g:
            g.run(step)
            g.run(step)
        return state["x"].numpy(), list(g.recoveries)

    expected, _ = run(None)
    got, recoveries = run(f"{a}:launch:nth=1:lost")
    assert [e["device"] for e in recoveries] == [b]
    np.testing.assert_array_equal(got, expected)


def test_non_device_errors_propagate_unchanged() -> None:
    state = new_state(DEVICES[0])
    boom = ValueError("a bug in the step")

    def step_fn(step: int) -> float:
        if step == 3:
            raise boom
        return train_step(state, step)

    with pytest.raises(ValueError) as caught:
        run_loop(state, 6, step_fn)
    assert caught.value is boom


def test_snapshots_only_on_snapshot_steps(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[int] = []
    captured: list[str] = []
    real_take = snapshot.take

    def counted(values: dict, step: int, **options: object) -> snapshot.Snapshot:
        taken.append(step)
        made = real_take(values, step, **options)
        captured.extend(made.values)  # the keys copied
        return made

    monkeypatch.setattr(snapshot, "take", counted)
    state = new_state(DEVICES[0])
    g = run_loop(state, 25, lambda k: train_step(state, k), snapshot_every=10)
    assert taken == [0, 10, 20] and g.snapshots_taken == 3
    assert captured == 3 * list(state)  # every value in each snapshot, and none taken in between


def test_device_follows_the_guard_and_is_restored_after() -> None:
    if len(DEVICES) < 2:
        pytest.skip("needs two devices")
    a, b = DEVICES[0], DEVICES[1]
    state = new_state(a)
    seen: list[str] = []

    def step_fn(step: int) -> float:
        seen.append(hetero.device().name)
        return Faulty(state, {(1, a): "sticky"} if len(seen) == 2 else {})(step)

    outside = hetero.device(DEVICES[-1])
    with hetero.use_device(outside):
        with hetero.guard(state, devices=[a, b], snapshot_every=5) as g:
            assert hetero.device() is hetero.device(a) is g.device
            for step in range(3):
                g.run(step_fn, step)
            assert hetero.device() is hetero.device(b)
            assert hetero.zeros(3).device is hetero.device(b)  # new arrays follow the guard
        assert hetero.device() is outside  # the guard's device is no longer in force
    assert seen == [a, a, b, b, b]  # step 0, step 1 fails on a; replay of 0, retry of 1, then 2 on b


def test_snapshot_round_trip_of_nested_values() -> None:
    a = DEVICES[-1]
    arr = hetero.asarray(np.arange(6, dtype=np.float32), device=a, copy=True)
    host = np.ones(3)
    state: dict[str, Any] = {"arrays": [arr, {"host": host}], "name": "run-1", "lr": 0.5}
    taken = snapshot.take(state, 0)
    hetero.copyto(arr, np.zeros(6, dtype=np.float32))
    host[:] = 7
    state["name"], state["lr"] = "changed", 9.0
    snapshot.restore(taken, state, hetero.device(a))
    assert state["arrays"][0] is arr and state["arrays"][1]["host"] is host  # refilled in place
    np.testing.assert_array_equal(arr.numpy(), np.arange(6))
    np.testing.assert_array_equal(host, 1)
    assert (state["name"], state["lr"]) == ("run-1", 0.5)
    assert taken.nbytes == arr.nbytes + host.nbytes


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="snapshot_every"):
        hetero.guard({}, snapshot_every=0)
    with pytest.raises(TypeError, match="dict"):
        hetero.guard([1, 2])  # type: ignore[arg-type]


def test_standby_prepares_the_failover_device_only() -> None:
    if len(DEVICES) < 2:
        pytest.skip("needs two devices")
    a, b = DEVICES[0], DEVICES[1]
    state = new_state(a)
    with hetero.guard(state, devices=[a, b]) as g:
        assert g.wait_standby(120) is hetero.device(b)  # never the device the work is on
    with hetero.guard(state, devices=[a]) as g:
        assert g.wait_standby(120) is None  # nowhere to go
    with hetero.guard(state, devices=[a, b], standby=False) as g:
        assert g.wait_standby() is None


def test_snapshot_is_a_copy_on_every_device(device: hetero.Device) -> None:
    arr = hetero.asarray(np.arange(8, dtype=np.float32), device=device, copy=True)
    taken = snapshot.take({"w": arr}, 0)
    hetero.copyto(arr, np.full(8, -1, np.float32))
    np.testing.assert_array_equal(taken.values["w"].data, np.arange(8))  # the snapshot did not follow
    restored: dict[str, Any] = {"w": arr}
    snapshot.restore(taken, restored, device)
    hetero.copyto(arr, np.full(8, -2, np.float32))
    np.testing.assert_array_equal(taken.values["w"].data, np.arange(8))  # nor does the restored array share it


def test_views_in_the_state_stay_views_of_their_base_across_a_move(device_pair: tuple[hetero.Device, hetero.Device]) -> None:
    a, b = device_pair
    w = hetero.asarray(np.arange(12, dtype=np.float32).reshape(3, 4), device=a, copy=True)
    state: dict[str, Any] = {"w": w, "row": w[1], "col": w[:, ::-2], "orphan": hetero.zeros((2, 2), device=a).T[0]}
    taken = snapshot.take(state, 0)
    assert taken.nbytes == w.nbytes + 4 * 4  # one copy of w for w and its two views; the orphan's 2x2 base
    w[...] = -1.0
    snapshot.restore(taken, state, b)
    if a is b:
        assert state["w"] is w and state["row"].base is w  # refilled in place
    assert state["row"].base is state["w"] and state["col"].base is state["w"] and state["w"].device is b
    np.testing.assert_array_equal(state["col"].numpy(), np.arange(12).reshape(3, 4)[:, ::-2])
    state["row"][...] = 100.0  # still a view: the base sees the write
    assert (state["w"].numpy()[1] == 100).all()
    np.testing.assert_array_equal(state["orphan"].numpy(), [0, 0])


def test_a_guarded_step_of_array_operations_on_views_replays_after_a_fault() -> None:
    """Array operations (fused elementwise chains into views, a reduction) launch through the path
    injection sees; the replay on another device ends equal to the fault-free run."""
    if len(DEVICES) < 2:
        pytest.skip("needs two devices")
    a, b = DEVICES[0], DEVICES[1]

    def run(inject_rule: str | None) -> dict[str, Any]:
        w = hetero.asarray(np.linspace(-1, 1, 32, dtype=np.float32).reshape(4, 8), device=a, copy=True)
        state: dict[str, Any] = {"w": w, "head": w[0], "sums": []}

        def step(k: int) -> None:
            w, head = state["w"], state["head"]
            head *= 0.5                        # through the view: the base changes
            w[1:] -= 0.1 * (w[:-1] * w[:-1] - float(k))  # a fused chain into a view (overlap: read first)
            state["sums"].append(float(hetero.sum(w * 2.0)))

        context = hetero.fault.inject(inject_rule) if inject_rule else contextlib.nullcontext()
        with context:
            run_loop_plain(state, 8, step, snapshot_every=3, devices=[a, b])
        return state

    faulted, clean = run(f"{a}:launch:nth=9:lost"), run(None)
    assert faulted["w"].device.name == b and faulted["head"].base is faulted["w"]
    np.testing.assert_allclose(faulted["w"].numpy(), clean["w"].numpy(), rtol=1e-6)
    np.testing.assert_allclose(faulted["sums"], clean["sums"], rtol=1e-6)


def run_loop_plain(state: dict[str, Any], steps: int, step_fn: Callable[[int], Any], **options: Any) -> Guard:
    with hetero.guard(state, **options) as g:
        for step in range(steps):
            g.run(step_fn, step)
    return g
