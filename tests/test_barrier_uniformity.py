"""barrier() in loops and ifs: a kernel is accepted or refused the same way on every device,
and a loop whose trip count depends only on the work-group's size gives the right answer
everywhere (PoCL 3.1 miscompiled it when the loop condition was the kernel's only
``get_local_size`` query: hetero hoists size queries to the kernel's entry).
"""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.core.errors import CompileError

N = 1024
GROUP_SIZES = (1024, 256, 64)


@hetero.kernel
def doubling_sum(data: hetero.Array[hetero.i32]):
    """numba-cuda's doc example ``array_sum``, without its ``if tid < size`` wrapper:
    the stride doubles while it is below the group size; each group's sum goes to the
    group's first element."""
    tid = hetero.local_id(0)
    shr = hetero.local_array(N, hetero.i32)
    shr[tid] = data[hetero.global_id(0)]
    hetero.barrier()
    s = 1
    while s < hetero.local_size(0):
        if tid % (2 * s) == 0:
            shr[tid] += shr[tid + s]
        s *= 2
        hetero.barrier()
    if tid == 0:
        data[hetero.global_id(0)] = shr[0]


@hetero.kernel
def halving_sum(data: hetero.Array[hetero.i32], out: hetero.Array[hetero.i32]):
    """A tree reduction whose stride starts at half the group size."""
    tid = hetero.local_id(0)
    shr = hetero.local_array(N, hetero.i32)
    shr[tid] = data[hetero.global_id(0)]
    hetero.barrier()
    s = hetero.local_size(0) // 2
    while s > 0:
        if tid < s:
            shr[tid] += shr[tid + s]
        s //= 2
        hetero.barrier()
    if tid == 0:
        out[hetero.group_id(0)] = shr[0]


@hetero.kernel
def uniform_conditions(data: hetero.Array[hetero.i32], out: hetero.Array[hetero.i32], rounds: hetero.i32):
    """Barriers under conditions on the grid size, a scalar parameter and the group id:
    all uniform across a work-group, so legal."""
    tid = hetero.local_id(0)
    shr = hetero.local_array(N, hetero.i32)
    shr[tid] = data[hetero.global_id(0)]
    hetero.barrier()
    groups = hetero.global_size(0) // hetero.local_size(0)
    for _ in range(rounds):
        if hetero.group_id(0) < groups:
            v = shr[(tid + 1) % hetero.local_size(0)]
            hetero.barrier()
            shr[tid] = v
            hetero.barrier()
    out[hetero.global_id(0)] = shr[tid]


@hetero.kernel
def numba_array_sum(data: hetero.Array[hetero.i32]):
    """numba-cuda's ``array_sum`` as written: its barriers sit under ``if tid < size``,
    which depends on the work-item (undefined behaviour in CUDA and OpenCL when items differ)."""
    tid = hetero.local_id(0)
    size = len(data)
    if tid < size:
        i = hetero.global_id(0)
        shr = hetero.local_array(N, hetero.i32)
        shr[tid] = data[i]
        hetero.barrier()
        s = 1
        while s < hetero.local_size(0):
            if tid % (2 * s) == 0:
                shr[tid] += shr[tid + s]
            s *= 2
            hetero.barrier()
        if tid == 0:
            data[tid] = shr[tid]


@hetero.kernel
def loop_on_local_id(data: hetero.Array[hetero.i32]):
    s = hetero.local_id(0)
    while s < 8:
        s += 1
        hetero.barrier()
    data[hetero.global_id(0)] = s


def _expected_group_sums(group: int) -> list[int]:
    return np.arange(N, dtype=np.int64).reshape(-1, group).sum(axis=1).tolist()


@pytest.mark.parametrize("group", GROUP_SIZES)
def test_tree_reductions_on_the_group_size(device: hetero.Device, group: int) -> None:
    if group > device.max_work_group_size:
        pytest.skip(f"{device.name} allows work-groups of at most {device.max_work_group_size}")
    data = hetero.asarray(np.arange(N, dtype=np.int32), device=device)
    doubling_sum[(N,), (group,)](data)
    assert data.numpy()[::group].tolist() == _expected_group_sums(group)
    out = hetero.zeros(N // group, dtype="int32", device=device)
    halving_sum[(N,), (group,)](hetero.asarray(np.arange(N, dtype=np.int32), device=device), out)
    assert out.numpy().tolist() == _expected_group_sums(group)
    assert sum(_expected_group_sums(group)) == 523776


def test_barriers_under_uniform_conditions(device: hetero.Device) -> None:
    out = hetero.zeros(256, dtype="int32", device=device)
    uniform_conditions[(256,), (64,)](hetero.asarray(np.arange(256, dtype=np.int32), device=device), out, 3)
    expected = np.arange(256).reshape(4, 64)
    assert out.numpy().tolist() == np.roll(expected, -3, axis=1).ravel().tolist()


@pytest.mark.parametrize("kernel, why", [(numba_array_sum, "local_id"), (loop_on_local_id, "local_id")])
def test_barrier_under_work_item_dependent_control_flow_is_refused(device: hetero.Device, kernel: hetero.Kernel,
                                                                   why: str) -> None:
    data = hetero.asarray(np.arange(N, dtype=np.int32), device=device)
    with pytest.raises(CompileError, match="barrier\\(\\) inside control flow that depends on the work-item") as info:
        kernel[(N,), (256,)](data)
    assert why in str(info.value) and "test_barrier_uniformity.py" in str(info.value)
    assert f"kernel {kernel.name!r}" in str(info.value)


@pytest.mark.parametrize("dialect", ["opencl", "cuda", "hip"])
def test_every_c_dialect_reads_size_queries_once_at_entry(dialect: str) -> None:
    from hetero.compiler.ir import passes
    from hetero.compiler.emit.registry import emitter_for
    from hetero.compiler.frontend.python import lower_kernel
    from hetero.compiler.frontend.signature import parse_signature
    from hetero.core.target import Target

    _, types = parse_signature("i32[:]")
    fn = passes.optimize(lower_kernel(doubling_sum.py_func, types))
    text = emitter_for(dialect).emit(fn, Target(dialect, "any", frozenset(), "")).text
    body = text[text.index("hetero_doubling_sum("):]
    assert body.count("hetero_local_size0 = ") == 1
    loop = next(line for line in body.splitlines() if line.strip().startswith("while"))
    assert "hetero_local_size0" in loop, loop
