"""``numba.cuda.kernels.transpose.transpose(a, b=None)``: a 2-D device array transposed into ``b``
(a new C-ordered device array when not given), on ``a``'s device, by hetero's strided copy."""

from __future__ import annotations

from typing import Any

import hetero
from hetero.compat.cuda.arrays import DeviceNDArray, device_array


def transpose(a: DeviceNDArray, b: DeviceNDArray | None = None) -> DeviceNDArray:
    """Copy ``a.T`` into ``b`` (made when None) and return ``b``."""
    if not isinstance(a, DeviceNDArray) or a.ndim != 2:
        raise TypeError(f"transpose: takes a 2-D device array, got {a!r}")
    shape: Any = a.shape[::-1]
    if b is None:
        b = device_array(shape, a.dtype, device=a.device)
    if b.shape != shape or b.dtype != a.dtype:
        raise ValueError(f"transpose: the output is {b.dtype}{list(b.shape)}, the transpose {a.dtype}{list(shape)}")
    hetero.copyto(b.array, a.array.T)
    return b
