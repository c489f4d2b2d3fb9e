"""Numba's device arrays for ``hetero.compat.cuda``: ``to_device``, ``device_array(_like)``,
``copy_to_host``, ``copy_to_device`` — over hetero arrays on any device.

A :class:`DeviceNDArray` holds a :class:`hetero.Array` (``.array``) on the device it was
made on: ``hetero.device()`` (the one :func:`hetero.use_device` selects) unless named. Indexing
it with integers copies that element to the host, as Numba's does; slicing gives a device view.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import numpy as np

import hetero
from hetero.array.ndarray import Array
from hetero.compat.cuda import layouts
from hetero.compat.cuda.streams import scope
from hetero.core.device import Device


class DeviceNDArray:
    """An array in a device's memory, with Numba's ``DeviceNDArray`` methods."""

    __slots__ = ("array",)

    def __init__(self, array: Array) -> None:
        self.array = array

    # -- what it is ------------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(self.array.shape)

    @property
    def ndim(self) -> int:
        return self.array.ndim

    @property
    def size(self) -> int:
        return self.array.size

    @property
    def dtype(self) -> np.dtype[Any]:
        return np.dtype(self.array.dtype)

    @property
    def nbytes(self) -> int:
        return self.array.size * self.dtype.itemsize

    @property
    def strides(self) -> tuple[int, ...]:
        """Steps between neighbours along each axis, in bytes (NumPy's and Numba's unit)."""
        return tuple(self.array.byte_strides)

    @property
    def device(self) -> Device:
        return self.array.device

    @property
    def T(self) -> DeviceNDArray:
        return self.transpose()

    def transpose(self, axes: Any = None) -> DeviceNDArray:
        """A new C-ordered array holding this 2-D array transposed, as Numba's (which copies)."""
        if axes is not None and tuple(axes) == tuple(range(self.ndim)):
            return self
        if self.ndim != 2:
            raise NotImplementedError(f"transposing a {self.ndim}-D DeviceNDArray: Numba-CUDA transposes 2-D arrays "
                                      "only; use hetero.permute_dims(a.array, axes) for a view")
        if axes is not None and tuple(axes) != (1, 0):
            raise ValueError(f"invalid axes list {axes!r} for a 2-D array")
        out = hetero.empty(self.shape[::-1], dtype=self.dtype, device=self.device)
        hetero.copyto(out, self.array.T)
        return DeviceNDArray(out)

    def is_f_contiguous(self) -> bool:
        return self.size <= 1 or self.strides == layouts.dense_strides(
            self.shape, tuple(reversed(range(self.ndim))), self.dtype.itemsize)

    @property
    def flags(self) -> dict[str, bool]:
        """``C_CONTIGUOUS`` and ``F_CONTIGUOUS``, as NumPy's ``flags`` spells them."""
        return {"C_CONTIGUOUS": self.is_c_contiguous(), "F_CONTIGUOUS": self.is_f_contiguous()}

    def __len__(self) -> int:
        return self.shape[0] if self.shape else 0

    def __repr__(self) -> str:
        return f"<hetero.compat.cuda DeviceNDArray {self.dtype}{list(self.shape)} on {self.device.name}>"

    def __hetero_array__(self) -> Array:
        """The hetero array this wraps (how kernels that read this array as a global find it)."""
        return self.array

    def is_c_contiguous(self) -> bool:
        return bool(self.array.is_contiguous)

    # -- copies ----------------------------------------------------------------------------
    def copy_to_host(self, ary: np.ndarray | None = None, stream: Any = 0) -> np.ndarray:
        """The array's contents in host memory (into ``ary`` when given), copied on ``stream``; returns
        when the host may read them (with a stream too: hetero's copies to the host do not return early)."""
        with scope(stream):
            host = self.array.numpy()
        if ary is None:
            return np.array(host, copy=True)
        if ary.shape != host.shape or ary.dtype != host.dtype:
            raise ValueError(f"copy_to_host: the host array is {ary.dtype}{list(ary.shape)}, this array "
                             f"{host.dtype}{list(host.shape)}")
        np.copyto(ary, host)
        return ary

    def copy_to_device(self, ary: Any, stream: Any = 0) -> None:
        """Overwrite the contents from a host array or another device array of the same shape."""
        source = ary.array if isinstance(ary, DeviceNDArray) else np.ascontiguousarray(ary, dtype=self.dtype)
        if tuple(source.shape) != self.shape:
            raise ValueError(f"copy_to_device: {list(source.shape)} does not match this array's {list(self.shape)}")
        with scope(stream):
            hetero.copyto(self.array, source)

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        host = self.copy_to_host()
        return host if dtype is None else host.astype(dtype)

    # -- indexing --------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> Any:
        keys = key if isinstance(key, tuple) else (key,)
        if len(keys) == self.ndim and all(isinstance(k, (int, np.integer)) for k in keys):
            for k, n in zip(keys, self.shape, strict=True):
                if not -n <= int(k) < n:
                    raise IndexError(f"index {int(k)} is out of bounds for an axis of size {n}")
            return self.array[key].numpy()[()]
        return DeviceNDArray(self.array[key])

    def __setitem__(self, key: Any, value: Any) -> None:
        self.array[key] = value.array if isinstance(value, DeviceNDArray) else value

    def __iter__(self) -> Iterator[Any]:
        if self.ndim == 1:
            yield from self.copy_to_host()
        else:
            for i in range(len(self)):
                yield self[i]

    def reshape(self, *shape: Any) -> DeviceNDArray:
        return DeviceNDArray(hetero.reshape(self.array, shape[0] if len(shape) == 1 else shape))

    def ravel(self) -> DeviceNDArray:
        return DeviceNDArray(hetero.reshape(self.array, (-1,)))


def _dtype(dtype: Any) -> np.dtype[Any]:
    """A NumPy dtype from Numba's spellings (``float32``, ``np.float32``, ``"float32"``)."""
    own = getattr(dtype, "hetero_type", None)
    return np.dtype(dtype.dtype) if own is not None else np.dtype(dtype)


def _device(device: str | Device | None) -> Device:
    return hetero.device(device)


def to_device(obj: Any, stream: Any = 0, copy: bool = True, to: DeviceNDArray | None = None,
              device: str | Device | None = None) -> DeviceNDArray:
    """A device copy of ``obj`` (a NumPy array, or anything ``numpy.asarray`` takes). With ``to``,
    copies into that device array instead."""
    if isinstance(obj, DeviceNDArray):
        if to is None:
            return obj
        to.copy_to_device(obj)
        return to
    host = np.ascontiguousarray(obj)
    if to is not None:
        to.copy_to_device(host, stream)
        return to
    with scope(stream):
        # copy=True: on a device that shares host memory (cpu) asarray would alias ``obj``, and a
        # kernel's writes to the device array would change the host array; Numba's is a copy
        return DeviceNDArray(hetero.asarray(host, device=_device(device), copy=True))


def device_array(shape: Any, dtype: Any = np.float64, strides: Any = None, order: str = "C", stream: Any = 0,
                 device: str | Device | None = None) -> DeviceNDArray:
    """An uninitialised device array (Numba's default dtype: float64), in C or Fortran order or with
    the given dense ``strides`` (:mod:`hetero.compat.cuda.layouts`)."""
    found, dims = _dtype(dtype), layouts.shape_of(shape)
    return _dense(dims, found, layouts.axis_order(dims, found.itemsize, strides, order), _device(device))


def _dense(shape: tuple[int, ...], dtype: np.dtype[Any], axes: tuple[int, ...], device: Device) -> DeviceNDArray:
    base = hetero.empty(tuple(shape[a] for a in axes), dtype=dtype, device=device)
    if axes == tuple(range(len(shape))):
        return DeviceNDArray(base)
    return DeviceNDArray(hetero.permute_dims(base, layouts.inverse(axes)))


def device_array_like(ary: Any, stream: Any = 0, device: str | Device | None = None) -> DeviceNDArray:
    """An uninitialised device array of ``ary``'s shape and dtype, laid out like it without gaps, on
    ``ary``'s device when it has one."""
    where = ary.device if isinstance(ary, DeviceNDArray) and device is None else device
    return _dense(tuple(ary.shape), np.dtype(ary.dtype), layouts.order_like(ary), _device(where))


def pinned_array(shape: Any, dtype: Any = np.float64, strides: Any = None, order: str = "C") -> np.ndarray:
    """A host array (hetero stages copies itself: pinning is the backend's business)."""
    found, dims = _dtype(dtype), layouts.shape_of(shape)
    return layouts.host_array(dims, found, layouts.axis_order(dims, found.itemsize, strides, order))


def mapped_array(shape: Any, dtype: Any = np.float64, strides: Any = None, order: str = "C", stream: Any = 0,
                 portable: bool = False, wc: bool = False) -> np.ndarray:
    """A host array: a kernel given it copies it in and back around the launch, so the host sees what
    the kernel wrote once the launch returns, as with CUDA's mapped memory after a synchronize."""
    return pinned_array(shape, dtype, strides, order)


def pinned_array_like(ary: Any) -> np.ndarray:
    """A host array of ``ary``'s shape and dtype, laid out like it (see :func:`pinned_array`)."""
    return layouts.host_array(tuple(ary.shape), np.dtype(ary.dtype), layouts.order_like(ary))


def mapped_array_like(ary: Any, stream: Any = 0, portable: bool = False, wc: bool = False) -> np.ndarray:
    """A host array of ``ary``'s shape and dtype, laid out like it (see :func:`mapped_array`)."""
    return pinned_array_like(ary)


@contextlib.contextmanager
def pinned(*arrays: Any) -> Iterator[None]:
    """Numba's ``with cuda.pinned(a, b):``; hetero stages its copies itself, so nothing to do."""
    yield
