"""Gathers and scans: ``index`` with integer tensors, ``index_select``, ``gather``, ``embedding``'s
neighbours, ``flip``, ``cumsum``/``cumprod``, and the functional ``copy``. An index out of range
is an error, as in torch (hetero checks indices on the host, so such a graph is not replayed as a
launch plan)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

import hetero
import hetero.xp as xp
from hetero.torch.backend.lowerings import casts
from hetero.torch.backend.lowerings.registry import NotLowered, lowers
from hetero.torch.backend.lowerings.shapes import dtype_of

aten = torch.ops.aten


def _integers(*indices: Any) -> None:
    for index in indices:
        if isinstance(index, hetero.Array) and index.dtype.kind not in "iu":
            raise NotLowered(f"a {index.dtype} index tensor (a mask's result has a data-dependent shape)")


@lowers(aten.index.Tensor)
def index(x: hetero.Array, indices: Sequence[hetero.Array | None]) -> Any:
    """``x[i, :, j]`` with integer tensors (None: a whole dimension), NumPy's rules, which torch's are."""
    _integers(*indices)
    if not any(isinstance(i, hetero.Array) for i in indices):
        return x
    return x[tuple(slice(None) if i is None else i for i in indices)]


@lowers(aten.index_select.default)
def index_select(x: hetero.Array, dim: int, index: hetero.Array) -> Any:
    _integers(index)
    if x.ndim == 0:
        raise NotLowered("index_select of a 0-d tensor")
    return xp.take(x, xp.reshape(index, (-1,)), axis=dim % x.ndim)


@lowers(aten.gather.default)
def gather(x: hetero.Array, dim: int, index: hetero.Array, *, sparse_grad: bool = False) -> Any:
    _integers(index)
    if x.ndim == 0 or index.ndim != x.ndim or any(i > s for i, s in zip(index.shape, x.shape, strict=True)):
        raise NotLowered("gather with an index of another rank or larger than the input")
    axis = dim % x.ndim
    if index.shape[:axis] + index.shape[axis + 1:] != x.shape[:axis] + x.shape[axis + 1:]:
        x = x[tuple(slice(0, s) if a != axis else slice(None) for a, s in enumerate(index.shape))]
    return xp.take_along_axis(x, index, axis=axis)


@lowers(aten.flip.default)
def flip(x: hetero.Array, dims: Sequence[int]) -> Any:
    if x.ndim == 0 or not dims:
        return x
    return xp.flip(x, axis=tuple(sorted({d % x.ndim for d in dims})))


def _scan(cumulative: Any) -> Any:
    """A torch scan (``cumsum``, ``cumprod``) over ``cumulative``: bools and integers in int64, as torch."""
    def lowering(x: hetero.Array, dim: int, *, dtype: torch.dtype | None = None) -> Any:
        wanted = dtype_of(dtype, np.dtype(np.int64) if x.dtype.kind in "biu" else x.dtype)
        if x.ndim == 0:
            return xp.astype(x, wanted)
        return cumulative(x, axis=dim % x.ndim, dtype=wanted)
    return lowering


cumsum = lowers(aten.cumsum.default)(_scan(xp.cumulative_sum))
cumprod = lowers(aten.cumprod.default)(_scan(xp.cumulative_prod))


@lowers(aten.copy.default)
def copy(x: hetero.Array, src: hetero.Array, non_blocking: bool = False) -> Any:
    """The functional copy: ``src``'s values in ``x``'s shape and dtype."""
    values = casts.astype(src, x.dtype)
    return xp.broadcast_to(values, x.shape) if values.shape != x.shape else values


__all__: list[str] = []


def _unique_positions(x: hetero.Array, indices: Sequence[hetero.Array | None]) -> bool:
    """Whether the integer index tensors name each position of ``x`` at most once (one bool read
    on the host: torch writes a repeated position in an order it does not define, hetero in its own)."""
    arrays = [(axis, i) for axis, i in enumerate(indices) if isinstance(i, hetero.Array)]
    shape = xp.broadcast_arrays(*(i for _, i in arrays))[0].shape
    if math.prod(shape) < 2:
        return True
    linear = None
    for axis, i in arrays:
        wrapped = xp.remainder(xp.astype(xp.broadcast_to(i, shape), np.dtype(np.int64)), x.shape[axis])
        linear = wrapped if linear is None else linear * x.shape[axis] + wrapped
    ordered = xp.sort(xp.reshape(linear, (-1,)))
    return not bool(xp.any(ordered[1:] == ordered[:-1]))


@lowers(aten.index_put.default)
def index_put(x: hetero.Array, indices: Sequence[hetero.Array | None], values: hetero.Array,
              accumulate: bool = False) -> Any:
    """A new ``x`` with ``x[indices] = values`` (``+=`` with ``accumulate``), NumPy's indexing rules,
    which torch's are; indices naming a position twice run in torch (see :func:`_unique_positions`)."""
    _integers(*indices)
    if not isinstance(values, hetero.Array) or values.dtype != x.dtype:
        raise NotLowered("index_put of values of another dtype (an error in torch)")
    if accumulate and x.dtype.kind == "b":
        raise NotLowered("index_put accumulating bools")
    if len(indices) > x.ndim or not any(isinstance(i, hetero.Array) for i in indices):
        raise NotLowered("index_put without an index tensor, or with more indices than dims")
    if not _unique_positions(x, indices):
        raise NotLowered("index_put naming a position twice (torch's order of the writes, or of the sums, is its own)")
    key = tuple(slice(None) if i is None else i for i in indices)
    out = hetero.asarray(x, copy=True)
    out[key] = x[key] + values if accumulate else values
    return out


def _sort(x: hetero.Array, dim: int, descending: bool, stable: bool) -> tuple[Any, Any]:
    """torch's sort as a stable argsort and a gather. NaN (torch puts it last, first when
    descending) and, unless ``stable``, equal values (torch's order of ties is its own) run in
    torch: each check reads a bool on the host."""
    if x.ndim == 0:
        return x, hetero.zeros((), dtype=np.dtype(np.int64), device=x.device)
    if x.dtype.kind == "c":
        raise NotLowered("sort of a complex tensor")
    if x.dtype.kind == "f" and bool(xp.any(xp.isnan(x))):
        raise NotLowered("sort of a tensor holding NaN")
    axis = dim % x.ndim
    order = xp.argsort(x, axis=axis, descending=descending, stable=True)
    values = xp.take_along_axis(x, order, axis=axis)
    if not stable and x.shape[axis] > 1:
        head, tail = (slice(None),) * axis + (slice(1, None),), (slice(None),) * axis + (slice(None, -1),)
        if bool(xp.any(values[head] == values[tail])):
            raise NotLowered("sort of equal values with stable=False (torch's order of ties is its own)")
    return values, xp.astype(order, np.dtype(np.int64))


@lowers(aten.sort.default)
def sort(x: hetero.Array, dim: int = -1, descending: bool = False) -> Any:
    return _sort(x, dim, descending, stable=False)


@lowers(aten.sort.stable)
def sort_stable(x: hetero.Array, *, stable: bool | None = None, dim: int = -1, descending: bool = False) -> Any:
    return _sort(x, dim, descending, stable=bool(stable))
