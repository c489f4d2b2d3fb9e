"""Materialising views: the strided copy kernel's launches, writes into views, and kernels given views.

One generated kernel (:mod:`hetero.compiler.array_kernels.strided_copy`, built as IR, compiled through
:func:`hetero.compiler.build.pipeline.compile_function`) copies any view into any view of the same
shape on one device; it is launched as a ``@hetero.kernel`` is (:class:`hetero.kernels.kernel.Specialization`),
so launch counters, fault injection and the device's queue order see it. One kernel is built
per (rank, element width, device): the layout travels as i64 arguments, and neighbouring axes
that step evenly are merged first, so most copies run the rank-1 or rank-2 kernel.

A ``@hetero.kernel`` given a view it cannot take as it is (:class:`StagedSpecialization`) runs
on contiguous copies of those views; the array parameters the kernel writes (a ``Store`` or
an atomic in its IR; every view when it calls device functions) are copied back into the
views afterwards.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from hetero.core import fusion_state as _fusion
from hetero.core import tracing_state
from hetero.array.ndarray import Array, fill_scalar, transfer, asarray, empty
from hetero.array.components import components
from hetero.array.hooks import ASSIGN, COPY_INTO, STAGED_LAUNCH, VIEW_TO_NUMPY
from hetero.array.views import broadcast_to
from hetero.compiler.array_kernels import strided_copy
from hetero.compiler.ir.queries import written_arrays
from hetero.core.device import Device
from hetero.core.errors import ArrayError
from hetero.kernels.generated import GeneratedSpecialization
from hetero.kernels.kernel import Specialization
from hetero.kernels.launch_args import shares_memory
from hetero.core.runtime_parts import runs_kernels

#: A strided view is downloaded whole-range and strided on the host when the range it covers
#: is at most this many times its own size; else it is made contiguous on the device first.
HOST_STRIDE_RATIO = 2


_lock = threading.RLock()
_copies: dict[tuple[int, int, Device], GeneratedSpecialization] = {}


def _copy_kernel(rank: int, width: int, device: Device) -> GeneratedSpecialization:
    key = (rank, width, device)
    entry = _copies.get(key)
    if entry is None:
        with _lock:
            entry = _copies.get(key)
            if entry is None:
                entry = GeneratedSpecialization(strided_copy.build(rank, strided_copy.ELEMENT_BY_WIDTH[width]), device)
                _copies[key] = entry
    return entry


def merged_axes(shape: tuple[int, ...], *layouts: tuple[int, ...]) -> tuple[tuple[int, ...], list[tuple[int, ...]]]:
    """``shape`` and the strides of ``layouts`` with length-1 axes dropped and neighbouring axes
    merged where every layout steps evenly across them (the copy touches the same elements)."""
    axes = [(size, [strides[a] for strides in layouts]) for a, size in enumerate(shape) if size != 1]
    merged: list[tuple[int, list[int]]] = []
    for size, steps in axes:
        if merged and all(prev == step * size for prev, step in zip(merged[-1][1], steps, strict=True)):
            merged[-1] = (merged[-1][0] * size, steps)
        else:
            merged.append((size, steps))
    return tuple(size for size, _ in merged), [tuple(steps[i] for _, steps in merged) for i in range(len(layouts))]


def _flat(array: Array, width: int) -> Array:
    """The whole buffer under ``array`` as a 1-D array of ``width``-byte unsigned elements."""
    root = array.base if array.base is not None else array
    return Array(root.buffer, root.device, (root.nbytes // width,), np.dtype(f"u{width}"))


def launch_copy(dst: Array, src: Array) -> None:
    """``dst[...] = src`` on their one device, through the strided copy kernel (same shape and
    itemsize; ``src`` may have stride-0 axes). ``dst`` must not overlap ``src`` unless equal."""
    if dst.size == 0:
        return
    width = dst.dtype.itemsize
    if width not in strided_copy.ELEMENT_BY_WIDTH and dst.dtype.kind == "c":  # complex128: its float64 pairs
        launch_copy(components(dst), components(src))
        return
    shape, (dst_strides, src_strides) = merged_axes(dst.shape, dst.strides, src.strides)
    kernel = _copy_kernel(len(shape), width, dst.device)
    args = [_flat(dst, width), _flat(src, width), dst.size, *shape, dst.offset, *dst_strides, src.offset, *src_strides]
    kernel.run((dst.size,), args)


def copy_into(dst: Array, src: Array) -> None:
    """``dst[...] = src`` for arrays of one shape and dtype, on any devices, either a view."""
    if dst.shape != src.shape or dst.dtype != src.dtype:
        raise ArrayError(f"cannot copy {src.dtype}{list(src.shape)} into {dst.dtype}{list(dst.shape)}")
    if dst.size == 0:
        return
    if src.device is not dst.device:
        if src.device.runtime.host_memory:
            _write_host(dst, src._host())
            return
        src = src if src._owns_layout() else src.copy()  # contiguous on its own device first
        if dst._owns_layout():
            transfer(dst, src)
            return
        staged = empty(src.shape, src.dtype, device=dst.device)
        transfer(staged, src)
        src = staged
    if dst._owns_layout() and src._owns_layout():
        transfer(dst, src)
    elif runs_kernels(dst.device.runtime):
        launch_copy(dst, src)
    else:
        _write_host(dst, src._host())


def check_writeable(dst: Array) -> None:
    if any(stride == 0 and size > 1 for size, stride in zip(dst.shape, dst.strides, strict=True)):
        raise ArrayError(f"cannot write into a broadcast view (shape {dst.shape}, strides {dst.strides}): its "
                         "elements share memory; write into the array it was broadcast from, or copy() it first")


def assign(dst: Array, value: Any) -> None:
    """``dst[...] = value``: a Python or NumPy scalar, a NumPy array or a hetero array (any device),
    broadcast to ``dst``'s shape and converted to its dtype (as NumPy's assignment does)."""
    check_writeable(dst)
    _check_not_dropping_imag(dst, value)
    if isinstance(value, Array):
        if value.dtype != dst.dtype:
            value = _on(value._host().astype(dst.dtype), dst.device)
        elif value.device is not dst.device:
            value = value.to(dst.device)
        elif value.buffer is dst.buffer and value.size:  # overlapping views: read everything first
            value = value.copy()
        copy_into(dst, broadcast_to(value, dst.shape))
        return
    if isinstance(value, (np.ndarray, np.generic)):  # NumPy's own values convert as NumPy converts them
        host = np.asarray(value).astype(dst.dtype, copy=False)
    else:
        try:
            host = np.asarray(fill_scalar(value, dst.dtype) if np.ndim(value) == 0 else value, dtype=dst.dtype)
        except (TypeError, ValueError) as exc:
            raise ArrayError(f"cannot assign {type(value).__name__} to a {dst.dtype} array: {exc}") from None
    try:
        host = np.broadcast_to(host, dst.shape)
    except ValueError:
        raise ArrayError(f"cannot broadcast a value of shape {host.shape} to the view's shape {dst.shape}") from None
    _write_host(dst, host)


def _check_not_dropping_imag(dst: Array, value: Any) -> None:
    """A complex value written into a real array is a TypeError: NumPy drops the imaginary part
    with only a warning, a silent wrong answer here."""
    kind = getattr(value, "dtype", None)
    complex_value = isinstance(value, complex) or (kind is not None and np.dtype(kind).kind == "c")
    if complex_value and dst.dtype.kind != "c":
        raise TypeError(f"cannot write a complex value into a {dst.dtype} array: its imaginary part would be lost; "
                        "write hetero.xp.real(value) (value.real for NumPy), or make the array complex")


def _on(host: np.ndarray, device: Device) -> Array:
    return asarray(np.ascontiguousarray(host), device=device, copy=True)


def _write_host(dst: Array, host: np.ndarray) -> None:
    """``dst[...] = host`` (already of ``dst``'s shape and dtype; may be a broadcast NumPy view)."""
    if dst.size == 0:
        return
    runtime = dst.device.runtime
    if runtime.host_memory and not tracing_state.active():  # while tracing (hetero.jit): the device's path, a step
        _fusion.before_write((dst,))
        np.copyto(dst._host(), host)
    elif dst.is_contiguous:
        _fusion.before_write((dst,))
        runtime.upload(dst.buffer, np.ascontiguousarray(host), dst.offset * dst.dtype.itemsize)
    else:
        compact = _compact(host)  # a broadcast source travels un-broadcast and is strided by the kernel
        copy_into(dst, broadcast_to(_on(compact, dst.device), dst.shape))


def _compact(host: np.ndarray) -> np.ndarray:
    """``host`` with its stride-0 (broadcast) axes reduced to length 1."""
    index = tuple(slice(0, 1) if stride == 0 else slice(None) for stride in host.strides)
    return host[index]


def view_to_numpy(view: Array) -> np.ndarray:
    """``view.numpy()`` (see :meth:`hetero.Array.numpy`)."""
    if view.size == 0:
        return np.empty(view.shape, view.dtype)
    root = cast(Array, view.base)
    runtime = view.device.runtime
    itemsize = view.dtype.itemsize
    if runtime.host_memory:
        flat = cast(np.ndarray, runtime.native_view(root.buffer, (root.nbytes // itemsize,), view.dtype))
        strided = np.lib.stride_tricks.as_strided(flat[view.offset:], view.shape, view.byte_strides,
                                                  writeable=all(s or n == 1 for n, s in zip(view.shape, view.strides, strict=True)))
        return strided
    if view.is_contiguous:
        out = np.empty(view.shape, view.dtype)
        runtime.download(out, view.buffer, view.offset * itemsize)
        return out
    low, high = _extent(view)
    if high - low <= HOST_STRIDE_RATIO * view.size:
        covered = np.empty(high - low, view.dtype)
        runtime.download(covered, view.buffer, low * itemsize)
        return np.lib.stride_tricks.as_strided(covered[view.offset - low:], view.shape, view.byte_strides).copy()
    return view.copy()._host()


def _extent(view: Array) -> tuple[int, int]:
    """The elements ``[low, high)`` of the buffer a non-empty view reaches."""
    low = high = view.offset
    for size, stride in zip(view.shape, view.strides, strict=True):
        reach = (size - 1) * stride
        low, high = (low + reach, high) if reach < 0 else (low, high + reach)
    return low, high + 1


# -- kernels given views --------------------------------------------------------------------
class StagedSpecialization:
    """A launch whose view arguments run on contiguous copies (see the module docstring); the
    copies and the launch are ordinary launches on the device's queue."""

    def __init__(self, inner: Specialization, views: tuple[int, ...], written: tuple[int, ...]) -> None:
        self.inner = inner
        self.types = inner.types
        self.device = inner.device
        self.views = views  # argument positions that get a contiguous copy
        self.written = written  # of those, the ones copied back after the launch
        self.alias_positions: tuple[int, ...] = ()
        self.direct = False  # a launch copies its views first: never the launcher's fast path
        self._unaliased = self
        self.launches = inner.launches
        self.calls = 0

    def unaliased(self) -> StagedSpecialization:
        return self

    def check_sizes(self, global_size: tuple[int, ...], local_size: tuple[int, ...] | None) -> None:
        self.inner.check_sizes(global_size, local_size)

    def launch(self, global_size: tuple[int, ...], local_size: tuple[int, ...] | None, args: Sequence[Any]) -> None:
        staged = list(args)
        for position in self.views:
            staged[position] = args[position].copy()
        entry = self.inner
        if entry.alias_positions and shares_memory(staged, entry.alias_positions):
            entry = entry.unaliased()
        entry.launch(global_size, local_size, staged)
        for position in self.written:
            copy_into(args[position], staged[position])


def staged(kernel: Any, inner: Specialization, args: Sequence[Any]) -> StagedSpecialization:
    """The staged launch of ``kernel`` (a :class:`hetero.kernels.kernel.Kernel`) for ``args``, some of them views."""
    views = tuple(i for i, a in enumerate(args) if isinstance(a, Array) and a._layout < 0)
    written = written_arrays(kernel._lowered(inner.declared_types or inner.types))  # the kernel's own parameters
    names = kernel.param_names()
    back = tuple(i for i in views if written is None or names[i] in written)
    return StagedSpecialization(inner, views, back)


COPY_INTO.register(copy_into)
ASSIGN.register(assign)
VIEW_TO_NUMPY.register(view_to_numpy)
STAGED_LAUNCH.register(staged)

__all__ = ["GeneratedSpecialization", "StagedSpecialization", "assign", "copy_into", "launch_copy", "view_to_numpy",
           "written_arrays"]  # written_arrays: re-exported from hetero.compiler.ir.queries
