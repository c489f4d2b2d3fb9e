"""Gathers and scans: ``index`` with integer tensors, ``index_select``, ``gather``, ``embedding``'s
neighbours, ``flip``, ``cumsum``/``cumprod``, and the functional ``copy``. An index out of range
is an error, as in torch (hetero checks indices on the host, so such a graph is not replayed as a
launch plan)."""

from __future__ import annotations

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
