"""complex64 and complex128 arrays on every device (hetero.array.components, array_complex,
array_complex_math, array_complex_reductions): storage and movement, astype, elementwise
operations and reductions against NumPy, special values, promotion, and the refusals."""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.arraylib.complex import elementwise as array_complex
from hetero.arraylib import reductions as array_reductions
from hetero.array.components import components

NAN, INF = np.nan, np.inf
#: Values with every kind of part: zeros of both signs, NaN, infinities, large and small.
VALUES = np.array([1 + 2j, 3 - 1j, -2 + 0.5j, 0j, complex(-0.0, -0.0), complex(NAN, 1), complex(1, NAN),
                   complex(INF, 0), complex(-INF, 1), complex(0.5, INF), 1e30 + 1e30j, -1e-3 + 2e-3j,
                   complex(-4, 0), complex(0, -3), 0.25 - 0.75j, 7 + 7j])
FINITE = VALUES[np.isfinite(VALUES)]
DTYPES = ["complex64", "complex128"]


def _on(host: np.ndarray, device: hetero.Device) -> hetero.Array:
    return hetero.asarray(host, device=device)


def _close(got: hetero.Array | np.ndarray, want: np.ndarray, rtol: float = 2e-5) -> None:
    got = got.numpy() if isinstance(got, hetero.Array) else got
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * 1e-3, equal_nan=True)


@pytest.fixture(autouse=True)
def _quiet_numpy() -> Any:
    with np.errstate(all="ignore"):  # the NumPy references divide by zero and overflow on purpose
        yield


# -- storage and movement --------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_round_trip_views_and_copies(device: hetero.Device, dtype: str) -> None:
    host = (VALUES.reshape(4, 4)).astype(dtype)
    z = _on(host, device)
    assert z.dtype == np.dtype(dtype) and z.shape == (4, 4)
    np.testing.assert_array_equal(z.numpy(), host)
    np.testing.assert_array_equal(z.T.copy().numpy(), host.T)
    np.testing.assert_array_equal(z[::-1, 1::2].numpy(), host[::-1, 1::2])
    np.testing.assert_array_equal(z[1:, ::-2].copy().numpy(), host[1:, ::-2])
    np.testing.assert_array_equal(hetero.broadcast_to(z[0], (3, 4)).copy().numpy(), np.broadcast_to(host[0], (3, 4)))
    np.testing.assert_array_equal(z.to("cpu").numpy(), host)
    np.testing.assert_array_equal(z.reshape(2, 8).numpy(), host.reshape(2, 8))


def test_python_complex_values_default_to_complex64(device: hetero.Device) -> None:
    z = hetero.asarray([1 + 1j, 2, 3.5], device=device)
    assert z.dtype == np.complex64
    np.testing.assert_array_equal(z.numpy(), np.array([1 + 1j, 2, 3.5], np.complex64))
    assert hetero.asarray(2j, device=device).dtype == np.complex64
    assert hetero.asarray(np.complex128(2j), device=device).dtype == np.complex128
    assert hetero.asarray([1.0, 2.0], dtype="complex128", device=device).dtype == np.complex128


def test_full_zeros_ones_and_assignment(device: hetero.Device) -> None:
    f = hetero.full((2, 3), 1 - 2j, device=device)
    assert f.dtype == np.complex64
    np.testing.assert_array_equal(f.numpy(), np.full((2, 3), 1 - 2j, np.complex64))
    np.testing.assert_array_equal(hetero.zeros(3, dtype="complex128", device=device).numpy(), np.zeros(3, complex))
    np.testing.assert_array_equal(hetero.ones(2, dtype="complex64", device=device).numpy(), np.ones(2, np.complex64))
    f[0, :] = 5j
    f[1, ::-1] = np.array([1, 2j, 3], np.complex64)
    f[1, 0] = 2.5
    np.testing.assert_array_equal(f.numpy(), np.array([[5j, 5j, 5j], [2.5, 2j, 1]], np.complex64))
    g = hetero.zeros((2, 3), dtype="complex64", device=device)
    g[:, 1] = f[:, 0]
    np.testing.assert_array_equal(g.numpy()[:, 1], f.numpy()[:, 0])


def test_scalar_conversions_and_repr(device: hetero.Device) -> None:
    z = hetero.asarray(np.array([3 - 4j], np.complex64), device=device)
    assert complex(z) == 3 - 4j and bool(z)
    assert not bool(hetero.zeros(1, dtype="complex64", device=device))
    with pytest.raises(TypeError, match="imaginary"):
        float(z)
    with pytest.raises(TypeError, match="imaginary"):
        int(z)
    assert "3.-4.j" in repr(z) and "complex64" in repr(z)


def test_complex_values_never_silently_lose_their_imaginary_part(device: hetero.Device) -> None:
    x = hetero.zeros(2, device=device)
    with pytest.raises(TypeError, match="imaginary"):
        x[0] = 1j
    with pytest.raises(TypeError, match="imaginary"):
        x[...] = hetero.asarray(np.array([1j, 2], np.complex64), device=device)
    with pytest.raises(TypeError, match="real"):
        hetero.asarray(np.array([1j]), device=device).astype("float32")
    with pytest.raises(hetero.ArrayError, match="complex"):
        hetero.full(2, 1j, dtype="float32", device=device)
    with pytest.raises(TypeError, match="imaginary"):
        hetero.asarray([1 + 1j, 2], dtype="float32", device=device)


def test_dlpack_on_host_memory() -> None:
    z = hetero.asarray(np.array([1 + 2j, 3j], np.complex64), device="cpu")
    np.testing.assert_array_equal(np.from_dlpack(z), z.numpy())


# -- astype ----------------------------------------------------------------------------------
@pytest.mark.parametrize("source", ["bool", "int32", "float32", "float64", "complex64", "complex128"])
@pytest.mark.parametrize("target", DTYPES)
def test_astype_to_complex(device: hetero.Device, source: str, target: str) -> None:
    host = (VALUES if source.startswith("complex") else np.array([0, 1, 2.5, -3, NAN, INF])).astype(source)
    x = _on(host, device)
    got = x.astype(target) if source != target else x.astype(target, copy=True)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(got.numpy(), host.astype(target))
    np.testing.assert_array_equal(x[::-2].astype(target).numpy(), host[::-2].astype(target))


# -- elementwise -----------------------------------------------------------------------------
BINARY: dict[str, Callable[[Any, Any], Any]] = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul}


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "divide"])
def test_binary_arithmetic(device: hetero.Device, dtype: str, op: str) -> None:
    a, b = FINITE.astype(dtype), np.roll(FINITE, 3).astype(dtype)
    za, zb = _on(a, device), _on(b, device)
    fn = BINARY.get(op, operator.truediv)
    _close(fn(za, zb), fn(a, b))
    _close(fn(za, 2.5 - 1j), fn(a, np.asarray(2.5 - 1j, dtype)))
    _close(fn(1 + 1j, zb), fn(np.asarray(1 + 1j, dtype), b))
    _close(fn(za[::-1], zb[::-1]), fn(a[::-1], b[::-1]))


def test_special_values_of_arithmetic_follow_numpy(device: hetero.Device) -> None:
    a = VALUES.astype(np.complex64)
    b = np.roll(a, 5)
    za, zb = _on(a, device), _on(b, device)
    with np.errstate(all="ignore"):
        _close(za + zb, a + b)
        _close(za - zb, a - b)
        _close(za / zb, a / b)  # Smith's algorithm, zero denominators included, as NumPy
        _close(-za, -a)


def test_division_does_not_overflow_for_large_denominators(device: hetero.Device) -> None:
    a = np.array([1e30 + 1e30j, 3e37 - 2e37j, 1 + 1j], np.complex64)
    b = np.array([2e30 - 1e30j, 1e38 + 1e38j, 1e-30 + 1e-30j], np.complex64)
    _close(_on(a, device) / _on(b, device), a / b)


def test_mixed_real_and_complex_promote_as_numpy(device: hetero.Device) -> None:
    z = _on(FINITE.astype(np.complex64), device)
    x32 = _on(np.linspace(-2, 2, FINITE.size).astype(np.float32), device)
    assert (z + x32).dtype == np.complex64
    _close(z * x32, FINITE.astype(np.complex64) * x32.numpy())
    _close(x32 / z, x32.numpy() / FINITE.astype(np.complex64))
    assert (x32 + 1j).dtype == np.complex64
    _close(x32 + 1j, x32.numpy() + np.complex64(1j))
    assert (z * 2).dtype == np.complex64 and (z + 0.5).dtype == np.complex64
    i32 = _on(np.arange(FINITE.size, dtype=np.int32), device)
    assert (z + i32).dtype == np.complex128
    _close(z + i32, FINITE.astype(np.complex64) + np.arange(FINITE.size, dtype=np.int32))
    assert hetero.result_type(x32, 1j) == np.complex64
    assert hetero.result_type(hetero.int8, 1j) == np.complex128


def test_complex64_with_complex128_computes_in_complex128(device: hetero.Device) -> None:
    a, b = FINITE.astype(np.complex64), np.roll(FINITE, 2)
    got = _on(a, device) / _on(b, device)
    assert got.dtype == np.complex128
    _close(got, a.astype(np.complex128) / b, rtol=1e-12)


def test_in_place_operators(device: hetero.Device) -> None:
    a = FINITE[np.abs(FINITE) < 1e3].astype(np.complex64)  # (1e30+1e30j)**2 overflows: NumPy's FMA gives -inf, not NaN
    z = hetero.asarray(a, device=device, copy=True)  # on cpu a shared array would change a too
    z *= z
    z += 1j
    view = z[::2]
    view /= 2
    want = a * a + np.complex64(1j)
    want[::2] /= 2
    _close(z, want)
    x = _on(np.ones(3, np.float32), device)
    with pytest.raises(TypeError, match="complex64"):
        x += 1j


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["sqrt", "exp", "log", "expm1", "log1p", "log2", "log10", "sin", "cos", "tan",
                                "sinh", "cosh", "tanh", "square", "sign", "negative", "positive", "reciprocal",
                                "conj", "acos", "asin", "atan", "acosh", "asinh", "atanh"])
def test_unary_functions_on_finite_values(device: hetero.Device, dtype: str, op: str) -> None:
    host = FINITE[np.abs(FINITE) < 1e3].astype(dtype)  # exp/sinh of 1e30 overflow in both
    got = array_complex.apply_complex(op, _on(host, device))
    want = getattr(np, {"conj": "conjugate", **_INVERSE}.get(op, op))(host)
    _close(got, want, rtol=2e-5 if dtype == "complex64" else 1e-12)


_INVERSE = {"acos": "arccos", "asin": "arcsin", "atan": "arctan", "acosh": "arccosh", "asinh": "arcsinh",
            "atanh": "arctanh"}
#: Parts whose every pairing exercises a special case, a branch cut or an overflow of the inverse functions.
_PARTS = [0.0, -0.0, 0.5, -0.5, 1.0, -1.0, 2.0, -2.0, 1e-10, 1e200, -1e200, INF, -INF, NAN]


def _same_part(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elementwise: both NaN, or equal (with the sign of a zero or an infinity), or close."""
    exact = np.isnan(want) | np.isinf(want) | (want == 0)
    signs = np.signbit(got) == np.signbit(want)
    close = np.abs(got - want) <= 1e-12 * np.abs(want)
    return np.where(np.isnan(want), np.isnan(got), np.where(exact, (got == want) & signs, close))


@pytest.mark.parametrize("op", sorted(_INVERSE))
def test_inverse_functions_follow_c99_special_cases(device: hetero.Device, op: str) -> None:
    host = np.array([complex(a, b) for a in _PARTS for b in _PARTS], np.complex128)
    got = array_complex.apply_complex(op, _on(host, device)).numpy()
    want = getattr(np, _INVERSE[op])(host)  # NumPy follows C99 Annex G, as the standard does
    ok = _same_part(got.real, want.real) & _same_part(got.imag, want.imag)
    assert ok.all(), [(z, g, w) for z, g, w in zip(host[~ok], got[~ok], want[~ok])][:5]


def _sign_unspecified(op: str, a: float, b: float) -> bool:
    """Where the standard leaves a sign unspecified and hetero's differs from NumPy's: sinh(-inf + (inf or NaN) j)."""
    return op == "sinh" and a == -INF and not np.isfinite(b)



@pytest.mark.parametrize("op", ["exp", "expm1", "log1p", "sinh", "cosh", "tanh"])
def test_exponential_and_hyperbolic_functions_follow_c99_special_cases(device: hetero.Device, op: str) -> None:
    host = np.array([complex(a, b) for a in _PARTS + [800.0, -800.0] for b in _PARTS
                     if not _sign_unspecified(op, a, b)
                     and not (op == "log1p" and 1e-10 in (a, b))], np.complex128)  # NumPy's is log(1 + z) there
    got = array_complex.apply_complex(op, _on(host, device)).numpy()
    want = _standard_over_numpy(op, host, getattr(np, op)(host))
    ok = _same_part(got.real, want.real) & _same_part(got.imag, want.imag)
    assert ok.all(), [(z, g, w) for z, g, w in zip(host[~ok], got[~ok], want[~ok])][:5]


def _standard_over_numpy(op: str, z: np.ndarray, want: np.ndarray) -> np.ndarray:
    """NumPy's values with the standard's where they differ: expm1 of a real value is exact (expm1(±0 + 0j) =
    +0 + 0j, expm1(inf + 0j) = inf + 0j) and expm1(∓inf + (inf or NaN) j) = -1 + 0j or inf + NaN j,
    tanh(±inf + bj) = ±1 + copysign(0, b) j for a finite b."""
    want = want.copy()
    if op == "expm1":
        real = z.imag == 0
        want[real] = [complex(0.0 if a == 0 else np.expm1(a), b) for a, b in zip(z.real[real], z.imag[real])]
        wild = np.isinf(z.real) & ~np.isfinite(z.imag)  # -1 + 0j and inf + NaN j (NumPy's is exp(z) - 1)
        want[wild] = [complex(-1.0, np.copysign(0.0, b)) if a < 0 else complex(INF, NAN)
                      for a, b in zip(z.real[wild], z.imag[wild])]
    if op == "tanh":
        edge = np.isinf(z.real) & np.isfinite(z.imag)
        want[edge] = [complex(np.copysign(1.0, a), np.copysign(0.0, b)) for a, b in zip(z.real[edge], z.imag[edge])]
    return want


def test_special_values_of_the_standard(device: hetero.Device) -> None:
    z = _on(np.array([0j, complex(-0.0, -0.0), complex(1, INF), complex(-INF, 1), complex(INF, 0), complex(30, 1)],
                     np.complex64), device)
    root = array_complex.apply_complex("sqrt", z).numpy()
    assert root[0] == 0 and np.signbit(root[1].imag)  # sqrt(-0 - 0j) keeps the sign of the imaginary part
    assert root[2] == complex(INF, INF) and root[3] == complex(0, INF)
    e = array_complex.apply_complex("exp", z).numpy()
    assert e[4] == complex(INF, 0)  # not INF + NaN j
    assert array_complex.apply_complex("log", z).numpy()[0] == complex(-INF, 0)
    assert array_complex.apply_complex("tanh", z).numpy()[5] == complex(1, 0)


def test_pow(device: hetero.Device) -> None:
    a = FINITE[np.abs(FINITE) < 1e3].astype(np.complex64)
    z = _on(a, device)
    _close(z ** 2, a ** 2)
    _close(z ** 0.5, a ** np.complex64(0.5), rtol=1e-4)
    _close(z ** (1 + 1j), a ** np.complex64(1 + 1j), rtol=1e-4)
    _close(2 ** z, np.complex64(2) ** a, rtol=1e-4)


def test_real_valued_results(device: hetero.Device) -> None:
    host = VALUES.astype(np.complex64)
    z = _on(host, device)
    np.testing.assert_array_equal(abs(z).numpy(), np.abs(host))
    np.testing.assert_array_equal(array_complex.real(z).numpy(), host.real)
    np.testing.assert_array_equal(array_complex.imag(z).numpy(), host.imag)
    assert array_complex.real(z).dtype == np.float32
    np.testing.assert_array_equal(array_complex.imag(_on(np.ones(2, np.float32), device)).numpy(), np.zeros(2))
    np.testing.assert_array_equal((z == z[::-1]).numpy(), host == host[::-1])
    np.testing.assert_array_equal((z != 1 + 2j).numpy(), host != 1 + 2j)
    for op in ("isnan", "isinf", "isfinite"):
        np.testing.assert_array_equal(array_complex.apply_complex(op, z).numpy(), getattr(np, op)(host))


def test_where_with_complex_operands(device: hetero.Device) -> None:
    a = FINITE.astype(np.complex64)
    z = _on(a, device)
    condition = hetero.asarray(np.arange(a.size) % 2 == 0, device=device)
    got = array_complex.apply_complex("where", condition, z, 0.5)
    np.testing.assert_array_equal(got.numpy(), np.where(np.arange(a.size) % 2 == 0, a, np.complex64(0.5)))


def test_one_kernel_per_part_of_a_fused_chain(device: hetero.Device) -> None:
    from hetero.core.launch_counts import launch_counts

    host = FINITE[np.abs(FINITE) < 1e3].astype(np.complex64)
    z = hetero.asarray(host, device=device, copy=True)  # not shared with NumPy: fusible
    (z * z + 1).numpy()  # compile first
    before = launch_counts().get(device.name, 0)
    result = z * z + 1
    # z * z: one fused kernel per part of the product; + 1: one per part again (the real part's
    # kernel adds 1, the imaginary part's copies); nothing else is launched
    assert launch_counts().get(device.name, 0) - before <= 4
    _close(result, host ** 2 + 1)


# -- reductions -------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", DTYPES)
def test_sum_and_mean(device: hetero.Device, dtype: str) -> None:
    host = (np.arange(12).reshape(3, 4) + 1j * np.arange(12)[::-1].reshape(3, 4)).astype(dtype)
    z = _on(host, device)
    _close(array_reductions.sum(z), np.asarray(host.sum()))
    _close(array_reductions.sum(z, axis=-1, keepdims=True), host.sum(-1, keepdims=True))
    _close(array_reductions.sum(z[:, ::-2], axis=0), host[:, ::-2].sum(0))
    _close(array_reductions.mean(z, axis=(0, 1)), np.asarray(host.mean()))
    _close(z.sum(axis=1), host.sum(1))


# -- refusals -----------------------------------------------------------------------------------
def test_real_only_operations_raise(device: hetero.Device) -> None:
    z = _on(np.array([1 + 1j, 2j], np.complex64), device)
    for call in (lambda: z < z, lambda: hetero.arraylib.elementwise.apply("maximum", z, z),
                 lambda: hetero.arraylib.elementwise.apply("floor", z), lambda: z // z, lambda: z % 2,
                 lambda: hetero.arraylib.elementwise.clip(z, 0, 1)):
        with pytest.raises(TypeError, match="real-valued"):
            call()
    for name in ("max", "min", "argmax", "prod", "cumulative_sum", "std"):
        with pytest.raises(TypeError, match="complex"):
            getattr(array_reductions, name)(z)


def test_component_views_and_complex_kernel_types(device: hetero.Device) -> None:
    z = _on(np.array([1 + 2j, 3 - 4j], np.complex64), device)
    parts = components(z)
    assert parts.dtype == np.float32 and parts.shape == (2, 2)
    np.testing.assert_array_equal(parts.numpy(), [[1, 2], [3, -4]])
    # kernels take complex arrays, as this view (hetero.compiler.ir.complex_lowering)
    assert hetero.Array[np.complex64] == hetero.ArrayType(hetero.c64)
    with pytest.raises(hetero.UnsupportedDtypeError, match="not supported"):
        hetero.Array[np.str_]


def test_manipulation_and_creation_functions_move_complex_values(device: hetero.Device) -> None:
    from hetero.arraylib import creation as array_creation, manipulation as array_manipulation

    host = np.array([1 + 2j, 3 - 1j], np.complex128)
    z = _on(host, device)
    np.testing.assert_array_equal(array_manipulation.concat([z, z[::-1]]).numpy(), np.concatenate([host, host[::-1]]))
    np.testing.assert_array_equal(array_manipulation.stack([z, z]).numpy(), np.stack([host, host]))
    np.testing.assert_array_equal(array_manipulation.roll(z, 1).numpy(), np.roll(host, 1))
    np.testing.assert_array_equal(array_creation.eye(2, dtype="complex64", device=device).numpy(), np.eye(2, dtype=np.complex64))
    np.testing.assert_array_equal(array_creation.full_like(z, 1j).numpy(), np.full(2, 1j))
