"""Elementwise operations with complex operands, composed from hetero's real elementwise
operations on the operands' component views (:mod:`hetero.array.components`).

:func:`hetero.arraylib.elementwise.apply` sends here every operation one of whose operands is
a complex array or a Python or NumPy complex scalar. Each operand becomes a (real, imag)
pair of real parts: strided float views of a complex array, the array itself for a real one
(its imaginary part an exact zero that drops out of the formulas, so ``z * 2`` is
``(zr * 2, zi * 2)`` and an infinite ``zi`` does not turn the real part into NaN), or Python
floats for scalars. The formulas build recorded (fused) real operations; each part of the
result is written into the result's component view by one fused kernel.

Promotion is NumPy 2's (:func:`hetero.array.promotion.result_type`): a Python complex is weak
(beside float32 it gives complex64). Division uses Smith's scaled algorithm, as NumPy does
(no overflow for large denominators; a zero denominator gives infinities or NaN as NumPy).
Operations the standard defines for real input only (``maximum``, ``floor``, ``<`` ...)
are a TypeError (:class:`hetero.UnsupportedDtypeError`). Transcendental functions are in
:mod:`hetero.arraylib.complex.functions`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array
from hetero.array.components import complex_dtype, is_complex, part_dtype
from hetero.arraylib.copy import copy_into
from hetero.arraylib.elementwise import OPS
from hetero.arraylib.complex.arithmetic import (
    Pair, Real, astype_complex, divide, make, multiply, shape_and_device, split, store,
)
from hetero.arraylib.complex.functions import power, unary
from hetero.arraylib.hooks import COMPLEX_CAST, COMPLEX_ELEMENTWISE
from hetero.array.views import broadcast_to
from hetero.core.errors import UnsupportedDtypeError
from hetero.array.promotion import result_type

def _binary(r: Real, op: str, a: Pair, b: Pair) -> Pair:
    if op == "add":
        return r.add(a[0], b[0]), r.add(a[1], b[1])
    if op == "subtract":
        return r.sub(a[0], b[0]), r.sub(a[1], b[1])
    if op == "multiply":
        return multiply(r, a, b)
    return divide(r, a, b)


def _unary(r: Real, op: str, a: Pair) -> Pair:
    ar, ai = a
    if op == "negative":
        return r.neg(ar), r.neg(ai)
    if op == "positive":
        return ar, ai
    if op == "conj":
        return ar, (None if ai is None else r("negative", ai))
    if op == "square":
        return r.sub(r.mul(ar, ar), r.mul(ai, ai)), r.add(r.mul(ar, ai), r.mul(ai, ar))
    if op == "reciprocal":
        return divide(r, (1.0, None), a)
    if op == "sign":  # z / |z|, 0 for 0 (the standard; NaN parts give NaN)
        magnitude = r("hypot", ar, r.zero(ai))
        zero = r("equal", magnitude, 0.0)
        return (r("where", zero, 0.0, r("divide", ar, magnitude)),
                r("where", zero, 0.0, r("divide", r.zero(ai), magnitude)))
    return unary(r, op, a)  # the transcendental functions (the inverse ones through it)


_ARITHMETIC = ("add", "subtract", "multiply", "divide")
_UNARY = ("negative", "positive", "conj", "square", "reciprocal", "sign")
_REAL_VALUED = ("abs", "real", "imag")
_PREDICATE = ("isnan", "isinf", "isfinite", "equal", "not_equal")
_COMPLEX_MATH = ("sqrt", "exp", "log", "expm1", "log1p", "log2", "log10", "sin", "cos", "tan", "sinh", "cosh", "tanh")
_COMPLEX_INVERSE = ("acos", "acosh", "asin", "asinh", "atan", "atanh")


def _predicate(r: Real, op: str, operands: tuple[Pair, ...]) -> Any:
    if op in ("equal", "not_equal"):
        (ar, ai), (br, bi) = operands
        same = r("logical_and", r("equal", ar, br), r("equal", r.zero(ai), r.zero(bi)))
        return same if op == "equal" else r("logical_not", same)
    (ar, ai), = operands
    join = "logical_and" if op == "isfinite" else "logical_or"
    return r(join, r(op, ar), r(op, r.zero(ai)))


def _real_valued(r: Real, op: str, a: Pair) -> Any:
    ar, ai = a
    if op == "abs":
        return r("hypot", ar, r.zero(ai))
    return ar if op == "real" else ai


def apply_complex(op: str, *operands: Any, out: Array | None = None) -> Array:
    """``hetero.<op>`` with a complex operand (see the module docstring)."""
    if op == "where":
        return _where(*operands)
    if op == "pow":
        return _finish(op, power(*operands), out)
    if op not in _ARITHMETIC + _UNARY + _REAL_VALUED + _PREDICATE + _COMPLEX_MATH + _COMPLEX_INVERSE:
        if op in OPS or op in ("conj", "real", "imag"):
            raise UnsupportedDtypeError(f"hetero.{op} is not defined for complex numbers (the array API standard "
                                        f"defines it for real-valued input only); apply it to hetero.xp.real(x) "
                                        f"and hetero.xp.imag(x), or to abs(x)")
        raise UnsupportedDtypeError(f"unknown elementwise operation {op!r}")
    arity = 2 if op in _ARITHMETIC or op in ("equal", "not_equal") else 1
    if len(operands) != arity:
        raise TypeError(f"hetero.{op} takes {arity} operand{'s' if arity > 1 else ''}, got {len(operands)}")
    dtype = result_type(*operands)
    if not is_complex(dtype):
        dtype = complex_dtype(dtype)  # real(x), imag(x), conj(x) of a real x
    part = part_dtype(dtype)
    r = Real(part)
    shape, device = shape_and_device(op, operands)
    pairs = tuple(split(x, part) for x in operands)
    if op in _PREDICATE:
        return _real_result(op, r, _predicate(r, op, pairs), shape, device, dtypes.bool_, out)
    if op in _REAL_VALUED:
        return _real_result(op, r, _real_valued(r, op, pairs[0]), shape, device, part, out)
    pair = _binary(r, op, *pairs) if arity == 2 else _unary(r, op, pairs[0])
    return _finish(op, (pair, shape, dtype, device), out)


def _finish(op: str, made: tuple[Pair, tuple[int, ...], np.dtype[Any], Any], out: Array | None) -> Array:
    pair, shape, dtype, device = made
    if out is not None and (out.dtype != dtype or out.shape != shape):
        raise UnsupportedDtypeError(f"in-place hetero.{op} into a {out.dtype}{list(out.shape)} array: the result is "
                                    f"{dtype}{list(shape)}, which it cannot hold; write y = x <op> value instead")
    result = make(pair, shape, dtype, device)
    if out is None:
        return result
    copy_into(out, result)  # computed apart first: the formulas read both parts of the operands
    return out


def _real_result(op: str, r: Real, value: Any, shape: tuple[int, ...], device: Any, dtype: np.dtype[Any],
                 out: Array | None) -> Array:
    if out is not None:
        raise UnsupportedDtypeError(f"hetero.{op} has no in-place form")
    if value is None:  # imag of a real array
        return _zeros(shape, dtype, device)
    if not isinstance(value, Array):
        return _zeros(shape, dtype, device) if not value else _filled(shape, dtype, device, value)
    if value.shape != shape:
        value = broadcast_to(value, shape).copy()
    return value


def _zeros(shape: tuple[int, ...], dtype: np.dtype[Any], device: Any) -> Array:
    return _filled(shape, dtype, device, 0)


def _filled(shape: tuple[int, ...], dtype: np.dtype[Any], device: Any, value: Any) -> Array:
    from hetero.array.ndarray import full

    return full(shape, value, dtype=dtype, device=device)


def _where(condition: Any, x1: Any, x2: Any) -> Array:
    dtype = result_type(x1, x2)
    if not isinstance(condition, Array) or condition.dtype != dtypes.bool_:
        raise UnsupportedDtypeError("hetero.where takes a bool array condition; compare first, e.g. x != 0")
    part = part_dtype(dtype)
    r = Real(part)
    shape, device = shape_and_device("where", (condition, x1, x2))
    (ar, ai), (br, bi) = split(x1, part), split(x2, part)
    pair = (r("where", condition, ar, br), r("where", condition, r.zero(ai), r.zero(bi)))
    return make(pair, shape, dtype, device)


def real(x: Any) -> Array:
    """The real parts of complex ``x`` (a view, as NumPy's ``real``); a real ``x`` itself."""
    if isinstance(x, Array) and not is_complex(x.dtype):
        return x
    return apply_complex("real", x)


def imag(x: Any) -> Array:
    """The imaginary parts of complex ``x`` (a view); zeros for a real ``x``."""
    return apply_complex("imag", x)


def conj(x: Any) -> Array:
    """The complex conjugate of ``x``; a copy of a real ``x``."""
    if isinstance(x, Array) and not is_complex(x.dtype):
        return x.copy()
    return apply_complex("conj", x)


COMPLEX_ELEMENTWISE.register(apply_complex)
COMPLEX_CAST.register(astype_complex)

__all__ = ["Real", "apply_complex", "astype_complex", "conj", "imag", "make", "real", "split", "store"]
