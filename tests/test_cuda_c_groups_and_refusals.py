"""Cooperative groups' ``cg::reduce`` over tiles through the CUDA C front end on every device, and
the front end's refusals: each names the file, the line and the construct (a ``switch`` was
reported as "this expression statement (switch_stmt) has no effect")."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import hetero
from hetero.compat.cuda import RawKernel
from hetero.core.errors import CompileError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("clang") is None,
                                reason="libclang is not installed (pip install libclang)")

REDUCE = """#include <cooperative_groups.h>
#include <cooperative_groups/reduce.h>
namespace cg = cooperative_groups;
__global__ void k(const float* x, float* sums, int* maxes, float* mins, unsigned int* bits) {
    cg::thread_block block = cg::this_thread_block();
    cg::thread_block_tile<32> tile = cg::tiled_partition<32>(block);
    float v = x[threadIdx.x];
    sums[threadIdx.x] = cg::reduce(tile, v, cg::plus<float>());
    maxes[threadIdx.x] = cg::reduce(cg::tiled_partition<8>(block), (int)threadIdx.x * 3 % 7, cg::greater<int>());
    mins[threadIdx.x] = cg::reduce(tile, v, cg::less<float>());
    bits[threadIdx.x] = cg::reduce(tile, 1u << (threadIdx.x % 32), cg::bit_or<unsigned int>());
}
"""


def test_cg_reduce_over_tiles(device: hetero.Device) -> None:
    kernel = RawKernel(REDUCE, "k", path="reduce.cu")
    x = np.random.default_rng(1).random(64).astype(np.float32)
    with hetero.use_device(device):
        sums, maxes = hetero.zeros(64, hetero.f32), hetero.zeros(64, hetero.i32)
        mins, bits = hetero.zeros(64, hetero.f32), hetero.zeros(64, hetero.u32)
        kernel((1,), (64,), (hetero.asarray(x), sums, maxes, mins, bits))
        warps = x.reshape(2, 32)
        np.testing.assert_allclose(sums.numpy(), np.repeat(warps.sum(1), 32), rtol=1e-5)
        assert maxes.numpy().tolist() == np.repeat((np.arange(64) * 3 % 7).reshape(8, 8).max(1), 8).tolist()
        assert mins.numpy().tolist() == np.repeat(warps.min(1), 32).tolist()
        assert bits.numpy().tolist() == [0xFFFFFFFF] * 64


@pytest.mark.parametrize("body, line, message", [
    ("switch (n) {\n case 0: o[0] = 1; break;\n default: o[0] = 2; }", 3, "a switch statement is not supported"),
    ("goto end;\n end: o[0] = 1;", 3, "a goto statement is not supported"),
    ("o[0] = cg::reduce(cg::this_thread_block(), o[0], cg::plus<float>());", 3,
     "cg::reduce over a .*thread_block: hetero reduces over a thread_block_tile"),
    ("o[0] = cg::reduce(cg::tiled_partition<32>(cg::this_thread_block()), o[0], cg::bit_and<float>());", 3,
     "cg::reduce with .*bit_and<float>"),
    ("o[0] = undeclared_function(o[0]);", 3, "use of undeclared identifier 'undeclared_function'"),
])
def test_refusals_name_file_line_and_construct(tmp_path: Path, body: str, line: int, message: str) -> None:
    code = f"#include <cooperative_groups.h>\nnamespace cg = cooperative_groups; __global__ void k(float* o, int n) {{\n{body}\n}}\n"
    with pytest.raises(CompileError, match=message) as info:
        RawKernel(code, "k", path=str(tmp_path / "refused.cu"))
    assert info.value.file.endswith("refused.cu") and info.value.line == line


UNIFORM_BREAK = """
__global__ void k(float* o, int n) {
    __shared__ float s[4];
    for (int i = 0; i < 10; ++i) {
        if (i >= n) break;
        s[threadIdx.x] = o[threadIdx.x] + i;
        __syncthreads();
        o[threadIdx.x] = s[(threadIdx.x + 1) % 4];
        __syncthreads();
    }
    int j = 0;
    while (true) {
        __syncthreads();
        o[threadIdx.x] += 1.0f;
        j++;
        if (j == n) break;
    }
}
"""


def test_a_uniform_break_out_of_a_loop_holding_a_barrier(device: hetero.Device) -> None:
    kernel = RawKernel(UNIFORM_BREAK, "k", path="uniform_break.cu")
    with hetero.use_device(device):
        o = hetero.asarray(np.arange(4, dtype=np.float32))
        kernel((1,), (4,), (o, np.int32(3)))
        want = np.arange(4, dtype=np.float32)
        for i in range(3):
            want = np.roll(want + i, -1)
        assert o.numpy().tolist() == (want + 3).tolist()


def test_a_break_that_depends_on_the_thread_around_a_barrier_is_refused(device: hetero.Device, tmp_path: Path) -> None:
    code = """
__global__ void k(float* o, int n) {
    for (int i = 0; i < 10; ++i) {
        if (threadIdx.x >= n) break;
        __syncthreads();
        o[threadIdx.x] += 1;
    }
}
"""
    kernel = RawKernel(code, "k", path=str(tmp_path / "divergent.cu"))
    with hetero.use_device(device), pytest.raises(CompileError, match="barrier.. inside control flow that depends on"):
        kernel((1,), (4,), (hetero.zeros(4, hetero.f32), np.int32(2)))
