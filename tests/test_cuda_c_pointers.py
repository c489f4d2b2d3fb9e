"""Pointer variables the CUDA C front end follows when a kernel sets them after their declaration:
declared ``nullptr`` and pointed at ``extern __shared__`` memory, or moved by assignment within
their array; pointing one array's variable into another is refused by name and line."""

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


def test_null_then_pointed_and_reassigned_pointers(device: hetero.Device) -> None:
    code = """
__global__ void k(float* o) {
    extern __shared__ float sh[];
    float* p = nullptr;
    p = sh;
    p[threadIdx.x] = o[threadIdx.x] * 2;
    __syncthreads();
    float* q = o;
    q = o + 4;
    q[threadIdx.x] = p[3 - threadIdx.x];
}
"""
    kernel = RawKernel(code, "k", path="pointers.cu")
    with hetero.use_device(device):
        o = hetero.asarray(np.arange(8, dtype=np.float32))
        kernel((1,), (4,), (o,), shared_mem=16)
        assert o.numpy().tolist() == [0, 1, 2, 3, 6, 4, 2, 0]


def test_a_pointer_variable_moved_into_another_array_is_refused(tmp_path: Path) -> None:
    code = """
__global__ void k(float* a, float* b) {
    float* p = NULL;
    p = a;
    p = b;
    p[0] = 1;
}
"""
    with pytest.raises(CompileError, match="points into a and is set here to point into b") as info:
        RawKernel(code, "k", path=str(tmp_path / "two.cu"))
    assert info.value.line == 5 and info.value.file.endswith("two.cu")
