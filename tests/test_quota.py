"""Per-task memory quotas: enforced before the vendor allocator, per task, under concurrent
threads, released when buffers are freed, and free of cost outside a task."""

from __future__ import annotations

import gc
import sys
import threading
import types
import weakref
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.core.device import Device, DeviceInfo, Kind
from hetero.core.plugin import DeviceRuntime
from hetero.scheduler import quota as quota_module
from hetero.scheduler.quota import Task, current_task, task
from hetero.scheduler.usage import LEDGER

KiB = 1 << 10


class SpyRuntime(DeviceRuntime):
    """Host memory behind the runtime interface, counting every call of the vendor allocator."""

    def __init__(self, name: str) -> None:
        self.info = DeviceInfo(name=name, backend=name.partition(":")[0], index=0, vendor="Test", kind=Kind.GPU,
                               model="spy", memory=1 << 30, compute_units=4, max_work_group_size=64, fp64=True,
                               driver_version="1", stable_id=f"spy-{name}")
        self.allocations: list[int] = []
        self.lock = threading.Lock()

    def allocate(self, nbytes: int) -> Any:
        with self.lock:
            self.allocations.append(nbytes)
        return np.empty(nbytes, np.uint8)

    def upload(self, dst: Any, src: np.ndarray, offset: int = 0) -> None:
        dst[offset:offset + src.nbytes] = src.reshape(-1).view(np.uint8)

    def download(self, dst: np.ndarray, src: Any, offset: int = 0) -> None:
        dst.reshape(-1).view(np.uint8)[:] = src[offset:offset + dst.nbytes]

    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        dst[:nbytes] = src[:nbytes]


@pytest.fixture
def spy() -> Device:
    runtime = SpyRuntime("spy:0")
    return Device(runtime.info, runtime)


def runtime(device: Device) -> SpyRuntime:
    assert isinstance(device.runtime, SpyRuntime)
    return device.runtime


def test_allocation_past_the_quota_raises_before_the_vendor_allocator(spy: Device) -> None:
    with task("train", quota={"spy:0": "4KiB"}) as t:
        kept = hetero.empty(KiB, hetero.uint8, device=spy)
        assert runtime(spy).allocations == [KiB]
        with pytest.raises(hetero.QuotaExceeded) as caught:
            hetero.empty(4 * KiB, hetero.uint8, device=spy)
        assert runtime(spy).allocations == [KiB]  # the vendor allocator was never called
        error = caught.value
        assert (error.device, error.task, error.quota, error.used, error.requested) == ("spy:0", "train", 4 * KiB, KiB, 4 * KiB)
        assert "task 'train'" in str(error) and "4096 bytes" in str(error) and "1024 bytes in use" in str(error)
        assert isinstance(error, MemoryError)
        assert t.usage("spy:0") == KiB
        hetero.empty(3 * KiB, hetero.uint8, device=spy)  # exactly up to the quota is allowed (freed at once)
    del kept


def test_a_failed_vendor_allocation_is_not_accounted(spy: Device) -> None:
    def refuse(nbytes: int) -> Any:
        raise hetero.DeviceOutOfMemoryError("out of memory", backend="spy", device="spy:0")

    runtime(spy).allocate = refuse  # type: ignore[method-assign]
    with task("oom", quota="1GiB") as t:
        with pytest.raises(hetero.DeviceOutOfMemoryError):
            hetero.empty(KiB, device=spy)
        assert t.usage() == {}
    assert LEDGER.used("spy:0") == 0


def test_each_task_has_its_own_quota_on_a_shared_device(spy: Device) -> None:
    small, large = Task("small", quota={"spy": "2KiB"}), Task("large", quota={"*": "8KiB"})
    held = []
    with small:
        held.append(hetero.empty(2 * KiB, hetero.uint8, device=spy))
        with pytest.raises(hetero.QuotaExceeded, match="task 'small'"):
            hetero.empty(1, hetero.uint8, device=spy)
        with large:  # nested: the inner task is the one charged
            held.append(hetero.empty(6 * KiB, hetero.uint8, device=spy))
            assert current_task() is large
        assert current_task() is small
    assert current_task() is None
    assert small.usage("spy:0") == 2 * KiB and large.usage(spy) == 6 * KiB
    assert LEDGER.used("spy:0") == 8 * KiB
    held.clear()
    assert LEDGER.used("spy:0") == 0


def test_usage_is_released_when_the_buffer_is_freed_not_before(spy: Device) -> None:
    cpu = hetero.device("cpu")
    with task("free") as t:  # no quota: usage is still accounted
        a = hetero.empty(256, hetero.float32, device=cpu)
        b = hetero.zeros(64, hetero.uint8, device=spy)
    view = a.numpy()  # shares the buffer: the memory stays in use while it lives
    assert t.usage() == {"cpu": 1024, "spy:0": 64}
    del a, b
    gc.collect()
    assert t.usage() == {"cpu": 1024}
    del view
    gc.collect()
    assert t.usage() == {}


def test_concurrent_threads_lose_no_accounting(spy: Device) -> None:
    shared = Task("shared", quota={"spy:0": "64MiB"})
    barrier = threading.Barrier(8)
    kept: list[list[hetero.Array]] = [[] for _ in range(8)]

    def work(slot: int) -> None:
        with shared:  # the same task object, entered in each thread
            barrier.wait()
            for i in range(200):
                array = hetero.empty(KiB + slot, hetero.uint8, device=spy)
                if i % 2:
                    kept[slot].append(array)

    threads = [threading.Thread(target=work, args=(slot,)) for slot in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    expected = sum(100 * (KiB + slot) for slot in range(8))
    assert shared.usage("spy:0") == expected == LEDGER.used("spy:0")
    assert len(runtime(spy).allocations) == 1600
    kept.clear()
    gc.collect()
    assert shared.usage("spy:0") == 0 == LEDGER.used("spy:0")


def test_concurrent_threads_cannot_overshoot_the_quota_together(spy: Device) -> None:
    shared = Task("capped", quota={"spy:0": 100 * KiB})
    kept: list[hetero.Array] = []
    refused: list[int] = []
    lock = threading.Lock()

    def work() -> None:
        with shared:
            for _ in range(50):
                try:
                    array = hetero.empty(KiB, hetero.uint8, device=spy)
                except hetero.QuotaExceeded:
                    with lock:
                        refused.append(1)
                    continue
                with lock:
                    kept.append(array)

    threads = [threading.Thread(target=work) for _ in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert len(kept) == 100 and len(refused) == 200
    assert shared.usage("spy:0") == 100 * KiB


def test_no_task_means_no_bookkeeping(spy: Device, monkeypatch: pytest.MonkeyPatch) -> None:
    def forbidden(*args: object, **kwargs: object) -> None:
        raise AssertionError("the quota path ran outside a task")

    monkeypatch.setattr(quota_module.Task, "allocate", forbidden)
    finalizers = len(weakref.finalize._registry)  # type: ignore[attr-defined]
    arrays = [hetero.empty(100, device=spy) for _ in range(10)]
    assert len(weakref.finalize._registry) == finalizers  # type: ignore[attr-defined]
    assert runtime(spy).allocations == [400] * 10 and LEDGER.used("spy:0") == 0
    del arrays
    # The hook in hetero.empty is one ContextVar read: the bound get of the task variable.
    from hetero.scheduler import context as context_module

    assert context_module.allocation_task == quota_module.CURRENT_TASK.get


def test_a_task_is_joined_from_another_thread_by_passing_it(spy: Device) -> None:
    outer = task("outer", quota="1MiB")
    seen: list[object] = []

    def work() -> None:
        seen.append(current_task())
        with task(outer):
            seen.append(current_task())
            seen.append(hetero.empty(KiB, hetero.uint8, device=spy))

    with outer:
        thread = threading.Thread(target=work)
        thread.start()
        thread.join()
    assert outer.usage("spy:0") == KiB
    assert seen[0] is None and seen[1] is outer  # threads do not inherit the task; they join it
    with pytest.raises(ValueError, match="already exists"):
        task(outer, quota="1GiB")


def test_quota_values_are_checked() -> None:
    with pytest.raises(ValueError, match="task 'x': quota for cpu '12 apples'"):
        Task("x", quota={"cpu": "12 apples"})
    with pytest.raises(ValueError, match="priority 'urgent'"):
        Task("x", priority="urgent")
    assert Task("x", quota={"CPU": "1.5KiB", "cuda": 2**30}).quota == {"cpu": 1536, "cuda": 2**30}
    assert Task("x", quota="1GiB").limit("rocm:3") == 2**30
    assert Task("x", quota={"cuda": 5}).limit("cuda:1") == 5 and Task("x", quota={"cuda": 5}).limit("rocm:0") is None


def fake_torch(monkeypatch: pytest.MonkeyPatch, devices: int = 2, total: int = 16 << 30) -> list[tuple[float, int]]:
    calls: list[tuple[float, int]] = []
    cuda = types.SimpleNamespace(
        is_available=lambda: True,
        device_count=lambda: devices,
        get_device_properties=lambda index: types.SimpleNamespace(total_memory=total),
        set_per_process_memory_fraction=lambda fraction, device: calls.append((fraction, device)),
    )
    monkeypatch.setitem(sys.modules, "torch", types.SimpleNamespace(cuda=cuda, version=types.SimpleNamespace(hip=None)))
    return calls


def test_torch_memory_fraction_follows_the_active_quotas(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = fake_torch(monkeypatch)
    with task("a", quota={"cuda:0": "4GiB"}):
        assert calls == [(0.25, 0)]
        with task("b", quota={"cuda": "2GiB"}):
            assert calls[1:] == [(0.375, 0), (0.125, 1)]
        assert calls[3:] == [(0.25, 0), (1.0, 1)]
    assert calls[5:] == [(1.0, 0)]
    with task("no quota"):
        assert len(calls) == 6  # a task without a quota leaves torch alone


def test_torch_is_never_imported_for_quotas(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "torch", raising=False)
    with task("a", quota="1GiB"):
        pass
    assert "torch" not in sys.modules


def test_quota_and_release_on_each_device_of_this_machine(device: hetero.Device) -> None:
    with task("each", quota={device.name: 8000}) as t:
        a = hetero.arange(1000, dtype=hetero.float32, device=device)
        b = a.copy()
        assert t.usage(device) == 8000
        with pytest.raises(hetero.QuotaExceeded, match=f"{device.name}: allocating 4000 bytes"):
            hetero.zeros(1000, device=device)
        assert b.numpy()[999] == 999
    del a, b
    gc.collect()
    assert t.usage() == {}


def test_leaving_a_task_out_of_order_is_an_error() -> None:
    first, second = Task("first"), Task("second")
    first.__enter__()
    second.__enter__()
    with pytest.raises(RuntimeError, match="task 'first' is left .* not the innermost"):
        first.__exit__(None, None, None)
    second.__exit__(None, None, None)
    first.__exit__(None, None, None)
    assert current_task() is None and first.active == second.active == 0


def test_a_process_task_covers_every_thread_that_entered_none(spy: Device) -> None:
    from hetero.scheduler import context as context_module
    from hetero.scheduler import set_process_task

    worker = Task("worker3", quota={"spy:0": 4 * KiB})
    kept: list[hetero.Array] = []
    assert set_process_task(worker) is None
    try:
        thread = threading.Thread(target=lambda: kept.append(hetero.empty(3 * KiB, hetero.uint8, device=spy)))
        thread.start()
        thread.join()
        assert worker.usage("spy:0") == 3 * KiB and current_task() is worker
        with pytest.raises(hetero.QuotaExceeded, match="task 'worker3'"):
            hetero.empty(2 * KiB, hetero.uint8, device=spy)
        with task("inner"):  # an entered task still takes precedence
            kept.append(hetero.empty(2 * KiB, hetero.uint8, device=spy))
        assert worker.active == 1
    finally:
        assert set_process_task(None) is worker
    assert worker.active == 0 and current_task() is None
    assert context_module.allocation_task == quota_module.CURRENT_TASK.get  # the bare read again
    kept.clear()
    assert worker.usage() == {}


# -- frees from finalizers (the garbage collector) --------------------------------------------------
class _FreesOnWrite(dict):  # type: ignore[type-arg]
    """A counter dict whose first write runs ``free`` (as a garbage collection run in the middle of
    a ledger update would run an array's finalizer, on the same thread)."""

    def __init__(self, free: Any) -> None:
        super().__init__()
        self.free: Any = free

    def __setitem__(self, key: str, value: int) -> None:
        super().__setitem__(key, value)
        free, self.free = self.free, None
        if free is not None:
            free()


def _finishes(work: Any) -> bool:
    """Whether ``work`` returns within 5 s (on a daemon thread: a deadlock leaves only that thread stuck)."""
    done = threading.Event()

    def run() -> None:
        work()
        done.set()

    threading.Thread(target=run, daemon=True).start()
    return done.wait(5)


def test_a_finalizer_freeing_inside_a_ledger_update_neither_deadlocks_nor_loses_the_free() -> None:
    from hetero.scheduler.usage import Ledger

    ledger = Ledger()
    ledger.note_outside("cpu", 100)
    assert ledger.outside("cpu") == 100  # a read applies the queued change
    counts = _FreesOnWrite(None)
    counts["cpu"] = 100
    counts.free = lambda: ledger.forget_outside("cpu", 30)
    ledger._outside = counts
    assert _finishes(lambda: ledger.note_outside("cpu", 50))
    assert ledger.outside("cpu") == 120

    task = Task("gc")
    ledger.charge(task, "cpu", 40, None)
    used = _FreesOnWrite(None)
    used["cpu"] = 40
    used.free = lambda: ledger.refund(task, "cpu", 40)
    task.used = used
    assert _finishes(lambda: ledger.charge(task, "cpu", 8, None))
    assert ledger.used("cpu") == 8 and task.used == {"cpu": 8}


def test_outside_allocations_are_queued_without_a_lock_yet_seen_by_every_reader() -> None:
    from hetero.scheduler.usage import OUTSIDE_BATCH, Ledger

    ledger = Ledger()
    seen = ledger.generation
    ledger.note_outside("cpu", 10)
    assert ledger.generation != seen  # a load-based placement decided before it re-decides
    ledger.forget_outside("cpu", 10)
    ledger.note_outside("opencl:0", 7)
    assert ledger.outside("cpu") == 0 and ledger.outside("opencl:0") == 7
    for _ in range(3 * OUTSIDE_BATCH):  # a program that never asks placement: the queue stays bounded
        ledger.note_outside("cpu", 1)
    assert len(ledger._outside_changes) < OUTSIDE_BATCH
    assert ledger.outside("cpu") == 3 * OUTSIDE_BATCH
