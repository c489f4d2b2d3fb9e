"""Sorting of hetero arrays (array API 2024.12): ``sort`` and ``argsort``, a generated bitonic sort per device.

The sorted axis is moved last (a contiguous copy when the rows are not contiguous already),
each row is padded to a power of two and sorted as (key, index) pairs by the kernels of
:mod:`hetero.compiler.array_kernels.sort`: one work-group block sort in local memory, then global and local
merge steps, O(log^2 n) launches, no host round trip. Pairs compare by key and then by
index, so the result is the stable order whether ``stable`` is asked for or not, and equals
NumPy's ``np.sort(x, kind="stable")`` / ``np.argsort(x, kind="stable")`` exactly. Descending
keeps equal elements in their input order too (it is not a reversed ascending sort).

Order of special values: NaN is above every number (last ascending, first descending, as
``np.flip(np.sort(np.flip(x)))`` gives); -0.0 and +0.0 are equal, so they keep their input
order. ``argsort`` returns int64 (the default index dtype). A 0-d array sorts to itself
(``axis`` must then be -1 or 0, as NumPy allows).

On a device whose memory is the host's (``cpu``) the sort is NumPy's stable sort, in place on
the array's own memory (no copy, no round trip): there it is the host's library, as LAPACK is
for ``linalg``, and faster than an O(n log^2 n) network on a few cores. The order is the same
(:data:`HOST_LIBRARY` False runs the generated kernels there too; the tests run both).
"""

from __future__ import annotations

import dataclasses
import math
import operator
from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array, from_host, empty, zeros
from hetero.kernels.generated import GeneratedSpecialization, SpecializationCache
from hetero.array.views import moveaxis
from hetero.compiler.array_kernels import sort as kernels
from hetero.core.device import Device
from hetero.core.errors import ArrayError, UnsupportedDtypeError
from hetero.kernels.kernel import device_target
from hetero.core.runtime_parts import runs_kernels
from hetero.core.types import i32, i64, scalar_type

_kernels: SpecializationCache[kernels.Sort] = SpecializationCache(kernels.build)
#: Sort on a host-memory device (``cpu``) with NumPy's stable sort (see the module docstring).
HOST_LIBRARY = True


def _kernel(spec: kernels.Sort, device: Device) -> GeneratedSpecialization:
    return _kernels.get(spec, device)


def checked(x: Any, what: str) -> Array:
    """``x`` if it is a hetero array on a device that runs generated kernels and of a dtype
    this device can sort; else the error that names the remedy."""
    if not isinstance(x, Array):
        raise TypeError(f"{what}() takes a hetero.Array, got {type(x).__name__}; make one with hetero.asarray(...)")
    if not runs_kernels(x.device.runtime):
        raise ArrayError(f"{what}() runs a generated kernel, and {x.device.name} runs no hetero kernels; "
                         "move the array to a device that does with x.to(...)")
    if x.dtype.kind not in "biuf":
        raise UnsupportedDtypeError(f"{what}() sorts real numbers and booleans, got {x.dtype}; "
                                    "complex numbers have no order in the array API standard")
    if x.dtype == dtypes.float64 and "fp64" not in device_target(what, x.device).features:
        raise UnsupportedDtypeError(f"{what}() of float64 needs fp64, which {x.device.name} lacks; convert to "
                                    "float32 first (x.astype(hetero.float32)) or use a device with fp64")
    return x


def bits(x: Array) -> Array:
    """The elements of ``x`` (C-contiguous from the start of its buffer, else copied so) as a 1-D
    array of the unsigned type of their width: the sort kernels move elements as their bits."""
    if not (x.is_contiguous and x.offset == 0):
        x = x.copy()
    root = x.base if x.base is not None else x
    kind = np.dtype(f"u{x.dtype.itemsize}")
    return Array(root.buffer, x.device, (x.size,), kind, (1,), 0, root)


@dataclasses.dataclass(frozen=True)
class SortedRows:
    """The work buffers of a sort: ``keys`` (u64, rows of ``2**log_p`` slots), ``index`` (None
    when the indices are packed into the keys' low bits) and the spec of their kernels."""

    keys: Array
    index: Array | None
    log_p: int
    spec: kernels.Sort


def layout(dtype: np.dtype[Any], n: int, descending: bool, stage: str = "block") -> kernels.Sort:
    """The kernel spec of sorting rows of ``n`` elements of ``dtype``: packed for up to 32-bit
    elements (rows shorter than 2**31), pairs of u64 key and i32/i64 index else."""
    source = scalar_type(np.dtype(f"u{dtype.itemsize}"))
    if dtype.itemsize <= 4 and n < 2**31:
        index = None
    else:
        index = i32 if n < 2**31 - 1 else i64
    return kernels.Sort(stage, source, dtype.kind, index, descending)


def sorted_rows(rows: Array, descending: bool) -> SortedRows:
    """Sort each row of the 2-D ``rows`` (at least one row) on the device, as (key, index)
    pairs: slot ``i < n`` of row ``r`` holds the ``i``-th element of row ``r`` in sorted order."""
    count, n = rows.shape
    device = rows.device
    log_p = (n - 1).bit_length()
    total = count << log_p
    spec = layout(rows.dtype, n, descending)
    keys = empty((total,), dtypes.uint64, device=device)
    work: list[Any] = [keys]
    index = None
    if spec.index is not None:
        index = empty((total,), spec.index.dtype, device=device)
        work.append(index)
    B, W = kernels.BLOCK, kernels.GROUP
    blocks = -(-total // B)
    _kernel(spec, device).run((blocks * W,), [*work, bits(rows), n, total, log_p, min(log_p, kernels.LOG_BLOCK)], (W,))
    if log_p > kernels.LOG_BLOCK:
        local = _kernel(dataclasses.replace(spec, stage="local"), device)
        for s in range(kernels.LOG_BLOCK + 1, log_p + 1):
            sh = s - 1
            while sh >= kernels.LOG_BLOCK:  # the steps at distances 2**sh >= BLOCK, up to MAX_FUSED a launch
                fused = min(kernels.MAX_FUSED, sh - kernels.LOG_BLOCK + 1)
                merge = _kernel(dataclasses.replace(spec, stage="global", fused=fused), device)
                merge.run((total >> fused,), [*work, n, log_p, s, sh])
                sh -= fused
            local.run((blocks * W,), [*work, n, total, log_p, s], (W,))
    return SortedRows(keys, index, log_p, spec)


def _axis(x: Array, axis: int, what: str) -> int:
    if isinstance(axis, bool) or not hasattr(type(axis), "__index__"):
        raise TypeError(f"{what}(): axis must be an int, got {axis!r}")
    axis = operator.index(axis)
    if not -x.ndim <= axis < x.ndim:
        raise IndexError(f"{what}(): axis {axis} is out of bounds for a {x.ndim}-d array "
                         f"(valid: {-x.ndim} .. {x.ndim - 1})")
    return axis % x.ndim


def _host_sort(x: Array, axis: int, descending: bool, indices: bool) -> Array:
    """NumPy's stable sort of a host-memory array, on its own memory; descending as the
    generated kernels order it (equal elements, NaN included, in input order; NaN first)."""
    a = x._host()
    if indices:
        if descending:
            order = np.flip(np.argsort(np.flip(a, axis), axis=axis, kind="stable"), axis)
            result = np.subtract(a.shape[axis] - 1, order, dtype=np.int64)
        else:
            result = np.argsort(a, axis=axis, kind="stable").astype(np.int64, copy=False)
    elif descending:
        result = np.flip(np.sort(np.flip(a, axis), axis=axis, kind="stable"), axis)
    else:
        result = np.sort(a, axis=axis, kind="stable")
    return from_host(np.ascontiguousarray(result), x.device, copy=False)


def _rows(x: Array, axis: int, what: str) -> tuple[Array, int]:
    """``x`` with ``axis`` moved last, as a contiguous 2-D array of rows, and the normalised axis."""
    axis = _axis(x, axis, what)
    moved = moveaxis(x, axis, -1)
    if not (moved.is_contiguous and moved.offset == 0):
        moved = moved.copy()
    return moved.reshape((math.prod(moved.shape[:-1]), moved.shape[-1])), axis


def _sort(x: Any, what: str, axis: int, descending: bool, stable: bool, indices: bool) -> Array:
    x = checked(x, what)
    out_dtype = dtypes.int64 if indices else x.dtype
    if x.ndim == 0:
        if axis not in (-1, 0) or isinstance(axis, bool):
            raise IndexError(f"{what}(): axis {axis!r} is out of bounds for a 0-d array (use -1 or 0)")
        return zeros((), dtypes.int64, device=x.device) if indices else x.copy()
    if HOST_LIBRARY and x.device.runtime.host_memory and x.size:
        return _host_sort(x, _axis(x, axis, what), descending, indices)
    rows, axis = _rows(x, axis, what)
    count, n = rows.shape
    moved_shape = (*(s for a, s in enumerate(x.shape) if a != axis), x.shape[axis])
    if count == 0 or n == 0:
        return empty(x.shape, out_dtype, device=x.device)
    if n == 1:
        result = zeros(rows.shape, dtypes.int64, device=x.device) if indices else rows.copy()
    else:
        done = sorted_rows(rows, descending)
        work = [done.keys] if done.index is None else [done.keys, done.index]
        result = empty((count * n,), out_dtype, device=x.device)
        stage = "indices" if indices else "gather"
        args: list[Any] = [result] if indices else [bits(result), bits(rows)]
        _kernel(dataclasses.replace(done.spec, stage=stage), x.device).run(
            (count * n,), [*args, *work, n, count * n, done.log_p])
    result = result.reshape(moved_shape)
    if axis == x.ndim - 1:
        return result
    return moveaxis(result, -1, axis).copy()


def sort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Array:
    """A sorted copy of ``x`` along ``axis`` (the stable order always; NaN last ascending, first
    descending; see the module docstring)."""
    return _sort(x, "sort", axis, descending, stable, indices=False)


def argsort(x: Array, /, *, axis: int = -1, descending: bool = False, stable: bool = True) -> Array:
    """The int64 indices that sort ``x`` along ``axis`` (the stable order always)."""
    return _sort(x, "argsort", axis, descending, stable, indices=True)


__all__ = ["SortedRows", "argsort", "bits", "checked", "layout", "sort", "sorted_rows"]
