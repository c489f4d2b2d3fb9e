"""Complex numbers as pairs of real parts, and the arithmetic on pairs that every complex
operation is composed from: a :class:`Real` builds recorded (fused) real operations, :func:`split`
makes an operand a (real, imag) pair, :func:`make` and :func:`store` write a pair into a complex
array's component views, and :func:`multiply` / :func:`divide` (Smith's algorithm, as NumPy) are
the products the elementwise operations (:mod:`.elementwise`) and the transcendental functions
(:mod:`.functions`, :mod:`.inverse`) share.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.array.ndarray import Array, empty
from hetero.arraylib.cast import astype as _real_astype
from hetero.array.components import complex_dtype, components, is_complex, part_dtype
from hetero.arraylib.copy import assign
from hetero.arraylib.elementwise import apply, same_device
from hetero.array.views import broadcast_to
from hetero.core.errors import UnsupportedDtypeError

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
