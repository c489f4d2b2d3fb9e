"""Basic indexing of hetero arrays: what layout ``x[key]`` has, as NumPy's basic indexing says.

A key is an int (negative counts from the end), a slice (any step, negative too), ``None``
(a new axis of length 1), ``Ellipsis``, or a tuple of these. The result is a view: a new
shape, strides and element offset over the same buffer (:func:`index_layout`). Keys with
integer arrays or boolean masks (NumPy's advanced indexing) never reach here:
:class:`hetero.Array` sends them to :mod:`hetero.arraylib.advanced_index`.
"""

from __future__ import annotations

import operator
from typing import Any

Layout = tuple[tuple[int, ...], tuple[int, ...], int]  # shape, strides (elements), element offset


def index_layout(shape: tuple[int, ...], strides: tuple[int, ...], offset: int, key: Any) -> Layout:
    """The layout of ``view[key]`` for a view of ``shape``, ``strides`` and ``offset`` (in elements)."""
    parts = key if isinstance(key, tuple) else (key,)
    ellipses = sum(1 for part in parts if part is Ellipsis)
    if ellipses > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for part in parts if part is not None and part is not Ellipsis)
    if consumed > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, but {consumed} were indexed")
    new_shape: list[int] = []
    new_strides: list[int] = []
    axis = 0
    for part in parts:
        if part is None:
            new_shape.append(1)
            new_strides.append(0)
        elif part is Ellipsis:
            for _ in range(len(shape) - consumed):
                new_shape.append(shape[axis])
                new_strides.append(strides[axis])
                axis += 1
        elif isinstance(part, slice):
            start, stop, step = part.indices(shape[axis])
            length = len(range(start, stop, step))
            if length:
                offset += start * strides[axis]
            new_shape.append(length)
            new_strides.append(strides[axis] * step)
            axis += 1
        else:
            offset += _integer(part, shape[axis], axis) * strides[axis]
            axis += 1
    new_shape.extend(shape[axis:])
    new_strides.extend(strides[axis:])
    return tuple(new_shape), tuple(new_strides), offset


def _integer(part: Any, size: int, axis: int) -> int:
    if isinstance(part, bool) or type(part).__name__ == "bool_":
        raise IndexError("a boolean is a mask, not a basic index: index the hetero.Array itself (x[True])")
    try:
        index = operator.index(part)
    except TypeError:
        raise IndexError(f"only integers, slices (`:`), ellipsis (`...`) and None are valid indices, got "
                         f"{type(part).__name__}; integer arrays and boolean masks index through hetero.Array") from None
    if not -size <= index < size:
        raise IndexError(f"index {index} is out of bounds for axis {axis} with size {size}")
    return index + size if index < 0 else index
