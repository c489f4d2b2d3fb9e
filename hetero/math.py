"""Math functions for kernels: ``hetero.math.sqrt(x)`` (Python's ``math.sqrt`` works too).

Each takes and returns floats: integer arguments compute in f32, f64 stays f64.
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
