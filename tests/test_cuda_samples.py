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
from hetero.core.errors import CompileError

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
    float* p = out[0] > 0.0f ? out : out + 1;
    p[0] = 2.0f;
}
"""
    with pytest.raises(CompileError, match="the pointer variable p: hetero follows pointers into") as info:
        RawKernel(code, "k", path=str(tmp_path / "k.cu"))
    assert info.value.line == 3 and info.value.file.endswith("k.cu")
    with pytest.raises(CompileError, match="no __global__ function named 'missing'"):
        RawKernel(code, "missing")


def test_pointer_variables_move_and_pun(device: hetero.Device) -> None:
    """A pointer variable into a parameter moves with +=; a uchar array written as uint pieces."""
    code = """
__global__ void k(float* out, unsigned int* words) {
    __shared__ unsigned char bytes[8];
    float* p = out + 1;
    p += 2;
    p[0] = 2.0f;
    *(p - 1) = 3.0f;
    ((unsigned int*)bytes)[threadIdx.x] = 0x04030201u * (threadIdx.x + 1);
    __syncthreads();
    unsigned char* b = bytes + 4 * threadIdx.x;
    words[threadIdx.x] = b[0] + 10 * b[3] + 100 * ((unsigned int*)bytes)[1 - threadIdx.x];
}
"""
    kernel = RawKernel(code, "k")
    out, words = np.zeros(6, np.float32), np.zeros(2, np.uint32)
    with hetero.use_device(device):
        kernel((1,), (2,), (out, words))
    np.testing.assert_array_equal(out, [0, 0, 3, 2, 0, 0])
    np.testing.assert_array_equal(words, [(1 + 40 + 100 * 0x08060402) % 2**32, (2 + 80 + 100 * 0x04030201) % 2**32])


def test_dynamic_shared_memory_is_sized_by_each_launch(device: hetero.Device) -> None:
    code = """
extern "C" __global__ void reverse(float* data) {
    extern __shared__ float tile[];
    unsigned int t = threadIdx.x;
    tile[t] = data[blockIdx.x * blockDim.x + t];
    __syncthreads();
    data[blockIdx.x * blockDim.x + t] = tile[blockDim.x - 1 - t];
}
"""
    kernel = RawKernel(code, "reverse")
    for threads in (32, 64):
        data = np.arange(4 * threads, dtype=np.float32)
        with hetero.use_device(device):
            kernel((4,), (threads,), (data,), shared_mem=threads * 4)
        np.testing.assert_array_equal(data, np.arange(4 * threads, dtype=np.float32).reshape(4, threads)[:, ::-1].ravel())
    with pytest.raises(CompileError, match="shared_mem"):
        with hetero.use_device(device):
            kernel((1,), (32,), (np.zeros(32, np.float32),))


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


def test_simple_atomic_intrinsics(device: hetero.Device) -> None:
    code, path = _source("0_Introduction/simpleAtomicIntrinsics/simpleAtomicIntrinsics.cu")
    kernel = RawKernel(code, "testKernel", path=path)
    threads, blocks = 256, 64  # the sample's launch
    data = np.zeros(11, dtype=np.int32)
    data[8] = data[10] = 0xFF
    with hetero.use_device(device):
        kernel((blocks,), (threads,), (data,))
    n = threads * blocks  # computeGold, in Python
    inc = dec = 0
    for _ in range(n):
        inc = 0 if inc >= 17 else inc + 1
        dec = 137 if dec == 0 or dec > 137 else dec - 1
    assert data[0] == 10 * n and data[1] == -10 * n
    assert 0 <= data[2] < n and data[3] == n - 1 and data[4] == 0
    assert data[5] == inc and data[6] == dec
    assert 0 <= data[7] < n
    anded = 0xFF
    xored = 0xFF
    for i in range(n):
        anded &= 2 * i + 7
        xored ^= i
    assert data[8] == anded and data[9] == -1 and data[10] == xored


# -- the same kernels, lowered and emitted for CUDA and HIP, built by nvcc and hipcc ----------
_SAMPLE_KERNELS = {
    "vectorAdd": ("0_Introduction/vectorAdd/vectorAdd.cu", "vectorAdd"),
    "matrixMul": ("0_Introduction/matrixMul/matrixMul.cu", "MatrixMulCUDA<32>"),
    "simpleAtomicIntrinsics": ("0_Introduction/simpleAtomicIntrinsics/simpleAtomicIntrinsics.cu", "testKernel"),
    "transposeDiagonal": ("6_Performance/transpose/transpose.cu", "transposeDiagonal"),
    "reduce3": ("2_Concepts_and_Techniques/reduction/reduction_kernel.cu", "reduce3<float>"),
    "reduce6": ("2_Concepts_and_Techniques/reduction/reduction_kernel.cu", "reduce6<float, 256, true>"),
    "histogram64": ("2_Concepts_and_Techniques/histogram/histogram64.cu", "histogram64Kernel"),
    "histogram256": ("2_Concepts_and_Techniques/histogram/histogram256.cu", "histogram256Kernel"),
    "scan": ("2_Concepts_and_Techniques/scan/scan.cu", "scanExclusiveShared"),
    "uniformUpdate": ("2_Concepts_and_Techniques/scan/scan.cu", "uniformUpdate"),
}
_GPU = {"cuda": ("nvcc", ".cu", ["-arch=sm_90", "-cubin", "-Werror", "all-warnings"]),
        "hip": ("hipcc", ".hip", ["--genco", "--offload-arch=gfx90a", "-Wall", "-Werror"])}


@pytest.mark.parametrize("dialect", sorted(_GPU))
@pytest.mark.parametrize("sample", sorted(_SAMPLE_KERNELS))
def test_sample_kernels_build_for_gpus(dialect: str, sample: str, tmp_path: Path) -> None:
    import os
    import shutil
    import subprocess

    from hetero.compiler.frontend import cuda_c
    from hetero.compiler.emit.cuda import EMITTER as CUDA
    from hetero.compiler.emit.hip import EMITTER as HIP
    from hetero.core.target import Target

    tool, suffix, options = _GPU[dialect]
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")
    relative, name = _SAMPLE_KERNELS[sample]
    code, path = _source(relative)
    function = cuda_c.Source(code, path).kernel(name, shared_bytes=1024)  # sizes an extern __shared__ array
    target = Target(dialect, "sm_90" if dialect == "cuda" else "gfx90a", frozenset({"fp64", "int64_atomics"}), "test")
    text = (CUDA if dialect == "cuda" else HIP).emit(function, target).text
    out = tmp_path / f"{sample}{suffix}"
    out.write_text(text)
    done = subprocess.run([tool, *options, str(out), "-o", str(tmp_path / "out.bin")], capture_output=True, text=True,
                          env={**os.environ, "HIP_PLATFORM": "amd"}, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr + "\n" + text


_TRANSPOSES = ["copy", "copySharedMem", "transposeNaive", "transposeCoalesced", "transposeNoBankConflicts",
               "transposeDiagonal", "transposeFineGrained", "transposeCoarseGrained"]


def _transpose_expected(kernel: str, a: np.ndarray, tile: int) -> np.ndarray:
    if kernel in ("copy", "copySharedMem"):
        return a
    n = a.shape[0]
    tiles = a.reshape(n // tile, tile, n // tile, tile)  # [tile row, row in tile, tile column, column in tile]
    if kernel == "transposeFineGrained":  # each tile transposed where it is
        return tiles.transpose(0, 3, 2, 1).reshape(n, n)
    if kernel == "transposeCoarseGrained":  # tiles moved to their transposed place, not transposed inside
        return tiles.transpose(2, 1, 0, 3).reshape(n, n)
    return a.T


@pytest.mark.parametrize("kernel_name", _TRANSPOSES)
def test_transpose(device: hetero.Device, kernel_name: str) -> None:
    code, path = _source("6_Performance/transpose/transpose.cu")
    kernel = RawKernel(code, kernel_name, path=path)
    size, tile, rows = 1024, 32, 16  # the sample's MATRIX_SIZE, TILE_DIM and BLOCK_ROWS
    a = np.arange(size * size, dtype=np.float32).reshape(size, size)  # the sample's input: h_idata[i] = i
    out = np.zeros_like(a)
    with hetero.use_device(device):
        kernel((size // tile, size // tile), (tile, rows), (out, a, np.int32(size), np.int32(size)))
    np.testing.assert_array_equal(out, _transpose_expected(kernel_name, a, tile))


def _next_pow2(x: int) -> int:
    return 1 << (x - 1).bit_length()


@pytest.mark.parametrize("which", [0, 1, 2, 3, 4, 5, 6])
@pytest.mark.parametrize("dtype,ctype", [(np.int32, "int"), (np.float32, "float")])
def test_reduction_kernels_0_to_6(device: hetero.Device, which: int, dtype: type, ctype: str) -> None:
    """Kernels 4-6 reduce their last warp with tile32.shfl_down (warp shuffles on every device)."""
    code, path = _source("2_Concepts_and_Techniques/reduction/reduction_kernel.cu")
    n, max_threads, max_blocks = 1 << 20, 256, 64  # reduction.cpp's defaults (its n is 1 << 24)
    if which < 3:  # getNumBlocksAndThreads
        threads = _next_pow2(n) if n < max_threads else max_threads
        blocks = (n + threads - 1) // threads
    else:
        threads = _next_pow2((n + 1) // 2) if n < max_threads * 2 else max_threads
        blocks = (n + threads * 2 - 1) // (threads * 2)
    if which == 6:
        blocks = min(max_blocks, blocks)
    # reduce()'s switch: kernels 4-6 are instantiated for the block size (and 6 for a power-of-2 n)
    arguments = {4: f"{ctype}, {threads}", 5: f"{ctype}, {threads}",
                 6: f"{ctype}, {threads}, {'true' if n & (n - 1) == 0 else 'false'}"}.get(which, ctype)
    kernel = RawKernel(code, f"reduce{which}<{arguments}>", path=path)
    shared = (2 if threads <= 32 else 1) * threads * np.dtype(dtype).itemsize
    rng = np.random.default_rng(1)
    data = (rng.integers(0, 256, n) if dtype == np.int32 else rng.random(n)).astype(dtype)  # the sample's inputs
    partial = np.zeros(blocks, dtype=dtype)
    with hetero.use_device(device):
        kernel((blocks,), (threads,), (data, partial, np.uint32(n)), shared_mem=shared)
    total = partial.astype(np.float64).sum()  # the sample finishes the partial sums on the CPU too
    if dtype == np.int32:
        assert int(partial.astype(np.int64).sum()) == int(data.astype(np.int64).sum())
    else:
        assert abs(total - data.astype(np.float64).sum()) < 1e-8 * n  # the sample's threshold for float


def _sorted_ok(keys: np.ndarray, vals: np.ndarray, src_keys: np.ndarray, src_vals: np.ndarray, length: int,
               direction: int) -> None:
    """sortingNetworks_validate.cpp's checks: each array sorted in ``direction``, keys a permutation
    of the input's, and every value still beside its key."""
    for start in range(0, keys.size, length):
        k = keys[start:start + length]
        assert np.array_equal(np.sort(k), np.sort(src_keys[start:start + length]))
        assert np.all(np.diff(k.astype(np.int64)) >= 0) if direction else np.all(np.diff(k.astype(np.int64)) <= 0)
        assert np.array_equal(src_keys[vals[start:start + length]], k)


@pytest.mark.parametrize("direction", [0, 1])
def test_bitonic_sort_shared(device: hetero.Device, direction: int) -> None:
    code, path = _source("2_Concepts_and_Techniques/sortingNetworks/bitonicSort.cu")
    kernel = RawKernel(code, "bitonicSortShared", path=path)
    limit = 1024  # SHARED_SIZE_LIMIT: one block of limit / 2 threads sorts limit elements
    batch, length = 8, limit
    rng = np.random.default_rng(2)
    src_keys = rng.integers(0, 2**32, batch * length, dtype=np.uint64).astype(np.uint32)  # the sample's random keys
    src_vals = np.arange(batch * length, dtype=np.uint32)
    dst_keys, dst_vals = np.zeros_like(src_keys), np.zeros_like(src_vals)
    with hetero.use_device(device):
        kernel((batch * length // limit,), (limit // 2,),
               (dst_keys, dst_vals, src_keys, src_vals, np.uint32(length), np.uint32(direction)))
    _sorted_ok(dst_keys, dst_vals, src_keys, src_vals, length, direction)


def _network(device: hetero.Device, algorithm: str, keys: np.ndarray, length: int, direction: int) -> tuple[np.ndarray, np.ndarray]:
    """bitonicSort() / oddEvenMergeSort() of the sample's host code, in Python: the kernels' sequence."""
    limit = 1024
    name = "bitonicSort.cu" if algorithm == "bitonic" else "oddEvenMergeSort.cu"
    code, path = _source(f"2_Concepts_and_Techniques/sortingNetworks/{name}")
    module = RawModule(code=code, path=path)
    total = keys.size
    blocks, threads = total // limit, limit // 2
    with hetero.use_device(device):
        src_keys, src_vals = hetero.asarray(keys), hetero.asarray(np.arange(total, dtype=np.uint32))
        dst_keys, dst_vals = hetero.zeros(total, hetero.u32), hetero.zeros(total, hetero.u32)
        u = np.uint32
        if algorithm == "bitonic":
            if length <= limit:
                module.get_function("bitonicSortShared")((blocks,), (threads,), (dst_keys, dst_vals, src_keys, src_vals,
                                                                                   u(length), u(direction)))
            else:
                module.get_function("bitonicSortShared1")((blocks,), (threads,), (dst_keys, dst_vals, src_keys, src_vals))
                size = 2 * limit
                while size <= length:
                    stride = size // 2
                    while stride > 0:
                        if stride >= limit:
                            module.get_function("bitonicMergeGlobal")((total // 512,), (256,), (
                                dst_keys, dst_vals, dst_keys, dst_vals, u(length), u(size), u(stride), u(direction)))
                        else:
                            module.get_function("bitonicMergeShared")((blocks,), (threads,), (
                                dst_keys, dst_vals, dst_keys, dst_vals, u(length), u(size), u(direction)))
                            break
                        stride //= 2
                    size *= 2
        else:
            first = min(length, limit)
            module.get_function("oddEvenMergeSortShared")((blocks,), (threads,), (dst_keys, dst_vals, src_keys, src_vals,
                                                                                  u(first), u(direction)))
            size = 2 * limit
            while size <= length:
                stride = size // 2
                while stride > 0:
                    module.get_function("oddEvenMergeGlobal")((total // 512,), (256,), (
                        dst_keys, dst_vals, dst_keys, dst_vals, u(length), u(size), u(stride), u(direction)))
                    stride //= 2
                size *= 2
        return dst_keys.numpy(), dst_vals.numpy()


@pytest.mark.parametrize("algorithm", ["bitonic", "oddEven"])
@pytest.mark.parametrize("length", [64, 1024, 4096])
def test_sorting_networks(device: hetero.Device, algorithm: str, length: int) -> None:
    total = 4096  # the sample sorts N = 1048576 keys in batches of each length; a smaller N, the same kernels
    rng = np.random.default_rng(length)
    keys = rng.integers(0, 2**32, total, dtype=np.uint64).astype(np.uint32)
    for direction in (0, 1):
        got_keys, got_vals = _network(device, algorithm, keys, length, direction)
        _sorted_ok(got_keys, got_vals, keys, np.arange(total, dtype=np.uint32), length, direction)


def test_a_kernel_after_many_host_code_errors_is_still_typed(device: hetero.Device) -> None:
    """clang stops reading after 20 errors by default; a sample file's host code (unparsable
    without CUDA's headers) must not leave the template instance behind it untyped."""
    host = "\n".join(f"void host{k}() {{ undeclared_call{k}(dim3(1), cudaMemcpyHostToDevice); }}" for k in range(30))
    code = host + "\ntemplate <class T> __global__ void twice(T *a) { a[threadIdx.x] = a[threadIdx.x] * (T)2; }\n"
    kernel = RawKernel(code, "twice<float>")
    a = np.arange(8, dtype=np.float32)
    with hetero.use_device(device):
        kernel((1,), (8,), (a,))
    np.testing.assert_array_equal(a, np.arange(8) * 2)


_WARP_C = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;
__global__ void warps(const int *x, int *down, unsigned int *votes, int *tiles, int *ranks) {
    cg::thread_block cta = cg::this_thread_block();
    cg::thread_block_tile<16> tile16 = cg::tiled_partition<16>(cta);
    unsigned int t = threadIdx.x;
    int v = x[t];
    down[t] = __shfl_down_sync(0xffffffff, v, 4, 8);  // segments of 8 lanes
    votes[t] = __ballot_sync(0xffffffff, v > 0) ^ (__all_sync(0xffffffff, v > -100) ? 1u : 0u);
    tiles[t] = tile16.shfl_xor(v, 5) + (int)tile16.ballot(v > 0);
    ranks[t] = (int)(tile16.thread_rank() * 100 + tile16.meta_group_rank() * 10 + tile16.size() / 16) + warpSize * 1000;
}
"""


def test_warp_intrinsics_and_tiles_in_cuda_c(device: hetero.Device) -> None:
    kernel = RawKernel(_WARP_C, "warps")
    n = 64
    x = np.random.default_rng(3).integers(-5, 6, n).astype(np.int32)
    down, tiles, ranks = (np.zeros(n, np.int32) for _ in range(3))
    votes = np.zeros(n, np.uint32)
    with hetero.use_device(device):
        kernel((1,), (n,), (x, down, votes, tiles, ranks))
    t = np.arange(n)
    src = t + 4
    np.testing.assert_array_equal(down, np.where((t % 8) + 4 < 8, x[np.minimum(src, n - 1)], x))
    for w in range(2):
        seg = x[32 * w:32 * w + 32]
        bits = sum(1 << j for j in range(32) if seg[j] > 0)
        np.testing.assert_array_equal(votes[32 * w:32 * w + 32], bits ^ 1)
    tile_bits = np.array([sum(1 << j for j in range(16) if x[16 * (k // 16) + j] > 0) for k in t])
    np.testing.assert_array_equal(tiles, x[t ^ 5] + tile_bits)
    np.testing.assert_array_equal(ranks, (t % 16) * 100 + (t // 16) * 10 + 1 + 32000)


def _histogram_gold(data: np.ndarray, bins: int) -> np.ndarray:
    """histogram_gold.cpp: each 32-bit word's four bytes, as bins of 64 (bits 2-7) or 256."""
    words = data.view(np.uint32)
    shifts, mask = ((2, 10, 18, 26), 0x3F) if bins == 64 else ((0, 8, 16, 24), 0xFF)
    return sum(np.bincount((words >> s) & mask, minlength=bins) for s in shifts).astype(np.uint32)


def test_histogram64(device: hetero.Device) -> None:
    """uint4 loads, a uchar pointer into shared memory, (uint *) stores into it, inlined helpers."""
    code, path = _source("2_Concepts_and_Techniques/histogram/histogram64.cu")
    module = RawModule(code=code, path=path)
    count_kernel, merge = module.get_function("histogram64Kernel"), module.get_function("mergeHistogram64Kernel")
    byte_count = 1 << 20  # main.cpp uses 64 MiB; the host code below is histogram64() of histogram64.cu
    data = np.random.default_rng(4).integers(0, 256, byte_count, dtype=np.uint8)  # h_Data[i] = rand() % 256
    block, bins = 64, 64  # HISTOGRAM64_THREADBLOCK_SIZE, HISTOGRAM64_BIN_COUNT
    histograms = -(-byte_count // (block * (255 - 255 % 16)))  # iDivUp(byteCount, 64 * iSnapDown(255, 16))
    partial = np.zeros(histograms * bins, np.uint32)
    result = np.zeros(bins, np.uint32)
    with hetero.use_device(device):
        count_kernel((histograms,), (block,), (partial, data.view(np.uint32), np.uint32(byte_count // 16)))
        merge((bins,), (256,), (result, partial, np.uint32(histograms)))
    np.testing.assert_array_equal(result, _histogram_gold(data, 64))


def test_histogram256(device: hetero.Device) -> None:
    """Per-warp sub-histograms: a pointer into shared memory and atomicAdd(s_WarpHist + data, 1)."""
    code, path = _source("2_Concepts_and_Techniques/histogram/histogram256.cu")
    module = RawModule(code=code, path=path)
    count_kernel, merge = module.get_function("histogram256Kernel"), module.get_function("mergeHistogram256Kernel")
    byte_count = 1 << 20
    data = np.random.default_rng(5).integers(0, 256, byte_count, dtype=np.uint8)
    partials, block, bins = 240, 6 * 32, 256  # PARTIAL_HISTOGRAM256_COUNT, HISTOGRAM256_THREADBLOCK_SIZE, bins
    partial = np.zeros(partials * bins, np.uint32)
    result = np.zeros(bins, np.uint32)
    with hetero.use_device(device):
        count_kernel((partials,), (block,), (partial, data.view(np.uint32), np.uint32(byte_count // 4)))
        merge((bins,), (256,), (result, partial, np.uint32(partials)))
    np.testing.assert_array_equal(result, _histogram_gold(data, 256))


def _scan_gold(src: np.ndarray, length: int) -> np.ndarray:
    """scan_gold.cpp: an exclusive prefix sum of each array of ``length`` (uint arithmetic wraps)."""
    arrays = src.reshape(-1, length)
    out = np.zeros_like(arrays)
    out[:, 1:] = np.cumsum(arrays[:, :-1], axis=1, dtype=np.uint32)
    return out.reshape(-1)


@pytest.mark.parametrize("length", [4, 64, 1024, 2048, 8192])
def test_scan(device: hetero.Device, length: int) -> None:
    """uint4 values through inlined device functions that take shared memory and the block, with
    barriers inside; a __shared__ scalar; scanExclusiveShort/Large's launches from scan.cu."""
    code, path = _source("2_Concepts_and_Techniques/scan/scan.cu")
    module = RawModule(code=code, path=path)
    block = 256  # THREADBLOCK_SIZE
    n = 1 << 16  # main.cpp's N is 13 * 1048576 / 2; any multiple of 4 * THREADBLOCK_SIZE works the same
    src = np.random.default_rng(2009).integers(0, 2**31, n, dtype=np.uint32)  # h_Input[i] = rand()
    dst = np.zeros(n, np.uint32)
    with hetero.use_device(device):
        shared = module.get_function("scanExclusiveShared")
        if length <= 4 * block:  # scanExclusiveShort
            shared((n // (4 * block),), (block,), (dst, src, np.uint32(length)))
        else:  # scanExclusiveLarge
            shared((n // (4 * block),), (block,), (dst, src, np.uint32(4 * block)))
            count = n // (4 * block)
            buf = np.zeros(count, np.uint32)
            module.get_function("scanExclusiveShared2")((-(-count // block),), (block,),
                                                        (buf, dst, src, np.uint32(count), np.uint32(length // (4 * block))))
            module.get_function("uniformUpdate")((count,), (block,), (dst, buf))
    np.testing.assert_array_equal(dst, _scan_gold(src, length))
