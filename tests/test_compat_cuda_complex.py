"""Complex numbers in kernels (complex64/complex128 scalars and arrays) on every device: Numba-CUDA
kernels and hetero kernels compute NumPy's answer, up to float rounding, through
hetero.compiler.ir.complex_lowering (complex values become pairs of floats before any emitter runs)."""

from __future__ import annotations

import cmath
import math
from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.compiler.ir import complex_lowering
from hetero.core.errors import CompileError


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


def random_complex(n: int, dtype: type = np.complex128, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)


def close(got: np.ndarray, want: np.ndarray, dtype: type = np.complex128) -> None:
    tol = 1e-11 if dtype == np.complex128 else 2e-5
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


# -- arithmetic -------------------------------------------------------------------------------
@cuda.jit
def arithmetic(a, b, z, add, sub, mul, div, neg, conj, scaled):
    i = cuda.grid(1)
    if i < a.size:
        add[i] = a[i] + b[i]
        sub[i] = a[i] - z
        mul[i] = a[i] * b[i]
        div[i] = a[i] / b[i]
        neg[i] = -a[i]
        conj[i] = a[i].conjugate()
        scaled[i] = 2.5 * a[i] + 1 - 0.5j


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64])
def test_arithmetic_matches_numpy(on: hetero.Device, dtype: type) -> None:
    n = 77
    a, b = random_complex(n, dtype, 1), random_complex(n, dtype, 2)
    z = 0.25 + 3j
    outs = [np.zeros(n, dtype) for _ in range(7)]
    arithmetic[3, 32](a, b, z, *outs)
    want = [a + b, a - z, a * b, a / b, -a, np.conj(a), 2.5 * a + 1 - 0.5j]
    for got, expected in zip(outs, want, strict=True):
        close(got, expected.astype(dtype), dtype)


@cuda.jit
def parts(a, re, im, size, angle, rebuilt, same):
    i = cuda.grid(1)
    if i < a.size:
        re[i] = a[i].real
        im[i] = a[i].imag
        size[i] = abs(a[i])
        angle[i] = cmath.phase(a[i])
        rebuilt[i] = complex(re[i], -im[i])
        same[i] = a[i] == rebuilt[i].conjugate() and not (a[i] != a[i])


def test_parts_abs_phase_and_comparison(on: hetero.Device) -> None:
    n = 40
    a = random_complex(n, seed=3)
    re, im, size, angle = (np.zeros(n) for _ in range(4))
    rebuilt, same = np.zeros(n, np.complex128), np.zeros(n, np.bool_)
    parts[2, 32](a, re, im, size, angle, rebuilt, same)
    close(re, a.real)
    close(im, a.imag)
    close(size, np.abs(a))
    close(angle, np.angle(a))
    close(rebuilt, np.conj(a))
    assert same.all()


# -- cmath ----------------------------------------------------------------------------------------
@cuda.jit
def functions(a, out):
    i = cuda.grid(1)
    if i < a.size:
        z = a[i]
        out[0, i] = cmath.exp(z)
        out[1, i] = cmath.log(z)
        out[2, i] = cmath.log10(z)
        out[3, i] = cmath.sqrt(z)
        out[4, i] = cmath.sin(z)
        out[5, i] = cmath.cos(z)
        out[6, i] = cmath.tan(z)
        out[7, i] = cmath.sinh(z)
        out[8, i] = cmath.cosh(z)
        out[9, i] = cmath.tanh(z)
        out[10, i] = z ** 3
        out[11, i] = z ** -2
        out[12, i] = z ** (0.5 + 0.25j)


def test_cmath_functions_match_numpy(on: hetero.Device) -> None:
    a = random_complex(64, seed=4) * 2
    a[:4] = [1 + 0j, -4 + 0j, 0 + 2j, -3 - 0j]  # the real axis and a branch cut
    out = np.zeros((13, a.size), np.complex128)
    functions[2, 32](a, out)
    want = [np.exp(a), np.log(a), np.log10(a), np.sqrt(a), np.sin(a), np.cos(a), np.tan(a), np.sinh(a), np.cosh(a),
            np.tanh(a), a ** 3, a ** -2.0, a ** (0.5 + 0.25j)]
    for k, expected in enumerate(want):
        np.testing.assert_allclose(out[k], expected, rtol=1e-10, atol=1e-12, err_msg=f"function {k}")


@cuda.jit
def edges(a, out):
    i = cuda.grid(1)
    if i < a.size:
        out[0, i] = cmath.sqrt(a[i])
        out[1, i] = cmath.exp(a[i])
        out[2, i] = cmath.tanh(a[i])
        out[3, i] = a[i] / (a[i] * 0)


def test_special_values_follow_the_documented_rules(on: hetero.Device) -> None:
    a = np.array([0j, complex(0, -0.0), 800 + 0j, 30 + 1j, -30 - 1j], np.complex128)
    out = np.zeros((4, a.size), np.complex128)
    with np.errstate(all="ignore"):
        edges[1, 8](a, out)
    assert out[0, 0] == 0 and math.copysign(1, out[0, 1].imag) == -1  # sqrt keeps the sign of a zero
    assert out[1, 2] == complex(math.inf, 0)  # exp(800 + 0j) is inf + 0j, not inf + nan j
    np.testing.assert_allclose(out[2, 3:], [1, -1])  # tanh saturates instead of inf / inf
    assert np.isnan(out[3]).all()  # division by zero: NaN parts, as Numba's Smith division


# -- control flow, locals, device functions ------------------------------------------------------
@cuda.jit(device=True)
def rotate(z, turns):
    w = z
    for _ in range(turns):
        w = w * 1j
    return w


@cuda.jit
def mandelbrot(cs, counts, rotated):
    i = cuda.grid(1)
    if i < cs.size:
        c = cs[i]
        z = 0j
        n = 0
        while abs(z) <= 2.0 and n < 50:
            z = z * z + c
            n += 1
        counts[i] = n
        rotated[i] = rotate(c, 3) if n < 50 else c


def test_loops_locals_and_device_functions(on: hetero.Device) -> None:
    xs, ys = np.meshgrid(np.linspace(-2, 1, 16), np.linspace(-1.2, 1.2, 8))
    cs = (xs + 1j * ys).ravel()
    counts, rotated = np.zeros(cs.size, np.int32), np.zeros(cs.size, np.complex128)
    mandelbrot[4, 32](cs, counts, rotated)
    want = np.zeros(cs.size, np.int32)
    for k, c in enumerate(cs):
        z, n = 0j, 0
        while abs(z) <= 2.0 and n < 50:
            z, n = z * z + c, n + 1
        want[k] = n
    np.testing.assert_array_equal(counts, want)
    close(rotated, np.where(want < 50, cs * -1j, cs))


@cuda.jit
def short_circuit(a, n, out):
    i = cuda.grid(1)
    # a[i] is read only where i < n: the launch covers more threads than a has elements
    w = a[i] if i < n else 1j
    if i < n and abs(a[i]) > 1.0:
        w = w * 2
    if i < out.size:
        out[i] = w


def test_conditional_reads_stay_in_bounds(on: hetero.Device) -> None:
    a = random_complex(5, seed=6) * 1.5
    out = np.zeros(64, np.complex128)
    short_circuit[2, 32](a, a.size, out)
    want = np.full(64, 1j)
    want[:5] = np.where(np.abs(a) > 1, a * 2, a)
    close(out, want)


@cuda.jit
def private_and_shared(a, out):
    tmp = cuda.local.array(4, np.complex128)
    tile = cuda.shared.array(32, np.complex64)
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    tile[t] = a[i]
    cuda.syncthreads()
    for k in range(4):
        tmp[k] = tile[(t + k) % 32] * k
    acc = 0j
    for k in range(4):
        acc += tmp[k]
    out[i] = acc


def test_local_and_shared_complex_arrays(on: hetero.Device) -> None:
    a = random_complex(64, np.complex64, seed=7)
    out = np.zeros(64, np.complex128)
    private_and_shared[2, 32](a, out)
    want = np.zeros(64, np.complex128)
    for i in range(64):
        block, t = divmod(i, 32)
        want[i] = sum(a[block * 32 + (t + k) % 32].astype(np.complex128) * k for k in range(4))
    close(out, want, np.complex64)


# -- hetero's own kernels and arrays --------------------------------------------------------------
@hetero.kernel
def scale_complex(z: hetero.c64, x: hetero.Array[hetero.c64], y: hetero.Array[hetero.c64]) -> None:
    i = hetero.global_id(0)
    if i < x.shape[0]:
        y[i] = z * x[i] + 1j


def test_hetero_kernel_with_complex_arrays_and_scalar(device: hetero.Device) -> None:
    x = random_complex(50, np.complex64, seed=8)
    xs = hetero.asarray(x, device=device)
    ys = hetero.zeros(50, np.complex64, device=device)
    scale_complex[50](np.complex64(2 - 1j), xs, ys)
    close(ys.numpy(), ((2 - 1j) * x + 1j).astype(np.complex64), np.complex64)
    lowered = scale_complex._lowered(scale_complex.arg_types((np.complex64(1), xs, ys)))
    assert [p.name for p in lowered.params][:3] == ["z__re", "z__im", "x"]  # parts, and the component view
    assert not complex_lowering.touches_complex(lowered)
    assert "fp64" not in lowered.features  # complex64 needs no fp64


# -- what is refused, with the reason ---------------------------------------------------------------
def _compile(kernel: cuda.Dispatcher, *args: object) -> None:
    kernel[1, 1](*args)


@cuda.jit
def to_float(a, out):
    out[0] = a[0]


@cuda.jit
def ordered(a, out):
    out[0] = a[0] < a[1]


@cuda.jit
def atomic_complex(a):
    cuda.atomic.add(a, 0, 1j)


@cuda.jit
def real_math(a, out):
    out[0] = math.sqrt(a[0])


@pytest.mark.parametrize("kernel, out, message", [
    (to_float, np.zeros(1), "take .real, .imag or abs"),
    (ordered, np.zeros(1, np.bool_), "not ordered"),
    (real_math, np.zeros(1, np.complex128), "use cmath"),
])
def test_what_python_refuses_is_a_compile_error(on: hetero.Device, kernel: cuda.Dispatcher, out: np.ndarray,
                                                message: str) -> None:
    with pytest.raises(CompileError, match=message):
        _compile(kernel, np.ones(2, np.complex128), out)


def test_atomics_on_complex_are_refused(on: hetero.Device) -> None:
    with pytest.raises(CompileError, match="complex"):
        _compile(atomic_complex, np.zeros(1, np.complex128))


def test_no_emitter_sees_a_complex_type() -> None:
    lowered = arithmetic.kernel._lowered(arithmetic.kernel.arg_types(
        [hetero.asarray(np.zeros(2, np.complex128), device="cpu")] * 2 + [np.complex128(1)]
        + [hetero.asarray(np.zeros(2, np.complex128), device="cpu")] * 7))
    assert not complex_lowering.touches_complex(lowered)
    assert all(not t.is_complex for t in lowered.locals.values())
