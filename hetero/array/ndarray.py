"""``hetero.Array``: an N-d array on any device, possibly a strided view of another, and the
functions that make and move them.

An array made by :func:`empty`, :func:`asarray` and the like owns a C-contiguous buffer of
one of the dtypes in :mod:`hetero.core.dtypes`. Basic indexing (``x[1:, ::-2, None, ...]``,
:mod:`hetero.array.index`) and the manipulations of :mod:`hetero.array.views` (``.T``,
``.mT``, ``reshape``, ``permute_dims``, ``broadcast_to``, ``expand_dims``, ``squeeze``,
``flip``, ``moveaxis``) return *views*: arrays with their own ``shape``, ``strides`` (in
elements; ``byte_strides`` in bytes, as NumPy's ``strides``) and element ``offset`` into the
buffer of their base array, which they keep alive. Writes through a view change the base.

What copies: ``copy()``, ``to(device)`` and ``asarray(view, copy=True)`` make contiguous
arrays; ``reshape`` copies when no strides can express the result (NumPy's rule). Copies of
views on one device run one generated kernel (the strided copy, :mod:`hetero.arraylib.copy`),
launched like any ``@hetero.kernel``. ``numpy()`` of a view is a strided NumPy view on
``cpu``; elsewhere a contiguous view is downloaded directly, a strided one by downloading
the range it covers and striding on the host when that range is at most twice the view's
size, else through the copy kernel. A kernel given a view the runtime cannot pass (not
contiguous, or at an offset on a non-host device) runs on a contiguous copy, and what the
kernel writes is copied back into the view after the launch.

Copies between devices go direct where a runtime can (host memory on either side), else
through a host staging buffer. On the ``cpu`` device, arrays (and views) share memory with
NumPy, DLPack consumers and torch without copies.

Arithmetic, comparisons and the array API's elementwise functions (``x + 1``, ``x == y``,
``hetero.sqrt(x)``) are the operators of :mod:`hetero.array.operators`, each a generated
kernel (:mod:`hetero.arraylib.elementwise`, promotion in :mod:`hetero.array.promotion`).

The default floating dtype is float32: every device has it, while fp64 is
optional on GPUs.
"""

from __future__ import annotations

import math
import numbers
import operator
import threading
from collections.abc import Sequence
from types import ModuleType
from typing import Any, cast

import numpy as np

from hetero.array import repr as _repr
from hetero.array import views as _views
from hetero.array.operators import OperatorMethods
from hetero.core import dtypes
from hetero.core import fusion_state as _fusion
from hetero.core import tracing_state
from hetero.array.hooks import ADVANCED_GET, ADVANCED_SET, ASSIGN, CAST, COPY_INTO, NAMESPACE, VIEW_TO_NUMPY
from hetero.array.host_values import HostValueMethods, provide_from_host
from hetero.array.index import index_layout
from hetero.array.reduction_methods import ReductionMethods
from hetero.core.device import Device
from hetero.core.errors import ArrayError
from hetero.core.launch_counts import wrote
from hetero.core.named_device import device as resolve_device
from hetero.scheduler import context as _tasks
from hetero.scheduler.usage import LEDGER
from hetero.core.types import ArrayType, scalar_type

_API_VERSIONS = ("2024.12", "2023.12", "2022.12", "2021.12")
_EMPTY = b""  # the buffer of every zero-byte array: runtimes never see it
# Byte offsets are signed 64-bit in every runtime (ptrdiff_t on the host, cl_long/ssize_t
# in kernels): an array past this could not be indexed, so it is refused before allocating.
MAX_BYTES = 2**63 - 1


def _advanced(key: Any) -> bool:
    """Whether an index key holds an integer array or a mask (NumPy's advanced indexing)."""
    parts = key if isinstance(key, tuple) else (key,)
    return any(isinstance(part, (Array, np.ndarray, list, bool, np.bool_)) for part in parts)


class Array(_views.ViewMethods, OperatorMethods, ReductionMethods, HostValueMethods):
    """An array on one device: C-contiguous when made with :func:`asarray`, :func:`empty`,
    :func:`zeros`, :func:`ones`, :func:`full`, :func:`arange` or :func:`from_dlpack`; a strided
    view of such an array when made by indexing or a view manipulation (see the module docstring).

    ``strides`` count *elements* (``byte_strides``: bytes, NumPy's convention); ``offset`` is the
    element where the view starts in its base's buffer; ``nbytes`` is the bytes of its elements."""

    __slots__ = ("_buf", "_device", "shape", "dtype", "nbytes", "_karg", "_outside", "_strides", "offset", "_base",
                 "_layout", "_key", "_pending", "_escaped", "__weakref__")

    def __init__(self, buffer: Any, device: Device, shape: tuple[int, ...], dtype: np.dtype[Any],
                 strides: tuple[int, ...] | None = None, offset: int = 0, base: Array | None = None) -> None:
        # Internal: users get arrays from the functions in this module.
        self._outside = 0  # bytes counted in LEDGER.outside for this array (made outside any task)
        self._buf = buffer  # None while _pending (a recorded elementwise result) is not yet computed
        self._pending: Any = None  # the recorded expression (hetero.arraylib.fusion.Lazy), until computed
        self._escaped = False  # (owners) whether memory is shared outside hetero: NumPy, DLPack, torch
        self._device = device
        self.shape = shape
        self.dtype = dtype
        self.nbytes = math.prod(shape) * dtype.itemsize  # Python ints: NumPy's int64 product wraps
        self._karg: Any = None  # what a kernel launch passes for this array, made on first launch
        self._strides = strides  # None: C-contiguous from the start of its own buffer (an owner)
        self.offset = offset  # in elements, into the buffer of ``_base``
        self._base = base  # the array owning the buffer (kept alive by this reference); None for an owner
        # The layout part of a kernel launch's dispatch key: the number of dimensions for arrays a
        # kernel can be given as they are, -1 - ndim for views it gets a contiguous copy of.
        self._layout = len(shape)
        #: This array's part of a launch's dispatch key (hetero.kernels.kernel.Launcher), made once.
        self._key = (dtype, self._layout, device)

    def __del__(self) -> None:
        if self._outside:  # a view of the buffer may outlive the array: placement then undercounts
            LEDGER.forget_outside(self._device.name, self._outside)

    def __class_getitem__(cls, dtype: Any) -> ArrayType:
        """``hetero.Array[hetero.f32]``: the type of an array parameter in a kernel signature."""
        return ArrayType(scalar_type(dtype))

    @property
    def _buffer(self) -> Any:
        """The buffer, computing a recorded (fused) value first."""
        if self._pending is not None:
            (_fusion.REALIZE.answer or _fusion.REALIZE.get())(self)
        return self._buf

    def _escape(self) -> None:
        """This array's memory is about to be seen outside hetero (a NumPy view, DLPack, torch),
        which may write it at any time: recorded work reading it is computed now, and work on
        it is never recorded again (:mod:`hetero.arraylib.fusion`)."""
        root = self._base if self._base is not None else self
        if not root._escaped:
            root._escaped = True
            _fusion.before_write((root,))

    def _kernel_arg(self) -> Any:
        if self._karg is None:
            buffer = self._buffer
            if self._base is not None and self._device.runtime.host_memory:  # a contiguous view: its bytes
                # (elsewhere a view a kernel takes as it is starts at the buffer's start: see _view)
                start = self.offset * self.dtype.itemsize
                buffer = buffer[start:start + self.nbytes]
            self._karg = self._device.runtime.kernel_arg(buffer, self.shape, self.dtype)
        return self._karg

    # -- layout ----------------------------------------------------------------------
    @property
    def strides(self) -> tuple[int, ...]:
        """Steps between neighbours along each axis, in elements (NumPy's are bytes: :attr:`byte_strides`)."""
        return self._strides if self._strides is not None else _views.contiguous_strides(self.shape)

    @property
    def byte_strides(self) -> tuple[int, ...]:
        """:attr:`strides` in bytes, as ``numpy.ndarray.strides`` counts them."""
        return tuple(s * self.dtype.itemsize for s in self.strides)

    @property
    def base(self) -> Array | None:
        """The array whose buffer this view shares (None for an array that owns its buffer)."""
        return self._base

    @property
    def is_contiguous(self) -> bool:
        """Whether the elements lie in C order without gaps (from :attr:`offset` on)."""
        if self._strides is None or self.size == 0:
            return True
        return all(stride == want for size, stride, want in
                   zip(self.shape, self._strides, _views.contiguous_strides(self.shape), strict=True) if size != 1)

    def _view(self, shape: tuple[int, ...], strides: tuple[int, ...], offset: int) -> Array:
        """A view of this array's buffer with this layout (strides and offset in elements)."""
        root = self._base if self._base is not None else self
        view = Array(self._buffer, self._device, shape, self.dtype, strides, offset, root)
        if view.size and not (view.is_contiguous and (offset == 0 or self._device.runtime.host_memory)):
            view._copied_by_kernels()
        return view

    def _copied_by_kernels(self) -> None:
        """Mark this view as one a kernel cannot take as it is (its launch gets a contiguous copy)."""
        self._layout = -1 - len(self.shape)
        self._key = (self.dtype, self._layout, self._device)

    def _owns_layout(self) -> bool:
        """Whether this array's elements are exactly its buffer, in C order (the fast copy paths)."""
        return self._base is None or (self.offset == 0 and self.nbytes == self._base.nbytes and self.is_contiguous)

    # -- indexing and views ------------------------------------------------------------
    def __getitem__(self, key: Any) -> Array:
        """Basic indexing (ints, slices, ``None``, ``...``): a view (see :mod:`hetero.array.index`);
        a key with integer arrays or boolean masks: a new array (:mod:`hetero.arraylib.advanced_index`)."""
        if _advanced(key):
            return cast(Array, ADVANCED_GET.call(self, key))
        return self._view(*index_layout(self.shape, self.strides, self.offset, key))

    def __setitem__(self, key: Any, value: Any) -> None:
        """Write ``value`` (a scalar, NumPy array or hetero array, broadcast to the view) into ``self[key]``;
        a key with integer arrays or masks scatters (:mod:`hetero.arraylib.advanced_index`)."""
        if _advanced(key):
            ADVANCED_SET.call(self, key, value)
            return
        ASSIGN.call(self[key], value)

    @property
    def device(self) -> Device:
        return self._device

    @property
    def buffer(self) -> Any:
        """The backend's buffer object: on OpenCL a pooled handle whose ``mem`` is the ``cl.Buffer``
        (:class:`hetero.backends.opencl.pool.PooledBuffer`), a CuPy ``MemoryPointer``, NumPy bytes.
        The memory stays this array's while the object lives."""
        return self._buffer

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        return self.nbytes // self.dtype.itemsize if self.dtype.itemsize else 0

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError("len() of a 0-d hetero.Array")
        return self.shape[0]

    # -- data out ------------------------------------------------------------------
    def numpy(self) -> np.ndarray:
        """The data as a NumPy array: a view sharing memory on ``cpu`` (strided for a strided
        view; read-only for a broadcast one), a host copy elsewhere. Waits for queued work that
        writes the array."""
        if self.nbytes and self._device.runtime.host_memory:
            self._escape()  # the caller may write through the view at any time
        return self._host()

    def _host(self) -> np.ndarray:
        """:meth:`numpy` for hetero's own reads and writes (the view does not escape)."""
        runtime = self._device.runtime
        if self._base is not None:
            return cast(np.ndarray, VIEW_TO_NUMPY.call(self))
        if runtime.host_memory:
            if self.nbytes == 0:
                return np.empty(self.shape, self.dtype)
            view = cast(np.ndarray, runtime.native_view(self._buffer, self.shape, self.dtype))
            return view
        out = np.empty(self.shape, self.dtype)
        if self.nbytes:
            runtime.download(out, self._buffer)
        return out

    def __array__(self, dtype: Any = None, copy: bool | None = None) -> np.ndarray:
        """NumPy 2's protocol (``np.asarray(x)``): the data on the host, shared with ``x`` on a
        device in host memory (``cpu``), a download elsewhere. ``copy=False`` is a ValueError where a
        copy is needed (another device, or another dtype); ``copy=True`` always gives a new array."""
        host_memory = self._device.runtime.host_memory
        converts = dtype is not None and np.dtype(dtype) != self.dtype
        if copy is False and (converts or not host_memory):
            why = f"converting {self.dtype} to {np.dtype(dtype)}" if converts else \
                f"its data is on {self._device.name}, not in host memory"
            raise ValueError(f"np.asarray(hetero.Array, copy=False) cannot avoid a copy: {why}; pass copy=None "
                             "to allow one, or call x.numpy()")
        data = self.numpy()
        if converts:
            return data.astype(dtype)
        return data.copy() if copy and host_memory else data

    def astype(self, dtype: Any, /, *, copy: bool = True, device: str | Device | None = None) -> Array:
        """:func:`hetero.astype`: this array as ``dtype``, converted by a generated kernel on its device."""
        return cast(Array, CAST.call(self, dtype, copy=copy, device=device))

    def to(self, device: str | Device) -> Array:
        """This array on ``device``: ``self`` when it is there already, else a copy."""
        target = resolve_device(device)
        if target is self._device:
            return self
        return self._copy_as(self.shape, target)

    def to_device(self, device: str | Device, /, *, stream: Any = None) -> Array:
        """The array API's name for :meth:`to` (``stream`` is accepted for the standard's sake:
        copies are ordered on the devices' own queues, and the result is ready when used)."""
        return self.to(device)

    def __array_namespace__(self, /, *, api_version: str | None = None) -> ModuleType:
        """hetero's array API namespace, :mod:`hetero.xp` (revision 2024.12; 2023.12 and 2022.12
        programs run on it too)."""
        if api_version is not None and api_version not in _API_VERSIONS:
            raise ValueError(f"hetero implements the array API {', '.join(_API_VERSIONS)}, not {api_version!r}")
        return cast(ModuleType, NAMESPACE.call())

    def copy(self) -> Array:
        """A new C-contiguous array with the same data on the same device."""
        return self._copy_as(self.shape, self._device)

    def _copy_as(self, shape: tuple[int, ...], device: Device) -> Array:
        """A new C-contiguous array of ``shape`` (of this size) on ``device``, holding this array's
        elements in C order: through the strided copy kernel when this is a strided view."""
        out = empty(shape, self.dtype, device=device)
        if self._owns_layout():
            transfer(out, self)
        else:
            COPY_INTO.call(out if shape == self.shape else out._view(self.shape, _views.contiguous_strides(self.shape), 0), self)
        return out

    # -- interop -------------------------------------------------------------------
    def _native(self, what: str) -> Any:
        self._buffer  # noqa: B018  (a recorded value is computed first)
        self._escape()
        if self._base is not None and self.nbytes:
            if not self._device.runtime.host_memory:
                raise BufferError(f"{what} of a view is supported for arrays in host memory only, not on "
                                  f"{self._device.name}; make it contiguous first: view.copy()")
            return self.numpy()
        view = self._device.runtime.native_view(self._buffer, self.shape, self.dtype) if self.nbytes else None
        if view is None and self.nbytes:
            raise BufferError(
                f"{what} is not supported for arrays on {self._device.name}; "
                f"copy to a device that supports it first, e.g. array.to('cpu')"
            )
        return view if view is not None else np.empty(self.shape, self.dtype)

    def __hetero_array__(self) -> Array:
        """This array: what a kernel that reads an array from outside its body (a global) passes."""
        return self

    def __dlpack__(self, *, stream: Any = None, max_version: Any = None, dl_device: Any = None, copy: Any = None) -> Any:
        if dl_device is not None and tuple(dl_device) == (1, 0) and not self._device.runtime.host_memory \
                and self._device.runtime.dlpack_device != (1, 0):
            # the consumer asks for host memory (kDLCPU): the standard lets a producer copy there
            if copy is False:
                raise BufferError(f"DLPack export of an array on {self._device.name} to the host (dl_device=(1, 0)) "
                                  "needs a copy, and copy=False forbids it; pass copy=None or copy=True")
            host = self.numpy()
            return host.__dlpack__(max_version=max_version) if max_version is not None else host.__dlpack__()
        native = self._native("DLPack export")
        kwargs = {k: v for k, v in (("stream", stream), ("max_version", max_version), ("dl_device", dl_device), ("copy", copy)) if v is not None}
        return native.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> tuple[int, int]:
        kind = self._device.runtime.dlpack_device
        if kind is None:
            raise BufferError(f"arrays on {self._device.name} have no DLPack device type")
        return kind

    @property
    def __cuda_array_interface__(self) -> dict[str, Any]:
        """The CUDA Array Interface (v3) of arrays on ``cuda`` devices (Numba, CuPy, torch read it);
        AttributeError elsewhere, so ``hasattr`` tells consumers whether it applies."""
        if self._base is not None and not self._device.runtime.host_memory:
            raise AttributeError(f"a view on {self._device.name} has no __cuda_array_interface__ yet; "
                                 "pass view.copy()")
        native = self._native("__cuda_array_interface__") if self._device.runtime.dlpack_device else None
        interface = getattr(native, "__cuda_array_interface__", None)
        if interface is None:
            raise AttributeError(f"arrays on {self._device.name} have no __cuda_array_interface__; use DLPack")
        return cast(dict[str, Any], interface)

    def torch(self) -> Any:
        """This array as a torch tensor sharing its memory (``cpu`` and ``cuda``/``rocm`` devices)."""
        from hetero.core.optional import require

        torch = require("torch", extra="torch", feature="Array.torch()")
        return torch.from_dlpack(self._native("torch interop"))

    def __repr__(self) -> str:
        """The values as NumPy's repr shows them: past NumPy's print threshold (1000 elements),
        summarised with ``...``, downloading only the elements shown."""
        return _repr.array_repr(self)


# -- making arrays ---------------------------------------------------------------------
def _shape(shape: int | Sequence[int]) -> tuple[int, ...]:
    try:
        dims = (operator.index(shape),) if not isinstance(shape, Sequence) else tuple(operator.index(s) for s in shape)
    except TypeError:
        raise ArrayError(f"shape must be an int or a sequence of ints, got {shape!r}") from None
    if any(d < 0 for d in dims):
        raise ArrayError(f"shape {dims} has a negative dimension")
    return dims


def byte_size(dims: tuple[int, ...], kind: np.dtype[Any]) -> int:
    """The bytes an array of ``dims`` and ``kind`` needs, refused past :data:`MAX_BYTES`."""
    count = math.prod(dims)  # exact: an int64 product wraps (6148914691236517206 x 3 float32 came out as 8 bytes)
    nbytes = count * kind.itemsize
    if nbytes > MAX_BYTES:
        raise ArrayError(f"shape {dims} of {kind} needs {count} elements = {nbytes} bytes, more than the "
                         f"2**63-1 bytes any device can address; use a smaller shape")
    return nbytes


def empty(shape: int | Sequence[int], dtype: Any = dtypes.float32, device: str | Device | None = None) -> Array:
    """An uninitialised array (float32, the default float, unless ``dtype`` says otherwise; None too)
    on ``device``: its bytes are whatever the memory held (a pooled buffer's last owner's data),
    never promised to be zero."""
    target = resolve_device(device)
    dims = _shape(shape)
    kind = dtypes.float32 if dtype is None else dtypes.as_dtype(dtype)
    nbytes = byte_size(dims, kind)
    task = _tasks.allocation_task()  # the scheduler task this is accounted to (None: no bookkeeping)
    if task is not None and nbytes:  # inside a scheduler task: quota checked before the vendor allocator, released on free
        return task.allocate(target, nbytes, lambda buffer: Array(buffer, target, dims, kind))
    if not nbytes:
        return Array(_EMPTY, target, dims, kind)
    made = Array(target.runtime.allocate(nbytes), target, dims, kind)
    # Counted per device even outside a task, so spread/binpack see it (no quota applies);
    # uncounted by Array.__del__, not a weakref.finalize: a plain allocation stays cheap.
    LEDGER.note_outside(target.name, nbytes)
    made._outside = nbytes
    return made


def give_buffer(made: Array) -> None:
    """Allocate the buffer of ``made``, an array recorded without one (:mod:`hetero.arraylib.fusion`),
    accounted as :func:`empty` accounts it (to the scheduler task current now)."""
    target, nbytes = made._device, made.nbytes
    task = _tasks.allocation_task()
    if task is not None and nbytes:
        def fill(buffer: Any) -> Array:
            made._buf = buffer
            return made
        task.allocate(target, nbytes, fill)
        return
    if not nbytes:
        made._buf = _EMPTY
        return
    made._buf = target.runtime.allocate(nbytes)
    LEDGER.note_outside(target.name, nbytes)
    made._outside = nbytes


def full(shape: int | Sequence[int], fill_value: Any, dtype: Any = None, device: str | Device | None = None) -> Array:
    """An array filled with ``fill_value``; the dtype follows the value (float32 for floats,
    int64 for ints). A value the dtype cannot hold (NaN in an integer dtype, 1<<70 in int32)
    is an :class:`ArrayError`, raised before anything is allocated."""
    if dtype is not None:
        kind = dtypes.as_dtype(dtype)
    elif isinstance(fill_value, numbers.Integral) and not isinstance(fill_value, (bool, np.bool_)):
        kind = dtypes.int64  # NumPy would make an object array of an int past int64
    else:
        kind = _python_dtype(np.asarray(fill_value))
    value = fill_scalar(fill_value, kind)
    out = empty(shape, kind, device)  # may be a reused buffer: every byte is written below
    if out.nbytes:
        runtime = out.device.runtime
        if runtime.host_memory and not tracing_state.active():  # while tracing: an upload, a step of the plan
            view = cast(np.ndarray, runtime.native_view(out.buffer, out.shape, kind))
            view.fill(value)
        else:
            runtime.upload(out.buffer, np.full(out.shape, value, dtype=kind))
    return out


def fill_scalar(value: Any, kind: np.dtype[Any]) -> Any:
    """``value`` as a scalar of ``kind``; a value ``kind`` cannot hold is an :class:`ArrayError`."""
    if isinstance(value, (bool, np.bool_)) or kind == dtypes.bool_:
        return kind.type(value)
    if kind.kind in "iu":
        if isinstance(value, numbers.Integral):
            number = int(value)
        else:
            try:
                real = float(value)
            except (TypeError, ValueError):
                raise ArrayError(f"fill_value {value!r} is not a real number; {kind} arrays hold integers") from None
            if not math.isfinite(real):
                raise ArrayError(f"cannot fill a {kind} array with {value!r}: integer dtypes have no NaN or infinity; "
                                 f"use a float dtype or a finite value")
            number = int(real)
        info = np.iinfo(kind)
        if not info.min <= number <= info.max:
            raise ArrayError(f"fill_value {value!r} does not fit in {kind} (range {info.min}..{info.max}); "
                             f"use a wider dtype such as int64, or a value in range")
        return kind.type(number)
    if kind.kind == "c":
        try:
            return kind.type(complex(value))
        except (TypeError, ValueError, OverflowError) as exc:
            raise ArrayError(f"cannot fill a {kind} array with fill_value {value!r}: {exc}") from None
    if isinstance(value, (complex, np.complexfloating)):
        raise ArrayError(f"cannot fill a {kind} array with the complex value {value!r}: a real dtype has no imaginary "
                         "part; use a complex dtype (hetero.complex64) or pass value.real")
    try:
        return kind.type(float(value))
    except (TypeError, ValueError, OverflowError) as exc:
        raise ArrayError(f"cannot fill a {kind} array with fill_value {value!r}: {exc}") from None


def zeros(shape: int | Sequence[int], dtype: Any = dtypes.float32, device: str | Device | None = None) -> Array:
    """Zeros of ``dtype`` (float32, the default float, when it is None)."""
    return full(shape, 0, dtypes.float32 if dtype is None else dtype, device)


def ones(shape: int | Sequence[int], dtype: Any = dtypes.float32, device: str | Device | None = None) -> Array:
    """Ones of ``dtype`` (float32, the default float, when it is None)."""
    return full(shape, 1, dtypes.float32 if dtype is None else dtype, device)


def arange(start: float, stop: float | None = None, step: float = 1, dtype: Any = None, device: str | Device | None = None) -> Array:
    """Evenly spaced values as ``numpy.arange``; float32 unless ``dtype`` or integer bounds say otherwise.
    A zero step, a bound that is not a finite number, or more elements than can be
    addressed is an :class:`ArrayError`."""
    if stop is None:
        start, stop = 0, start
    for name, bound in (("start", start), ("stop", stop), ("step", step)):
        if not isinstance(bound, numbers.Real):
            raise ArrayError(f"arange {name} must be a number, got {bound!r}")
        if not math.isfinite(bound):
            raise ArrayError(f"arange {name} must be finite, got {bound!r}")
    if step == 0:
        raise ArrayError("arange step must not be zero (it would never reach stop)")
    if all(isinstance(b, numbers.Integral) for b in (start, stop, step)):
        count = max(-((int(start) - int(stop)) // int(step)), 0)
    else:
        count = max(math.ceil((float(stop) - float(start)) / float(step)), 0)
    kind = dtypes.as_dtype(dtype) if dtype is not None else None
    byte_size((count,), np.dtype(np.float64))  # the host staging array is int64 or float64
    try:
        host = np.arange(start, stop, step)
    except (ValueError, OverflowError, MemoryError) as exc:
        raise ArrayError(f"arange({start}, {stop}, {step}) makes {count} elements, which host memory cannot stage: {exc}") from None
    kind = kind if kind is not None else _python_dtype(host)
    return from_host(host.astype(kind, copy=False), resolve_device(device), copy=True)


def _python_dtype(host: np.ndarray) -> np.dtype[Any]:
    # Python floats become float32 (not NumPy's float64), Python complex numbers complex64
    # (the standard's default complex dtype pairs with the default float): see the module docstring.
    if host.dtype == np.float64:
        return dtypes.float32
    if host.dtype == np.complex128:
        return dtypes.complex64
    return dtypes.as_dtype(host.dtype)


def asarray(obj: Any, dtype: Any = None, device: str | Device | None = None, copy: bool | None = None) -> Array:
    """An array from ``obj`` (a hetero.Array, NumPy array, nested sequence, scalar, or any
    DLPack-capable tensor such as torch's) on ``device`` (default: ``obj``'s device for
    arrays, else the configured default device).

    ``copy=None`` shares memory where it can (same device, matching dtype and layout);
    ``copy=False`` raises where it cannot; ``copy=True`` always copies.

    Without ``dtype``, Python bools, ints and floats (alone or in nested sequences, mixed as
    NumPy mixes them) give bool, int64, float32 and complex64 (the standard's defaults; float32 is
    hetero's default float, complex64 its complex partner); NumPy scalars and arrays keep their dtype. A hetero array given another
    ``dtype`` is converted on its device by the generated cast kernel (:func:`hetero.astype`).
    """
    kind = dtypes.as_dtype(dtype) if dtype is not None else None
    if isinstance(obj, Array):
        target = obj.device if device is None else resolve_device(device)
        if kind is not None and kind != obj.dtype:
            _refuse_copy(copy, f"converting {obj.dtype} to {kind}")
            return cast(Array, CAST.call(obj, kind, device=target))  # a generated kernel on obj's device
        if target is obj.device:
            return obj.copy() if copy else obj
        _refuse_copy(copy, f"moving from {obj.device.name} to {target.name}")
        return obj.to(target)
    target = resolve_device(device)
    if not isinstance(obj, np.ndarray) and hasattr(obj, "__dlpack_device__"):
        return from_dlpack_object(obj, target, kind, copy)
    if isinstance(obj, np.generic):  # a NumPy scalar keeps its dtype (Python floats become float32)
        host = np.asarray(obj)
    elif isinstance(obj, np.ndarray):
        host = obj
        if host.dtype == object:
            raise dtypes.UnsupportedDtypeError("object arrays are not supported; convert to a numeric dtype first")
    else:
        try:
            host = np.asarray(obj)
        except ValueError as exc:
            raise ArrayError(f"cannot make an array from {type(obj).__name__}: {exc} (ragged nested sequences are not supported)") from exc
        if host.dtype == object:
            raise ArrayError(f"cannot make an array from {type(obj).__name__}: elements are not numbers, or the nesting is ragged")
        if kind is None:
            kind = _python_dtype(host)
    if kind is not None and kind != host.dtype:
        _refuse_copy(copy, f"converting {host.dtype} to {kind}")
        _refuse_dropping_imag(host.dtype, kind)
        host = host.astype(kind)
        copy = True
    return from_host(host, target, copy)


def _refuse_dropping_imag(source: np.dtype[Any], target: np.dtype[Any]) -> None:
    # NumPy drops the imaginary part with only a warning: a silent wrong answer here
    if source.kind == "c" and target.kind != "c":
        raise TypeError(f"converting complex values ({source}) to {target} would drop their imaginary parts; "
                        f"take the real parts first (np.real(value)), or use a complex dtype")


def _refuse_copy(copy: bool | None, why: str) -> None:
    if copy is False:
        raise ArrayError(f"copy=False, but {why} needs a copy; pass copy=None to allow it")


def from_host(host: np.ndarray, target: Device, copy: bool | None) -> Array:
    kind = dtypes.as_dtype(host.dtype)
    runtime = target.runtime
    contiguous = host.flags.c_contiguous
    if runtime.host_memory and not copy and contiguous and host.flags.writeable and host.nbytes:
        shared = Array(runtime.wrap(host), target, host.shape, kind)
        shared._escaped = True  # the caller's NumPy array shares it
        return shared
    if copy is False:
        what = "a non-contiguous source" if not contiguous else (
            "a read-only source" if runtime.host_memory else f"moving host data to {target.name}")
        _refuse_copy(copy, what)
    out = empty(host.shape, kind, device=target)
    if out.nbytes:
        runtime.upload(out.buffer, np.ascontiguousarray(host))
    return out


provide_from_host(from_host)  # hetero.array.host_values rebuilds pickled arrays with it


def from_dlpack_object(obj: Any, target: Device, kind: np.dtype[Any] | None, copy: bool | None) -> Array:
    source = dlpack_owner(obj)
    if getattr(obj, "dtype", None) is not None:
        try:  # before DLPack: NumPy's importer answers a bfloat16 tensor with a bare RuntimeError
            dtypes.as_dtype(obj.dtype)
        except dtypes.UnsupportedDtypeError as exc:
            raise dtypes.UnsupportedDtypeError(f"cannot make a hetero array from this {type(obj).__name__}: {exc}") from None
    native = source.runtime.adopt(obj)
    if native is None:
        raise ArrayError(f"{source.name} cannot import {type(obj).__name__} through DLPack")
    if kind is not None and kind != native.dtype or not native.flags.c_contiguous or source is not target:
        why = (f"converting to {kind}" if kind is not None and kind != native.dtype
               else "a non-contiguous source" if not native.flags.c_contiguous
               else f"moving from {source.name} to {target.name}")
        _refuse_copy(copy, why)
        if source.runtime.host_memory or hasattr(native, "get"):
            host = native.get() if hasattr(native, "get") else np.asarray(native)
            if kind is not None:
                _refuse_dropping_imag(np.dtype(host.dtype), kind)
            return from_host(np.asarray(host, dtype=kind) if kind is not None else host, target, copy=True)
        raise ArrayError(f"cannot copy {type(obj).__name__} from {source.name}; move it to the host first")
    dtypes.as_dtype(native.dtype)
    array = Array(source.runtime.wrap(native) if native.nbytes else _EMPTY, source, tuple(native.shape), np.dtype(native.dtype))
    if copy:
        return array.copy()
    array._escaped = True  # the tensor it came from shares its memory
    return array


def dlpack_owner(obj: Any) -> Device:
    device_type, device_id = obj.__dlpack_device__()
    from hetero.core.registry import devices

    for candidate in devices():
        if candidate.runtime.dlpack_device == (int(device_type), int(device_id)):
            return candidate
    raise ArrayError(
        f"no hetero device holds DLPack device ({int(device_type)}, {int(device_id)}) of {type(obj).__name__}; "
        "its backend is unavailable or excluded"
    )


def from_dlpack(obj: Any) -> Array:
    """A zero-copy hetero.Array over a DLPack-capable object (torch/CuPy/NumPy) on its own device.
    Raises :class:`ArrayError` for sources hetero cannot view without a copy (non-contiguous)."""
    if not hasattr(obj, "__dlpack_device__"):
        raise ArrayError(f"{type(obj).__name__} does not support DLPack (no __dlpack_device__)")
    return from_dlpack_object(obj, dlpack_owner(obj), None, copy=False)


# -- moving data -----------------------------------------------------------------------
def copyto(dst: Array | np.ndarray, src: Array | np.ndarray) -> None:
    """Copy ``src`` into ``dst`` (same shape; either may be a host NumPy array), across
    any two devices. Returns once ``src`` may be reused when ``src`` is host memory and
    once ``dst`` holds the data when ``dst`` is host memory."""
    if type(dst) is Array and (dst._base is not None or type(src) is Array and src._base is not None):
        if type(src) is Array and (src.shape != dst.shape or src.dtype != dst.dtype):
            raise ArrayError(f"copyto: source {src.dtype}{list(src.shape)} does not match destination {dst.dtype}{list(dst.shape)}")
        if type(src) is np.ndarray:
            src = _conform(src, dst.shape, dst.dtype)
        ASSIGN.call(dst, src)
        return
    if type(dst) is np.ndarray and type(src) is Array and src._base is not None:
        if dst.shape != src.shape or dst.dtype != src.dtype or not dst.flags.writeable:
            raise ArrayError(f"copyto: destination must be a writeable {src.dtype}{list(src.shape)} array, "
                             f"got {dst.dtype}{list(dst.shape)}")
        np.copyto(dst, src.numpy())
        return
    if type(dst) is Array:
        if type(src) is np.ndarray:
            if src.dtype != dst.dtype or src.shape != dst.shape or not src.flags.c_contiguous:
                src = _conform(src, dst.shape, dst.dtype)
            if dst.nbytes:
                _fusion.before_write((dst,))
                dst._device.runtime.upload(dst._buffer, src)
                wrote(dst._device.name)
            return
        if type(src) is Array:
            if src.shape != dst.shape or src.dtype != dst.dtype:
                raise ArrayError(f"copyto: source {src.dtype}{list(src.shape)} does not match destination {dst.dtype}{list(dst.shape)}")
            transfer(dst, src)
            return
    elif type(dst) is np.ndarray and type(src) is Array:
        if dst.shape != src.shape or dst.dtype != src.dtype or not dst.flags.c_contiguous or not dst.flags.writeable:
            raise ArrayError(
                f"copyto: destination must be a writeable C-contiguous {src.dtype}{list(src.shape)} array, "
                f"got {dst.dtype}{list(dst.shape)}"
            )
        if src.nbytes:
            src._device.runtime.download(dst, src._buffer)
        return
    raise ArrayError(f"copyto takes hetero.Array and numpy.ndarray arguments, got {type(dst).__name__} and {type(src).__name__}")


def _conform(src: np.ndarray, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    if src.shape != shape:
        raise ArrayError(f"copyto: source shape {src.shape} does not match destination shape {shape}")
    if src.dtype != dtype and not np.can_cast(src.dtype, dtype, casting="same_kind"):
        raise ArrayError(f"copyto: cannot cast {src.dtype} to {dtype} safely; convert the source first")
    return np.ascontiguousarray(src, dtype=dtype)


STAGING_BYTES = 16 << 20  # copies between two non-host devices go through host memory in chunks of this size
_staging = threading.local()


def _staging_buffer(nbytes: int) -> np.ndarray:
    """A host buffer of ``min(nbytes, STAGING_BYTES)`` bytes, reused by this thread (its pages stay mapped)."""
    size = min(nbytes, STAGING_BYTES)
    buffer: np.ndarray | None = getattr(_staging, "buffer", None)
    if buffer is None or buffer.size < size:
        buffer = _staging.buffer = np.empty(size, dtype=np.uint8)
    return buffer[:size]


def transfer(dst: Array, src: Array) -> None:
    """Copy all bytes of ``src`` into ``dst`` (same nbytes), on whatever devices they are."""
    nbytes = src.nbytes
    if nbytes == 0:
        return
    source, target = src._device.runtime, dst._device.runtime
    wrote(dst._device.name)  # the guard's fingerprint of state on that device reads the count
    _fusion.before_write((dst,))  # recorded work reading dst computes before dst changes
    if source is target:
        source.copy(dst._buffer, src._buffer, nbytes)
    elif source.host_memory:
        target.upload(dst._buffer, src._buffer)
    elif target.host_memory:
        source.download(dst._buffer, src._buffer)
    else:
        staging = _staging_buffer(nbytes)
        for offset in range(0, nbytes, staging.size):
            chunk = staging[: min(staging.size, nbytes - offset)]
            source.download(chunk, src._buffer, offset)
            target.upload(dst._buffer, chunk, offset)
