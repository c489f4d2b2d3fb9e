"""The OpenCL buffer pool: a freed array's cl.Buffer comes back for the next allocation of its size
class; zeros on a reused buffer are zeros; the pool keeps at most its limit; out of memory empties
it and tries once more; closing releases what it keeps; quotas and the ledger count what arrays
hold, not what the pool keeps. Run on every OpenCL device here (none: skipped)."""

from __future__ import annotations

import gc
import threading
from typing import Any

import numpy as np
import pytest
from fakes.failing_allocator import OutOfMemoryMaker

import hetero
from hetero.backends.opencl.pool import POWER_OF_TWO_UP_TO, SMALLEST, BufferPool, PooledBuffer, size_class
from hetero.scheduler.quota import task
from hetero.scheduler.usage import LEDGER

MiB = 1 << 20


def fresh_runtime(device: hetero.Device) -> Any:
    """A runtime of its own over ``device``'s OpenCL device (its own context and pool), so a test
    can close it or swap its pool without touching the shared one."""
    from hetero.backends.opencl.runtime import OpenCLRuntime  # here: OpenCL runtimes only

    shared: Any = device.runtime
    runtime = OpenCLRuntime(shared.cl, shared.cl_device, shared.info)
    runtime.allocate(1)  # opens the context, queue and pool
    return runtime


def free_first(held: list[PooledBuffer], count: int) -> None:
    """Drop the first ``count`` handles, one at a time in list order (``del held[:n]`` frees them last first)."""
    for _ in range(count):
        held.pop(0)


def test_size_classes() -> None:
    huge = 1 << 62
    assert [size_class(n, huge) for n in (1, SMALLEST, SMALLEST + 1, 4000, 4096, POWER_OF_TWO_UP_TO)] == \
        [SMALLEST, SMALLEST, 2 * SMALLEST, 4096, 4096, POWER_OF_TWO_UP_TO]
    above = POWER_OF_TWO_UP_TO + 1  # past the power-of-two range: multiples of 1/16 of the next power of two
    assert size_class(above, huge) == POWER_OF_TWO_UP_TO + POWER_OF_TWO_UP_TO // 8
    for n in (above, 3 * MiB + 5, 100 * MiB + 1, (1 << 33) - 7):
        assert n <= size_class(n, huge) <= n * 1.125 + 1
    assert size_class(5 * MiB, 1 << 62) == 5 * MiB  # a multiple of the step already
    assert size_class(5 * MiB + 1, 5 * MiB + 100) == 5 * MiB + 1  # rounding up would pass the largest allocation
    assert size_class(1000, 600) == 1000


def test_a_freed_buffer_comes_back_for_the_same_size(opencl_device_fixture: hetero.Device) -> None:
    a = hetero.empty(1000, hetero.float32, device=opencl_device_fixture)
    assert isinstance(a.buffer, PooledBuffer) and a.buffer.size == 4096 and a.buffer.nbytes == 4000
    mem, pointer = a.buffer.mem, a.buffer.int_ptr
    del a
    b = hetero.empty(1000, hetero.float32, device=opencl_device_fixture)
    assert b.buffer.mem is mem and b.buffer.int_ptr == pointer
    c = hetero.empty(900, hetero.float32, device=opencl_device_fixture)  # b still holds it: a new one
    assert c.buffer.mem is not mem
    del b
    d = hetero.empty(1020, hetero.float32, device=opencl_device_fixture)  # same class, different size
    assert d.buffer.mem is mem


def test_zeros_on_a_reused_buffer_are_zeros(opencl_device_fixture: hetero.Device) -> None:
    for n in (3, 1000, (2 * MiB) // 4 + 17):
        dirty = hetero.full(n, 7.5, device=opencl_device_fixture)
        mem = dirty.buffer.mem
        del dirty
        clean = hetero.zeros(n, device=opencl_device_fixture)
        assert clean.buffer.mem is mem  # really reused, and still every element zero
        assert not clean.numpy().any()
        ones = hetero.ones(n - 1, hetero.int32, device=opencl_device_fixture)
        del clean
        assert (ones.numpy() == 1).all()


def test_the_pool_keeps_at_most_its_limit(opencl_device_fixture: hetero.Device) -> None:
    runtime: Any = opencl_device_fixture.runtime
    pool = BufferPool(runtime._new_buffer, runtime._out_of_memory, limit=4096, largest=1 << 40)
    assert pool.allocate(3000).size == 4096 and pool.allocate(5000).size == 5000  # could never be kept: not rounded
    pool.release()
    before = pool.stats().released
    held = [pool.allocate(1024) for _ in range(6)] + [pool.allocate(8192)]
    first = held[0].mem
    free_first(held, 2)  # 2 x 1 KiB kept
    assert pool.stats().kept_bytes == 2048 and pool.stats().kept_buffers == 2
    free_first(held, 3)  # 3 more: the oldest (the first freed) is pushed out to stay within 4 KiB
    stats = pool.stats()
    assert stats.kept_bytes == 4096 and stats.kept_buffers == 4 and stats.released - before == 1
    again = [pool.allocate(1024) for _ in range(4)]  # the four kept, the pushed-out one not among them
    assert all(b.mem is not first for b in again) and pool.stats().reused == 4 and pool.stats().kept_bytes == 0
    del held[:]  # a 1 KiB buffer, kept; the 8 KiB one is bigger than the whole limit: released, not kept
    stats = pool.stats()
    assert stats.kept_bytes == 1024 and stats.released - before == 2 and stats.limit == 4096


def test_out_of_memory_empties_the_pool_and_tries_once_more(opencl_device_fixture: hetero.Device) -> None:
    runtime: Any = opencl_device_fixture.runtime
    maker = OutOfMemoryMaker(runtime.cl, runtime._new_buffer, failures=0)
    pool = BufferPool(maker, runtime._out_of_memory, limit=1 << 20, largest=1 << 40)
    kept = [pool.allocate(4096) for _ in range(3)]
    del kept
    assert pool.stats().kept_bytes == 3 * 4096
    maker.failures = len(maker.calls) + 1  # the next call runs out of memory, the one after succeeds
    buffer = pool.allocate(64 << 10)
    assert buffer.size == 64 << 10 and maker.calls[-2:] == [64 << 10, 64 << 10]
    stats = pool.stats()
    assert stats.kept_bytes == 0 and stats.released == 3  # emptied before the second try


def test_a_second_out_of_memory_is_the_error_the_caller_sees(opencl_device_fixture: hetero.Device) -> None:
    runtime = fresh_runtime(opencl_device_fixture)
    device = hetero.Device(runtime.info, runtime)
    maker = OutOfMemoryMaker(runtime.cl, runtime._new_buffer, failures=0)
    runtime.pool = BufferPool(maker, runtime._out_of_memory, limit=1 << 20, largest=1 << 40)
    runtime.allocate(4096)  # freed at once: one buffer kept, something to release
    maker.failures = 10**6
    with pytest.raises(hetero.DeviceOutOfMemoryError) as caught:
        hetero.empty(1 << 16, hetero.uint8, device=device)
    assert caught.value.code == -4 and caught.value.device == opencl_device_fixture.name
    assert "allocating 65536 bytes" in str(caught.value)
    assert maker.calls[-2:] == [1 << 16, 1 << 16]  # tried twice, not more
    maker.calls.clear()
    with pytest.raises(hetero.DeviceOutOfMemoryError):
        runtime.allocate(1 << 16)
    assert maker.calls == [1 << 16]  # nothing kept to release: no second try


def test_closing_releases_what_the_pool_keeps(opencl_device_fixture: hetero.Device) -> None:
    runtime = fresh_runtime(opencl_device_fixture)
    kept, held = runtime.allocate(4096), runtime.allocate(4096)
    del kept
    assert runtime.pool.stats().kept_buffers >= 1
    runtime.close()
    assert runtime.pool.stats().kept_bytes == 0
    data = np.arange(1024, dtype=np.float32)
    runtime.upload(held, data)  # a buffer held across the close still works
    out = np.empty_like(data)
    runtime.download(out, held)
    assert np.array_equal(out, data)
    del held  # freed after the close: released, not kept
    assert runtime.pool.stats().kept_bytes == 0


def test_quotas_and_the_ledger_count_held_arrays_not_kept_buffers(opencl_device_fixture: hetero.Device) -> None:
    name = opencl_device_fixture.name
    with task("pooled", quota={name: "64KiB"}) as t:
        for _ in range(8):  # 8 x 40 KB freed in turn: fits a 64 KiB quota as long as kept bytes are not counted
            a = hetero.empty(40_000, hetero.uint8, device=opencl_device_fixture)
            assert t.usage(name) == 40_000  # what was asked for, not the 64 KiB size class
            del a
            gc.collect()
            assert t.usage(name) == 0
    before = LEDGER.outside(name)
    b = hetero.empty(40_000, hetero.uint8, device=opencl_device_fixture)
    assert LEDGER.outside(name) == before + 40_000
    del b
    assert LEDGER.outside(name) == before


def test_threads_allocating_and_freeing_keep_the_pool_consistent(opencl_device_fixture: hetero.Device) -> None:
    runtime: Any = opencl_device_fixture.runtime
    pool = BufferPool(runtime._new_buffer, runtime._out_of_memory, limit=64 << 10, largest=1 << 40)
    errors: list[BaseException] = []

    def churn(seed: int) -> None:
        try:
            sizes = np.random.default_rng(seed).integers(1, 16 << 10, 300)
            held: list[PooledBuffer] = []
            for size in sizes:
                held.append(pool.allocate(int(size)))
                if len(held) > 4:
                    held.pop(0)
        except BaseException as exc:  # noqa: BLE001 - reported by the test below
            errors.append(exc)

    threads = [threading.Thread(target=churn, args=(seed,)) for seed in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert not errors
    stats = pool.stats()
    assert 0 < stats.kept_bytes <= stats.limit and stats.reused > 0
    assert stats.kept_bytes == sum(size for size, _ in pool._kept_by_number.values())
