"""CLBlast, the OpenCL BLAS, through a thin ctypes binding of its C API (``libclblast.so``).

Optional: where the library is missing, :func:`library` returns None and :func:`missing`
says why and how to get it (Debian/Ubuntu ``apt-get install libclblast-dev``; CLBlast's
releases elsewhere). It is loaded on first use, never by ``import hetero``; a failed load is
remembered and reported, not retried.

Only the GEMM routines are bound: ``CLBlast{S,D,H}gemm`` and their ``StridedBatched``
variants, row-major, with transpose flags. Buffers are ``cl_mem`` handles (PyOpenCL's
``int_ptr``) and the queue is the device's own in-order queue, so a GEMM is ordered after the
kernels and copies queued before it and before those queued after it; the call enqueues and
returns. No event is asked for (CLBlast takes a null ``cl_event*``), so nothing is left to
release. PyOpenCL's ``pyclblast`` (a Cython wrapper) was not used: it wraps each call's
event retaining it once more than it releases, and it needs ``pyopencl.array`` objects.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import threading
from typing import Any

import numpy as np

from hetero.core.errors import KernelLaunchError

_ROW_MAJOR = 101
_NO, _YES = 111, 112
_SUCCESS = 0
#: CLBlast's status codes that are not OpenCL's (from clblast_c.h), for error messages.
_STATUS = {-2048: "not implemented", -1024: "kernel not ready", -2041: "unsupported precision",
           -2042: "invalid local memory usage", -2043: "no half precision support", -2044: "no double precision support",
           -2045: "invalid vector scalar", -2046: "insufficient memory scalar", -2047: "database error",
           -2050: "unknown error", -2049: "unexpected error", -1023: "insufficient memory temporary buffer",
           -1022: "invalid batch count", -1021: "invalid override kernel", -1020: "missing override parameter",
           -1019: "invalid local thread count", -1018: "invalid local threads total", -1017: "invalid local threads",
           -5: "out of resources", -4: "memory object allocation failure", -30: "invalid value", -36: "invalid queue",
           -38: "invalid memory object"}
_PREFIX: dict[np.dtype[Any], str] = {np.dtype(np.float32): "S", np.dtype(np.float64): "D", np.dtype(np.float16): "H"}
#: The dtypes CLBlast's GEMM takes (float16 only on devices with cl_khr_fp16).
DTYPES = tuple(_PREFIX)

class CLBlastError(KernelLaunchError):
    """A CLBlast routine returned a failing status: ``status`` is CLBlast's code (above -1000:
    an OpenCL status, which the OpenCL runtime translates into hetero's device errors)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


_lock = threading.Lock()
_state: dict[str, Any] = {}


def _scalar(dtype: np.dtype[Any]) -> Any:
    return {"S": ctypes.c_float, "D": ctypes.c_double, "H": ctypes.c_uint16}[_PREFIX[dtype]]


def _bind(lib: ctypes.CDLL) -> dict[str, Any]:
    size, mem = ctypes.c_size_t, ctypes.c_void_p
    queue_p, event_p = ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p
    routines: dict[str, Any] = {}
    for dtype, prefix in _PREFIX.items():
        scalar = _scalar(dtype)
        plain = getattr(lib, f"CLBlast{prefix}gemm")
        plain.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, size, size, size, scalar, mem, size, size,
                          mem, size, size, scalar, mem, size, size, queue_p, event_p]
        plain.restype = ctypes.c_int
        batched = getattr(lib, f"CLBlast{prefix}gemmStridedBatched")
        batched.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, size, size, size, scalar, mem, size, size, size,
                            mem, size, size, size, scalar, mem, size, size, size, size, queue_p, event_p]
        batched.restype = ctypes.c_int
        routines[prefix] = (plain, batched)
    return routines


def _version(path: str) -> str:
    """CLBlast's version, from the file the loader mapped (``libclblast.so.1.5.3``); '' if unknown."""
    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            for line in maps:
                if "libclblast" in line:
                    found = re.search(r"libclblast\.so\.(\d+(?:\.\d+)*)", os.path.realpath(line.split()[-1]))
                    if found:
                        return found.group(1)
    except OSError:
        pass
    found = re.search(r"\.so\.(\d+(?:\.\d+)+)", os.path.realpath(path))
    return found.group(1) if found else ""


def _load() -> dict[str, Any]:
    with _lock:
        if not _state:
            path = ctypes.util.find_library("clblast") or "libclblast.so.1"
            try:
                lib = ctypes.CDLL(path)
                _state.update(routines=_bind(lib), version=_version(path), path=path, error="")
            except (OSError, AttributeError) as exc:
                _state.update(routines=None, version="", path="", error=f"{path}: {exc}")
    return _state


def library() -> str | None:
    """``"CLBlast 1.5.3"`` when the library loads, else None (:func:`missing` says why)."""
    state = _load()
    if state["routines"] is None:
        return None
    return f"CLBlast {state['version']}".rstrip()


def missing() -> str:
    """Why CLBlast is not used, with the remedy ('' when it loads)."""
    state = _load()
    if state["routines"] is not None:
        return ""
    return (f"CLBlast is not installed ({state['error']}); install it for vendor GEMM on OpenCL devices: "
            "apt-get install libclblast-dev (Debian/Ubuntu), or a release from github.com/CNugteren/CLBlast")


def routine(dtype: np.dtype[Any], batch: int) -> str:
    """The CLBlast routine for ``dtype`` (``sgemm``, ``dgemmStridedBatched``, ...)."""
    return f"{_PREFIX[dtype].lower()}gemm" + ("StridedBatched" if batch > 1 else "")


def gemm(queue: int, dtype: np.dtype[Any], m: int, n: int, k: int, a: int, a_offset: int, a_ld: int, a_trans: bool,
         b: int, b_offset: int, b_ld: int, b_trans: bool, c: int, c_offset: int, c_ld: int, batch: int = 1,
         a_stride: int = 0, b_stride: int = 0, c_stride: int = 0, device: str = "", accumulate: bool = False) -> None:
    """Enqueue ``c = op(a) @ op(b)`` (``c += op(a) @ op(b)`` with ``accumulate``: beta = 1; row-major,
    offsets, leading dimensions and batch strides in elements) for ``batch`` matrices on ``queue``
    (a ``cl_command_queue`` as an int). Raises :class:`CLBlastError` (a
    :class:`hetero.KernelLaunchError`) with CLBlast's status."""
    state = _load()
    if state["routines"] is None:
        raise KernelLaunchError(missing())
    plain, batched = state["routines"][_PREFIX[dtype]]
    scalar = _scalar(dtype)
    one, zero = (scalar(0x3C00), scalar(0)) if dtype == np.float16 else (scalar(1.0), scalar(0.0))
    beta = one if accumulate else zero
    handle = ctypes.c_void_p(queue)
    flags = (_ROW_MAJOR, _YES if a_trans else _NO, _YES if b_trans else _NO)
    if batch > 1:
        status = batched(*flags, m, n, k, one, a, a_offset, a_ld, a_stride, b, b_offset, b_ld, b_stride, beta,
                         c, c_offset, c_ld, c_stride, batch, ctypes.byref(handle), None)
    else:
        status = plain(*flags, m, n, k, one, a, a_offset, a_ld, b, b_offset, b_ld, beta, c, c_offset, c_ld,
                       ctypes.byref(handle), None)
    if status != _SUCCESS:
        raise CLBlastError(
            f"CLBlast {routine(dtype, batch)} failed on {device or 'an OpenCL device'} with status {status} "
            f"({_STATUS.get(status, 'see clblast_c.h')}) for m={m} n={n} k={k} batch={batch}; set HETERO_BLAS=off "
            "to run hetero's own matmul kernel instead", status)


__all__ = ["DTYPES", "CLBlastError", "gemm", "library", "missing", "routine"]
