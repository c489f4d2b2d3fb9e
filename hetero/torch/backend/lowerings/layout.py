"""More views and creations: ``empty`` (zeros: torch leaves its values unspecified, so any are
torch's), ``diagonal``, ``repeat`` and ``slice_scatter`` (functional: a new array with a slice of
``self`` replaced by ``src``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

import hetero
import hetero.xp as xp
from hetero.torch.backend.lowerings.registry import NotLowered, lowers
from hetero.torch.backend.lowerings.shapes import DEVICE, dtype_of
from hetero.torch.backend.transfer import DTYPES

aten = torch.ops.aten


def _plain(layout: Any, device: Any) -> None:
    if layout not in (None, torch.strided):
        raise NotLowered(f"layout={layout}")
    if device is not None and torch.device(device).type not in ("cpu", "meta"):
        raise NotLowered(f"device={device}")


@lowers(aten.empty.memory_format)
def empty(size: Sequence[int], *, dtype: torch.dtype | None = None, layout: Any = None, device: Any = None,
          pin_memory: Any = None, memory_format: Any = None) -> Any:
    _plain(layout, device)  # a memory format only orders the elements in memory: hetero's are C order
    return hetero.zeros(tuple(size), dtype=dtype_of(dtype, DTYPES[torch.get_default_dtype()]), device=DEVICE.get())


@lowers(aten.empty_permuted.default)
def empty_permuted(size: Sequence[int], physical_layout: Sequence[int], *, dtype: torch.dtype | None = None,
                   layout: Any = None, device: Any = None, pin_memory: Any = None) -> Any:
    return empty(size, dtype=dtype, layout=layout, device=device)


@lowers(aten.diagonal.default)
def diagonal(x: hetero.Array, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Any:
    """The diagonal of dims ``dim1`` and ``dim2`` as the last dim, the others in their order."""
    if x.ndim < 2 or dim1 % x.ndim == dim2 % x.ndim:
        raise NotLowered("diagonal of fewer than two distinct dims (an error in torch)")
    first, second = dim1 % x.ndim, dim2 % x.ndim
    rest = [a for a in range(x.ndim) if a not in (first, second)]
    return xp.linalg.diagonal(xp.permute_dims(x, (*rest, first, second)), offset=offset)


@lowers(aten.repeat.default)
def repeat(x: hetero.Array, repeats: Sequence[int]) -> Any:
    """torch's repeat is NumPy's tile, with as many repeats as dims or more (leading new dims)."""
    if len(repeats) < x.ndim:
        raise NotLowered("repeat with fewer repeats than dims (an error in torch)")
    lead = len(repeats) - x.ndim
    return xp.tile(xp.reshape(x, (1,) * lead + x.shape), tuple(repeats))


@lowers(aten.slice_scatter.default)
def slice_scatter(x: hetero.Array, src: hetero.Array, dim: int = 0, start: int | None = None, end: int | None = None,
                  step: int = 1) -> Any:
    """``x`` with ``x[..., start:end:step, ...]`` (along ``dim``) replaced by ``src``: where a
    position along ``dim`` is in the slice, the ``src`` element it maps to, elsewhere ``x``'s."""
    if x.ndim == 0 or step < 1 or src.dtype != x.dtype:
        raise NotLowered("slice_scatter of a 0-d tensor, a step below 1 or another dtype")
    axis = dim % x.ndim
    picked = range(x.shape[axis])[slice(start, end, step)]
    shape = x.shape[:axis] + (len(picked),) + x.shape[axis + 1:]
    if src.shape != shape:
        raise NotLowered(f"slice_scatter of a {list(src.shape)} source into a {list(shape)} slice")
    if len(picked) == 0:
        return x
    position = np.arange(x.shape[axis])
    inside = np.zeros(x.shape[axis], dtype=bool)
    inside[picked.start:picked.stop:picked.step] = True
    source = np.clip((position - picked.start) // picked.step, 0, len(picked) - 1)
    along = (1,) * axis + (-1,) + (1,) * (x.ndim - axis - 1)  # broadcast along dim
    mask = hetero.asarray(inside.reshape(along), device=x.device)
    gathered = xp.take(src, hetero.asarray(source, device=x.device), axis=axis)
    return xp.where(mask, gathered, x)


__all__: list[str] = []
