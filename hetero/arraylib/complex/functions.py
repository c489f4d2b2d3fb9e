"""The transcendental functions of complex arrays (``sqrt``, ``exp``, ``log`` and their
relatives, the trigonometric and hyperbolic functions, ``pow``), as formulas over the real
and imaginary parts built from hetero's real elementwise operations (recorded and fused, as
every formula of :mod:`hetero.arraylib.complex.elementwise`).

The formulas keep the standard's main special cases: ``sqrt`` of a zero keeps the sign of
the imaginary part and ``sqrt(a ± inf j)`` is ``inf ± inf j``; ``exp`` of a value with a zero
imaginary part has a zero imaginary part (``exp(inf + 0j)`` is ``inf + 0j``, not NaN);
``log(0)`` is ``-inf + 0j``; ``tanh`` of a large real part is ``±1`` (no ``inf / inf``).
``sqrt`` and ``log`` work through ``hypot``, so they do not overflow for parts near the
dtype's maximum except where the result itself does.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hetero.array.ndarray import Array
from hetero.array.components import is_complex, part_dtype
from hetero.arraylib.complex import inverse as array_complex_inverse
from hetero.arraylib.complex.arithmetic import Pair, Real, divide, multiply, shape_and_device, split
from hetero.arraylib.complex.inverse import principal_sqrt as _sqrt
from hetero.core.errors import UnsupportedDtypeError
from hetero.array.promotion import result_type

#: Past this |real part| tanh is ±1 to within float64's precision (1 - tanh(22) < 2**-63).
_TANH_SATURATES = 22.0


def _exp(r: Real, ar: Any, ai: Any) -> Pair:
    scale = r("exp", ar)
    real_only = r("equal", ai, 0.0)  # exp(a + 0j) = exp(a) + 0j, also for a = inf
    re = r("where", real_only, scale, r("multiply", scale, r("cos", ai)))
    im = r("where", real_only, ai, r("multiply", scale, r("sin", ai)))
    # a non-finite b: exp(+inf + (inf or NaN) j) = inf + NaN j, exp(-inf + (inf or NaN) j) = 0 + 0j
    wild = r("logical_not", r("isfinite", ai))
    below, above = r("logical_and", wild, r("equal", ar, -math.inf)), r("logical_and", wild, r("equal", ar, math.inf))
    re = r("where", below, 0.0, r("where", above, math.inf, re))
    im = r("where", below, r("copysign", 0.0, ai), r("where", above, math.nan, im))
    return re, im


def _expm1_special(r: Real, ar: Any, ai: Any, re: Any, im: Any) -> Pair:
    """expm1's special cases over the general formula: the real axis exact (expm1(±0 + 0j) = +0 + 0j,
    expm1(inf + 0j) = inf + 0j), and -1 + 0j / inf + NaN j for a = ∓inf with a non-finite b."""
    real = r("equal", ai, 0.0)
    re = r("where", real, r("where", r("equal", ar, 0.0), 0.0, r("expm1", ar)), re)
    im = r("where", real, ai, im)
    wild = r("logical_not", r("isfinite", ai))
    below, above = r("logical_and", wild, r("equal", ar, -math.inf)), r("logical_and", wild, r("equal", ar, math.inf))
    re = r("where", below, -1.0, r("where", above, math.inf, re))
    im = r("where", below, r("copysign", 0.0, ai), r("where", above, math.nan, im))
    return re, im


def _log(r: Real, ar: Any, ai: Any) -> Pair:
    return r("log", r("hypot", ar, ai)), r("atan2", ai, ar)


def _tanh(r: Real, ar: Any, ai: Any) -> Pair:
    # (sinh 2a + i sin 2b) / (cosh 2a + cos 2b); for large |a|, ±1 + i 4 sin b cos b e^(-2|a|) ~ ±1 + ±0 j
    twice_a, twice_b = r("multiply", ar, 2.0), r("multiply", ai, 2.0)
    denominator = r("add", r("cosh", twice_a), r("cos", twice_b))
    re = r("divide", r("sinh", twice_a), denominator)
    im = r("divide", r("sin", twice_b), denominator)
    # ±1 ± 0j for a large |a| with a finite b, and for an infinite a whatever b is (a finite a with an
    # infinite or NaN b stays NaN + NaN j)
    large = r("logical_and", r("greater", r("abs", ar), _TANH_SATURATES),
              r("logical_or", r("isinf", ar), r("isfinite", ai)))
    re = r("where", large, r("copysign", 1.0, ar), re)
    # the standard: tanh(±inf + bj) = ±1 + copysign(0, b) j (and the sign of sin(inf)'s NaN varies by device)
    sign = r("where", r("logical_and", r("isfinite", ai), r("isfinite", ar)), r("sin", twice_b), ai)
    im = r("where", large, r("copysign", 0.0, sign), im)
    return _real_axis(r, "tanh", ar, ai, re, im)


def _real_axis(r: Real, op: str, ar: Any, ai: Any, re: Any, im: Any) -> Pair:
    """The C99 special cases of sinh, cosh and tanh on the real axis and for ±0 or ±inf real parts with a
    non-finite imaginary part, over the general formula's ``re``, ``im``."""
    real = r("equal", ai, 0.0)  # op(a ± 0j) = op(a) + (±0) j (cosh: the sign of a times that of b)
    re = r("where", real, r(op, ar), re)
    im = r("where", real, r("multiply", r("copysign", 0.0, ar), ai) if op == "cosh" else ai, im)
    wild = r("logical_not", r("isfinite", ai))
    zero = r("logical_and", wild, r("equal", ar, 0.0))  # ±0 + (inf or NaN) j: ±0 + NaN j; cosh: NaN + 0j
    re = r("where", zero, math.nan if op == "cosh" else ar, re)
    im = r("where", zero, 0.0 if op == "cosh" else math.nan, im)
    if op != "tanh":  # ±inf + (inf or NaN) j: ±inf + NaN j (cosh: +inf)
        infinite = r("logical_and", wild, r("isinf", ar))
        re = r("where", infinite, math.inf if op == "cosh" else ar, re)
        im = r("where", infinite, math.nan, im)
    return re, im


def _hyperbolic(r: Real, op: str, ar: Any, ai: Any) -> Pair:
    if op == "sinh":  # sinh a cos b + i cosh a sin b
        pair = (r("multiply", r("sinh", ar), r("cos", ai)), r("multiply", r("cosh", ar), r("sin", ai)))
    elif op == "cosh":  # cosh a cos b + i sinh a sin b
        pair = (r("multiply", r("cosh", ar), r("cos", ai)), r("multiply", r("sinh", ar), r("sin", ai)))
    else:
        return _tanh(r, ar, ai)
    return _real_axis(r, op, ar, ai, *pair)


def unary(r: Real, op: str, a: Pair) -> Pair:
    """``op`` of the complex value with parts ``a`` (its imaginary part may be None: zero)."""
    ar, ai = a[0], r.zero(a[1])
    if op in ("acos", "acosh", "asin", "asinh", "atan", "atanh"):
        return array_complex_inverse.unary(r, op, a)
    if op == "sqrt":
        return _sqrt(r, ar, ai)
    if op == "exp":
        return _exp(r, ar, ai)
    if op == "log":
        return _log(r, ar, ai)
    if op in ("log2", "log10"):
        re, im = _log(r, ar, ai)
        scale = 1.0 / math.log(2.0 if op == "log2" else 10.0)
        return r("multiply", re, scale), r("multiply", im, scale)
    if op == "log1p":  # log|1 + z| = log1p(2a + a² + b²) / 2, computed without forming 1 + a
        inside = r("add", r("multiply", ar, r("add", ar, 2.0)), r("multiply", ai, ai))
        re = r("multiply", r("log1p", inside), 0.5)
        # a large |z| (where the squares overflow): log|1 + z| directly; an infinite part: +inf
        limit = math.sqrt(float(np.finfo(r.dtype).max)) / 4.0
        large = r("logical_or", r("greater", r("abs", ar), limit), r("greater", r("abs", ai), limit))
        re = r("where", large, r("log", r("hypot", r("add", ar, 1.0), ai)), re)
        re = r("where", r("logical_or", r("isinf", ar), r("isinf", ai)), math.inf, re)
        return re, r("atan2", ai, r("add", ar, 1.0))
    if op == "expm1":  # expm1(a) cos b - 2 sin²(b/2) + i e^a sin b
        half = r("sin", r("multiply", ai, 0.5))
        re = r("subtract", r("multiply", r("expm1", ar), r("cos", ai)), r("multiply", r("multiply", half, half), 2.0))
        return _expm1_special(r, ar, ai, re, r("multiply", r("exp", ar), r("sin", ai)))
    if op in ("sinh", "cosh", "tanh"):
        return _hyperbolic(r, op, ar, ai)
    # sin z = -i sinh(iz), cos z = cosh(iz), tan z = -i tanh(iz), with iz = -b + ai
    re, im = _hyperbolic(r, {"sin": "sinh", "cos": "cosh", "tan": "tanh"}[op], r("negative", ai), ar)
    return (re, im) if op == "cos" else (im, r("negative", re))


def power(base: Any, exponent: Any) -> tuple[Pair, tuple[int, ...], np.dtype[Any], Any]:
    """``base ** exponent`` with a complex operand: ``exp(exponent * log(base))``, with exact
    small integer powers of a scalar exponent (0, 1, 2, -1), and ``0 ** w`` = 0 for ``real(w) > 0``."""
    dtype = result_type(base, exponent)
    if not is_complex(dtype):
        raise UnsupportedDtypeError(f"internal: complex pow of {dtype}")
    part = part_dtype(dtype)
    r = Real(part)
    shape, device = shape_and_device("pow", (base, exponent))
    a, w = split(base, part), split(exponent, part)
    if not isinstance(w[0], Array) and not isinstance(w[1], Array) and w[1] in (None, 0.0) \
            and w[0] in (0.0, 1.0, 2.0, -1.0):
        if w[0] == 0.0:
            return (1.0, 0.0), shape, dtype, device
        if w[0] == 1.0:
            return a, shape, dtype, device
        if w[0] == 2.0:
            return multiply(r, a, a), shape, dtype, device
        return divide(r, (1.0, None), a), shape, dtype, device
    log_a = _log(r, a[0], r.zero(a[1]))
    re, im = multiply(r, w, log_a)
    re, im = _exp(r, re, r.zero(im))
    zero_base = r("logical_and", r("equal", a[0], 0.0), r("equal", r.zero(a[1]), 0.0))
    zero = r("logical_and", zero_base, r("greater", w[0], 0.0))
    return (r("where", zero, 0.0, re), r("where", zero, 0.0, im)), shape, dtype, device


__all__ = ["power", "unary"]


