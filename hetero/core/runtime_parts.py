"""The parts a device runtime is made of, after tinygrad's ``Compiled(allocator, compiler, runtime)``.

:class:`hetero.core.plugin.DeviceRuntime` is all five together, and is what a backend subclasses:

- :class:`Allocator` — device memory: allocate, upload, download, copy, how much is used,
  whether buffers are host memory, and releasing memory kept for reuse.
- :class:`KernelLoader` — what kernels are compiled for, and loading one.
- :class:`KernelRunner` — enqueuing a loaded kernel, and waiting for the queue.
- :class:`HealthSource` — the device's health, its health events, and the errors its faults raise.
- :class:`Interop` — zero-copy exchange with the vendor's own arrays (DLPack, torch, CuPy).

Only the four data-moving methods of :class:`Allocator` must be written; every other method has
a default that says "this device does not do that" (no kernels, no health source, no interop).
hetero asks those questions through the parts (:func:`runs_kernels`), never by probing for
attributes.

Streams are a sixth part that only some runtimes have: :class:`StreamRuntime`, a protocol a
runtime declares by subclassing it next to ``DeviceRuntime``.
"""

from __future__ import annotations

import abc
import contextvars
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from hetero.core.device import DeviceInfo, Health, HealthState
from hetero.core.target import Target


class Allocator(abc.ABC):
    """Device memory. Buffers are opaque to hetero: whatever :meth:`allocate` returns is handed
    back to :meth:`upload`, :meth:`download`, :meth:`copy` and the kernel part. Zero-byte arrays
    never reach a runtime.

    There is no ``free``: hetero frees a buffer by dropping its last reference, so its memory goes
    back when the buffer object is garbage collected (NumPy arrays and CuPy ``MemoryPointer``\\ s
    do this themselves). A runtime that keeps freed memory for reuse hands out a handle whose
    finalizer returns the memory to its pool (the OpenCL runtime: :mod:`hetero.backends.opencl.pool`).
    """

    #: True when buffers are host-addressable flat ``uint8`` NumPy arrays, so other devices can
    #: copy to and from them directly, without staging.
    host_memory: bool = False

    @abc.abstractmethod
    def allocate(self, nbytes: int) -> Any:
        """Allocate ``nbytes`` (> 0) of device memory and return the buffer. Its contents are
        undefined (a reused buffer holds what was last written to it)."""

    @abc.abstractmethod
    def upload(self, dst: Any, src: np.ndarray, offset: int = 0) -> None:
        """Copy the C-contiguous host array ``src`` into ``dst`` at byte ``offset``; return
        when ``src`` may be reused."""

    @abc.abstractmethod
    def download(self, dst: np.ndarray, src: Any, offset: int = 0) -> None:
        """Copy ``dst.nbytes`` bytes of ``src`` from byte ``offset`` into the C-contiguous host
        array ``dst``; return when ``dst`` holds the data."""

    def download_many(self, copies: Sequence[tuple[np.ndarray, Any]], wait: bool = True) -> Callable[[bool], bool] | None:
        """:meth:`download` of each ``(dst, src)`` (whole buffers). With ``wait`` it returns when every
        ``dst`` holds its data (None). With ``wait=False`` a runtime whose copies queue may return
        at once, the copies queued behind the work already asked of the device (so they read the
        buffers as that work leaves them, whatever is queued later): it then returns ``done(block)``,
        which says whether they have arrived (with ``block``, after waiting for them) and raises the
        device's error if they failed; ``dst`` must not be read before it said True. A runtime whose copies queue overrides it to wait once for all of them (a
        snapshot of many small arrays then pays the device's round trip once, not per array), or
        not at all. This default copies one by one, at once, and returns None either way."""
        for dst, src in copies:
            self.download(dst, src)
        return None

    def alias_host(self, host: np.ndarray) -> Any | None:
        """A buffer of this device over the C-contiguous host array ``host`` itself, for kernels to
        read and write in place without a copy (a CPU device of an OpenCL runtime shares the host's
        memory); None where this device cannot, or not without a copy (the default: None). The
        buffer keeps ``host`` alive. After the work on it, :meth:`end_alias` makes what the device
        wrote visible in ``host``."""
        return None

    def end_alias(self, buffer: Any) -> None:
        """Wait for the work queued on an :meth:`alias_host` buffer and make what it wrote visible in
        the host array (a runtime that copied behind the scenes copies back here)."""

    @abc.abstractmethod
    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        """Copy ``nbytes`` between two buffers of this device (may return before it finishes)."""

    def memory_used(self) -> int | None:
        """Bytes of this device's memory in use now by everyone (this process, others, the
        driver), as the device reports it; None when the backend cannot tell. The placement
        policies count it, so memory allocated outside hetero's scheduler tasks is seen."""
        return None

    def close(self) -> None:
        """hetero forgets this device (:func:`hetero.core.registry.reset`): release the memory kept for
        reuse. Buffers still held stay valid; those freed later are released, not kept. The
        default keeps nothing, so has nothing to release."""


class KernelLoader(abc.ABC):
    """Loading kernels. A runtime without kernels returns None from :meth:`kernel_target`
    (the default), and hetero then never calls the rest (see :func:`runs_kernels`)."""

    def kernel_target(self) -> Target | None:
        """What this device's kernels are compiled for; None when it runs no hetero kernels."""
        return None

    def build_kernel(self, source: Any, artifact: bytes | None, path: Path) -> tuple[Any, bytes | None]:
        """Load a kernel. ``source`` has ``text``, ``entry`` and ``options`` (generated code);
        ``artifact`` is what this method returned before for the same source and device (from
        the cache), or None: then compile ``source`` with the vendor's compiler. ``path`` is a
        file path in the cache the runtime may use. Returns the loaded kernel and the artifact
        to cache (None when there is nothing new to cache). Raises KernelBuildError.

        On ``cuda`` and ``hip`` targets ``artifact`` may also be a prebuilt module image from a
        kernel bundle, built by nvcc or hipcc for this device's arch: a CUDA fatbin (cubin plus
        PTX), cubin or PTX, or an AMD code object (see
        :data:`hetero.compiler.build.toolchains.BINARY_KINDS`). The driver's module loader
        (``cuModuleLoadData``, ``hipModuleLoadData``) takes each of them as is."""
        raise NotImplementedError(f"{type(self).__name__} runs no kernels: its kernel_target() is None")

    def kernel_arg(self, buffer: Any, shape: tuple[int, ...], dtype: Any) -> Any:
        """What a kernel launch passes for an array: the buffer itself unless a runtime says otherwise."""
        return buffer

    def prepare_kernel(self, kernel: Any, values: Sequence[Any]) -> None:
        """Finish building loaded ``kernel`` for launches like ``values`` (host stand-ins: empty
        NumPy arrays of each array argument's element type and rank, each scalar's converted
        value) without running it. For runtimes whose compiler runs at the first launch (Numba
        on ``cpu``); the default does nothing. The guard's standby calls it in the background."""


class KernelRunner(abc.ABC):
    """Running loaded kernels on the device's queue, and waiting for that queue."""

    def launch(self, kernel: Any, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
               args: Sequence[Any]) -> None:
        """Enqueue ``kernel`` over ``global_size`` work-items in groups of ``local_size``
        (None: the runtime chooses); ``args`` follow the kernel's ABI. May return before it finishes."""
        raise NotImplementedError(f"{type(self).__name__} runs no kernels: its kernel_target() is None")

    def bound_launch(self, kernel: Any, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
                     args: Sequence[Any]) -> Callable[[Sequence[tuple[int, Any]]], None] | None:
        """A launch of ``kernel`` kept with its arguments set once (a launch plan replays it many
        times): the returned ``launch(changed)`` resets only the ``(position, value)`` pairs given
        (array buffers) and enqueues, as :meth:`launch` would with the full argument list. None
        where this runtime has no cheaper way than :meth:`launch` (the default)."""
        return None

    def call_library(self, name: str, call: Callable[[], Any]) -> Any:
        """Run ``call``, which enqueues a vendor library routine (``name``: a GEMM of CLBlast,
        cuBLAS through CuPy, NumPy's on the host) on this device's queue, as :meth:`launch`
        enqueues a kernel: fault injection's ``launch`` rules count it, and a runtime may translate
        its failures. The default calls it; runtimes with a queue to mark busy override this."""
        return call()

    def synchronize(self) -> None:
        """Wait for every queued operation on this device (kernels and device copies)."""


class HealthSource(abc.ABC):
    """How the device is doing, and what its faults look like."""

    info: DeviceInfo

    def health(self) -> Health:
        """The device's health now; UNKNOWN when the backend has no way to tell."""
        return Health(HealthState.UNKNOWN, "this backend reports no health")

    def drain_health_events(self) -> list[dict[str, Any]]:
        """Health events the backend saw since the last call (e.g. NVML Xid events: ``{"kind": "xid",
        "xid": 79, "time": <epoch seconds>, ...}``), oldest first; empty when it has no event source."""
        return []

    def note_error(self, error: BaseException) -> None:
        """Remember a device error that outlives the call it came from: after a context-corrupting
        or device-lost error, :meth:`health` should say ``unhealthy`` for the rest of the process.
        Backends call it on their own errors; ``hetero.guard`` on torch's and CuPy's errors raised
        from user code, read as hetero errors (:mod:`hetero.fault.foreign_errors`). This default
        remembers nothing: for a backend whose devices keep no broken state across calls."""

    def fault_error(self, kind: str, code: int | None = None, doing: str = "launch") -> BaseException:
        """The exception this backend's real path raises for a fault, built the same way (fault
        injection raises it, so classification and recovery run unchanged). ``kind`` is one of
        ``lost``, ``sticky``, ``oom``, ``degraded``, or ``code`` for an explicit vendor ``code``
        (``cuda:700``, ``opencl:-5``); ``doing`` names the operation. Backends override this to
        go through their own vendor-error translation."""
        from hetero.core.errors import ContextCorruptedError, DeviceDegradedError, DeviceError, DeviceLostError, DeviceOutOfMemoryError

        classes: dict[str, type[DeviceError]] = {
            "lost": DeviceLostError, "sticky": ContextCorruptedError, "oom": DeviceOutOfMemoryError,
            "degraded": DeviceDegradedError, "code": DeviceError,
        }
        if kind not in classes:
            raise ValueError(f"unknown fault kind {kind!r}; valid kinds: {', '.join(classes)}")
        return classes[kind](f"{doing} failed: {kind} fault", backend=self.info.backend, device=self.info.name,
                             code=code, code_name=None)


class Interop(abc.ABC):
    """Zero-copy exchange of buffers with the vendor's array objects (DLPack, torch, CuPy)."""

    #: ``(device_type, device_id)`` per the DLPack spec, or None when the device
    #: has no DLPack device type consumers understand.
    dlpack_device: tuple[int, int] | None = None

    def native_view(self, buffer: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any | None:
        """A zero-copy array object of the vendor's library over ``buffer`` (NumPy on the
        host, CuPy on CUDA), used for DLPack and torch interop; None when there is none."""
        return None

    def adopt(self, native: Any) -> Any | None:
        """The vendor array behind ``native`` (a DLPack producer, a CuPy array…), without copying;
        None when ``native`` is not one this device can adopt."""
        return None

    def wrap(self, native: Any) -> Any:
        """The buffer (as :meth:`Allocator.allocate` returns) over a C-contiguous native array from
        :meth:`adopt`."""
        raise NotImplementedError(f"{type(self).__name__} cannot wrap vendor arrays: its adopt() returns None")


@runtime_checkable
class StreamRuntime(Protocol):
    """Streams: several in-order queues on one device, so work in two of them may overlap.

    A runtime that has them declares it by subclassing this next to ``DeviceRuntime``
    (``class CuPyRuntime(DeviceRuntime, StreamRuntime)``); :class:`hetero.Stream` uses a device's
    streams only when its runtime is a ``StreamRuntime``, and is an alias of the device's single
    queue everywhere else. ``stream`` arguments are what :meth:`new_stream` returned.
    """

    @abc.abstractmethod
    def new_stream(self) -> Any:
        """A new stream on this device (its vendor object, e.g. a CuPy ``Stream``). It must be ordered
        after work already queued outside any stream, and need not be ordered after other streams."""

    @abc.abstractmethod
    def push_stream(self, stream: Any) -> contextvars.Token[Any]:
        """From now on, in this thread/context only, send this runtime's copies and launches to
        ``stream``. Returns the token :meth:`pop_stream` takes to undo it (calls nest; other threads
        keep sending their work where it went)."""

    @abc.abstractmethod
    def pop_stream(self, token: contextvars.Token[Any]) -> None:
        """Undo the :meth:`push_stream` that returned ``token``: work goes where it went before."""

    @abc.abstractmethod
    def sync_stream(self, stream: Any) -> None:
        """Return when everything queued on ``stream`` so far has finished (the host waits)."""

    @abc.abstractmethod
    def stream_wait(self, waiting: Any, other: Any) -> None:
        """Make work queued on ``waiting`` from now on wait for what ``other`` has queued so far,
        on the device, without blocking the host."""


def runs_kernels(runtime: KernelLoader) -> bool:
    """Whether hetero kernels run on this runtime (its :meth:`KernelLoader.kernel_target` is not None)."""
    return runtime.kernel_target() is not None
