"""What CUDA's headers give a kernel without an ``#include``, through the CUDA C front end on every
device: the math library in float and double forms, its intrinsics, the integer intrinsics,
``__ldg``/``__stcs``, the fixed-width types and limits, and shuffles with and without a width,
each checked against what NumPy computes (CUDA documents the intrinsics' error; hetero computes
the accurate function, so the tolerances below are the accurate functions')."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import numpy as np
import pytest

import hetero
from hetero.compat.cuda import RawKernel
from hetero.core.errors import CompileError

pytestmark = pytest.mark.skipif(importlib.util.find_spec("clang") is None,
                                reason="libclang is not installed (pip install libclang)")

#: name -> NumPy's function, on x in [0.1, 0.9) (acosh on 1 + x).
UNARY = {
    "sqrt": np.sqrt, "rsqrt": lambda x: 1 / np.sqrt(x), "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1,
    "exp10": lambda x: 10.0 ** x, "log": np.log, "log2": np.log2, "log10": np.log10, "log1p": np.log1p,
    "sin": np.sin, "cos": np.cos, "tan": np.tan, "asin": np.arcsin, "acos": np.arccos, "atan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "asinh": np.arcsinh, "acosh": lambda x: np.arccosh(1 + x),
    "atanh": np.arctanh, "lgamma": np.vectorize(math.lgamma), "tgamma": np.vectorize(math.gamma),
    "fabs": np.abs, "floor": np.floor, "ceil": np.ceil, "trunc": np.trunc, "round": np.round, "rint": np.rint,
    "nearbyint": np.rint, "cbrt": np.cbrt, "rcbrt": lambda x: 1 / np.cbrt(x), "sinpi": lambda x: np.sin(np.pi * x),
    "cospi": lambda x: np.cos(np.pi * x),
}
BINARY = {
    "pow": np.power, "fmin": np.fmin, "fmax": np.fmax, "atan2": np.arctan2, "fmod": np.fmod, "hypot": np.hypot,
    "copysign": np.copysign, "remainder": lambda a, b: a - np.rint(a / b) * b, "nextafter": np.nextafter,
    "fdim": lambda a, b: np.where(a > b, a - b, 0), "rhypot": lambda a, b: 1 / np.hypot(a, b),
}
#: The fast intrinsics: name -> (its arity, NumPy's function).
INTRINSICS = {
    "__expf": (1, np.exp), "__logf": (1, np.log), "__log2f": (1, np.log2), "__log10f": (1, np.log10),
    "__sinf": (1, np.sin), "__cosf": (1, np.cos), "__tanf": (1, np.tan), "__exp10f": (1, lambda x: 10.0 ** x),
    "__fsqrt_rn": (1, np.sqrt), "__frsqrt_rn": (1, lambda x: 1 / np.sqrt(x)), "__frcp_rn": (1, lambda x: 1 / x),
    "__saturatef": (1, lambda x: np.clip(x * 3 - 1, 0, 1)), "__powf": (2, np.power), "__fdividef": (2, np.divide),
    "__fmul_rn": (2, np.multiply), "__fadd_rn": (2, np.add),
}


def _inputs(n: int, dtype: type) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(7)
    return (rng.uniform(0.1, 0.9, n).astype(dtype), rng.uniform(0.1, 0.9, n).astype(dtype))


def _math_kernel(ctype: str, suffix: str) -> str:
    lines = []
    for k, name in enumerate(UNARY):
        arg = "1 + x" if name == "acosh" else "x"
        lines.append(f"o[{k} * n + i] = {name}{suffix}({arg});")
    for k, name in enumerate(BINARY, start=len(UNARY)):
        lines.append(f"o[{k} * n + i] = {name}{suffix}(x, y);")
    extra = len(UNARY) + len(BINARY)
    lines += [f"o[{extra} * n + i] = fma{suffix}(x, y, x);", f"o[{extra + 1} * n + i] = ldexp{suffix}(x, 3);",
              (f"o[{extra + 2} * n + i] = isnan(x) + 2 * isinf(x * CUDART_INF_F) + 4 * signbit(-x)"
               f" + 8 * isnan(x * 0 * CUDART_INF_F);"),
              f"o[{extra + 3} * n + i] = sqrt(x) + abs(-x) + pow(x, 2);", f"o[{extra + 4} * n + i] = lrint{suffix}(x * 8);"]
    body = "\n    ".join(lines)
    return f"""
__global__ void k({ctype}* o, const {ctype}* xs, const {ctype}* ys, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    {ctype} x = xs[i], y = ys[i];
    {body}
}}
"""


def _expected(x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    out = [fn(x) for fn in UNARY.values()] + [fn(x, y) for fn in BINARY.values()]
    flags = np.full_like(x, 2 + 4 + 8)  # x * inf is inf, -x has its sign bit, x * 0 * inf is NaN
    return [*out, x * y + x, x * 8, flags, np.sqrt(x) + x + x * x, np.rint(x * 8)]


@pytest.mark.parametrize("ctype, suffix, dtype, rtol", [("float", "f", np.float32, 3e-6),
                                                         ("double", "", np.float64, 1e-13)])
def test_math_library_in_float_and_double_forms(device: hetero.Device, ctype: str, suffix: str, dtype: type,
                                                 rtol: float) -> None:
    n = 64
    x, y = _inputs(n, dtype)
    expected = _expected(x.astype(np.float64), y.astype(np.float64))
    kernel = RawKernel(_math_kernel(ctype, suffix), "k", path=f"math_{ctype}.cu")
    with hetero.use_device(device):
        out = hetero.zeros(len(expected) * n, hetero.f32 if dtype == np.float32 else hetero.f64)
        kernel((1,), (n,), (out, hetero.asarray(x), hetero.asarray(y), np.int32(n)))
        got = out.numpy().reshape(len(expected), n)
    names = [*UNARY, *BINARY, "fma", "ldexp", "isnan/isinf/signbit", "sqrt(float)+abs+pow(x,int)", "lrint"]
    for name, want, have in zip(names, expected, got, strict=True):
        np.testing.assert_allclose(have, want, rtol=rtol, atol=rtol, err_msg=f"{name}{suffix} on {device.name}")


def test_fast_intrinsics_and_conversions(device: hetero.Device) -> None:
    n = 64
    x, y = _inputs(n, np.float32)
    lines = []
    for k, (name, (arity, _)) in enumerate(INTRINSICS.items()):
        arg = "x * 3 - 1" if name == "__saturatef" else "x"
        lines.append(f"o[{k} * n + i] = {name}({arg}{', y' if arity == 2 else ''});")
    count = len(INTRINSICS)
    lines += [f"o[{count} * n + i] = __float2int_rn(x * 8) + 100 * __float2int_rd(x * 8) + 10000 * __float2int_ru(x * 8);",
              f"o[{count + 1} * n + i] = __int2float_rn(i) + __float2int_rz(-x * 8);"]
    body = "\n    ".join(lines)
    code = f"""
__global__ void k(float* o, const float* xs, const float* ys, int n) {{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float x = xs[i], y = ys[i];
    {body}
}}
"""
    kernel = RawKernel(code, "k", path="intrinsics.cu")
    with hetero.use_device(device):
        out = hetero.zeros((count + 2) * n, hetero.f32)
        kernel((1,), (n,), (out, hetero.asarray(x), hetero.asarray(y), np.int32(n)))
        got = out.numpy().reshape(count + 2, n)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    for row, (name, (arity, fn)) in enumerate(INTRINSICS.items()):
        want = fn(x64, y64) if arity == 2 else fn(x64)
        np.testing.assert_allclose(got[row], want, rtol=3e-6, atol=3e-6, err_msg=f"{name} on {device.name}")
    x8 = x64 * 8
    np.testing.assert_array_equal(got[count], np.rint(x8) + 100 * np.floor(x8) + 10000 * np.ceil(x8))
    np.testing.assert_array_equal(got[count + 1], np.arange(n) + np.trunc(-x8))


def _popc(v: int) -> int:
    return v.bit_count()


def _clz(v: int, bits: int) -> int:
    return bits - v.bit_length()


def _ffs(v: int) -> int:
    return (v & -v).bit_length()


def _brev(v: int, bits: int) -> int:
    return int(format(v, f"0{bits}b")[::-1], 2)


def test_integer_intrinsics(device: hetero.Device) -> None:
    rng = np.random.default_rng(3)
    words = np.concatenate([np.array([0, 1, 0x80000000, 0xFFFFFFFF, 0x00F0F000], np.uint32),
                            rng.integers(0, 2**32, 59, dtype=np.uint32)])
    longs = np.concatenate([np.array([0, 1, 2**63, 2**64 - 1, 0x0000F00000000000], np.uint64),
                            rng.integers(0, 2**64, 59, dtype=np.uint64)])
    code = """
__global__ void k(int* o, unsigned int* r, unsigned long long* r64, const unsigned int* w,
                  const unsigned long long* l, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    unsigned int x = __ldg(&w[i]);
    unsigned long long y = __ldcs(l + i);
    o[i] = __popc(x); o[n + i] = __clz((int)x); o[2 * n + i] = __ffs((int)x);
    o[3 * n + i] = __popcll(y); o[4 * n + i] = __clzll((long long)y); o[5 * n + i] = __ffsll((long long)y);
    r[i] = __brev(x); r[n + i] = __umulhi(x, 0x9E3779B9u); r[2 * n + i] = __byte_perm(x, 0x76543210u, 0x5140u);
    __stcs(r64 + i, __brevll(y));
}
"""
    kernel = RawKernel(code, "k", path="bits.cu")
    n = len(words)
    with hetero.use_device(device):
        o, r, r64 = hetero.zeros(6 * n, hetero.i32), hetero.zeros(3 * n, hetero.u32), hetero.zeros(n, hetero.u64)
        kernel((1,), (n,), (o, r, r64, hetero.asarray(words), hetero.asarray(longs), np.int32(n)))
        got_o, got_r, got_r64 = o.numpy().reshape(6, n), r.numpy().reshape(3, n), r64.numpy()
    w, lg = [int(v) for v in words], [int(v) for v in longs]
    assert got_o[0].tolist() == [_popc(v) for v in w]
    assert got_o[1].tolist() == [_clz(v, 32) for v in w]
    assert got_o[2].tolist() == [_ffs(v) for v in w]
    assert got_o[3].tolist() == [_popc(v) for v in lg]
    assert got_o[4].tolist() == [_clz(v, 64) for v in lg]
    assert got_o[5].tolist() == [_ffs(v) for v in lg]
    assert got_r[0].tolist() == [_brev(v, 32) for v in w]
    assert got_r[1].tolist() == [(v * 0x9E3779B9) >> 32 for v in w]
    both = [(0x76543210 << 32) | v for v in w]  # __byte_perm's selector 0x5140: bytes 0, 4, 1, 5
    assert got_r[2].tolist() == [sum(((b >> (8 * s)) & 0xFF) << (8 * k) for k, s in enumerate((0, 4, 1, 5))) for b in both]
    assert got_r64.tolist() == [_brev(v, 64) for v in lg]


def test_vector_loads_and_stores_with_cache_hints(device: hetero.Device) -> None:
    code = """
__global__ void k(float4* out, const float4* in) {
    int i = threadIdx.x;
    float4 v = __ldg(&in[i]);
    uint4 zero;
    v.x += zero.x;
    __stcs(&out[i], make_float4(v.w, v.z, v.y, v.x));
}
"""
    kernel = RawKernel(code, "k", path="hints.cu")
    data = np.arange(32, dtype=np.float32)
    with hetero.use_device(device):
        out = hetero.zeros(32, hetero.f32)
        kernel((1,), (8,), (out, hetero.asarray(data)))
        assert out.numpy().tolist() == data.reshape(8, 4)[:, ::-1].ravel().tolist()


def test_implicit_types_and_limits(device: hetero.Device) -> None:
    code = """
__global__ void k(float* f, long long* n) {
    int64_t a = 1; uint64_t b = 2; int32_t c = 3; uint32_t d = 4; uint8_t e = 5; uint g = 6; ushort h = 7; size_t s = 8;
    n[0] = a + b + c + d + e + g + h + s;
    n[1] = INT_MAX; n[2] = INT_MIN; n[3] = CUDART_VERSION;
#if CUDART_VERSION < 9000
    n[4] = __ballot(1);
#else
    n[4] = 9000;
#endif
    f[0] = CUDART_INF_F; f[1] = -FLT_MAX; f[2] = fminf(f[2], CUDART_INF_F);
}
"""
    kernel = RawKernel(code, "k", path="implicit.cu")
    with hetero.use_device(device):
        f, n = hetero.asarray(np.full(3, 5, np.float32)), hetero.zeros(5, hetero.i64)
        kernel((1,), (1,), (f, n))
        assert n.numpy().tolist() == [36, 2**31 - 1, -2**31, 12000, 9000]
        assert f.numpy().tolist() == [np.inf, -np.finfo(np.float32).max, 5.0]


def test_shuffles_take_three_or_four_arguments(device: hetero.Device) -> None:
    code = """
__global__ void k(float* o) {
    float v = o[threadIdx.x];
    float down = __shfl_down_sync(0xffffffff, v, 1);
    float up = __shfl_up_sync(0xffffffff, v, 2);
    float across = __shfl_xor_sync(0xffffffff, v, 1);
    float first = __shfl_sync(0xffffffff, v, 0);
    float half = __shfl_down_sync(0xffffffff, v, 1, 16);
    __syncwarp();
    o[32 + threadIdx.x] = down; o[64 + threadIdx.x] = up; o[96 + threadIdx.x] = across;
    o[128 + threadIdx.x] = first; o[160 + threadIdx.x] = half;
}
"""
    kernel = RawKernel(code, "k", path="shuffles.cu")
    lanes = np.arange(32)
    with hetero.use_device(device):
        o = hetero.asarray(np.concatenate([lanes, np.zeros(160)]).astype(np.float32))
        kernel((1,), (32,), (o,))
        got = o.numpy().reshape(6, 32)
    assert got[1].tolist() == np.minimum(lanes + 1, 31).tolist()
    assert got[2].tolist() == np.where(lanes < 2, lanes, lanes - 2).tolist()
    assert got[3].tolist() == (lanes ^ 1).tolist()
    assert got[4].tolist() == [0] * 32
    assert got[5].tolist() == np.where(lanes % 16 == 15, lanes, lanes + 1).tolist()


@pytest.mark.parametrize("call", ["sincosf(x, &s, &c)", "s = __float_as_int(x)", "s = frexpf(x, &e)",
                                  "s = erfinvf(x)"])
def test_math_functions_not_lowered_are_refused_by_name(tmp_path: Path, call: str) -> None:
    code = f"""
__global__ void k(float* o) {{
    float x = o[0], s = 0, c = 0; int e = 0;
    {call};
    o[1] = s + c + e;
}}
"""
    name = call.split("(")[0].split()[-1]
    with pytest.raises(CompileError, match=f"{name}: hetero's CUDA C front end does not lower") as info:
        RawKernel(code, "k", path=str(tmp_path / "refused.cu"))
    assert info.value.line == 4 and info.value.file.endswith("refused.cu")
