"""``numba.cuda.cudadrv.devicearray`` for ``hetero.compat.cuda``: the device array type and the
helpers programs import from it (``DeviceNDArray``, ``from_array_like``, ``auto_device``,
``is_cuda_ndarray``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.compat.cuda.arrays import DeviceNDArray, device_array_like, to_device

__all__ = ["DeviceNDArray", "auto_device", "from_array_like", "is_cuda_ndarray"]


def from_array_like(ary: Any, stream: Any = 0, gpu_data: Any = None) -> DeviceNDArray:
    """An uninitialised device array of ``ary``'s shape and dtype, laid out like it without gaps."""
    if gpu_data is not None:
        raise TypeError("from_array_like(gpu_data=...): hetero cannot adopt device memory made elsewhere; leave "
                        "gpu_data out, or wrap the memory with hetero.asarray")
    return device_array_like(ary, stream)


def is_cuda_ndarray(obj: Any) -> bool:
    return isinstance(obj, DeviceNDArray)


def auto_device(obj: Any, stream: Any = 0, copy: bool = True, user_explicit: bool = False) -> tuple[DeviceNDArray, bool]:
    """``(device array, whether it was copied)``: ``obj`` itself when it is a device array, else a
    device copy of it. A host array that is neither C- nor Fortran-contiguous is a ValueError, as
    in Numba (copy it with ``np.ascontiguousarray`` first)."""
    if isinstance(obj, DeviceNDArray):
        return obj, False
    host = np.asarray(obj)
    if host.ndim and not (host.flags.c_contiguous or host.flags.f_contiguous):
        raise ValueError("Array contains non-contiguous buffer and cannot be transferred as a single memory "
                         "region. Please ensure contiguous buffer with numpy .ascontiguousarray()")
    return to_device(host, stream), True
