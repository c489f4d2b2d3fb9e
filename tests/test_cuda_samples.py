"""NVIDIA's cuda-samples kernels, from their source text unchanged (../shared/peers/cuda-samples),
through the CUDA C front end on every device, with the sample's launch sizes and its CPU check
(the host code rewritten here in Python)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import hetero
from hetero.compat.cuda import RawKernel, RawModule
from hetero.errors import CompileError

SAMPLES = Path(__file__).resolve().parent.parent.parent / "shared" / "peers" / "cuda-samples" / "Samples"
pytestmark = [
    pytest.mark.skipif(not SAMPLES.is_dir(), reason=f"cuda-samples are not at {SAMPLES}"),
    pytest.mark.skipif(importlib.util.find_spec("clang") is None, reason="libclang is not installed (pip install libclang)"),
]


def _source(relative: str) -> tuple[str, str]:
    path = SAMPLES / relative
    return path.read_text(), str(path)


def test_vector_add(device: hetero.Device) -> None:
    code, path = _source("0_Introduction/vectorAdd/vectorAdd.cu")
    kernel = RawKernel(code, "vectorAdd", path=path)
    n = 50000  # the sample's sizes: 50000 elements, 256 threads per block
    rng = np.random.default_rng(0)
    a, b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
    with hetero.use_device(device):
        c = hetero.zeros(n, hetero.f32)
        threads = 256
        kernel(((n + threads - 1) // threads,), (threads,), (hetero.asarray(a), hetero.asarray(b), c, np.int32(n)))
        assert np.all(np.abs(a + b - c.numpy()) <= 1e-5)  # the sample's check


@pytest.mark.parametrize("block_size", [16, 32])
def test_matrix_mul(device: hetero.Device, block_size: int) -> None:
    code, path = _source("0_Introduction/matrixMul/matrixMul.cu")
    module = RawModule(code=code, path=path, name_expressions=[f"MatrixMulCUDA<{block_size}>"])
    kernel = module.get_function(f"MatrixMulCUDA<{block_size}>")
    # the sample's dimensions: A is (5*2*bs) x (5*2*bs), B (5*4*bs) wide, all ones and 0.01
    wa, ha = 5 * 2 * block_size, 5 * 2 * block_size
    wb, hb = 5 * 4 * block_size, 5 * 2 * block_size
    a = np.ones((ha, wa), dtype=np.float32)
    b = np.full((hb, wb), 0.01, dtype=np.float32)
    c = np.zeros((ha, wb), dtype=np.float32)
    with hetero.use_device(device):
        kernel((wb // block_size, ha // block_size), (block_size, block_size), (c, a, b, np.int32(wa), np.int32(wb)))
    # the sample's check: |C - dimsA.x * valB| / |C| / dimsA.x <= 1e-6 for every element
    rel_err = np.abs(c.astype(np.float64) - wa * 0.01) / np.abs(c.astype(np.float64)) / wa
    assert np.all(rel_err <= 1e-6), rel_err.max()


def test_unsupported_constructs_name_file_line_and_construct(tmp_path: Path) -> None:
    code = """
__global__ void k(float* out) {
    extern __shared__ float dynamic[];
    out[0] = dynamic[0];
}
"""
    with pytest.raises(CompileError, match="dynamic shared memory") as info:
        RawKernel(code, "k", path=str(tmp_path / "k.cu"))
    assert info.value.line == 3 and info.value.file.endswith("k.cu")
    with pytest.raises(CompileError, match="no __global__ function named 'missing'"):
        RawKernel(code, "missing")


def test_c_integer_division_truncates_and_types_follow_c(device: hetero.Device) -> None:
    code = r"""
extern "C" __global__ void ops(int* q, int* r, float* f, const int* a, const int* b, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) {
        q[i] = a[i] / b[i];
        r[i] = a[i] % b[i];
        f[i] = a[i] / 2 + 0.5f;      // integer division first, then float: C's rules
    }
}
"""
    kernel = RawKernel(code, "ops")
    a = np.array([7, -7, 7, -7, 0, 9], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 3, 3], dtype=np.int32)
    q, r, f = np.zeros(6, np.int32), np.zeros(6, np.int32), np.zeros(6, np.float32)
    with hetero.use_device(device):
        kernel((1,), (32,), (q, r, f, a, b, 6))
    np.testing.assert_array_equal(q, np.trunc(a / b).astype(np.int32))
    np.testing.assert_array_equal(r, a - b * np.trunc(a / b).astype(np.int32))
    np.testing.assert_array_equal(f, (np.trunc(a / 2) + 0.5).astype(np.float32))
