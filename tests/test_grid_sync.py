"""Grid-wide syncs (CUDA's ``cuda.cg.this_grid().sync()``) on every device, as phases of launches
(hetero.compiler.ir.grid_sync), and names bound to one of several arrays (``data = buf_0``)."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.compat.cuda import float32
from hetero.core.errors import CompileError


@pytest.fixture(autouse=True)
def _on(device: hetero.Device):  # type: ignore[no-untyped-def]
    with hetero.use_device(device):
        yield


@cuda.jit
def rotate_rows(m, rounds):
    # every thread reads what another wrote before the sync: wrong without a real grid-wide wait
    col = cuda.grid(1)
    n = m.shape[1]
    if col >= n:
        return
    carried = 0.5  # a float local that lives across the syncs
    flag = col % 2 == 0  # and a bool
    for r in range(1, rounds):
        m[r, col] = m[r - 1, (col + 1) % n] + (1 if flag else 2)
        carried += 1.0
        cuda.cg.this_grid().sync()
    m[0, col] = carried


def test_a_sync_in_a_for_loop_with_locals_and_an_early_return(device: hetero.Device) -> None:
    rounds, n = 6, 300
    m = np.zeros((rounds, n))
    rotate_rows[(n + 63) // 64, 64](m, rounds)  # 320 threads, 20 return at once
    want = np.zeros((rounds, n))
    for r in range(1, rounds):
        want[r] = np.roll(want[r - 1], -1) + np.where(np.arange(n) % 2 == 0, 1, 2)
    want[0] = 0.5 + (rounds - 1)
    np.testing.assert_array_equal(m, want)


@cuda.jit
def ping_pong(a, b, steps):
    i = cuda.grid(1)
    grid = cuda.cg.this_grid()
    step = 0
    while step < steps:
        if step % 2 == 0:
            src = a
            dst = b
        else:
            src = b
            dst = a
        left = src[i - 1] if i > 0 else src[len(src) - 1]
        dst[i] = left
        step += 1
        grid.sync()


def test_a_sync_in_a_while_loop_over_aliased_arrays(device: hetero.Device) -> None:
    n = 96
    a = cuda.to_device(np.arange(n, dtype=np.float64))
    b = cuda.device_array(n, dtype=np.float64)
    ping_pong[3, 32](a, b, 5)  # an odd count: the result is in b
    np.testing.assert_array_equal(b.copy_to_host(), np.roll(np.arange(n), 5))


@cuda.jit
def some_sync(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = i
        if i % 3 == 0:
            cuda.cg.this_grid().sync()
            out[i] = out[(i + 1) % out.size] + 1000


def test_threads_that_never_sync_count_as_arrived(device: hetero.Device) -> None:
    out = np.zeros(30, dtype=np.int64)
    some_sync[1, 32](out)
    want = np.arange(30)
    want[::3] = (np.arange(30)[::3] + 1) % 30 + 1000
    np.testing.assert_array_equal(out, want)


def test_refused_with_shared_memory_or_continue() -> None:
    @cuda.jit
    def with_shared(a):
        s = cuda.shared.array(4, float32)
        s[0] = 1
        cuda.cg.this_grid().sync()
        a[0] = s[0]

    with pytest.raises(CompileError, match="shared memory"):
        with_shared[1, 1](np.zeros(1))

    @cuda.jit
    def with_continue(a):
        for i in range(3):
            if i == 1:
                continue
            cuda.cg.this_grid().sync()
            a[0] = i

    with pytest.raises(CompileError, match="continue"):
        with_continue[1, 1](np.zeros(1))


@cuda.jit
def guarded_block_sum(data, out):
    shared = cuda.shared.array(128, float32)
    tid = cuda.threadIdx.x
    if tid < data.size:  # holds for every thread of the launch: CUDA's contract for syncthreads
        shared[tid] = data[tid]
        cuda.syncthreads()
        s = 1
        while s < cuda.blockDim.x:
            if tid % (2 * s) == 0:
                shared[tid] += shared[tid + s]
            s *= 2
            cuda.syncthreads()
        if tid == 0:
            out[0] = shared[0]


def test_syncthreads_under_a_condition_cuda_requires_uniform(device: hetero.Device) -> None:
    data = np.arange(128, dtype=np.float32)
    out = np.zeros(1, dtype=np.float32)
    guarded_block_sum[1, 128](data, out)
    assert out[0] == data.sum()


def test_hetero_kernels_still_refuse_such_barriers() -> None:
    @hetero.kernel
    def guarded(a: hetero.Array[hetero.f32]):
        if hetero.local_id(0) < a.shape[0]:
            hetero.barrier()

    with pytest.raises(CompileError, match="depends on the work-item"):
        guarded[4](hetero.zeros(4))


def test_the_array_class_in_annotations_is_not_an_outside_array(device: hetero.Device) -> None:
    """Kernels annotated with the bare ``Array`` class (``from hetero.array.ndarray import Array``) must not
    take the class for a global array to pass (it has ``__hetero_array__`` as a method)."""
    from hetero.kernels.calibration_kernels import saxpy

    x = hetero.ones(8, hetero.f32, device=device)
    y = hetero.zeros(8, hetero.f32, device=device)
    saxpy[8](2.0, x, y)
    np.testing.assert_array_equal(y.numpy(), np.full(8, 2.0, np.float32))
