"""The C99/OpenCL math set in kernels, on every device, against NumPy (SciPy for erf and the
gamma functions, Python's ``math.remainder`` for IEEE remainder) within stated ulp bounds.

Tolerances are OpenCL 1.2's full-profile single-precision bounds (the loosest any device
here promises; CUDA's and glibc's are tighter), plus one ulp for the reference's own
rounding; the exact functions (trunc, round, rint, copysign, fmod, remainder and the
predicates) must match bit for bit. lgamma has no OpenCL bound: 16 ulp of max(|ref|, 1),
an absolute floor near its zeros at 1 and 2.
"""

from __future__ import annotations

import math
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import scipy.special

import hetero
from hetero import math as hm
from hetero.core.errors import CompileError

#: name -> the largest error allowed, in ulp of the reference.
UNARY_ULP = {
    "atan": 5, "asin": 4, "acos": 4, "sinh": 4, "cosh": 4, "asinh": 4, "acosh": 4, "atanh": 5,
    "log10": 3, "log2": 3, "log1p": 2, "expm1": 3, "exp2": 3, "erf": 16, "erfc": 16, "lgamma": 16,
    "tgamma": 16, "cbrt": 2, "trunc": 0, "round": 0, "rint": 0,
}  # fmt: skip
BINARY_ULP = {"atan2": 6, "hypot": 4, "copysign": 0, "fmod": 0, "remainder": 0}
PREDICATES = ("isnan", "isinf", "isfinite", "signbit")


def _c_round(x: np.ndarray) -> np.ndarray:
    """C's round: halfway cases away from zero (``x - trunc(x)`` is exact)."""
    t = np.trunc(x)
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(x - t) >= 0.5, t + np.sign(x), t)


def _ieee_remainder(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    def one(a: float, b: float) -> float:
        try:
            return math.remainder(a, b)
        except ValueError:  # remainder(inf, y) and remainder(x, 0): NaN in C
            return math.nan

    return np.array([one(float(a), float(b)) for a, b in zip(x, y)])


def _tgamma(x: np.ndarray) -> np.ndarray:
    # C: tgamma(+-0) = +-inf, tgamma(negative integer) = NaN, tgamma(-inf) = NaN
    result = scipy.special.gamma(x)
    poles = (x < 0) & (x == np.floor(x))
    return np.where(poles | (x == -np.inf), np.nan, np.where(x == 0, np.copysign(np.inf, x), result))


def _lgamma(x: np.ndarray) -> np.ndarray:
    # C: lgamma(non-positive integer) = +inf, lgamma(-inf) = +inf
    return np.where(((x <= 0) & (x == np.floor(x))) | np.isinf(x), np.inf, scipy.special.gammaln(x))


REFERENCE: dict[str, Callable[..., np.ndarray]] = {
    "atan": np.arctan, "asin": np.arcsin, "acos": np.arccos, "sinh": np.sinh, "cosh": np.cosh, "asinh": np.arcsinh,
    "acosh": np.arccosh, "atanh": np.arctanh, "log10": np.log10, "log2": np.log2, "log1p": np.log1p,
    "expm1": np.expm1, "exp2": np.exp2, "erf": scipy.special.erf, "erfc": scipy.special.erfc, "lgamma": _lgamma,
    "tgamma": _tgamma, "cbrt": np.cbrt, "trunc": np.trunc, "round": _c_round, "rint": np.rint,
    "atan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign, "fmod": np.fmod, "remainder": _ieee_remainder,
    "isnan": np.isnan, "isinf": np.isinf, "isfinite": np.isfinite, "signbit": np.signbit,
}  # fmt: skip


@hetero.kernel
def unary(x, out):
    """Each one-argument function into its own row of ``out``; the row order is UNARY_ULP's."""
    i = hetero.global_id(0)
    v = x[i]
    out[0, i] = hm.atan(v)
    out[1, i] = hm.asin(v)
    out[2, i] = hm.acos(v)
    out[3, i] = hm.sinh(v)
    out[4, i] = hm.cosh(v)
    out[5, i] = hm.asinh(v)
    out[6, i] = hm.acosh(v)
    out[7, i] = hm.atanh(v)
    out[8, i] = hm.log10(v)
    out[9, i] = hm.log2(v)
    out[10, i] = hm.log1p(v)
    out[11, i] = hm.expm1(v)
    out[12, i] = hm.exp2(v)
    out[13, i] = hm.erf(v)
    out[14, i] = hm.erfc(v)
    out[15, i] = hm.lgamma(v)
    out[16, i] = hm.tgamma(v)
    out[17, i] = hm.cbrt(v)
    out[18, i] = hm.trunc(v)
    out[19, i] = hm.round(v)
    out[20, i] = hm.rint(v)


@hetero.kernel
def binary(x, y, out):
    i = hetero.global_id(0)
    a = x[i]
    b = y[i]
    out[0, i] = hm.atan2(a, b)
    out[1, i] = hm.hypot(a, b)
    out[2, i] = hm.copysign(a, b)
    out[3, i] = hm.fmod(a, b)
    out[4, i] = hm.remainder(a, b)


@hetero.kernel
def predicates(x, out):
    i = hetero.global_id(0)
    v = x[i]
    out[0, i] = hm.isnan(v)
    out[1, i] = hm.isinf(v)
    out[2, i] = hm.isfinite(v)
    out[3, i] = hm.signbit(v)


@hetero.kernel
def python_spellings(x, out):
    """Python's own math module and round(): math.gamma is tgamma, round() rounds ties to even."""
    i = hetero.global_id(0)
    v = x[i]
    out[0, i] = math.atan(v) + math.gamma(v)
    out[1, i] = math.trunc(v)
    out[2, i] = round(v)
    out[3, i] = hm.round(v)
    out[4, i] = math.fmod(v, 0.75) + math.remainder(v, 0.75)
    out[5, i] = 1.0 if math.isnan(v) or math.isinf(v) else 0.0


SPECIALS = [0.0, -0.0, 0.5, -0.5, 1.5, 2.5, -2.5, 3.5, 1.0, -1.0, 2.0, -3.0, 0.49999997, 1e-7, 1e30, -1e30,
            math.inf, -math.inf, math.nan]


def inputs(dtype: type) -> np.ndarray:
    return np.concatenate([np.linspace(-5, 5, 201), SPECIALS]).astype(dtype)


def needs_fp64(device: hetero.Device, dtype: type) -> None:
    target = device.runtime.kernel_target()
    if dtype is np.float64 and (target is None or "fp64" not in target.features):
        pytest.skip(f"{device.name} has no fp64")


def ulp_error(got: np.ndarray, ref: np.ndarray, dtype: type, floor: float = 0.0) -> np.ndarray:
    """|got - ref| in ulp of ``ref`` (of max(|ref|, floor)); 0 where both are the same NaN/inf."""
    ref = ref.astype(dtype)
    same = (got == ref) | (np.isnan(got) & np.isnan(ref))
    with np.errstate(invalid="ignore", over="ignore"):
        scale = np.spacing(np.maximum(np.abs(ref), dtype(floor))).astype(np.float64)
        error = np.abs(got.astype(np.float64) - ref.astype(np.float64)) / scale
    return np.where(same, 0.0, np.where(np.isnan(error), np.inf, error))


def check(name: str, got: np.ndarray, ref: np.ndarray, tol: int, dtype: type, args: tuple[np.ndarray, ...]) -> None:
    error = ulp_error(got, ref, dtype, 1.0 if name == "lgamma" else 0.0)
    allowed = tol + 1 if tol else 0
    if tol == 0:  # exact: the same bits, signed zeros included
        error = np.where((got == 0) & (ref == 0) & (np.signbit(got) != np.signbit(ref.astype(dtype))), np.inf, error)
    bad = np.flatnonzero(error > allowed)
    if bad.size:
        k = bad[0]
        raise AssertionError(f"{name}({', '.join(repr(float(a[k])) for a in args)}) = {got[k]!r}, NumPy says "
                             f"{ref.astype(dtype)[k]!r}: {error[k]:.1f} ulp > {allowed} ({bad.size} values off)")


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_unary_functions_match_numpy(device: hetero.Device, dtype: type) -> None:
    needs_fp64(device, dtype)
    x = inputs(dtype)
    out = hetero.zeros((len(UNARY_ULP), x.size), dtype=dtype, device=device)
    unary[x.size](hetero.asarray(x, device=device), out)
    got = out.numpy()
    with np.errstate(all="ignore"):
        for row, (name, tol) in enumerate(UNARY_ULP.items()):
            check(name, got[row], REFERENCE[name](x.astype(np.float64)), tol, dtype, (x,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_binary_functions_match_numpy(device: hetero.Device, dtype: type) -> None:
    needs_fp64(device, dtype)
    base = inputs(dtype)
    x = np.concatenate([base, base[::-1], [7.0, -7.0, 5.0, 1e30, 3.0, math.inf, 2.0, 0.0]]).astype(dtype)
    y = np.concatenate([base[::-1], np.roll(base, 7), [2.0, 2.0, 0.0, 3.0, math.inf, 1.0, -0.0, -1.0]]).astype(dtype)
    out = hetero.zeros((len(BINARY_ULP), x.size), dtype=dtype, device=device)
    binary[x.size](hetero.asarray(x, device=device), hetero.asarray(y, device=device), out)
    got = out.numpy()
    with np.errstate(all="ignore"):
        for row, (name, tol) in enumerate(BINARY_ULP.items()):
            check(name, got[row], REFERENCE[name](x.astype(np.float64), y.astype(np.float64)), tol, dtype, (x, y))


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_predicates_return_bool(device: hetero.Device, dtype: type) -> None:
    needs_fp64(device, dtype)
    x = inputs(dtype)
    out = hetero.zeros((len(PREDICATES), x.size), dtype=bool, device=device)
    predicates[x.size](hetero.asarray(x, device=device), out)
    got = out.numpy()
    for row, name in enumerate(PREDICATES):
        assert got[row].tolist() == REFERENCE[name](x).tolist(), name


def test_python_spellings_and_the_two_roundings(device: hetero.Device) -> None:
    x = np.array([0.5, 1.5, 2.5, -0.5, -2.5, 3.25, math.inf, math.nan], dtype=np.float32)
    out = hetero.zeros((6, x.size), dtype=np.float32, device=device)
    python_spellings[x.size](hetero.asarray(x, device=device), out)
    got = out.numpy()
    assert got[2, :6].tolist() == [0.0, 2.0, 2.0, -0.0, -2.0, 3.0]  # round(): ties to even, as Python
    assert got[3, :6].tolist() == [1.0, 2.0, 3.0, -1.0, -3.0, 3.0]  # hetero.math.round: ties away from zero, as C
    assert got[1, :6].tolist() == [0.0, 1.0, 2.0, -0.0, -2.0, 3.0]
    np.testing.assert_allclose(got[0, :6], np.arctan(x[:6]) + scipy.special.gamma(x[:6]), rtol=1e-5)
    assert got[5].tolist() == [0, 0, 0, 0, 0, 0, 1, 1]
    with np.errstate(all="ignore"):
        expected = np.fmod(x, np.float32(0.75)) + _ieee_remainder(x, np.full_like(x, 0.75)).astype(np.float32)
    np.testing.assert_array_equal(got[4], expected)


@hetero.kernel
def uses_degrees(x):
    x[0] = math.degrees(x[0])


@hetero.kernel
def uses_unknown(x):
    x[0] = hm.sqrtt(x[0])


@hetero.kernel
def rounds_to_digits(x):
    x[0] = round(x[0], 2)


@pytest.mark.parametrize("kernel, name", [(uses_degrees, "math.degrees"), (uses_unknown, "math.sqrtt")])
def test_an_unknown_math_function_lists_the_supported_ones(device: hetero.Device, kernel: hetero.Kernel,
                                                           name: str) -> None:
    with pytest.raises(CompileError, match=f"{name} is not supported \\(supported: .*atan2.*\\)") as info:
        kernel[1](hetero.zeros(1, device=device))
    assert "test_math_functions.py" in str(info.value)


def test_round_with_digits_is_refused(device: hetero.Device) -> None:
    with pytest.raises(CompileError, match="round\\(x\\) in kernels takes one argument"):
        rounds_to_digits[1](hetero.zeros(1, device=device))


# -- CUDA and HIP: the same kernels compile with the vendor compilers --------------------
GPU_COMPILERS = {
    "cuda": ("nvcc", ".cu", ["-arch=sm_90", "-cubin", "-Werror", "all-warnings"]),
    "hip": ("hipcc", ".hip", ["--genco", "--offload-arch=gfx90a", "-Wall", "-Werror"]),
}


@pytest.mark.parametrize("dialect", sorted(GPU_COMPILERS))
def test_math_kernels_compile_for_cuda_and_hip(dialect: str, tmp_path: Path) -> None:
    from hetero.compiler.ir import passes
    from hetero.compiler.emit.cuda import EMITTER as CUDA
    from hetero.compiler.emit.hip import EMITTER as HIP
    from hetero.compiler.frontend.python import lower_kernel
    from hetero.compiler.frontend.signature import parse_signature
    from hetero.core.target import Target

    tool, suffix, flags = GPU_COMPILERS[dialect]
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not on PATH; install the {dialect.upper()} toolkit to build {dialect} kernels")
    features = frozenset({"fp64", "fp16", "int64_atomics"})
    target = Target(dialect, "sm_90" if dialect == "cuda" else "gfx90a", features, tool)
    emitter = CUDA if dialect == "cuda" else HIP
    cases = [(unary, "{t}[:], {t}[:, :]"), (binary, "{t}[:], {t}[:], {t}[:, :]"), (predicates, "{t}[:], bool[:, :]"),
             (python_spellings, "f32[:], f32[:, :]")]
    for kernel, signature in cases:
        for t in ("f32", "f64"):
            _, types = parse_signature(signature.format(t=t))
            text = emitter.emit(passes.optimize(lower_kernel(kernel.py_func, types)), target).text
            path = tmp_path / f"{kernel.name}_{t}{suffix}"
            path.write_text(text)
            done = subprocess.run([tool, *flags, str(path), "-o", str(path.with_suffix(".bin"))],
                                  capture_output=True, text=True, timeout=300, env={**os.environ, "HIP_PLATFORM": "amd"})
            assert done.returncode == 0, f"{tool} failed on {kernel.name} ({t}):\n{done.stderr}\n{text}"


def test_math_kernels_compile_with_nvrtc() -> None:
    """What the cuda backend does at run time: NVRTC, which includes no headers, must know
    every math function and predicate the emitter calls."""
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings is not installed")
    from hetero.backends.cupy import nvrtc_compile
    from hetero.compiler.ir import passes
    from hetero.compiler.emit.cuda import EMITTER as CUDA
    from hetero.compiler.frontend.python import lower_kernel
    from hetero.compiler.frontend.signature import parse_signature
    from hetero.core.target import Target

    if not nvrtc_compile.available():
        pytest.skip("libnvrtc cannot be loaded (pip install nvidia-cuda-nvrtc)")
    target = Target("cuda", "sm_90", frozenset({"fp64", "int64_atomics"}), "nvrtc")
    for kernel, signature in [(unary, "{t}[:], {t}[:, :]"), (binary, "{t}[:], {t}[:], {t}[:, :]"),
                              (predicates, "{t}[:], bool[:, :]")]:
        for t in ("f32", "f64"):
            _, types = parse_signature(signature.format(t=t))
            source = CUDA.emit(passes.optimize(lower_kernel(kernel.py_func, types)), target)
            nvrtc_compile.compile_cuda(source.text, source.entry, "sm_90", source.options)
