"""``hetero.Stream``: an in-order queue of work on one device, for overlapping copies and kernels.

::

    with hetero.Stream("cuda:0") as s:      # inside: hetero.device() is cuda:0, and kernel
        saxpy[n](2.0, x, y)                  # launches and copies on cuda:0 go to stream s
    s.synchronize()                          # wait for what was queued on s

What it is on each backend, honestly:

- ``cuda`` / ``rocm``: a real CUDA/HIP stream (a CuPy ``Stream``), so work in two ``Stream``
  blocks may overlap. Work outside any ``Stream`` block goes to the device's default stream
  (the legacy default stream, shared with torch and CuPy). New streams are *blocking* streams:
  they order themselves after work already on that default stream, but NOT after each other, so
  results made in one stream are visible to another after :meth:`synchronize` or
  :meth:`wait_for`. Host copies (``numpy()``, ``asarray(host)``) still return only when the host
  side may be used, as everywhere in hetero.
- every other device (OpenCL, ``cpu``): an alias of the device's single in-order queue. Code
  written with streams runs there unchanged and correctly, without overlap; :attr:`native` is None.

Which it is follows the device's runtime: a :class:`~hetero.core.runtime_parts.StreamRuntime` has streams.

Leaving the ``with`` block does not wait (so two blocks can overlap); call :meth:`synchronize`.
"""

from __future__ import annotations

import threading
from types import TracebackType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # typing.Self is 3.11+; hetero supports 3.10
    from typing_extensions import Self

from hetero.core.device import Device
from hetero.core.named_device import device as resolve_device
from hetero.core.registry import use_device
from hetero.core.runtime_parts import StreamRuntime


class Stream:
    """An in-order queue of work on one device (see the module docstring for what it is per backend)."""

    def __init__(self, device: str | Device | None = None) -> None:
        self.device = resolve_device(device)
        runtime = self.device.runtime
        #: The device's streams; None where it has one queue.
        self._streams: StreamRuntime | None = runtime if isinstance(runtime, StreamRuntime) else None
        #: The vendor stream (a CuPy ``Stream`` on cuda/rocm); None where the device has one queue.
        self.native: Any = self._streams.new_stream() if self._streams is not None else None
        self._local = threading.local()  # per-thread stack of (stream token, device scope): re-entrant

    def _stack(self) -> list[tuple[Any, Any]]:
        if not hasattr(self._local, "stack"):
            self._local.stack = []
        return self._local.stack  # type: ignore[no-any-return]

    @property
    def handle(self) -> int:
        """The raw stream handle (``cudaStream_t`` as an int; 0 for the device's single queue)."""
        return int(getattr(self.native, "ptr", 0) or 0)

    def __cuda_stream__(self) -> tuple[int, int]:
        """The CUDA stream protocol (version 0, handle), for libraries that take any stream object."""
        if self.native is None:
            raise AttributeError(f"{self.device.name} has no CUDA stream")
        return (0, self.handle)

    def __enter__(self) -> Self:
        token = self._streams.push_stream(self.native) if self._streams is not None else None
        device_scope = use_device(self.device)
        device_scope.__enter__()
        self._stack().append((token, device_scope))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        token, device_scope = self._stack().pop()
        device_scope.__exit__(kind, error, trace)
        if self._streams is not None:
            self._streams.pop_stream(token)

    def synchronize(self) -> None:
        """Wait until everything queued on this stream has finished (the whole device where it has one queue)."""
        if self._streams is not None:
            self._streams.sync_stream(self.native)
        else:
            self.device.synchronize()

    def wait_for(self, other: Stream) -> None:
        """Make work queued on this stream from now on wait for what ``other`` has queued so far
        (on the device, without blocking the host, where both are streams of one device)."""
        if self._streams is not None and other.native is not None and other.device is self.device:
            self._streams.stream_wait(self.native, other.native)
        elif other is not self:
            other.synchronize()

    def __repr__(self) -> str:
        kind = f"stream 0x{self.handle:x}" if self.native is not None else "the device's in-order queue"
        return f"<hetero.Stream {self.device.name}: {kind}>"

