"""Python's and Numba-CUDA's numeric built-ins in Numba-CUDA kernels on every device, in Numba's
types, against Python and NumPy: round(x) and round(x, n), pow and ** on ints and floats,
cuda.fma, cuda.cbrt, math.frexp and math.ldexp (exact, subnormals and infinities included)."""

from __future__ import annotations

import math
from collections.abc import Iterator
from fractions import Fraction

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.core.errors import CompileError


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


def _fallback_round(x: float, ndigits: int) -> float:
    """CPython's fallback double_round, which numba-cuda implements (Python's own round is
    correctly rounded from the decimal string, and differs on values such as 2.675)."""
    if math.isinf(x) or math.isnan(x):
        return x
    if ndigits >= 0:
        pow1, pow2 = (10.0 ** (ndigits - 22), 1e22) if ndigits > 22 else (10.0 ** ndigits, 1.0)
        y = (x * pow1) * pow2
        if math.isinf(y):
            return x
    else:
        pow1, pow2 = 10.0 ** -ndigits, 1.0
        y = x / pow1
    z = float(round(y))
    if math.fabs(y - z) == 0.5:
        z = 2.0 * round(y / 2.0)
    return (z / pow2) / pow1 if ndigits >= 0 else z * pow1


@cuda.jit
def round_both(x, digits, whole, halves, rounded):
    i = cuda.grid(1)
    if i < x.size:
        whole[i] = round(x[i])
        halves[i] = round(x[i]) >> 1  # an integer, as in Numba (a float would refuse >>)
        rounded[i] = round(x[i], digits)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("digits", [0, 2, 5, -1, -3])
def test_round_matches_numba_cuda(on: hetero.Device, dtype: type, digits: int) -> None:
    x = np.array([0.5, 1.5, 2.5, -2.5, 2.675, 1234.5678, -0.125, 3.14159, 5e-5, 12345.0, 1e300 if dtype is np.float64
                  else 1e30, np.inf, -np.inf, np.nan], dtype=dtype)
    whole = np.zeros(x.size, np.int64)
    halves = np.zeros(x.size, np.int64)
    rounded = np.zeros(x.size, dtype)
    round_both[1, 32](x, digits, whole, halves, rounded)
    finite = np.isfinite(x) & (np.abs(x) < 1e18)
    np.testing.assert_array_equal(whole[finite], [round(float(v)) for v in x[finite]])
    np.testing.assert_array_equal(halves[finite], [round(float(v)) >> 1 for v in x[finite]])
    np.testing.assert_array_equal(rounded, np.array([_fallback_round(float(v), digits) for v in x]).astype(dtype))
    if digits >= 0:
        np.testing.assert_array_equal(rounded[finite], np.round(x[finite].astype(np.float64), digits).astype(dtype))


@cuda.jit
def powers(a, b, by_pow, by_op):
    i = cuda.grid(1)
    if i < a.size:
        by_pow[i] = pow(a[i], b[i])
        by_op[i] = a[i] ** b[i]


@pytest.mark.parametrize("base, exponent, result", [
    (np.int64, np.int64, np.int64), (np.int32, np.int32, np.int64), (np.uint32, np.uint32, np.uint64),
    (np.float32, np.int32, np.float32), (np.float32, np.int64, np.float32), (np.float64, np.int32, np.float64),
    (np.float32, np.float32, np.float32), (np.float64, np.float64, np.float64), (np.int32, np.float32, np.float64),
])
def test_pow_on_ints_and_floats(on: hetero.Device, base: type, exponent: type, result: type) -> None:
    a = np.array([2, 3, 5, 7, 1, 0, 10, 2], dtype=base)
    b = np.array([0, 1, 2, 3, 30, 4, 5, 20], dtype=exponent)
    by_pow = np.zeros(a.size, result)
    by_op = np.zeros(a.size, result)
    powers[1, 8](a, b, by_pow, by_op)
    expected = np.array([float(x) ** float(y) for x, y in zip(a.astype(object), b.astype(object))]).astype(result)
    rtol = 1e-6 if result == np.float32 else 1e-12
    np.testing.assert_allclose(by_pow, expected, rtol=rtol)
    np.testing.assert_array_equal(by_op, by_pow)


@cuda.jit
def typed_power(x, n, out):
    out[0] = x[0] ** n[0] * 3.0  # f32 ** i64 is f32 in Numba; 3.0 is f64: the product is f64
    out[1] = (x[0] ** n[0]) / x[0]


def test_float_to_integer_power_keeps_f32(on: hetero.Device) -> None:
    x = np.array([1.1], np.float32)
    out = np.zeros(2, np.float64)
    typed_power[1, 1](x, np.array([3], np.int64), out)
    single = np.float32(np.float32(1.1) ** np.float32(3))
    assert out[0] == pytest.approx(float(single) * 3.0, rel=1e-6)
    assert out[1] == pytest.approx(float(np.float32(single / np.float32(1.1))), rel=1e-6)


@cuda.jit
def integer_powers(a, b, out):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = a[i] ** b[i]


def test_integer_power_with_negative_exponent_is_numbas(on: hetero.Device) -> None:
    a = np.array([1, -1, -1, 2, 3, -2], np.int64)
    b = np.array([-3, -3, -2, -1, 2, 3], np.int64)
    out = np.zeros(a.size, np.int64)
    integer_powers[1, 8](a, b, out)
    np.testing.assert_array_equal(out, [1, -1, 1, 0, 9, -8])  # Numba: 0 unless the base is 1 or -1


@cuda.jit
def fma_cbrt(a, b, c, fused, roots):
    i = cuda.grid(1)
    if i < a.size:
        fused[i] = cuda.fma(a[i], b[i], c[i])
        roots[i] = cuda.cbrt(a[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fma_and_cbrt(on: hetero.Device, dtype: type) -> None:
    rng = np.random.default_rng(5)
    a = rng.uniform(-100, 100, 64).astype(dtype)
    a[:4] = [27, -8, 0, 1e-3]
    b = rng.uniform(-100, 100, 64).astype(dtype)
    c = rng.uniform(-100, 100, 64).astype(dtype)
    # a case where the product's rounding shows: (1 + 2**-k)(1 - 2**-k) - 1 is -2**-2k exactly once fused
    k = 12 if dtype is np.float32 else 27
    a[4], b[4], c[4] = 1 + 2.0 ** -k, 1 - 2.0 ** -k, -1
    fused = np.zeros_like(a)
    roots = np.zeros_like(a)
    fma_cbrt[2, 32](a, b, c, fused, roots)
    exact = np.array([float(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))) for x, y, z in zip(a, b, c)])
    np.testing.assert_allclose(fused, exact.astype(dtype), rtol=1e-6 if dtype is np.float32 else 1e-14)
    assert fused[4] == -(2.0 ** (-2 * k))
    np.testing.assert_allclose(roots, np.cbrt(a), rtol=2e-7 if dtype is np.float32 else 1e-15)
    assert roots[2] == 0 and abs(roots[0] - 3) <= 3 * np.finfo(dtype).eps  # C libraries allow 1 ulp (glibc: 3 + 1 ulp)


@cuda.jit
def frexp_ldexp(x, n, mantissa, exponent, scaled):
    i = cuda.grid(1)
    if i < x.size:
        mantissa[i], exponent[i] = math.frexp(x[i])
        m, e = math.frexp(x[i])
        scaled[i] = math.ldexp(x[i], n[i])
        if m != mantissa[i] and not math.isnan(m) or e != exponent[i]:  # the same pair when not unpacked into elements
            scaled[i] = 42.0


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_frexp_and_ldexp_are_exact(on: hetero.Device, dtype: type) -> None:
    info = np.finfo(dtype)
    tiny = float(info.smallest_subnormal)
    x = np.array([3.1415, -0.785375, 1.0, 0.5, 0.0, -0.0, np.inf, -np.inf, np.nan, float(info.max),
                  float(info.tiny), tiny, 3 * tiny, -1e-3, 123456.0, 7.0], dtype=dtype)
    n = np.array([2, -3, 0, 1, 5, -5, 3, -3, 2, 1, -2, 200, -1, -300, 2000, -2000], np.int32)
    mantissa = np.zeros_like(x)
    exponent = np.zeros(x.size, np.int32)
    scaled = np.zeros_like(x)
    frexp_ldexp[1, 16](x, n, mantissa, exponent, scaled)
    expected = [math.frexp(float(v)) for v in x]
    np.testing.assert_array_equal(mantissa, np.array([m for m, _ in expected], dtype))
    np.testing.assert_array_equal(exponent, [e for _, e in expected])
    with np.errstate(over="ignore", under="ignore"):
        np.testing.assert_array_equal(scaled, np.ldexp(x, n))
    assert np.signbit(mantissa[5]) and np.signbit(scaled[5])


@cuda.jit
def bare_frexp(x, out):
    out[0] = math.frexp(x[0])


def test_frexp_unpacked_only(on: hetero.Device) -> None:
    with pytest.raises(CompileError, match=r"frexp.*unpack"):
        bare_frexp[1, 1](np.ones(1), np.ones(1))


def _selp(a, b, c):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < a.size:
        a[i] = cuda.selp(a[i] < b, a[i] * 2, c[i])


def test_selp_selects_without_a_branch(device: hetero.Device) -> None:
    a = np.arange(16, dtype=np.int64)
    c = np.full(16, 17, dtype=np.int64)
    with hetero.use_device(device):
        d_a = cuda.to_device(a)
        cuda.jit(_selp)[1, 16](d_a, 6, cuda.to_device(c))
        got = d_a.copy_to_host()
    np.testing.assert_array_equal(got, np.where(a < 6, a * 2, c))


def _fp16_ops(out, a, b, c):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < a.size:
        out[0, i] = cuda.fp16.hadd(a[i], b[i])
        out[1, i] = cuda.fp16.hmul(a[i], b[i])
        out[2, i] = cuda.fp16.hdiv(a[i], b[i])
        out[3, i] = cuda.fp16.hfma(a[i], b[i], c[i])
        out[4, i] = cuda.fp16.hsqrt(cuda.fp16.habs(a[i]))
        out[5, i] = cuda.fp16.hmax(a[i], b[i])
        out[6, i] = cuda.fp16.hneg(a[i]) if cuda.fp16.hlt(a[i], b[i]) else a[i]


def test_fp16_intrinsics_round_each_result_to_float16_once(device: hetero.Device) -> None:
    rng = np.random.default_rng(7)
    a, b, c = (rng.standard_normal(64).astype(np.float16) * 8 for _ in range(3))
    out = np.zeros((7, 64), dtype=np.float16)
    with hetero.use_device(device):
        d_out = cuda.to_device(out)
        cuda.jit(_fp16_ops)[1, 64](d_out, cuda.to_device(a), cuda.to_device(b), cuda.to_device(c))
        got = d_out.copy_to_host()
    wide = [x.astype(np.float64) for x in (a, b, c)]
    want = [a + b, a * b, a / b,  # NumPy's float16 arithmetic rounds each result once
            (wide[0] * wide[1] + wide[2]).astype(np.float16),  # a*b exact in f64: one rounding to f16 (inputs this small)
            np.sqrt(np.abs(a)), np.maximum(a, b), np.where(a < b, -a, a)]
    for row, expected in enumerate(want):
        np.testing.assert_array_equal(got[row], expected, err_msg=f"row {row} on {device.name}")
