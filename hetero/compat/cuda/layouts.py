"""Dense layouts for ``hetero.compat.cuda``'s new arrays: C order, Fortran order, explicit strides,
and "like this array" (Numba's ``*_array_like``: the same axis order, without gaps).

A dense layout is an order of the axes, outermost first: an array is made in that order and its
axes permuted back, so a device array in Fortran order is a view of a C-ordered buffer (kernels
given it take a contiguous copy and write back into it, as for any strided view).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def shape_of(shape: Any) -> tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(n) for n in shape)


def dense_strides(shape: Sequence[int], axes: Sequence[int], itemsize: int) -> tuple[int, ...]:
    """The byte strides of a dense array of ``shape`` whose axes lie outermost-first in ``axes``."""
    strides = [0] * len(shape)
    step = itemsize
    for axis in reversed(axes):
        strides[axis] = step
        step *= max(int(shape[axis]), 1)
    return tuple(strides)


def axis_order(shape: Sequence[int], itemsize: int, strides: Any = None, order: str = "C") -> tuple[int, ...]:
    """The axis order of a new dense array: from ``strides`` when given (they must describe a dense
    array), else C (``order="C"``) or Fortran (``"F"``) order. A ValueError names what is wrong."""
    if order not in ("C", "F"):
        raise ValueError(f"order must be 'C' or 'F', got {order!r}")
    natural = tuple(range(len(shape))) if order == "C" else tuple(reversed(range(len(shape))))
    if strides is None:
        return natural
    given = tuple(int(s) for s in strides)
    if len(given) != len(shape):
        raise ValueError(f"strides {given} do not match the shape {tuple(shape)}")
    axes = tuple(sorted(range(len(shape)), key=lambda a: -given[a]))
    if dense_strides(shape, axes, itemsize) != given and dense_strides(shape, natural, itemsize) != given:
        raise ValueError(f"strides {given} of shape {tuple(shape)} with {itemsize}-byte elements leave gaps or "
                         "overlap: new arrays are dense; make one dense array and take a view of it")
    return axes if dense_strides(shape, axes, itemsize) == given else natural


def order_like(ary: Any) -> tuple[int, ...]:
    """The axis order of a dense array laid out like ``ary`` (Numba's ``*_array_like``): C when ``ary``
    is C-contiguous (or both), Fortran when only that, else its axes by decreasing stride."""
    shape, strides, itemsize = tuple(ary.shape), tuple(ary.strides), np.dtype(ary.dtype).itemsize
    c_order = tuple(range(len(shape)))
    if dense_strides(shape, c_order, itemsize) == strides or np.prod(shape) <= 1:
        return c_order
    if dense_strides(shape, c_order[::-1], itemsize) == strides:
        return c_order[::-1]
    return tuple(sorted(range(len(shape)), key=lambda a: -abs(strides[a])))


def inverse(axes: Sequence[int]) -> tuple[int, ...]:
    """The permutation that puts axes laid out in ``axes`` back in their own order."""
    back = [0] * len(axes)
    for position, axis in enumerate(axes):
        back[axis] = position
    return tuple(back)


def host_array(shape: tuple[int, ...], dtype: np.dtype[Any], axes: Sequence[int]) -> np.ndarray:
    """A new NumPy array of ``shape`` laid out in ``axes`` order."""
    return np.empty(tuple(shape[a] for a in axes), dtype=dtype).transpose(inverse(axes))
