"""The array API's ``diff`` (2024.12): n-th forward differences along an axis, on the array's device.

Each order is one generated elementwise kernel over two views of the previous order (``x[1:] -
x[:-1]`` along the axis, recorded and fused as any elementwise operation); a bool array's
difference is ``!=``, as NumPy's. ``prepend`` and ``append`` (arrays, or scalars broadcast to one
element along the axis) are joined to ``x`` first by :func:`hetero.concat`, which promotes their
dtypes together.
"""

from __future__ import annotations

import operator
from typing import Any

from hetero.core import dtypes
from hetero.array.ndarray import Array, full
from hetero.arraylib.functions import not_equal, subtract
from hetero.arraylib.manipulation import concat
from hetero.arraylib.take import checked
from hetero.array.views import broadcast_to


def _edge(value: Any, x: Array, axis: int, what: str) -> Array:
    """``prepend``/``append`` as an array joinable to ``x`` along ``axis``."""
    if isinstance(value, Array):
        if value.ndim != x.ndim:
            raise ValueError(f"hetero.diff: {what} has {value.ndim} dimension(s) and x {x.ndim}; give it x's shape "
                             f"except along axis {axis}")
        return value
    if not isinstance(value, (bool, int, float)):
        raise TypeError(f"hetero.diff: {what} must be a hetero array or a Python scalar, got {type(value).__name__}; "
                        "make it an array first: hetero.asarray(..., device=x.device)")
    scalar = full((), value, dtype=x.dtype, device=x.device)
    return broadcast_to(scalar, x.shape[:axis] + (1,) + x.shape[axis + 1:])


def diff(x: Array, /, *, axis: int = -1, n: int = 1, prepend: Any = None, append: Any = None) -> Array:
    """The ``n``-th discrete forward difference of ``x`` along ``axis``: ``out[i] = x[i + 1] - x[i]``
    applied ``n`` times, ``prepend``/``append`` joined to ``x`` first. The axis ends ``M + N1 + N2 - n``
    long (0 when that is negative)."""
    x = checked(x, "hetero.diff")
    if x.ndim == 0:
        raise ValueError("hetero.diff needs an array of at least one dimension, got a 0-d array")
    try:
        a, order = operator.index(axis), operator.index(n)
    except TypeError:
        raise TypeError(f"hetero.diff: axis and n must be ints, got axis={axis!r}, n={n!r}") from None
    if not -x.ndim <= a < x.ndim:
        raise IndexError(f"hetero.diff: axis {a} is out of bounds for an array of {x.ndim} dimension(s)")
    if order < 0:
        raise ValueError(f"hetero.diff: the order n must be >= 0, got {order}")
    a %= x.ndim
    if prepend is not None or append is not None:
        parts = ([_edge(prepend, x, a, "prepend")] if prepend is not None else []) + [x]
        parts += [_edge(append, x, a, "append")] if append is not None else []
        x = concat(parts, axis=a)
    lead = (slice(None),) * a
    for _ in range(order):
        later, earlier = x[(*lead, slice(1, None))], x[(*lead, slice(None, -1))]
        x = not_equal(later, earlier) if x.dtype == dtypes.bool_ else subtract(later, earlier)
    return x


__all__ = ["diff"]
