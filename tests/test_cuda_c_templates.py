"""``__device__`` function templates and templates from included headers through the CUDA C front
end on every device: called with explicit template arguments (``load<float, 4>(p)``) or deduced
ones, nested, taking references; an error inside an instance names the template's own file and
line; and a default-initialised vector (``uint4 x;``) is a value, not a call."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

import hetero
from hetero.compat.cuda import RawKernel, RawModule
from hetero.core.errors import CompileError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("clang") is None,
                                reason="libclang is not installed (pip install libclang)")

TEMPLATES = """
template <typename T, int N> __device__ T load(const T* p) { T s = 0; for (int i = 0; i < N; ++i) s += p[i]; return s; }
template <typename T> __device__ T twice(T v) { return v * 2; }
template <class T> __device__ void swap2(T& a, T& b) { T t = a; a = b; b = t; }
template <int N> __device__ float sum_n(const float* p) { float s = 0; for (int i = 0; i < N; ++i) s += p[i]; return s; }
template <class T, int N> __device__ T outer(const T* p) { return sum_n<N>(p) * 2; }

__global__ void k(float* o, int* n) {
    __shared__ float s[2];
    s[0] = o[0]; s[1] = o[1];
    swap2(s[0], s[1]);
    o[4] = load<float, 4>(o);
    o[5] = twice(o[1]) + twice<int>(3);
    o[6] = outer<float, 3>(o);
    n[0] = load<int, 2>(n + 1);
    o[0] = s[0]; o[1] = s[1];
}
"""


def test_device_function_templates_explicit_and_deduced(device: hetero.Device) -> None:
    kernel = RawKernel(TEMPLATES, "k", path="templates.cu")
    with hetero.use_device(device):
        o = hetero.asarray(np.array([1, 2, 3, 4, 0, 0, 0], np.float32))
        n = hetero.asarray(np.array([0, 5, 7], np.int32))
        kernel((1,), (1,), (o, n))
        assert o.numpy().tolist() == [2, 1, 3, 4, 10, 10, 12]
        assert n.numpy().tolist() == [12, 5, 7]


def test_templates_from_an_included_header(device: hetero.Device, tmp_path: Path) -> None:
    (tmp_path / "ops.cuh").write_text(
        "template <typename T> __device__ T cube(T v) { return v * v * v; }\n"
        "template <typename T> __global__ void scale(T* o, T by) { o[threadIdx.x] = cube(o[threadIdx.x]) * by; }\n")
    code = '#include "ops.cuh"\n__global__ void k(float* o) { o[threadIdx.x] = cube(o[threadIdx.x]) + 1.0f; }\n'
    path = str(tmp_path / "main.cu")
    module = RawModule(code=code, path=path, name_expressions=["scale<float>"])
    with hetero.use_device(device):
        o = hetero.asarray(np.arange(4, dtype=np.float32))
        RawKernel(code, "k", path=path)((1,), (4,), (o,))
        assert o.numpy().tolist() == [1, 2, 9, 28]
        module.get_function("scale<float>")((1,), (4,), (o, np.float32(0.5)))
        assert o.numpy().tolist() == [0.5, 4, 364.5, 10976]


def test_an_error_inside_a_template_instance_names_the_template_line(tmp_path: Path) -> None:
    code = """
template <typename T> __device__ T first(T v) {
    return v.x;
}
__global__ void k(float* o) { o[0] = first<float>(o[1]); }
"""
    with pytest.raises(CompileError, match="member reference base type .*float.* is not a structure") as info:
        RawKernel(code, "k", path=str(tmp_path / "bad.cu"))
    assert info.value.file.endswith("bad.cu") and info.value.line == 3


def test_default_initialised_vectors(device: hetero.Device) -> None:
    code = """
__global__ void k(unsigned int* o) {
    uint4 v;
    float2 f;
    v.y = 3u;
    o[0] = v.x + v.y + (unsigned int)f.x;
}
"""
    kernel = RawKernel(code, "k", path="vectors.cu")
    with hetero.use_device(device):
        o = hetero.asarray(np.array([9], np.uint32))
        kernel((1,), (1,), (o,))
        assert o.numpy().tolist() == [3]


def test_a_template_kernel_takes_each_launchs_dynamic_shared_memory(device: hetero.Device) -> None:
    code = """
template <int N> __global__ void reverse(float* o) {
    extern __shared__ float s[];
    s[threadIdx.x] = o[threadIdx.x] + N;
    __syncthreads();
    o[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x];
}
"""
    kernel = RawModule(code=code, path="reverse.cu", name_expressions=["reverse<2>"]).get_function("reverse<2>")
    with hetero.use_device(device):
        for threads in (4, 8):  # the instance is made once; each launch sizes its shared memory
            o = hetero.asarray(np.arange(threads, dtype=np.float32))
            kernel((1,), (threads,), (o,), shared_mem=threads * 4)
            assert o.numpy().tolist() == (np.arange(threads)[::-1] + 2).tolist()
