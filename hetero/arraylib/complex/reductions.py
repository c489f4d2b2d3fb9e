"""Reductions of complex arrays: ``sum`` and ``mean`` reduce the component view
(:mod:`hetero.array.components`) over the same axes, its last (real, imag) axis kept, so
each part is the real reduction of that part; the result is the complex array over the
reduced parts (no copy). ``prod`` and the scans would need the complex product across
elements, which no reduction kernel computes: they, ``max``, ``min``, ``argmax``,
``argmin``, ``std``, ``var``, ``any`` and ``all`` of complex arrays are a TypeError
naming what to do instead (the standard defines ``max``/``min``/``argmax``/``argmin`` for
real-valued input only).
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from hetero.core import dtypes
from hetero.array.ndarray import Array
from hetero.array.components import as_complex, complex_dtype, components, is_complex, part_dtype
from hetero.arraylib.hooks import COMPLEX_REDUCTION
from hetero.core.errors import UnsupportedDtypeError


def _axes(x: Array, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    chosen = tuple(axis) if isinstance(axis, Sequence) else (operator.index(axis),)
    normal = []
    for a in chosen:
        a = operator.index(a)
        if not -x.ndim <= a < x.ndim:
            raise UnsupportedDtypeError(f"axis {a} is out of range for an array of {x.ndim} dimensions")
        normal.append(a % x.ndim)
    return tuple(normal)  # the reduction itself refuses repeated axes, as for real arrays


def _part_dtype(x: Array, dtype: Any, what: str) -> Any:
    if dtype is None:
        return None
    target = dtypes.as_dtype(dtype)
    if not is_complex(target):
        raise UnsupportedDtypeError(f"{what}() of a {x.dtype} array with dtype={target} would drop the imaginary part; "
                                    f"give a complex dtype, or reduce hetero.xp.real(x)")
    return part_dtype(target)


def complex_reduction(name: str, x: Array, /, *, axis: int | Sequence[int] | None = None, dtype: Any = None,
                      keepdims: bool = False, **rest: Any) -> Array:
    """``name`` (``"sum"`` or ``"mean"``) of complex ``x``; other reductions raise (see the module docstring)."""
    from hetero.arraylib import reductions as array_reductions

    if name not in ("sum", "mean") or rest:
        hint = "reduce abs(x), or hetero.xp.real(x) and hetero.xp.imag(x)"
        if name in ("prod", "cumulative_prod", "cumulative_sum"):
            hint = "compute it on the host: np." + name.replace("cumulative_", "cum") + "(x.numpy())"
        raise UnsupportedDtypeError(f"{name}() of complex arrays is not supported ({x.dtype}); {hint}")
    parts = components(x)
    axes = _axes(x, axis)
    if name == "sum":
        reduced = array_reductions.sum(parts, axis=axes, dtype=_part_dtype(x, dtype, name), keepdims=keepdims)
    else:
        if dtype is not None:
            raise TypeError("mean() takes no dtype")
        reduced = array_reductions.mean(parts, axis=axes, keepdims=keepdims)
    if reduced.base is not None or not reduced.is_contiguous:
        reduced = reduced.copy()
    made = as_complex(reduced)
    want = complex_dtype(reduced.dtype)
    if made.dtype != want:
        raise UnsupportedDtypeError(f"internal: {name}() of {x.dtype} gave {made.dtype}")
    return made


COMPLEX_REDUCTION.register(complex_reduction)

__all__ = ["complex_reduction"]
