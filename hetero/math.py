"""Math functions for kernels: ``hetero.math.sqrt(x)`` (Python's ``math.sqrt`` works too).

Each takes and returns floats: integer arguments compute in f32, f64 stays f64. The
predicates (``isnan``, ``isinf``, ``isfinite``, ``signbit``) return ``bool``.

Semantics are C99's (OpenCL C's), the same on every device: the cpu backend calls the C
library's function, the GPU and OpenCL backends their vendor's built-in, so results agree
to within each function's stated ulp bound (tests/test_math_functions.py). Where Python
and C differ, the C meaning holds for the ``hetero.math`` name:

- ``round`` rounds halfway cases away from zero (C's ``round``); Python's ``round(x)`` in a
  kernel rounds them to even (C's ``rint``, also ``hetero.math.rint``), as Python does.
  Both return a float of the argument's type, as ``trunc``, ``floor`` and ``ceil`` do.
- ``fmod`` is C's ``fmod`` (the sign of x, as ``math.fmod``); ``remainder`` is the IEEE
  remainder (``math.remainder``); the ``%`` operator stays Python's floored modulo.
- Where Python raises ``ValueError`` (``math.log(-1)``, ``math.gamma(0)``) a kernel gets C's
  NaN or infinity; ``lgamma`` is log|Γ(x)|, ``math.gamma`` is ``tgamma``.
"""

from __future__ import annotations

from hetero.language import Intrinsic

sqrt = Intrinsic("math.sqrt", "square root")
rsqrt = Intrinsic("math.rsqrt", "1 / sqrt(x)")
exp = Intrinsic("math.exp", "e ** x")
log = Intrinsic("math.log", "natural logarithm")
log2 = Intrinsic("math.log2", "base-2 logarithm")
sin = Intrinsic("math.sin", "sine")
cos = Intrinsic("math.cos", "cosine")
tan = Intrinsic("math.tan", "tangent")
tanh = Intrinsic("math.tanh", "hyperbolic tangent")
pow = Intrinsic("math.pow", "x ** y")
fabs = Intrinsic("math.fabs", "absolute value")
floor = Intrinsic("math.floor", "round down")
ceil = Intrinsic("math.ceil", "round up")
fmin = Intrinsic("math.fmin", "minimum (ignores a NaN operand)")
fmax = Intrinsic("math.fmax", "maximum (ignores a NaN operand)")
fma = Intrinsic("math.fma", "x * y + z, rounded once")
atan = Intrinsic("math.atan", "arc tangent")
atan2 = Intrinsic("math.atan2", "atan2(y, x): arc tangent of y / x in the quadrant of (x, y)")
asin = Intrinsic("math.asin", "arc sine")
acos = Intrinsic("math.acos", "arc cosine")
sinh = Intrinsic("math.sinh", "hyperbolic sine")
cosh = Intrinsic("math.cosh", "hyperbolic cosine")
asinh = Intrinsic("math.asinh", "inverse hyperbolic sine")
acosh = Intrinsic("math.acosh", "inverse hyperbolic cosine")
atanh = Intrinsic("math.atanh", "inverse hyperbolic tangent")
log10 = Intrinsic("math.log10", "base-10 logarithm")
log1p = Intrinsic("math.log1p", "log(1 + x), accurate near 0")
expm1 = Intrinsic("math.expm1", "e ** x - 1, accurate near 0")
exp2 = Intrinsic("math.exp2", "2 ** x")
erf = Intrinsic("math.erf", "error function")
erfc = Intrinsic("math.erfc", "1 - erf(x), accurate for large x")
lgamma = Intrinsic("math.lgamma", "log |gamma(x)|")
tgamma = Intrinsic("math.tgamma", "gamma function (Python's math.gamma)")
hypot = Intrinsic("math.hypot", "sqrt(x * x + y * y) without overflow")
cbrt = Intrinsic("math.cbrt", "cube root")
trunc = Intrinsic("math.trunc", "round towards zero (a float)")
round = Intrinsic("math.round", "round to nearest, halfway cases away from zero (C's round; a float)")
rint = Intrinsic("math.rint", "round to nearest, halfway cases to even (Python's round(); a float)")
copysign = Intrinsic("math.copysign", "copysign(x, y): |x| with the sign of y")
fmod = Intrinsic("math.fmod", "C's fmod: x - trunc(x / y) * y, exactly (the sign of x)")
remainder = Intrinsic("math.remainder", "IEEE remainder: x - n * y, n = x / y rounded to even")
nextafter = Intrinsic("math.nextafter", "nextafter(x, y): the next float after x towards y")
isnan = Intrinsic("math.isnan", "is x a NaN (bool)")
isinf = Intrinsic("math.isinf", "is x an infinity (bool)")
isfinite = Intrinsic("math.isfinite", "is x neither NaN nor infinite (bool)")
signbit = Intrinsic("math.signbit", "is x's sign bit set, -0.0 and negative NaNs included (bool)")
