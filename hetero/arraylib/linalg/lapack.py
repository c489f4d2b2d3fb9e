"""Which library runs ``hetero.linalg``'s LAPACK work on each device, and the one call that runs it.

============ =========================================================================
device       library
============ =========================================================================
``cpu``      NumPy's ``linalg`` (its LAPACK, e.g. OpenBLAS) on the array's own host memory:
             strided NumPy views of the operands, no copy in
``cuda``,    ``cupy.linalg`` (cuSOLVER / rocSOLVER) on the device buffer: CuPy views
``rocm``     of the operands, no copy in
``oneapi``,  none: NumPy on the host, operands downloaded and results uploaded, a *host
``opencl``   fallback* that is counted, announced and configurable
             (:mod:`hetero.arraylib.host_fallback`)
============ =========================================================================

A function is written once, as ``compute(xp, *arrays)`` over NumPy or CuPy (their ``linalg``
share their names and arguments), and :func:`call` runs it where the table says. Results are
copied into new C-contiguous hetero arrays on the operands' device (a result is O(n²), the work
O(n³)). A library call goes through the runtime's ``call_library`` and advances the device's
launch counter, as a BLAS call does (:mod:`hetero.arraylib.linalg.blas`).

float16: neither NumPy's nor CuPy's LAPACK takes it, so float16 operands are computed in
float32 and the results rounded to float16 once. Operands with no data (an empty batch, a 0 x 0
matrix) need no library: NumPy works out the result (its shape, and values such as the 1 of
``det`` of a 0 x 0 matrix) on the host with nothing to download, and it is uploaded.

LAPACK's failures (a singular matrix given to ``inv`` or ``solve``, one that is not positive
definite given to ``cholesky``) become :class:`hetero.ArrayError` naming the function and device.
CuPy does not check for them by default: there the result holds NaN or infinity instead.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array, from_host, empty
from hetero.arraylib.elementwise import same_device
from hetero.arraylib.host_fallback import LAPACK_LIBRARIES, note
from hetero.core.device import Device
from hetero.core.errors import ArrayError, UnsupportedDtypeError
from hetero.core.launch_counts import counter as launch_counter

log = logging.getLogger("hetero.arraylib.linalg.lapack")


@dataclasses.dataclass(frozen=True)
class Choice:
    """Where LAPACK work on one device runs: ``library`` (``numpy``, ``cuSOLVER``, ``rocSOLVER``, or
    ``numpy (host fallback)``) and whether the operands stay on the device (``on_device``)."""

    library: str
    on_device: bool

    def __str__(self) -> str:
        return self.library if self.on_device else f"{self.library}: the device has no LAPACK hetero calls"


def choose(device: Device, libraries: Mapping[str, str] = LAPACK_LIBRARIES) -> Choice:
    """The library that runs LAPACK-backed ``linalg`` functions for arrays on ``device`` (or, given
    another backend-to-library table such as ``FFT_LIBRARIES``, that table's functions)."""
    library = libraries.get(device.backend)
    if library is None:
        return Choice("numpy (host fallback)", on_device=False)
    return Choice(library, on_device=True)


def _has_fp64(device: Device) -> bool:
    target = device.runtime.kernel_target()
    return "fp64" in target.features if target is not None else bool(device.info.fp64)


def check_float(function: str, dtype: np.dtype[Any], device: Device, *, complex_ok: bool = False) -> None:
    """Refuse (:class:`UnsupportedDtypeError`, naming the remedy) a ``dtype`` that is not floating
    point (or complex, where ``complex_ok``), or float64/complex128 on a device without fp64."""
    if dtype.kind != "f" and not (complex_ok and dtype.kind == "c"):
        kinds = "floating-point or complex" if complex_ok else "floating-point"
        raise UnsupportedDtypeError(f"hetero.{function} takes {kinds} arrays, got {dtype}; convert first, "
                                    "e.g. hetero.astype(x, hetero.float32)")
    if dtype in (dtypes.float64, dtypes.complex128) and not _has_fp64(device):
        narrow = "complex64" if dtype.kind == "c" else "float32"
        raise UnsupportedDtypeError(f"hetero.{function} of {dtype} needs fp64, which {device.name} lacks; "
                                    f"convert to {narrow} first (hetero.astype(x, hetero.{narrow})) or use a device "
                                    "with fp64")


def float_dtype(function: str, arrays: Sequence[Array], *, complex_ok: bool = False) -> np.dtype[Any]:
    """The floating (or, where ``complex_ok``, complex) dtype ``function`` (``"linalg.inv"``)
    computes in for these operands: their promoted dtype, refused by :func:`check_float` for an
    integer or bool operand or for 64-bit floats on a device without fp64."""
    for x in arrays:
        check_float(function, x.dtype, x.device, complex_ok=complex_ok)
    result = np.dtype(np.result_type(*(x.dtype for x in arrays)))
    check_float(function, result, arrays[0].device, complex_ok=complex_ok)
    return result


def real_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """The real dtype of ``dtype``'s values' magnitudes (float32 for complex64), ``dtype`` if real:
    what eigenvalues of a Hermitian matrix, singular values and norms come back as."""
    return np.dtype(np.finfo(dtype).dtype) if dtype.kind == "c" else dtype


def _cupy_view(cupy: Any, x: Array) -> Any:
    memory = x.buffer + x.offset * x.dtype.itemsize
    return cupy.ndarray(x.shape, dtype=x.dtype, memptr=memory, strides=x.byte_strides)


def call(function: str, arrays: Sequence[Array], compute: Callable[..., Any], work: np.dtype[Any],
         results: Sequence[np.dtype[Any]], libraries: Mapping[str, str] = LAPACK_LIBRARIES) -> tuple[Array, ...]:
    """``compute(xp, *operands)`` for ``arrays`` (on one device) with NumPy or CuPy as ``xp``,
    each operand converted to ``work`` (float32 for float16); its result (a native array or a
    tuple of them) comes back as hetero arrays of ``results`` dtypes on the arrays' device (the
    library named per backend by ``libraries``, LAPACK's by default). When
    ``arrays[0]`` is empty, ``compute`` gets zeros of the operands' shapes on the host."""
    device = same_device(function, list(arrays))
    inner = dtypes.float32 if work == dtypes.float16 else work
    choice = choose(device, libraries)
    try:
        if arrays[0].size == 0:  # nothing to read: the result's shape and constants only
            return _to_host_arrays(compute(np, *(np.zeros(x.shape, inner) for x in arrays)), device, results)
        if not choice.on_device:
            note(function, device)  # raises under host_fallback: error
            operands = [np.asarray(x._host(), dtype=inner) for x in arrays]
            return _to_host_arrays(compute(np, *operands), device, results)
        if device.runtime.host_memory:
            found = _library(device, choice, function, lambda: compute(np, *(np.asarray(x._host(), dtype=inner) for x in arrays)))
            return _to_host_arrays(found, device, results)
        cupy = device.runtime.cupy  # type: ignore[attr-defined]

        def run() -> tuple[Array, ...]:
            found = compute(cupy, *(_cupy_view(cupy, x).astype(inner, copy=False) for x in arrays))
            return _to_cupy_arrays(cupy, found, device, results)

        result: tuple[Array, ...] = _library(device, choice, function, run)
        return result
    except np.linalg.LinAlgError as exc:
        raise ArrayError(f"hetero.{function} on {device.name} failed in {choice.library}: {exc}; check the input "
                         "(a singular matrix has no inverse, cholesky needs a symmetric positive-definite one)") from None


def _library(device: Device, choice: Choice, function: str, run: Callable[[], Any]) -> Any:
    result = device.runtime.call_library(f"{choice.library} {function}", run)
    next(launch_counter(device.name))
    if log.isEnabledFor(logging.DEBUG):
        log.debug("%s on %s: %s", function, device.name, choice)
    return result


def _as_tuple(found: Any) -> tuple[Any, ...]:
    return tuple(found) if isinstance(found, tuple) else (found,)


def _to_host_arrays(found: Any, device: Device, results: Sequence[np.dtype[Any]]) -> tuple[Array, ...]:
    out = []
    for value, dtype in zip(_as_tuple(found), results, strict=True):
        out.append(from_host(np.asarray(value, dtype=dtype), device, copy=True))  # (0-d stays 0-d)
    return tuple(out)


def _to_cupy_arrays(cupy: Any, found: Any, device: Device, results: Sequence[np.dtype[Any]]) -> tuple[Array, ...]:
    out = []
    for value, dtype in zip(_as_tuple(found), results, strict=True):
        value = cupy.asarray(value)
        array = empty(tuple(value.shape), dtype, device=device)
        if array.size:
            _cupy_view(cupy, array)[...] = value.astype(dtype, copy=False)
        out.append(array)
    return tuple(out)


__all__ = ["Choice", "call", "check_float", "choose", "float_dtype"]
