"""The inverse trigonometric and hyperbolic functions of complex arrays (``acos``, ``asin``,
``atan``, ``acosh``, ``asinh``, ``atanh``), as formulas over the real and imaginary parts built
from hetero's real elementwise operations, like :mod:`hetero.arraylib.complex.functions`.

``acos``, ``asin`` and ``acosh`` are Kahan's formulas ("Branch cuts for complex elementary
functions", 1987): products of the principal square roots of ``1 ± z`` (or ``z ± 1``), whose
signed zeros put the values on either side of a branch cut on the right side, and which do not
cancel near the branch points. ``atanh`` is ``log((1 + z) / (1 - z)) / 2`` split into parts on the
first quadrant (with ``log1p`` and ``atan2``; ``1 / z + πj/2`` for large ``|z|``) and carried to the
others by its symmetries; ``asinh`` and ``atan`` are ``asin`` and ``atanh`` of ``iz`` rotated back.
Infinite and NaN parts follow the standard's special cases (C99 Annex G).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from hetero.arraylib.complex.arithmetic import Pair, Real, multiply


def principal_sqrt(r: Real, ar: Any, ai: Any) -> Pair:
    """The principal square root of ``ar + ai j`` (the standard's special cases included)."""
    # t = sqrt((|a| + |z|) / 2); for a >= 0: (t, b / 2t), else (|b| / 2t, copysign(t, b))
    t = r("sqrt", r("multiply", r("add", r("abs", ar), r("hypot", ar, ai)), 0.5))
    half = r("divide", ai, r("multiply", t, 2.0))
    positive = r("logical_not", r("signbit", ar))
    re = r("where", positive, t, r("abs", half))
    im = r("where", positive, half, r("copysign", t, ai))
    zero = r("equal", t, 0.0)  # z = 0: (0, b), the sign of b kept
    infinite = r("isinf", ai)  # a ± inf j: inf ± inf j, even for a NaN
    re = r("where", infinite, math.inf, r("where", zero, 0.0, re))
    im = r("where", infinite, ai, r("where", zero, ai, im))
    return re, im


_sqrt = principal_sqrt


def _roots(r: Real, ar: Any, ai: Any) -> tuple[Pair, Pair]:
    """The principal square roots of ``1 - z`` and ``1 + z`` (``1 - z`` has imaginary part ``-b``, signed)."""
    return _sqrt(r, r("subtract", 1.0, ar), r("negative", ai)), _sqrt(r, r("add", 1.0, ar), ai)


def _acos(r: Real, ar: Any, ai: Any) -> Pair:
    # acos z = 2 atan2(Re √(1-z), Re √(1+z)) + i asinh(Im(conj(√(1+z)) √(1-z)))
    minus, plus = _roots(r, ar, ai)
    re = r("multiply", r("atan2", minus[0], plus[0]), 2.0)
    im = r("asinh", multiply(r, (plus[0], r("negative", plus[1])), minus)[1])
    # an infinite part: Re = atan2(|b|, a), Im = -copysign(inf, b) (-inf for a NaN b); acos(±0 + NaN j) = π/2 + NaN j
    infinite = _infinite(r, ar, ai)
    re = r("where", infinite, r("atan2", r("abs", ai), ar), re)
    im = r("where", infinite, r("where", r("isnan", ai), -math.inf, r("copysign", math.inf, r("negative", ai))), im)
    re = r("where", r("logical_and", r("equal", ar, 0.0), r("isnan", ai)), math.pi / 2, re)
    return re, im


def _infinite(r: Real, ar: Any, ai: Any) -> Any:
    return r("logical_or", r("isinf", ar), r("isinf", ai))


def _asin(r: Real, ar: Any, ai: Any) -> Pair:
    # asin z = atan2(a, Re(√(1-z) √(1+z))) + i asinh(Im(conj(√(1-z)) √(1+z)))
    minus, plus = _roots(r, ar, ai)
    re = r("atan2", ar, multiply(r, minus, plus)[0])
    im = r("asinh", multiply(r, (minus[0], r("negative", minus[1])), plus)[1])
    # an infinite part: Re = copysign(atan2(|a|, |b|), a), Im = copysign(inf, b); asin(±0 + bj) = ±0 + i asinh(b)
    infinite = _infinite(r, ar, ai)
    re = r("where", infinite, r("copysign", r("atan2", r("abs", ar), r("abs", ai)), ar), re)
    im = r("where", infinite, r("copysign", math.inf, ai), im)
    re = r("where", r("equal", ar, 0.0), ar, re)
    return re, im


def _acosh(r: Real, ar: Any, ai: Any) -> Pair:
    # acosh z = asinh(Re(conj(√(z-1)) √(z+1))) + 2i atan2(Im √(z-1), Re √(z+1))
    below, above = _sqrt(r, r("subtract", ar, 1.0), ai), _sqrt(r, r("add", ar, 1.0), ai)
    re = r("asinh", multiply(r, (below[0], r("negative", below[1])), above)[0])
    im = r("multiply", r("atan2", below[1], above[0]), 2.0)
    # an infinite part: +inf + copysign(atan2(|b|, a), b) j; acosh(±0 + NaN j) = NaN + π/2 j
    infinite = _infinite(r, ar, ai)
    re = r("where", infinite, math.inf, re)
    im = r("where", infinite, r("copysign", r("atan2", r("abs", ai), ar), ai), im)
    im = r("where", r("logical_and", r("equal", ar, 0.0), r("isnan", ai)), math.pi / 2, im)
    return re, im


def _atanh(r: Real, ar: Any, ai: Any) -> Pair:
    # on x, y = |a|, |b|: Re = log1p(4x / ((1-x)² + y²)) / 4, Im = atan2(2y, (1-x)(1+x) - y²) / 2
    x, y = r("abs", ar), r("abs", ai)
    one_minus = r("subtract", 1.0, x)
    denominator = r("add", r("multiply", one_minus, one_minus), r("multiply", y, y))
    re = r("multiply", r("log1p", r("divide", r("multiply", x, 4.0), denominator)), 0.25)
    im = r("multiply", r("atan2", r("multiply", y, 2.0),
                         r("subtract", r("multiply", one_minus, r("add", x, 1.0)), r("multiply", y, y))), 0.5)
    # large |z| (where the squares overflow): 1 / z + πj/2, i.e. Re = (x / |z|) / |z|
    limit = math.sqrt(float(np.finfo(r.dtype).max)) / 4.0
    large = r("logical_or", r("greater", x, limit), r("greater", y, limit))
    magnitude = r("hypot", x, y)
    re = r("where", large, r("divide", r("divide", x, magnitude), magnitude), re)
    im = r("where", large, r("where", r("logical_or", r("isnan", x), r("isnan", y)), math.nan, math.pi / 2), im)
    infinite = _infinite(r, x, y)  # ±0 + π/2 j (NaN j for a NaN b)
    re = r("where", infinite, 0.0, re)
    im = r("where", r("isinf", y), math.pi / 2, im)
    imaginary = r("equal", x, 0.0)  # atanh(ib) = i atan(b), also for an infinite or NaN b
    re = r("where", imaginary, 0.0, re)
    im = r("where", imaginary, r("atan", y), im)
    return r("copysign", re, ar), r("copysign", im, ai)


def unary(r: Real, op: str, a: Pair) -> Pair:
    """``op`` (an inverse trigonometric or hyperbolic function) of the complex value with parts ``a``."""
    ar, ai = a[0], r.zero(a[1])
    if op == "acos":
        return _acos(r, ar, ai)
    if op == "asin":
        return _asin(r, ar, ai)
    if op == "acosh":
        return _acosh(r, ar, ai)
    if op == "atanh":
        return _atanh(r, ar, ai)
    # asinh z = -i asin(iz), atan z = -i atanh(iz), with iz = -b + ai
    re, im = (_asin if op == "asinh" else _atanh)(r, r("negative", ai), ar)
    return im, r("negative", re)


__all__ = ["unary"]
