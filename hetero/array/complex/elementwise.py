"""Elementwise operations with complex operands, composed from hetero's real elementwise
operations on the operands' component views (:mod:`hetero.array.components`).

:func:`hetero.array.elementwise.apply` sends here every operation one of whose operands is
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
:mod:`hetero.array.complex.functions`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array, empty
from hetero.array.cast import astype as _real_astype
from hetero.array.components import complex_dtype, components, is_complex, part_dtype
from hetero.array.copy import assign, copy_into
from hetero.array.elementwise import OPS, apply, same_device
from hetero.array.hooks import COMPLEX_CAST, COMPLEX_ELEMENTWISE, COMPLEX_POWER, COMPLEX_UNARY
from hetero.array.views import broadcast_to
from hetero.core.errors import UnsupportedDtypeError
from hetero.array.promotion import result_type

#: A real part: an array, a Python float, or None for an exact zero (a real operand's imaginary part).
Part = Array | float | bool | None

_NUMPY = {"atan2": "arctan2", "pow": "power", "abs": "absolute"}


class Real:
    """Real elementwise operations on parts in one component dtype: on the device when a part
    is an array (recorded, fused), on the host in that dtype when every part is a scalar."""

    def __init__(self, dtype: np.dtype[Any]) -> None:
        self.dtype = dtype

    def __call__(self, op: str, *args: Part) -> Any:
        if any(a is None for a in args):
            raise UnsupportedDtypeError(f"internal: hetero.{op} of a missing part")  # a formula bug, never silent
        if op == "where" and not isinstance(args[0], Array):
            return args[1] if args[0] else args[2]
        if any(isinstance(a, Array) for a in args):
            return apply(op, *args)
        with np.errstate(all="ignore"):
            values = [a if isinstance(a, (bool, np.bool_)) else self.dtype.type(a) for a in args]
            return getattr(np, _NUMPY.get(op, op))(*values).item()

    # None-aware arithmetic: None is an exact zero
    def add(self, a: Part, b: Part) -> Part:
        return b if a is None else a if b is None else self("add", a, b)

    def sub(self, a: Part, b: Part) -> Part:
        return a if b is None else self("negative", b) if a is None else self("subtract", a, b)

    def mul(self, a: Part, b: Part) -> Part:
        return None if a is None or b is None else self("multiply", a, b)

    def neg(self, a: Part) -> Part:
        return None if a is None else self("negative", a)

    def zero(self, a: Part) -> Any:
        """``a``, with None spelt as 0.0 (for functions of both parts)."""
        return 0.0 if a is None else a


Pair = tuple[Part, Part]


def split(x: Any, part: np.dtype[Any]) -> Pair:
    """Operand ``x`` as (real, imag) parts of dtype ``part`` (see the module docstring)."""
    if isinstance(x, Array):
        if is_complex(x.dtype):
            if part_dtype(x.dtype) != part:  # complex64 beside complex128: widen, never compute narrow
                x = astype_complex(x, complex_dtype(part))
            view = components(x)
            return view[..., 0], view[..., 1]
        return (x if x.dtype == part else _real_astype(x, part)), None
    if isinstance(x, (complex, np.complexfloating)):
        return float(x.real), float(x.imag)
    return float(x), None


def astype_complex(x: Array, target: np.dtype[Any]) -> Array:
    """``x`` (any dtype) as complex ``target``: the imaginary part of a real array is 0."""
    out = empty(x.shape, target, device=x.device)
    view = components(out)
    part = part_dtype(target)
    if is_complex(x.dtype):
        source = components(x)
        store(view[..., 0], _real_astype(source[..., 0], part))
        store(view[..., 1], _real_astype(source[..., 1], part))
    else:
        store(view[..., 0], _real_astype(x, part))
        store(view[..., 1], 0.0)
    return out


def store(view: Array, value: Part) -> None:
    """Write a part into a component view (one fused kernel for a recorded array)."""
    if value is None:
        value = 0.0
    if not isinstance(value, Array):
        assign(view, value)
        return
    if value.shape != view.shape:
        value = broadcast_to(value, view.shape)
    if value.dtype != view.dtype:
        value = _real_astype(value, view.dtype)
    apply("positive", value, out=view)


def shape_and_device(op: str, operands: tuple[Any, ...]) -> tuple[tuple[int, ...], Any]:
    arrays = [x for x in operands if isinstance(x, Array)]
    if not arrays:
        raise UnsupportedDtypeError(f"hetero.{op} needs at least one hetero array operand")
    device = same_device(op, arrays)
    try:
        shape = tuple(np.broadcast_shapes(*(x.shape for x in arrays)))
    except ValueError:
        shown = " and ".join(str(x.shape) for x in arrays)
        raise UnsupportedDtypeError(f"hetero.{op}: shapes {shown} do not broadcast together") from None
    return shape, device


def make(pair: Pair, shape: tuple[int, ...], dtype: np.dtype[Any], device: Any) -> Array:
    """A new complex array of ``shape`` holding ``pair``."""
    out = empty(shape, dtype, device=device)
    view = components(out)
    store(view[..., 0], pair[0])
    store(view[..., 1], pair[1])
    return out


# -- the operations ------------------------------------------------------------------------
def _divide(r: Real, a: Pair, b: Pair) -> Pair:
    (ar, ai), (br, bi) = a, b
    if bi is None:  # a real divisor: each part on its own
        return r("divide", ar, br), (None if ai is None else r("divide", ai, br))
    ai0 = r.zero(ai)
    # Smith's algorithm (as NumPy): scale by the larger of |br|, |bi| so nothing overflows
    larger = r("greater_equal", r("abs", br), r("abs", bi))
    big, small = r("where", larger, br, bi), r("where", larger, bi, br)
    ratio = r("divide", small, big)
    scale = r("divide", 1.0, r("add", big, r("multiply", small, ratio)))
    re = r("where", larger, r("add", ar, r("multiply", ai0, ratio)), r("add", r("multiply", ar, ratio), ai0))
    im = r("where", larger, r("subtract", ai0, r("multiply", ar, ratio)), r("subtract", r("multiply", ai0, ratio), ar))
    re, im = r("multiply", re, scale), r("multiply", im, scale)
    zero = r("logical_and", r("equal", br, 0.0), r("equal", bi, 0.0))  # NumPy: the parts over |0|, inf or NaN
    return r("where", zero, r("divide", ar, r("abs", br)), re), r("where", zero, r("divide", ai0, r("abs", bi)), im)


def multiply(r: Real, a: Pair, b: Pair) -> Pair:
    (ar, ai), (br, bi) = a, b
    return r.sub(r.mul(ar, br), r.mul(ai, bi)), r.add(r.mul(ar, bi), r.mul(ai, br))


def divide(r: Real, a: Pair, b: Pair) -> Pair:
    return _divide(r, a, b)


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
    return COMPLEX_UNARY.call(r, op, a)  # hetero.array.complex.functions (the inverse functions through it)


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
        return _finish(op, COMPLEX_POWER.call(*operands), out)
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
