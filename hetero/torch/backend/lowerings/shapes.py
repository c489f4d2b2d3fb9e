"""Views, reshapes, copies and creation: the graph is functional (AOTAutograd removes mutation),
so a view may be a copy where hetero's layout needs one, never a different value. Creation
operations make their arrays on the graph's device (:data:`DEVICE`, set by the interpreter)."""

from __future__ import annotations

import contextvars
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

import hetero
import hetero.xp as xp
from hetero.core.device import Device
from hetero.torch.backend.lowerings import casts
from hetero.torch.backend.lowerings.registry import NotLowered, lowers
from hetero.torch.backend.transfer import DTYPES

aten = torch.ops.aten

#: The device a graph runs on, for the operations that make arrays from nothing.
DEVICE: contextvars.ContextVar[Device] = contextvars.ContextVar("hetero_torch_device")


def dtype_of(dtype: torch.dtype | None, default: np.dtype[Any]) -> np.dtype[Any]:
    """A torch dtype as NumPy's (``default`` for None)."""
    if dtype is None:
        return default
    if dtype not in DTYPES:
        raise NotLowered(f"dtype={dtype}")
    return DTYPES[dtype]


def _torch_default(value: Any) -> np.dtype[Any]:
    """The dtype torch gives a tensor made from the Python ``value`` with no dtype."""
    if isinstance(value, bool):
        return np.dtype(np.bool_)
    if isinstance(value, int):
        return np.dtype(np.int64)
    return DTYPES[torch.get_default_dtype()]


def _placement(device: Any) -> None:
    if device is not None and torch.device(device).type not in ("cpu", "meta"):
        raise NotLowered(f"device={device}")


@lowers(aten.view.default, aten._unsafe_view.default, aten.reshape.default)
def view(x: hetero.Array, size: Sequence[int]) -> Any:
    return xp.reshape(x, tuple(size))


@lowers(aten.alias.default, aten.lift_fresh_copy.default)
def alias(x: hetero.Array) -> Any:
    return x


@lowers(aten.clone.default)
def clone(x: hetero.Array, *, memory_format: Any = None) -> Any:
    return x  # the graph is functional: nothing writes either one


@lowers(aten.permute.default)
def permute(x: hetero.Array, dims: Sequence[int]) -> Any:
    return xp.permute_dims(x, tuple(d % x.ndim for d in dims)) if x.ndim else x


@lowers(aten.t.default)
def t(x: hetero.Array) -> Any:
    return x.T if x.ndim == 2 else x


@lowers(aten.transpose.int)
def transpose(x: hetero.Array, dim0: int, dim1: int) -> Any:
    if x.ndim < 2:
        return x
    order = list(range(x.ndim))
    order[dim0 % x.ndim], order[dim1 % x.ndim] = order[dim1 % x.ndim], order[dim0 % x.ndim]
    return xp.permute_dims(x, tuple(order))


@lowers(aten.expand.default)
def expand(x: hetero.Array, size: Sequence[int], *, implicit: bool = False) -> Any:
    lead = len(size) - x.ndim
    shape = tuple(x.shape[i - lead] if s == -1 else s for i, s in enumerate(size))
    return xp.broadcast_to(x, shape)


@lowers(aten.unsqueeze.default)
def unsqueeze(x: hetero.Array, dim: int) -> Any:
    return xp.expand_dims(x, axis=dim)


@lowers(aten.squeeze.dims, aten.squeeze.dim, aten.squeeze.default)
def squeeze(x: hetero.Array, dim: Any = None) -> Any:
    if x.ndim == 0:
        return x
    dims = range(x.ndim) if dim is None else (dim,) if isinstance(dim, int) else dim
    ones = tuple(sorted({d % x.ndim for d in dims if x.shape[d % x.ndim] == 1}))
    return xp.squeeze(x, axis=ones) if ones else x


@lowers(aten._to_copy.default)
def to_copy(x: hetero.Array, *, dtype: torch.dtype | None = None, layout: Any = None, device: Any = None,
            pin_memory: Any = None, non_blocking: bool = False, memory_format: Any = None) -> Any:
    _placement(device)
    if layout not in (None, torch.strided):
        raise NotLowered(f"layout={layout}")
    wanted = dtype_of(dtype, x.dtype)
    return casts.astype(x, wanted)


@lowers(aten.select.int)
def select(x: hetero.Array, dim: int, index: int) -> Any:
    return x[(slice(None),) * (dim % x.ndim) + (index,)]


@lowers(aten.slice.Tensor)
def slice_(x: hetero.Array, dim: int = 0, start: int | None = None, end: int | None = None, step: int = 1) -> Any:
    if end is not None and end > 1 << 62:
        end = None
    return x[(slice(None),) * (dim % x.ndim) + (slice(start, end, step),)]


@lowers(aten.split_with_sizes.default)
def split_with_sizes(x: hetero.Array, split_sizes: Sequence[int], dim: int = 0) -> Any:
    parts, start = [], 0
    for size in split_sizes:
        parts.append(slice_(x, dim, start, start + size))
        start += size
    return parts


@lowers(aten.split.Tensor)
def split(x: hetero.Array, split_size: int, dim: int = 0) -> Any:
    length = x.shape[dim % x.ndim]
    return split_with_sizes(x, [min(split_size, length - s) for s in range(0, length, split_size)] or [0], dim)


@lowers(aten.cat.default)
def cat(tensors: Sequence[hetero.Array], dim: int = 0) -> Any:
    kept = [t for t in tensors if not (t.ndim == 1 and t.shape[0] == 0)] or list(tensors)  # torch skips legacy empties
    if len({t.dtype for t in kept}) > 1:
        raise NotLowered("cat of tensors of several dtypes")
    return xp.concat(kept, axis=dim % kept[0].ndim)


@lowers(aten.full.default)
def full(size: Sequence[int], fill_value: Any, *, dtype: torch.dtype | None = None, layout: Any = None,
         device: Any = None, pin_memory: Any = None) -> Any:
    _placement(device)
    return hetero.full(tuple(size), fill_value, dtype=dtype_of(dtype, _torch_default(fill_value)), device=DEVICE.get())


@lowers(aten.full_like.default)
def full_like(x: hetero.Array, fill_value: Any, *, dtype: torch.dtype | None = None, layout: Any = None,
              device: Any = None, pin_memory: Any = None, memory_format: Any = None) -> Any:
    _placement(device)
    return hetero.full(x.shape, fill_value, dtype=dtype_of(dtype, x.dtype), device=x.device)


@lowers(aten.scalar_tensor.default)
def scalar_tensor(value: Any, *, dtype: torch.dtype | None = None, layout: Any = None, device: Any = None,
                  pin_memory: Any = None) -> Any:
    _placement(device)
    return hetero.full((), value, dtype=dtype_of(dtype, DTYPES[torch.get_default_dtype()]), device=DEVICE.get())


@lowers(aten.arange.start_step, aten.arange.start, aten.arange.default)
def arange(start: Any, end: Any = None, step: Any = 1, *, dtype: torch.dtype | None = None, layout: Any = None,
           device: Any = None, pin_memory: Any = None) -> Any:
    _placement(device)
    if end is None:
        start, end = 0, start
    floats = any(isinstance(v, float) for v in (start, end, step))
    default = DTYPES[torch.get_default_dtype()] if floats else np.dtype(np.int64)
    wanted = dtype_of(dtype, default)
    if floats:
        raise NotLowered("arange over floats (its element count rounds as torch computes it)")
    return hetero.arange(start, end, step, dtype=wanted, device=DEVICE.get())


@lowers(aten.constant_pad_nd.default)
def constant_pad_nd(x: hetero.Array, pad: Sequence[int], value: Any = 0) -> Any:
    if any(p < 0 for p in pad):
        raise NotLowered("negative padding (a crop)")
    out = x
    for i in range(len(pad) // 2):
        axis = x.ndim - 1 - i
        before, after = pad[2 * i], pad[2 * i + 1]
        blocks = []
        for width in (before, after):
            shape = list(out.shape)
            shape[axis] = width
            blocks.append(hetero.full(tuple(shape), value, dtype=x.dtype, device=x.device) if width else None)
        parts = [b for b in (blocks[0], out, blocks[1]) if b is not None]
        out = xp.concat(parts, axis=axis) if len(parts) > 1 else out
    return out


__all__ = ["DEVICE", "dtype_of"]
