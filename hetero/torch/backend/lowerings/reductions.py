"""Reductions over dimensions: ``sum``, ``mean``, ``amax``/``amin``, ``argmax``/``argmin``,
``prod``, ``any``/``all``, ``var`` (hetero's deterministic reductions: the same bits every run
on a device)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

import hetero
import hetero.xp as xp
from hetero.torch.backend.lowerings.registry import NotLowered, lowers

aten = torch.ops.aten


def axes(x: hetero.Array, dim: int | Sequence[int] | None) -> tuple[int, ...] | None:
    """torch's ``dim`` (an int, a list, or None / an empty list for every dimension) as axes."""
    if dim is None:
        return None
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    if not dims:
        return None
    if x.ndim == 0:
        if any(d not in (0, -1) for d in dims):
            raise NotLowered(f"dim={dim} of a 0-d tensor")
        return None
    return tuple(sorted({d % x.ndim for d in dims}))


def _dtype(dtype: torch.dtype | None) -> np.dtype[Any] | None:
    if dtype is None:
        return None
    from hetero.torch.backend.transfer import DTYPES

    if dtype not in DTYPES:
        raise NotLowered(f"dtype={dtype}")
    return DTYPES[dtype]


@lowers(aten.sum.dim_IntList, aten.sum.default)
def sum_(x: hetero.Array, dim: Any = None, keepdim: bool = False, *, dtype: torch.dtype | None = None) -> Any:
    wanted = _dtype(dtype)
    if wanted is None and x.dtype.kind in "biu":
        wanted = np.dtype(np.int64)  # torch sums bools and integers as int64
    return xp.sum(x, axis=axes(x, dim), keepdims=keepdim, dtype=wanted)


@lowers(aten.mean.dim, aten.mean.default)
def mean(x: hetero.Array, dim: Any = None, keepdim: bool = False, *, dtype: torch.dtype | None = None) -> Any:
    if x.dtype.kind != "f" or dtype is not None:
        raise NotLowered("mean of a non-float tensor or with dtype=")
    return xp.mean(x, axis=axes(x, dim), keepdims=keepdim)


@lowers(aten.amax.default)
def amax(x: hetero.Array, dim: Any = (), keepdim: bool = False) -> Any:
    return xp.max(x, axis=axes(x, dim), keepdims=keepdim)


@lowers(aten.amin.default)
def amin(x: hetero.Array, dim: Any = (), keepdim: bool = False) -> Any:
    return xp.min(x, axis=axes(x, dim), keepdims=keepdim)


@lowers(aten.argmax.default)
def argmax(x: hetero.Array, dim: int | None = None, keepdim: bool = False) -> Any:
    """The first largest (NaN counts as largest), as torch."""
    if x.ndim == 0:
        return hetero.zeros((), dtype="int64", device=x.device)  # torch takes dim 0 / -1 of a 0-d tensor
    return xp.argmax(x, axis=dim, keepdims=keepdim)


@lowers(aten.argmin.default)
def argmin(x: hetero.Array, dim: int | None = None, keepdim: bool = False) -> Any:
    if x.ndim == 0:
        return hetero.zeros((), dtype="int64", device=x.device)
    return xp.argmin(x, axis=dim, keepdims=keepdim)


@lowers(aten.prod.dim_int)
def prod(x: hetero.Array, dim: int, keepdim: bool = False, *, dtype: torch.dtype | None = None) -> Any:
    wanted = _dtype(dtype)
    if wanted is None and x.dtype.kind in "biu":
        wanted = np.dtype(np.int64)
    return xp.prod(x, axis=axes(x, dim), keepdims=keepdim, dtype=wanted)


@lowers(aten.any.dim, aten.any.dims, aten.any.default)
def any_(x: hetero.Array, dim: Any = None, keepdim: bool = False) -> Any:
    return xp.any(x, axis=axes(x, dim), keepdims=keepdim)


@lowers(aten.all.dim, aten.all.dims, aten.all.default)
def all_(x: hetero.Array, dim: Any = None, keepdim: bool = False) -> Any:
    return xp.all(x, axis=axes(x, dim), keepdims=keepdim)


@lowers(aten.var.correction)
def var(x: hetero.Array, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> Any:
    if x.dtype.kind != "f":
        raise NotLowered("var of a non-float tensor")
    return xp.var(x, axis=axes(x, dim), correction=1 if correction is None else correction, keepdims=keepdim)


__all__ = ["axes"]


@lowers(aten.var_mean.correction)
def var_mean(x: hetero.Array, dim: Any = None, *, correction: Any = None, keepdim: bool = False) -> Any:
    if x.dtype.kind != "f":
        raise NotLowered("var_mean of a non-float tensor")
    return var(x, dim, correction=correction, keepdim=keepdim), mean(x, dim, keepdim)


@lowers(aten.linalg_vector_norm.default)
def vector_norm(x: hetero.Array, ord: float = 2, dim: Any = None, keepdim: bool = False, *,  # noqa: A002
                dtype: torch.dtype | None = None) -> Any:
    if x.dtype.kind != "f" or dtype is not None:
        raise NotLowered("the norm of a non-float tensor or with dtype=")
    return xp.linalg.vector_norm(x, axis=axes(x, dim), keepdims=keepdim, ord=float(ord))
