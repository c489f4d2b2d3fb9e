"""``searchsorted`` of hetero arrays (array API 2024.12): a generated binary search, one work-item per value.

``x1`` is one-dimensional and ascending (or put in ascending order by ``sorter``, the indices
``argsort(x1)`` gives); each element of ``x2`` gets the index where inserting it keeps that
order: ``side="left"`` before equal elements, ``"right"`` after them. Elements compare as
:func:`hetero.arraylib.sort.sort` orders them (NaN above every number, -0.0 equal to +0.0), in the
promoted dtype of ``x1`` and ``x2``. The result is int64, of ``x2``'s shape. The kernel is
:mod:`hetero.compiler.array_kernels.search`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array, empty
from hetero.kernels.generated import GeneratedSpecialization, SpecializationCache
from hetero.arraylib.sort import checked
from hetero.compiler.array_kernels import search as kernels
from hetero.core.device import Device
from hetero.core.errors import ArrayError
from hetero.array.promotion import promote
from hetero.core.types import ScalarType, f32, scalar_type, u8

_kernels: SpecializationCache[kernels.Search] = SpecializationCache(kernels.build)


def _kernel(spec: kernels.Search, device: Device) -> GeneratedSpecialization:
    return _kernels.get(spec, device)


def key_type(dtype: np.dtype[Any]) -> ScalarType:
    """The type the search compares elements of ``dtype`` in (exactly: float16 as float32, bool as uint8)."""
    if dtype == dtypes.float16:
        return f32
    if dtype == dtypes.bool_:
        return u8
    return scalar_type(dtype)


def _owner(x: Array) -> Array:
    """``x`` as a 1-D C-contiguous array of its own (a copy for a view)."""
    flat = x.reshape(x.size)
    return flat.copy() if flat.base is not None else flat


def searchsorted(x1: Array, x2: Array, /, *, side: str = "left", sorter: Array | None = None) -> Array:
    """The int64 indices (``x2``'s shape) where the elements of ``x2`` go in the ascending 1-D ``x1``."""
    x1, x2 = checked(x1, "searchsorted"), checked(x2, "searchsorted")
    if x1.ndim != 1:
        raise ArrayError(f"searchsorted(): x1 must be one-dimensional, got shape {x1.shape}; flatten it "
                         "(x1.reshape(-1)) and sort it first")
    if side not in kernels.SIDES:
        raise ArrayError(f"searchsorted(): side must be 'left' or 'right', got {side!r}")
    if x2.device != x1.device:
        raise ArrayError(f"searchsorted(): x1 is on {x1.device.name} and x2 on {x2.device.name}; move one with x.to(...)")
    order: Array | None = None
    if sorter is not None:
        if not isinstance(sorter, Array) or sorter.dtype.kind not in "iu":
            raise TypeError(f"searchsorted(): sorter must be a hetero array of integer indices (as argsort gives), "
                            f"got {getattr(sorter, 'dtype', type(sorter).__name__)}")
        if sorter.shape != x1.shape or sorter.device != x1.device:
            raise ArrayError(f"searchsorted(): sorter must have x1's shape {x1.shape} on {x1.device.name}, got "
                             f"shape {sorter.shape} on {sorter.device.name}")
        order = _owner(sorter)
    common = promote(x1.dtype, x2.dtype)
    result = empty(x2.shape, dtypes.int64, device=x1.device)
    count = x2.size
    if count == 0:
        return result
    spec = kernels.Search(side, scalar_type(x1.dtype), scalar_type(x2.dtype), key_type(common),
                          scalar_type(order.dtype) if order is not None else None)
    args: list[Any] = [result.reshape(count), _owner(x1)]
    if order is not None:
        args.append(order)
    args += [_owner(x2), x1.size, count]
    _kernel(spec, x1.device).run((count,), args)
    return result


__all__ = ["searchsorted"]
