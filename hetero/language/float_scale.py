"""``math.frexp``, ``math.ldexp`` and ``round(x, ndigits)`` as device functions in hetero's own
kernel language, so every dialect and device computes them alike and exactly.

``ldexp`` scales by powers of two only while the value stays normal (each such product is
exact), then multiplies once by a representable power of two: one rounding, as C's
``ldexp`` rounds. ``frexp`` counts the halvings that bring ``|x|`` into ``[0.5, 1)``. The
frontend (:mod:`hetero.compiler.frontend.numba_builtins`) calls the variant of the
argument's type and gives the results Numba's types. Vocabulary: imports only the
language, the types and :mod:`hetero.math`.
"""

# The annotations are hetero kernel types (hetero.f32), which the compiler reads; mypy cannot.
# mypy: disable-error-code="valid-type,operator,no-untyped-def"

from __future__ import annotations

import math

from hetero import math as hmath
from hetero.core.types import f32, f64, i32
from hetero.language import DeviceFunction, func

_TWO64 = 18446744073709551616.0  # 2**64, exact in f32 and f64
_HALF64 = 5.421010862427522e-20  # 2**-64


@func
def _ldexp(x, n: i32, low: i32, keep):
    """``x * 2**n`` with one rounding: ``low`` is the least ``n`` whose power of two the type holds
    with margin (-1000 for f64, -100 for f32), ``keep`` the least ``|y|`` that stays normal when
    scaled by 2**-64 (2**-958, 2**-62)."""
    k = n
    if k > 2400:
        k = i32(2400)  # any finite nonzero x is inf by then, and 0 stays 0
    if k < -2400:
        k = i32(-2400)
    y = x
    while k >= 64:
        y = y * _TWO64
        k -= 64
    while k < low and hmath.fabs(y) >= keep:
        y = y * _HALF64
        k += 64
    if k < low:
        return y * 0.0  # |x * 2**n| is below half the least subnormal: a zero of x's sign
    p = keep / keep  # 1 in x's type (k is now in [low, 63]: 2**k is a normal number of it)
    while k > 0:
        p = p * 2.0
        k -= 1
    while k < 0:
        p = p * 0.5
        k += 1
    return y * p


@func
def ldexp64(x: f64, n: i32) -> f64:
    return _ldexp(x, n, i32(-1000), f64(2.0 ** -958))


@func
def ldexp32(x: f32, n: i32) -> f32:
    return _ldexp(x, n, i32(-100), f32(2.0 ** -62))


@func
def frexp_exponent(x) -> i32:
    """The exponent ``e`` of ``x = m * 2**e`` with ``0.5 <= |m| < 1``; 0 for 0, inf and nan (Python's)."""
    if x == 0.0 or not hmath.isfinite(x):
        return i32(0)
    m = hmath.fabs(x)
    e = i32(0)
    while m >= _TWO64:
        m = m * _HALF64
        e += 64
    while m < _HALF64:
        m = m * _TWO64
        e -= 64
    while m >= 1.0:
        m = m * 0.5
        e += 1
    while m < 0.5:
        m = m * 2.0
        e -= 1
    return e


def _round_ndigits(x, ndigits):  # type: ignore[no-untyped-def]
    """Python's ``round(x, ndigits)`` by CPython's fallback algorithm, as numba-cuda computes it
    (lowered with Numba's typing: in f64), save that values past 2**63 keep Python's answer."""
    if math.isinf(x) or math.isnan(x):
        return x
    if ndigits >= 0:
        if ndigits > 22:
            pow1 = 10.0 ** (ndigits - 22)
            pow2 = 1e22
        else:
            pow1 = 10.0 ** ndigits
            pow2 = 1.0
        y = (x * pow1) * pow2
        if math.isinf(y):
            return x
    else:
        pow1 = 10.0 ** (-ndigits)
        pow2 = 1.0
        y = x / pow1
    z = hmath.rint(y)  # numba-cuda's round(y) is an i64, wrong past 2**63: rint keeps Python's answer
    if math.fabs(y - z) == 0.5:
        z = 2.0 * hmath.rint(y / 2.0)  # halfway between two integers: to even
    if ndigits >= 0:
        z = (z / pow2) / pow1
    else:
        z *= pow1
    return z


round_ndigits = DeviceFunction(_round_ndigits, typing="numba")
