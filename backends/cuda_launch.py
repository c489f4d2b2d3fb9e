"""Kernel launches on an NVIDIA GPU straight through the driver's ``cuLaunchKernel``.

CuPy's ``Function.__call__`` converts every argument afresh on each launch. hetero knows each
kernel's parameters when it loads the kernel (the emitter's ABI: pointers, ``long long``
extents, scalars of fixed C types), so here one :class:`struct.Struct` per kernel packs the
values as the kernel lays its parameters out (C's natural alignment, which CUDA's parameter
space follows), into a buffer the driver takes whole (``CU_LAUNCH_PARAM_BUFFER_POINTER``).

Nothing is trusted blind: a kernel launches this way only when the driver confirms the layout
(``cuFuncGetParamInfo``, CUDA 12.4 and later: every parameter's offset and size, and no parameter
more) and its ABI has only types this module knows. Anything else, a driver without the call, or
``HETERO_CUDA_DRIVER_LAUNCH=0``, launches through CuPy as before. Launch errors come back as CuPy's
own ``CUDADriverError`` (the caller translates it as it translates CuPy's).
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
import threading
from collections.abc import Sequence
from typing import Any

logger = logging.getLogger("hetero.backends.cupy")

#: struct codes of the scalar parameter types (hetero dtype name -> native struct code).
SCALAR_CODES = {"bool": "?", "i8": "b", "u8": "B", "i16": "h", "u16": "H", "i32": "i", "u32": "I",
                "i64": "q", "u64": "Q", "f16": "e", "f32": "f", "f64": "d"}
_BUFFER_POINTER, _BUFFER_SIZE, _END = 1, 2, 0  # CU_LAUNCH_PARAM_* (cuda.h)
CUDA_SUCCESS = 0
CUDA_ERROR_INVALID_VALUE = 1
#: The driver's answer when no CUDA context is current on the calling thread.
CUDA_ERROR_INVALID_CONTEXT = 201


def layout(abi: Sequence[Any]) -> struct.Struct | None:
    """The packing of a kernel's parameters from its ABI (``hetero.compiler.emit_base.AbiArg``):
    arrays are device pointers, shapes ``long long``; None when a scalar's type is not known here."""
    codes = ["@"]
    for arg in abi:
        if arg.kind == "array":
            codes.append("Q")
        elif arg.kind == "shape":
            codes.append("q")
        else:
            code = SCALAR_CODES.get(getattr(arg.dtype, "name", ""))
            if code is None:
                return None
            codes.append(code)
    return struct.Struct("".join(codes))


def offsets(packing: struct.Struct) -> list[tuple[int, int]]:
    """``(offset, size)`` of each parameter in ``packing``'s buffer."""
    found: list[tuple[int, int]] = []
    codes = packing.format.lstrip("@")
    for end in range(1, len(codes) + 1):
        size = struct.calcsize(codes[end - 1])
        found.append((struct.calcsize("@" + codes[:end]) - size, size))
    return found


class Driver:
    """The two driver entry points this module calls, from ``libcuda`` through ctypes."""

    def __init__(self, library: Any) -> None:
        self.launch = library.cuLaunchKernel  # 11 arguments, passed as ctypes objects or small ints
        self.launch.restype = ctypes.c_int
        self.param_info = getattr(library, "cuFuncGetParamInfo", None)
        if self.param_info is not None:
            self.param_info.restype = ctypes.c_int
            self.param_info.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_size_t),
                                        ctypes.POINTER(ctypes.c_size_t)]

    def confirms(self, function: int, packing: struct.Struct) -> bool:
        """Whether the driver places ``function``'s parameters exactly where ``packing`` does."""
        if self.param_info is None:
            return False
        offset, size = ctypes.c_size_t(), ctypes.c_size_t()
        expected = offsets(packing)
        for index, (want_offset, want_size) in enumerate(expected):
            if self.param_info(function, index, ctypes.byref(offset), ctypes.byref(size)) != CUDA_SUCCESS:
                return False
            if (offset.value, size.value) != (want_offset, want_size):
                logger.warning("kernel parameter %d lies at %d (%d bytes) on the driver, %d (%d bytes) in hetero's "
                               "packing: launching through CuPy", index, offset.value, size.value, want_offset,
                               want_size)
                return False
        # and no parameter after the last one hetero packs
        return bool(self.param_info(function, len(expected), ctypes.byref(offset), ctypes.byref(size)) != CUDA_SUCCESS)


def open_driver(name: str = "libcuda.so.1") -> Driver | None:
    """The driver's launch entry points, or None (not Linux's libcuda, too old, or turned off with
    ``HETERO_CUDA_DRIVER_LAUNCH=0``): kernels then launch through CuPy."""
    if os.environ.get("HETERO_CUDA_DRIVER_LAUNCH", "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    try:
        driver = Driver(ctypes.CDLL(name))
    except (OSError, AttributeError) as exc:
        logger.debug("kernels launch through CuPy: %s", exc)
        return None
    return driver if driver.param_info is not None else None


class DriverLaunch:
    """One loaded kernel launched by ``cuLaunchKernel`` with its parameters packed into one buffer.

    Calls from several threads take turns on the buffer (the driver copies it during the call)."""

    __slots__ = ("_call", "_extra", "_function", "_lock", "_pack", "_size", "buffer", "function", "launches")

    def __init__(self, driver: Driver, function: Any, packing: struct.Struct) -> None:
        self.function = function  # CuPy's Function: keeps the module (and so the CUfunction) loaded
        self._function = ctypes.c_void_p(int(function.ptr))
        self._call = driver.launch
        self._pack = packing.pack_into
        self.buffer = ctypes.create_string_buffer(max(packing.size, 1))
        self._size = ctypes.c_size_t(packing.size)
        self._extra: Any = (ctypes.c_void_p * 5)(_BUFFER_POINTER, ctypes.addressof(self.buffer), _BUFFER_SIZE,
                                                 ctypes.addressof(self._size), _END) if packing.size else None
        self._lock = threading.Lock()
        self.launches = 0  # successful ones, for reports

    def __call__(self, dims: tuple[int, int, int, int, int, int], stream: int, values: Sequence[Any]) -> int:
        """Launch with grid and block ``dims`` on ``stream`` (a CUstream handle, 0 for the default);
        the driver's status. Raises struct.error / TypeError when a value does not fit its
        parameter (the caller then launches through CuPy, which says what is wrong)."""
        handle = ctypes.c_void_p(stream) if stream else None
        with self._lock:
            self._pack(self.buffer, 0, *values)
            status: int = self._call(self._function, dims[0], dims[1], dims[2], dims[3], dims[4], dims[5], 0,
                                     handle, None, self._extra)
        return status


def driver_launch(driver: Driver | None, function: Any, abi: Sequence[Any]) -> DriverLaunch | None:
    """A :class:`DriverLaunch` for ``function`` (a CuPy Function) when the driver confirms its
    layout, else None (launch it through CuPy)."""
    if driver is None or not hasattr(function, "ptr"):
        return None
    packing = layout(abi)
    if packing is None or not driver.confirms(int(function.ptr), packing):
        return None
    return DriverLaunch(driver, function, packing)
