"""The CUDA C and HIP emitters: every kernel of the corpus, and the kernels below (for what
the corpus lacks), is emitted and compiled by nvcc and hipcc with warnings as errors (each
test skips when its compiler is absent); structure checks catch what a compiler would accept
but a user would notice (a lost barrier, a second shared array, a missing header, 32-bit
index math, renamed variables)."""

from __future__ import annotations

import cmath
import concurrent.futures
import ctypes
import ctypes.util
import functools
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from kernels import corpus

import hetero
from hetero import f16, f32, f64, i32, i64, language, u32, u64
from hetero.compat import cuda
from hetero.compiler.ir import nodes as ir
from hetero.compiler.emit.cuda import EMITTER as CUDA
from hetero.compiler.emit.hip import EMITTER as HIP
from hetero.compiler.emit.opencl import EMITTER as OPENCL
from hetero.compiler.emit.base import Emitter, default_abi, entry_name
from hetero.compiler.frontend.signature import parse_signature
from hetero.core.target import Target
from hetero.core.errors import CompileError

FEATURES = frozenset({"fp64", "fp16", "int64_atomics"})
TARGETS = {"cuda": Target("cuda", "sm_90", FEATURES, "nvcc 13.0"), "hip": Target("hip", "gfx90a", FEATURES, "hipcc 5.2")}
EMITTERS: dict[str, Emitter] = {"cuda": CUDA, "hip": HIP}
FP16_HEADERS = {"cuda": "#include <cuda_fp16.h>", "hip": "#include <hip/hip_fp16.h>"}

# The argument types tests/test_kernels.py launches each corpus kernel with.
CORPUS_SIGNATURES = {
    "saxpy": "f32, f32[:], f32[:]", "daxpy": "f64, f64[:], f64[:]", "matmul_tiled": "f32[:, :], f32[:, :], f32[:, :]",
    "reduce_sum": "f32[:], f32[:]", "reduce_sum_i64": "i64[:], i64[:]", "jacobi": "f32[:, :], f32[:, :]",
    "histogram": "i32[:], i64, i32[:]", "scan_blocks": "i32[:], i32[:]", "softmax_rows": "f32[:, :], f32[:, :]",
    "transpose_tiled": "f32[:, :], f32[:, :]", "mandelbrot": "i32[:, :], i32", "apply_smoothstep": "f32[:], f32[:]",
    "floor_ops": "i32[:], i32[:], i32[:], i32[:]", "triad": "f32[:], f32[:], f32[:], f32",
}


# -- kernels for what the corpus lacks ---------------------------------------------------
@hetero.kernel
def halves(x: hetero.Array[f16], y: hetero.Array[f16], w: hetero.Array[f32], d: hetero.Array[f64],
           z: hetero.Array[f16], k: f32):
    """f16 arrays in global and local memory, an f16 scalar, f64 -> f16, an f16 literal."""
    tile = hetero.local_array(64, f16)
    lid = hetero.local_id(0)
    i = hetero.global_id(0)
    tile[lid] = x[i]
    hetero.barrier()
    h = f16(tile[63 - lid] * k)
    y[i] = h
    w[i] = f32(x[i]) / 3.0 + f32(h)
    z[i] = f16(d[i]) if i % 2 == 0 else f16(0.1)


@hetero.kernel
def doubles(x: hetero.Array[f64], out: hetero.Array[f64], n: hetero.Array[i64]):
    """Every math function on f64, floor division, modulo, powers and infinities."""
    i = hetero.global_id(0)
    v = x[i]
    a = hetero.math.sqrt(v) + hetero.math.rsqrt(v) + hetero.math.exp(v) + hetero.math.log(v) + hetero.math.log2(v)
    b = hetero.math.sin(v) * hetero.math.cos(v) + hetero.math.tan(v) - hetero.math.tanh(v) + hetero.math.pow(v, 1.5)
    c = hetero.math.fabs(v) + hetero.math.floor(v) + hetero.math.ceil(v) + hetero.math.fmin(v, 2.0)
    e = hetero.math.fmax(v, -math.inf) + hetero.math.fma(v, v, 1.0) + v // 0.5 + v % 3.0 + v ** 2.0 + abs(v)
    out[i] = min(a + b, c + e) if v < 1e300 else f64(math.inf)
    n[i] = i64(v) ** 3 // (n[i] + 1) % 7 + abs(n[i]) + max(n[i], -5)


@hetero.kernel
def floats(x: hetero.Array[f32], out: hetero.Array[f32]):
    """Every math function on f32: the f-suffixed C names."""
    i = hetero.global_id(0)
    v = x[i]
    a = hetero.math.sqrt(v) + hetero.math.rsqrt(v) + hetero.math.exp(v) + hetero.math.log(v) + hetero.math.log2(v)
    b = hetero.math.sin(v) * hetero.math.cos(v) + hetero.math.tan(v) - hetero.math.tanh(v) + hetero.math.pow(v, 1.5)
    c = hetero.math.fabs(v) + hetero.math.floor(v) + hetero.math.ceil(v) + hetero.math.fmin(v, 2.0)
    e = hetero.math.fmax(v, -math.inf) + hetero.math.fma(v, v, 1.0) + v // 0.5 + v % 3.0 + v ** 2.0 + abs(v)
    out[i] = a + b + c + e + math.nan


@hetero.kernel
def atomics(a64: hetero.Array[i64], b64: hetero.Array[u64], d64: hetero.Array[f64], a32: hetero.Array[i32],
            b32: hetero.Array[u32], f: hetero.Array[f32], old: hetero.Array[f64]):
    """Every atomic on every type it works on, results used and unused, in global and local memory."""
    hits = hetero.local_array(4, i32)
    peak = hetero.local_array(2, f32)
    i = hetero.global_id(0)
    lid = hetero.local_id(0)
    if lid < 2:
        peak[lid] = 0.0
    hetero.barrier()
    for op in range(3):
        hetero.atomic_add(a64, op, i)
        hetero.atomic_sub(a64, op, 2)
        hetero.atomic_min(a64, op, -i)
        hetero.atomic_max(a64, op, i)
        hetero.atomic_cas(a64, op, 0, i)
        hetero.atomic_add(b64, op, u64(i))
        hetero.atomic_sub(b64, op, u64(1))
        hetero.atomic_min(b64, op, u64(i))
        hetero.atomic_max(b64, op, u64(i))
        hetero.atomic_cas(b64, op, u64(0), u64(i))
        hetero.atomic_add(d64, op, 0.5)
        hetero.atomic_sub(d64, op, 0.25)
        hetero.atomic_min(d64, op, f64(i))
        hetero.atomic_max(d64, op, f64(i))
        hetero.atomic_cas(d64, op, 0.0, 1.0)
        hetero.atomic_add(a32, op, 1)
        hetero.atomic_sub(a32, op, 1)
        hetero.atomic_min(a32, op, -1)
        hetero.atomic_max(a32, op, 1)
        hetero.atomic_cas(a32, op, 0, 1)
        hetero.atomic_add(b32, op, u32(1))
        hetero.atomic_sub(b32, op, u32(1))
        hetero.atomic_min(b32, op, u32(1))
        hetero.atomic_max(b32, op, u32(1))
        hetero.atomic_cas(b32, op, u32(0), u32(1))
        hetero.atomic_add(f, op, 1.5)
        hetero.atomic_sub(f, op, 0.5)
        hetero.atomic_min(f, op, -1.0)
        hetero.atomic_max(f, op, 1.0)
        hetero.atomic_cas(f, op, 0.0, 1.0)
    hetero.atomic_add(hits, lid % 4, 1)
    hetero.atomic_max(peak, 0, f32(i))
    hetero.barrier()
    total = f64(hetero.atomic_add(a64, 3, 1)) + f64(hetero.atomic_cas(a64, 4, 0, 1)) + hetero.atomic_add(d64, 3, 1.0)
    total += f64(hetero.atomic_max(a64, 5, i)) + hetero.atomic_max(d64, 4, 2.0) + hetero.atomic_cas(d64, 5, 0.0, 1.0)
    total += f64(hetero.atomic_sub(b64, 3, u64(1))) + f64(hetero.atomic_min(b64, 4, u64(i)))
    total += f64(hetero.atomic_cas(f, 3, 0.0, 2.0)) + f64(hetero.atomic_min(f, 4, 1.0)) + f64(hits[lid % 4])
    old[i] = total + f64(peak[0])


@hetero.kernel
def newer_atomics(a64: hetero.Array[i64], b64: hetero.Array[u64], d64: hetero.Array[f64], a32: hetero.Array[i32],
                  b32: hetero.Array[u32], f: hetero.Array[f32], old: hetero.Array[f64]):
    """Exchange, bitwise and CUDA's wrapping inc/dec on every type each works on, in global and local memory."""
    flags = hetero.local_array(2, u32)
    i = hetero.global_id(0)
    lid = hetero.local_id(0)
    if lid < 2:
        flags[lid] = u32(0)
    hetero.barrier()
    language.atomic_exch(a64, 0, i)
    language.atomic_and(a64, 1, i)
    language.atomic_or(a64, 2, i)
    language.atomic_xor(a64, 3, i)
    language.atomic_exch(b64, 0, u64(i))
    language.atomic_and(b64, 1, u64(i))
    language.atomic_or(b64, 2, u64(i))
    language.atomic_xor(b64, 3, u64(i))
    language.atomic_inc(b64, 4, u64(7))
    language.atomic_dec(b64, 5, u64(7))
    language.atomic_exch(d64, 0, 1.0)
    language.atomic_exch(a32, 0, 1)
    language.atomic_and(a32, 1, 3)
    language.atomic_or(a32, 2, 3)
    language.atomic_xor(a32, 3, 3)
    language.atomic_exch(b32, 0, u32(1))
    language.atomic_and(b32, 1, u32(3))
    language.atomic_or(b32, 2, u32(3))
    language.atomic_xor(b32, 3, u32(3))
    language.atomic_inc(b32, 4, u32(7))
    language.atomic_dec(b32, 5, u32(7))
    language.atomic_exch(f, 0, 2.0)
    language.atomic_or(flags, 0, u32(1))
    language.atomic_inc(flags, 1, u32(3))
    hetero.barrier()
    total = f64(language.atomic_exch(a64, 6, i)) + language.atomic_exch(d64, 1, 2.0) + f64(language.atomic_xor(b32, 6, u32(1)))
    total += f64(language.atomic_inc(b32, 7, u32(9))) + f64(language.atomic_dec(b64, 6, u64(9))) + f64(flags[1])
    old[i] = total + f64(language.atomic_exch(f, 1, 3.0))


@cuda.jit
def private_arrays(data, out):
    """cuda.local.array: a per-thread array, across a barrier."""
    window = cuda.local.array(3, cuda.float32)
    i = cuda.grid(1)
    for k in range(3):
        window[k] = data[i] * (k + 1)
    cuda.syncthreads()
    out[i] = window[0] + window[2]


@cuda.jit
def warps(data, flags, out, votes):
    """Every warp operation: shuffles of each width of value, votes, fences, syncwarp."""
    i = cuda.grid(1)
    v = data[i]
    if cuda.threadIdx.x < 32:
        for offset in (16, 8, 4, 2, 1):
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
    v += cuda.shfl_up_sync(0xFFFFFFFF, v, 1) + cuda.shfl_xor_sync(0xFFFFFFFF, v, 3) + cuda.shfl_sync(0xFFFFFFFF, v, 0)
    flag = cuda.shfl_sync(0xFFFFFFFF, flags[i], 1)
    n = cuda.shfl_down_sync(0xFFFFFFFF, cuda.laneid, 2) + cuda.warpsize
    cuda.syncwarp()
    cuda.threadfence_block()
    out[i] = v + n + flag
    cuda.threadfence()
    votes[i] = cuda.ballot_sync(0xFFFFFFFF, v > 0) + cuda.activemask() + cuda.lanemask_lt()
    m, p = cuda.match_all_sync(0xFFFFFFFF, n)
    votes[i] += cuda.match_any_sync(0xFFFFFFFF, n) + m + p
    if cuda.all_sync(0xFFFFFFFF, flag) or cuda.any_sync(cuda.activemask(), v < 0.0):
        votes[i] += 1
    cuda.threadfence_system()


@hetero.func
def row_times_column(a, b, row: i64):
    acc = 0.0
    for k in range(a.shape[1]):
        acc += a[row, k] * b[k, 0]
    return acc


@hetero.func
def put(out, j: i64, value):
    out[j] = value


@hetero.func
def positive(v: f32) -> bool:
    return v > 0.0


@hetero.kernel
def device_functions(a: hetero.Array[f32], b: hetero.Array[f32], out: hetero.Array[f32]):
    """Device functions taking 2-D arrays, writing arrays, returning bool, returning nothing."""
    i = hetero.global_id(0)
    if i < out.shape[0]:
        value = row_times_column(a, b, i)
        if positive(value):
            put(out, i, value)


@hetero.kernel
def flags(inputs: hetero.Array[bool], outputs: hetero.Array[bool], small: hetero.Array[hetero.u8],
          wide: hetero.Array[hetero.i16], everything: bool):
    """bool arrays (one byte each), a bool parameter, narrow integer arithmetic."""
    i = hetero.global_id(0)
    if i < inputs.shape[0]:
        outputs[i] = not inputs[i] or everything
        small[i] = hetero.u8(small[i] * 3 + 1)
        wide[i] = hetero.i16(wide[i] << 2) if inputs[i] else -wide[i]


@hetero.kernel
def volume(src: hetero.Array[f32], dst: hetero.Array[f32], sizes: hetero.Array[i64]):
    """3-D indexing and every index built-in on every axis."""
    x = hetero.global_id(0)
    y = hetero.global_id(1)
    z = hetero.global_id(2)
    if z < src.shape[0] and y < src.shape[1] and x < src.shape[2]:
        dst[z, y, x] = src[z, y, x] * 2.0
    if x == 0 and y == 0 and z == 0:
        for axis_size in range(1):
            sizes[axis_size] = hetero.local_id(2) + hetero.group_id(2) + hetero.local_size(2)
        sizes[1] = hetero.num_groups(0) * hetero.num_groups(1) * hetero.num_groups(2)
        sizes[2] = hetero.global_size(0) + hetero.global_size(1) + hetero.global_size(2)
        sizes[3] = hetero.local_size(0) + hetero.local_size(1) + hetero.group_id(1) + hetero.local_id(1)


@hetero.kernel
def names(out: hetero.Array[i64], this: i64):
    """User names that are C++ keywords, CUDA built-ins or macros keep working."""
    new = 1
    template = 2
    threadIdx = 3
    half = 4
    linux = 5
    errno = 6
    expf = 7
    signed = 8
    atomicAdd = 9
    float4 = 10
    for delete in range(this, 0, -2):
        new += delete
    step = this % 3 - 1
    for virtual in range(10, 0, step):
        template += virtual
        if virtual == 5:
            break
    while threadIdx < 100:
        threadIdx *= 2
        if threadIdx == 12:
            continue
    out[0] = new + template + threadIdx + half + linux + errno + expf + signed + atomicAdd + float4 + delete


@cuda.jit
def complex_numbers(a, b, z):
    """Complex values (as pairs of floats): arithmetic, cmath functions, powers, both widths."""
    i = cuda.grid(1)
    w = a[i] * z / (b[i] + 1j)
    a[i] = cmath.exp(w) + cmath.sqrt(w) * cmath.tanh(w) - cmath.log(w) ** 2 + w ** (0.5 + 1j)
    b[i] = complex(abs(w), cmath.phase(w)) * b[i].conjugate() + cmath.tan(b[i])


@cuda.jit
def bit_intrinsics(a, b, out):
    """cuda.popc/clz/ffs/brev on 32- and 64-bit patterns (device functions of hetero.language.bits)."""
    i = cuda.grid(1)
    out[i] = cuda.popc(a[i]) + cuda.clz(b[i]) + cuda.ffs(a[i]) + cuda.brev(b[i]) + cuda.brev(a[i])


EXTRA_SIGNATURES = {
    "halves": "f16[:], f16[:], f32[:], f64[:], f16[:], f32", "doubles": "f64[:], f64[:], i64[:]",
    "floats": "f32[:], f32[:]", "atomics": "i64[:], u64[:], f64[:], i32[:], u32[:], f32[:], f64[:]",
    "newer_atomics": "i64[:], u64[:], f64[:], i32[:], u32[:], f32[:], f64[:]", "private_arrays": "f32[:], f32[:]",
    "warps": "f64[:], bool[:], f64[:], u32[:]", "complex_numbers": "c128[:], c64[:], c128",
    "bit_intrinsics": "u32[:], i64[:], u64[:]",
    "device_functions": "f32[:, :], f32[:, :], f32[:]", "flags": "bool[:], bool[:], u8[:], i16[:], bool",
    "volume": "f32[:, :, :], f32[:, :, :], i64[:]", "names": "i64[:], i64",
}
EXTRA = {"halves": halves, "doubles": doubles, "floats": floats, "atomics": atomics, "newer_atomics": newer_atomics,
         "private_arrays": private_arrays.kernel, "warps": warps.kernel,
         "complex_numbers": complex_numbers.kernel, "bit_intrinsics": bit_intrinsics.kernel,
         "device_functions": device_functions, "flags": flags, "volume": volume, "names": names}
KERNELS = {**{name: (getattr(corpus, name), sig) for name, sig in CORPUS_SIGNATURES.items()},
           **{name: (EXTRA[name], sig) for name, sig in EXTRA_SIGNATURES.items()}}


def lowered(name: str) -> ir.Function:
    kernel, signature = KERNELS[name]
    return kernel._lowered(parse_signature(signature)[1])


def source(dialect: str, name: str) -> str:
    return EMITTERS[dialect].emit(lowered(name), TARGETS[dialect]).text


# -- compiling with the vendors' compilers ------------------------------------------------
COMPILERS = {
    "cuda": ("nvcc", ".cu", ["-arch=sm_90", "-cubin", "-Werror", "all-warnings"], ".cubin"),
    "hip": ("hipcc", ".hip", ["--genco", "--offload-arch=gfx90a", "-Wall", "-Werror"], ".hsaco"),
}


def _compile(dialect: str, name: str, folder: Path) -> tuple[bool, str]:
    tool, suffix, options, output = COMPILERS[dialect]
    path = folder / f"{name}{suffix}"
    path.write_text(source(dialect, name))
    command = [tool, *options, str(path), "-o", str(folder / f"{name}{output}")]
    env = {**os.environ, "HIP_PLATFORM": "amd"}
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300, check=False)
    return done.returncode == 0, " ".join(command) + "\n" + done.stdout + done.stderr


@functools.cache
def compiled(dialect: str) -> dict[str, tuple[bool, str]]:
    """Every kernel built by the dialect's compiler, in parallel, once per test session."""
    folder = Path(tempfile.mkdtemp(prefix=f"hetero-{dialect}-build-"))
    with concurrent.futures.ThreadPoolExecutor(max_workers=os.cpu_count() or 4) as pool:
        futures = {name: pool.submit(_compile, dialect, name, folder) for name in KERNELS}
        return {name: future.result() for name, future in futures.items()}


def numbered(text: str) -> str:
    return "\n".join(f"{n:4} | {line}" for n, line in enumerate(text.splitlines(), 1))


@pytest.mark.parametrize("name", sorted(KERNELS))
@pytest.mark.parametrize("dialect", ["cuda", "hip"])
def test_kernel_compiles_without_warnings(dialect: str, name: str) -> None:
    tool = COMPILERS[dialect][0]
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not on PATH; install the {dialect.upper()} toolkit to build {dialect} kernels")
    ok, log = compiled(dialect)[name]
    assert ok, f"{tool} rejected {name}:\n{numbered(source(dialect, name))}\n{log}"


# In a process of its own: hipRTC's LLVM clashes with other LLVMs loaded here (OpenCL, Numba).
_HIPRTC = """
import ctypes, pathlib, sys
hiprtc = ctypes.CDLL("libamdhip64.so")
if not hasattr(hiprtc, "hiprtcCompileProgram"):
    sys.exit("no hipRTC in libamdhip64.so")
for path in sorted(pathlib.Path(sys.argv[1]).glob("*.hip")):
    program = ctypes.c_void_p()
    hiprtc.hiprtcCreateProgram(ctypes.byref(program), path.read_bytes(), path.name.encode(), 0, None, None)
    if hiprtc.hiprtcCompileProgram(program, 1, (ctypes.c_char_p * 1)(b"--offload-arch=gfx90a")) != 0:
        size = ctypes.c_size_t()
        hiprtc.hiprtcGetProgramLogSize(program, ctypes.byref(size))
        log = ctypes.create_string_buffer(size.value + 1)
        hiprtc.hiprtcGetProgramLog(program, log)
        print(f"{path.stem} failed:", log.value.decode(errors="replace"))
"""


def test_hip_kernels_build_with_hiprtc(tmp_path: Path) -> None:
    """hipRTC, which builds kernels at run time, brings its own headers: the source must suit it too."""
    if ctypes.util.find_library("amdhip64") is None:
        pytest.skip("libamdhip64 (hipRTC) is not installed")
    for name in KERNELS:
        (tmp_path / f"{name}.hip").write_text(source("hip", name))
    done = subprocess.run([sys.executable, "-c", _HIPRTC, str(tmp_path)], capture_output=True, text=True,
                          timeout=600, check=False)
    if "no hipRTC" in done.stderr:
        pytest.skip(done.stderr.strip())
    assert done.returncode == 0 and not done.stdout, done.stdout + done.stderr


def test_every_corpus_kernel_is_compiled() -> None:
    in_corpus = {name for name, value in vars(corpus).items() if isinstance(value, hetero.Kernel)}
    assert in_corpus == set(CORPUS_SIGNATURES), "give each corpus kernel a signature in CORPUS_SIGNATURES"


# -- what the generated text must say ------------------------------------------------------
DIALECTS = pytest.mark.parametrize("dialect", ["cuda", "hip"])


def statements_of(fn: ir.Function, kind: type) -> int:
    return sum(isinstance(s, kind) for s in ir.walk_stmts(fn.body))


@DIALECTS
@pytest.mark.parametrize("name, arrays", [("reduce_sum", 1), ("transpose_tiled", 1), ("matmul_tiled", 2),
                                          ("scan_blocks", 1), ("saxpy", 0)])
def test_one_shared_declaration_per_local_array(dialect: str, name: str, arrays: int) -> None:
    text = source(dialect, name)
    assert len(lowered(name).local_arrays) == arrays
    assert text.count("__shared__") == arrays
    for local in lowered(name).local_arrays:
        size = " * ".join(map(str, local.shape))
        assert f"__shared__ float {local.name}[{size}];" in text or f"__shared__ int {local.name}[{size}];" in text


@DIALECTS
@pytest.mark.parametrize("name", ["reduce_sum", "matmul_tiled", "scan_blocks", "transpose_tiled", "saxpy", "atomics"])
def test_each_barrier_is_one_syncthreads(dialect: str, name: str) -> None:
    text = source(dialect, name)
    assert text.count("__syncthreads();") == statements_of(lowered(name), ir.Barrier)
    assert "barrier(" not in text


@DIALECTS
def test_fp16_header_only_where_f16_is_used(dialect: str) -> None:
    for name in KERNELS:
        text = source(dialect, name)
        assert (FP16_HEADERS[dialect] in text) == (name == "halves"), name
        assert ("#include <hip/hip_runtime.h>" in text) == (dialect == "hip")
        assert "cuda_fp16" not in text or dialect == "cuda"
    text = source(dialect, "halves")
    assert "__shared__ __half tile[64];" in text and "const __half* __restrict__ x" in text
    assert "__half h = __float2half(0.0f);" in text and "__half2float(" in text


@DIALECTS
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_extern_c_entry_with_the_opencl_abi(dialect: str, name: str) -> None:
    fn = lowered(name)
    emitted = EMITTERS[dialect].emit(fn, TARGETS[dialect])
    assert emitted.entry == entry_name(fn) and emitted.dialect == dialect
    assert emitted.text.count('extern "C"') == 1
    assert f'extern "C" __global__ void {entry_name(fn)}(' in emitted.text
    assert emitted.abi == default_abi(fn, with_shapes=True)
    opencl = OPENCL.emit(fn, Target("opencl", "any", FEATURES, "test"))
    assert emitted.abi == opencl.abi  # the launcher treats all three alike
    params = [p.strip() for p in emitted.text.split(f"{entry_name(fn)}(")[1].split(") {")[0].split(",")]
    kinds = ["shape" if re.fullmatch(r"long long \w+_shape\d", p) else "array" if "*" in p else "scalar" for p in params]
    assert kinds == [a.kind for a in emitted.abi]


@DIALECTS
@pytest.mark.parametrize("name", sorted(KERNELS))
def test_output_is_deterministic_and_one_statement_a_line(dialect: str, name: str) -> None:
    text = source(dialect, name)
    assert source(dialect, name) == text
    for line in text.splitlines():
        if not line.lstrip().startswith("for ("):
            assert line.count(";") <= 1, line


@DIALECTS
def test_index_math_is_64_bit_and_user_names_are_kept(dialect: str) -> None:
    text = source(dialect, "saxpy")
    assert "i = (long long)blockIdx.x * blockDim.x + threadIdx.x;" in text
    assert "long long i = 0;" in text and "y[i] = (a * x[i]) + y[i];" in text
    mandelbrot = source(dialect, "mandelbrot")
    for variable in ("zr", "zi", "cr", "ci"):
        assert f"float {variable} = 0;" in mandelbrot
    assert "int max_iter" in mandelbrot and "int* __restrict__ out, long long out_shape0" in mandelbrot
    volume = source(dialect, "volume")
    assert "z = (long long)blockIdx.z * blockDim.z + threadIdx.z;" in volume
    assert "(long long)gridDim.x * blockDim.x" in volume and "(long long)gridDim.z" in volume
    renamed = source(dialect, "names")
    for name in ("new", "template", "threadIdx", "half", "linux", "errno", "expf", "signed", "atomicAdd", "float4",
                 "delete", "virtual", "this"):
        assert re.search(rf"\bv_{name}\b", renamed), name
    assert "long long step = 0;" in renamed


@DIALECTS
def test_math_functions_are_chosen_by_type(dialect: str) -> None:
    single, double = source(dialect, "floats"), source(dialect, "doubles")
    for function in ("sqrt", "rsqrt", "exp", "log", "log2", "sin", "cos", "tan", "tanh", "pow", "fabs", "floor",
                     "ceil", "fmin", "fmax", "fma"):
        assert f"{function}f(" in single and not re.search(rf"\b{function}\(", single), function
        assert re.search(rf"\b{function}\(", double) and f"{function}f(" not in double, function
    assert "llabs(" in double and "__int_as_float(0x7fc00000)" in single


@DIALECTS
def test_atomics_use_the_vendor_functions(dialect: str) -> None:
    text = source(dialect, "atomics")
    assert "atomicAdd(&a32[" in text and "atomicSub(&b32[" in text and "atomicMin(&b64[" in text
    assert "(long long)atomicAdd((unsigned long long*)&a64[" in text  # signed 64-bit: on the unsigned word
    assert "atomicAdd(&d64[" in text and "atomicAdd(&f[" in text  # native f64 and f32 adds
    assert "heterohelp_atomic_max_float(&peak[" in text and "heterohelp_atomic_min_long_long(&a64[" in text
    assert "__int_as_float(atomicCAS((int*)&f[" in text


def test_double_add_without_native_atomic_is_a_compare_and_swap_loop() -> None:
    old_gpu = Target("cuda", "sm_52", FEATURES, "nvcc 11.8")
    text = CUDA.emit(lowered("atomics"), old_gpu).text
    assert "heterohelp_atomic_add_double(&d64[" in text and "atomicAdd(&d64[" not in text


@DIALECTS
def test_missing_target_features_are_compile_errors(dialect: str) -> None:
    bare = Target(dialect, "any", frozenset(), "test")
    with pytest.raises(CompileError, match="daxpy.*no fp64"):
        EMITTERS[dialect].emit(lowered("daxpy"), bare)
    with pytest.raises(CompileError, match="64-bit atomics"):
        EMITTERS[dialect].emit(lowered("reduce_sum_i64"), Target(dialect, "any", frozenset({"fp64"}), "test"))
    with pytest.raises(CompileError, match="f16 scalar"):
        EMITTERS[dialect].emit(lowered("halves"), Target(dialect, "any", frozenset({"fp64"}), "test"))
    with pytest.raises(ValueError, match="not opencl:any"):
        EMITTERS[dialect].emit(lowered("saxpy"), Target("opencl", "any", FEATURES, "test"))


def test_hip_rounds_double_to_half_once() -> None:
    text = source("hip", "halves")
    assert "heterohelp_half_from_double(d[i])" in text and "__double2half" not in text
    assert "__double2half(d[i])" in source("cuda", "halves")
