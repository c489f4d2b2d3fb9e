"""The array API standard's elementwise functions (2024.12 names) in the ``hetero`` namespace.

Each is one generated kernel (:mod:`hetero.arraylib.elementwise`); operands are hetero arrays
(any views, one device) and Python or NumPy scalars, with the standard's broadcasting and
:mod:`hetero.array.promotion`'s type promotion. Semantics are NumPy 2's on every device, the
special values included (:mod:`hetero.compiler.array_kernels.elementwise_ops`): ``round`` rounds halfway
cases to even, integer ``floor_divide`` and ``remainder`` by zero give 0, ``maximum`` and
``minimum`` propagate NaN. ``where`` is the one operation of three operands. Complex operands
are computed by :mod:`hetero.arraylib.complex.elementwise` from real operations on their parts; functions the
standard defines for real input only raise a TypeError for them.
"""

from __future__ import annotations

from typing import Any

from hetero.core import dtypes
from hetero.array.ndarray import Array
from hetero.arraylib.cast import astype
from hetero.arraylib.eager import apply
from hetero.arraylib.elementwise import clip as _clip
from hetero.core.errors import ArrayError


def abs(x: Any, /) -> Array:
    return apply("abs", x)


def acos(x: Any, /) -> Array:
    return apply("acos", x)


def acosh(x: Any, /) -> Array:
    return apply("acosh", x)


def add(x1: Any, x2: Any, /) -> Array:
    return apply("add", x1, x2)


def asin(x: Any, /) -> Array:
    return apply("asin", x)


def asinh(x: Any, /) -> Array:
    return apply("asinh", x)


def atan(x: Any, /) -> Array:
    return apply("atan", x)


def atan2(x1: Any, x2: Any, /) -> Array:
    return apply("atan2", x1, x2)


def atanh(x: Any, /) -> Array:
    return apply("atanh", x)


def bitwise_and(x1: Any, x2: Any, /) -> Array:
    return apply("bitwise_and", x1, x2)


def bitwise_invert(x: Any, /) -> Array:
    return apply("bitwise_invert", x)


def bitwise_left_shift(x1: Any, x2: Any, /) -> Array:
    return apply("bitwise_left_shift", x1, x2)


def bitwise_or(x1: Any, x2: Any, /) -> Array:
    return apply("bitwise_or", x1, x2)


def bitwise_right_shift(x1: Any, x2: Any, /) -> Array:
    return apply("bitwise_right_shift", x1, x2)


def bitwise_xor(x1: Any, x2: Any, /) -> Array:
    return apply("bitwise_xor", x1, x2)


def ceil(x: Any, /) -> Array:
    return apply("ceil", x)


def copysign(x1: Any, x2: Any, /) -> Array:
    return apply("copysign", x1, x2)


def cos(x: Any, /) -> Array:
    return apply("cos", x)


def cosh(x: Any, /) -> Array:
    return apply("cosh", x)


def divide(x1: Any, x2: Any, /) -> Array:
    return apply("divide", x1, x2)


def equal(x1: Any, x2: Any, /) -> Array:
    return apply("equal", x1, x2)


def exp(x: Any, /) -> Array:
    return apply("exp", x)


def expm1(x: Any, /) -> Array:
    return apply("expm1", x)


def floor(x: Any, /) -> Array:
    return apply("floor", x)


def floor_divide(x1: Any, x2: Any, /) -> Array:
    return apply("floor_divide", x1, x2)


def greater(x1: Any, x2: Any, /) -> Array:
    return apply("greater", x1, x2)


def greater_equal(x1: Any, x2: Any, /) -> Array:
    return apply("greater_equal", x1, x2)


def hypot(x1: Any, x2: Any, /) -> Array:
    return apply("hypot", x1, x2)


def isfinite(x: Any, /) -> Array:
    return apply("isfinite", x)


def isinf(x: Any, /) -> Array:
    return apply("isinf", x)


def isnan(x: Any, /) -> Array:
    return apply("isnan", x)


def less(x1: Any, x2: Any, /) -> Array:
    return apply("less", x1, x2)


def less_equal(x1: Any, x2: Any, /) -> Array:
    return apply("less_equal", x1, x2)


def log(x: Any, /) -> Array:
    return apply("log", x)


def log10(x: Any, /) -> Array:
    return apply("log10", x)


def log1p(x: Any, /) -> Array:
    return apply("log1p", x)


def log2(x: Any, /) -> Array:
    return apply("log2", x)


def logaddexp(x1: Any, x2: Any, /) -> Array:
    return apply("logaddexp", x1, x2)


def logical_and(x1: Any, x2: Any, /) -> Array:
    return apply("logical_and", x1, x2)


def logical_not(x: Any, /) -> Array:
    return apply("logical_not", x)


def logical_or(x1: Any, x2: Any, /) -> Array:
    return apply("logical_or", x1, x2)


def logical_xor(x1: Any, x2: Any, /) -> Array:
    return apply("logical_xor", x1, x2)


def maximum(x1: Any, x2: Any, /) -> Array:
    return apply("maximum", x1, x2)


def minimum(x1: Any, x2: Any, /) -> Array:
    return apply("minimum", x1, x2)


def multiply(x1: Any, x2: Any, /) -> Array:
    return apply("multiply", x1, x2)


def negative(x: Any, /) -> Array:
    return apply("negative", x)


def nextafter(x1: Any, x2: Any, /) -> Array:
    return apply("nextafter", x1, x2)


def not_equal(x1: Any, x2: Any, /) -> Array:
    return apply("not_equal", x1, x2)


def positive(x: Any, /) -> Array:
    return apply("positive", x)


def pow(x1: Any, x2: Any, /) -> Array:
    return apply("pow", x1, x2)


def reciprocal(x: Any, /) -> Array:
    return apply("reciprocal", x)


def remainder(x1: Any, x2: Any, /) -> Array:
    return apply("remainder", x1, x2)


def round(x: Any, /) -> Array:
    return apply("round", x)


def sign(x: Any, /) -> Array:
    return apply("sign", x)


def signbit(x: Any, /) -> Array:
    return apply("signbit", x)


def sin(x: Any, /) -> Array:
    return apply("sin", x)


def sinh(x: Any, /) -> Array:
    return apply("sinh", x)


def sqrt(x: Any, /) -> Array:
    return apply("sqrt", x)


def square(x: Any, /) -> Array:
    return apply("square", x)


def subtract(x1: Any, x2: Any, /) -> Array:
    return apply("subtract", x1, x2)


def tan(x: Any, /) -> Array:
    return apply("tan", x)


def tanh(x: Any, /) -> Array:
    return apply("tanh", x)


def trunc(x: Any, /) -> Array:
    return apply("trunc", x)


def where(condition: Array, x1: Any, x2: Any, /) -> Array:
    """``x1`` where ``condition`` is true, else ``x2``: one generated kernel selecting per element
    (a NaN in the operand not selected never reaches the result). ``x1`` and ``x2`` promote as the
    standard says and may be Python scalars, though not both; all three broadcast together. A
    condition of another dtype than bool counts its nonzero elements as true (NumPy's rule),
    converted by one more kernel first."""
    if not isinstance(condition, Array):
        raise ArrayError(f"hetero.where: condition must be a hetero array, not {type(condition).__name__}; make "
                         "one first: hetero.asarray(condition, device=...)")
    if not isinstance(x1, Array) and not isinstance(x2, Array):
        raise ArrayError("hetero.where: x1 or x2 must be a hetero array (the standard's rule), not two scalars; "
                         "make one first: hetero.full_like(condition, value, dtype=...)")
    if condition.dtype != dtypes.bool_:
        condition = astype(condition, dtypes.bool_)
    return apply("where", condition, x1, x2)


def clip(x: Array, /, min: Any = None, max: Any = None) -> Array:
    """``x`` limited to ``[min, max]`` (either bound may be None, a scalar or an array); NaN propagates."""
    return _clip(x, min, max)


__all__ = [
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and", "bitwise_invert",
    "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil", "clip", "copysign",
    "cos", "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater", "greater_equal",
    "hypot", "isfinite", "isinf", "isnan", "less", "less_equal", "log", "log10", "log1p", "log2", "logaddexp",
    "logical_and", "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter", "not_equal", "positive", "pow", "reciprocal", "remainder", "round", "sign", "signbit", "sin",
    "sinh", "sqrt", "square", "subtract", "tan", "tanh", "trunc", "where",
]
