"""Gathers and scatters of hetero arrays by integer index arrays: the array API's ``take`` and
``take_along_axis`` (2024.12), and the launches that integer-array and mask indexing
(:mod:`hetero.arraylib.advanced_index`) run.

Each is one generated kernel on the arrays' device (:mod:`hetero.compiler.array_kernels.gather`), launched as
a ``@hetero.kernel`` is, that reads ``x`` through its strides (any view) and the index arrays
through theirs (broadcast ones too). Index arrays of any integer dtype are converted to int64
on the device first (a uint64 one is checked to fit first: one more host read). A negative
index counts from the end, as in NumPy. The standard leaves out-of-range indices undefined;
hetero never reads or writes outside an array: the kernel skips such an element and records
it, and the host reads that record back once per launch (a wait for the device) and raises an
IndexError naming the value, the axis and its size. A scatter checks its indices first (a min
and a max reduction per index array), so one that raises has written nothing. Where a
scatter's indices repeat, which value lands is unspecified (the standard's rule).
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array, asarray, empty, zeros
from hetero.arraylib.cast import astype
from hetero.kernels.generated import GeneratedSpecialization, SpecializationCache
from hetero.arraylib.reductions import max as _max
from hetero.arraylib.reductions import min as _min
from hetero.compiler.array_kernels import gather as gather_ir
from hetero.compiler.array_kernels.strided_copy import ELEMENT_BY_WIDTH
from hetero.core.device import Device
from hetero.core.errors import ArrayError
from hetero.core.runtime_parts import runs_kernels


class Term(NamedTuple):
    """One index array of a gather: int64 ``array`` read at ``offset`` with ``strides`` per result
    axis (0 where it is broadcast), indexing an axis of length ``dim`` that steps ``step`` elements
    (``axis`` names it in errors)."""

    array: Array
    offset: int
    strides: tuple[int, ...]
    dim: int
    step: int
    axis: int


_kernels: SpecializationCache[gather_ir.Gather] = SpecializationCache(gather_ir.build)


def _kernel(spec: gather_ir.Gather, device: Device) -> GeneratedSpecialization:
    return _kernels.get(spec, device)


def checked(x: Any, what: str) -> Array:
    """``x`` if it is a hetero array on a device that runs kernels, else an error with the remedy."""
    if not isinstance(x, Array):
        raise TypeError(f"{what} takes a hetero.Array, got {type(x).__name__}; make one with hetero.asarray(...)")
    if not runs_kernels(x.device.runtime):
        raise ArrayError(f"{what} runs a generated kernel, and {x.device.name} runs no hetero kernels; "
                         "move the array to a device that does with x.to(...)")
    return x


def _whole(x: Array, dtype: np.dtype[Any]) -> Array:
    """The whole buffer under ``x`` as a 1-D array of ``dtype`` (kernels index it with the layout)."""
    root = _root(x)
    return Array(root.buffer, root.device, (root.nbytes // dtype.itemsize,), dtype)


def index_array(indices: Any, device: Device, what: str) -> Array:
    """``indices`` (a hetero integer array, or a NumPy array or nested list of ints) as an int64
    hetero array on ``device``; another dtype is an IndexError."""
    if isinstance(indices, Array):
        if indices.dtype.kind not in "iu":
            raise IndexError(f"{what}: index arrays must have an integer dtype, got {indices.dtype}; convert them "
                             "with indices.astype(hetero.int64)")
        if indices.device is not device:
            raise ArrayError(f"{what}: the indices are on {indices.device.name} and the array on {device.name}; move "
                             f"them first: indices.to({device.name!r})")
        if indices.dtype == dtypes.uint64 and indices.size:  # past int64's range it would wrap negative
            _fits_int64(int(_max(indices)._host()), what)
        return indices if indices.dtype == dtypes.int64 else astype(indices, dtypes.int64)
    host = np.asarray(indices)
    if host.dtype == np.uint64 and host.size:
        _fits_int64(int(host.max()), what)
    if host.dtype.kind not in "iu" and not (host.size == 0 and host.dtype.kind == "f"):  # [] is float64
        raise IndexError(f"{what}: index arrays must have an integer dtype, got {host.dtype}")
    try:
        host = host.astype(np.int64)
    except (TypeError, ValueError, OverflowError):
        raise IndexError(f"{what}: indices must be integers, got {indices!r}") from None
    return asarray(host, device=device)


def _fits_int64(largest: int, what: str) -> None:
    if largest > np.iinfo(np.int64).max:
        raise IndexError(f"{what}: index {largest} is out of bounds for any array (indices are int64 on the device)")


def broadcast_strides(x: Array, shape: tuple[int, ...]) -> tuple[int, ...]:
    """``x``'s strides broadcast (right-aligned) to ``shape``: 0 on added and stretched axes."""
    lead = len(shape) - x.ndim
    return (0,) * lead + tuple(0 if n == 1 and want != 1 else s
                               for n, s, want in zip(x.shape, x.strides, shape[lead:], strict=True))


def _launch(spec: gather_ir.Gather, dst: Array, dst_offset: int, dst_strides: tuple[int, ...], src: Array,
            src_offset: int, src_strides: tuple[int, ...], shape: tuple[int, ...], terms: Sequence[Term]) -> None:
    device = dst.device
    err = zeros((2,), dtypes.int64, device=device)
    width = dst.dtype.itemsize
    element = np.dtype(f"u{width}")
    args: list[Any] = [_whole(dst, element), _whole(src, element), err]
    args += [_whole(t.array, dtypes.int64) for t in terms]
    args += [math.prod(shape), *shape, dst_offset, *dst_strides, src_offset, *src_strides]
    for t in terms:
        args += [t.offset, *t.strides, t.dim, t.step]
    _kernel(spec, device).run((math.prod(shape),), args)
    which, value = (int(v) for v in err._host())  # the one host read: did any index fall outside?
    if which:
        bad = terms[which - 1]
        raise IndexError(f"index {value} is out of bounds for axis {bad.axis} with size {bad.dim}; indices must lie "
                         f"in [{-bad.dim}, {bad.dim})")


def gather(x: Array, shape: tuple[int, ...], strides: tuple[int, ...], offset: int, terms: Sequence[Term]) -> Array:
    """A new array of ``shape``: element ``c`` is ``x``'s buffer at ``offset + sum(c * strides)``
    plus each term's index times its step."""
    out = empty(shape, x.dtype, device=x.device)
    if out.size:
        spec = gather_ir.Gather(len(shape), len(terms), _element(x))
        _launch(spec, out, 0, out.strides, x, offset, strides, shape, terms)
    return out


def scatter(x: Array, shape: tuple[int, ...], strides: tuple[int, ...], offset: int, terms: Sequence[Term],
            values: Array) -> None:
    """The inverse of :func:`gather`: ``values`` (of ``x``'s dtype and device, broadcastable to
    ``shape``) written into ``x``'s buffer at those places."""
    if not math.prod(shape):
        return
    if values.buffer is x.buffer:  # overlapping: read everything first
        values = values.copy()
    # indices read from x itself (x[x[:2]] = v) are read before any write: from a copy of the
    # buffer they lie in, so their offsets and strides stay as they are
    terms = [t._replace(array=_root(t.array).copy()) if t.array.buffer is x.buffer else t for t in terms]
    _check_in_range(terms, shape)  # before any write: a refused scatter leaves x as it was
    spec = gather_ir.Gather(len(shape), len(terms), _element(x), scatter=True)
    _launch(spec, x, offset, strides, values, values.offset, broadcast_strides(values, shape), shape, terms)


def _check_in_range(terms: Sequence[Term], shape: tuple[int, ...]) -> None:
    """IndexError naming the first index of ``terms`` (as read over ``shape``) outside its axis:
    two reductions (and two host reads) per index array, the price of a scatter that writes all
    or nothing."""
    for t in terms:
        read = t.array._view(shape, t.strides, t.offset)  # the indices the scatter reads, as it reads them
        for value in (int(_min(read)), int(_max(read))):
            if not -t.dim <= value < t.dim:
                raise IndexError(f"index {value} is out of bounds for axis {t.axis} with size {t.dim}; indices must "
                                 f"lie in [{-t.dim}, {t.dim}) (nothing was written)")


def _root(x: Array) -> Array:
    return x.base if x.base is not None else x


def _element(x: Array) -> Any:
    return ELEMENT_BY_WIDTH[x.dtype.itemsize]


def _axis(what: str, axis: Any, ndim: int) -> int:
    try:
        index = operator.index(axis)
    except TypeError:
        raise TypeError(f"{what}: axis must be an int, got {axis!r}") from None
    if not -ndim <= index < ndim:
        raise IndexError(f"{what}: axis {index} is out of bounds for an array of {ndim} dimension(s); pass an axis "
                         f"in [{-ndim}, {ndim})")
    return index % ndim


def take(x: Array, indices: Any, /, *, axis: int | None = None) -> Array:
    """The elements of ``x`` at ``indices`` along ``axis`` (which may be left out for a 1-D ``x``):
    the result's shape is ``x.shape[:axis] + indices.shape + x.shape[axis + 1:]``."""
    x = checked(x, "hetero.take")
    if axis is None:
        if x.ndim != 1:
            raise ValueError(f"hetero.take of a {x.ndim}-d array needs axis=; give the axis to take along")
        axis = 0
    a = _axis("hetero.take", axis, x.ndim)
    idx = index_array(indices, x.device, "hetero.take")
    shape = x.shape[:a] + idx.shape + x.shape[a + 1:]
    rest = x.ndim - a - 1
    strides = x.strides[:a] + (0,) * idx.ndim + x.strides[a + 1:]
    term = Term(idx, idx.offset, (0,) * a + idx.strides + (0,) * rest, x.shape[a], x.strides[a], a)
    return gather(x, shape, strides, x.offset, [term])


def take_along_axis(x: Array, indices: Any, /, *, axis: int = -1) -> Array:
    """``x``'s elements picked along ``axis`` by ``indices`` (of ``x``'s number of dimensions,
    broadcast against ``x`` on the other axes), as ``numpy.take_along_axis``."""
    x = checked(x, "hetero.take_along_axis")
    idx = index_array(indices, x.device, "hetero.take_along_axis")
    if x.ndim == 0:
        raise ValueError("hetero.take_along_axis needs an array of at least one dimension, got a 0-d array")
    if idx.ndim != x.ndim:
        raise ValueError(f"hetero.take_along_axis: indices have {idx.ndim} dimension(s) and x {x.ndim}; they must "
                         "have the same number")
    a = _axis("hetero.take_along_axis", axis, x.ndim)
    shape = []
    for k, (n, m) in enumerate(zip(x.shape, idx.shape, strict=True)):
        if k == a:
            shape.append(m)
        elif n == m or 1 in (n, m):
            shape.append(m if n == 1 else n)
        else:
            raise ValueError(f"hetero.take_along_axis: x of shape {x.shape} and indices of shape {idx.shape} do not "
                             f"broadcast on axis {k}; they must agree (or be 1) on every axis but {a}")
    result = tuple(shape)
    x_strides = tuple(0 if k == a or (n == 1 and want != 1) else s
                      for k, (n, s, want) in enumerate(zip(x.shape, x.strides, result, strict=True)))
    term = Term(idx, idx.offset, broadcast_strides(idx, result), x.shape[a], x.strides[a], a)
    return gather(x, result, x_strides, x.offset, [term])


__all__ = ["Term", "broadcast_strides", "gather", "index_array", "scatter", "take", "take_along_axis"]
