"""Numba-CUDA's streams and events for ``hetero.compat.cuda``: ``cuda.stream()``,
``default_stream()``, ``legacy_default_stream()``, ``per_thread_default_stream()``, ``cuda.event()``
and ``cuda.event_elapsed_time``, over :class:`hetero.Stream`.

A stream made by :func:`stream` is a :class:`hetero.Stream` on the current device: a real CUDA/HIP
stream on ``cuda``/``rocm``, the device's one in-order queue elsewhere (so code written with
streams runs unchanged, in order, without overlap). Launches ``kernel[blocks, threads, stream]``,
``to_device(a, stream)`` and ``copy_to_host(stream=s)`` queue their work on it. The default
streams are the device's default queue; the per-thread default stream is that queue too (it then
orders more work than CUDA's would, never less).

An event's :meth:`Event.record` waits until the stream has reached it and notes the host's clock:
:func:`Event.elapsed_time` is the time between two such moments, in milliseconds, as the host saw
them (never shorter than the work between them; a little longer, by the wait's own latency).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from typing import Any

import hetero
from hetero.kernels.stream import Stream as HeteroStream


class Stream:
    """A Numba-CUDA stream: a :class:`hetero.Stream`, or the device's default queue."""

    def __init__(self, stream: HeteroStream | None, kind: str = "stream") -> None:
        #: The hetero stream; None for a default stream (the device's default queue).
        self.stream = stream
        self.kind = kind
        self.device = stream.device if stream is not None else hetero.device()

    @property
    def handle(self) -> int:
        """The CUDA/HIP stream handle (0 for a default stream and on devices with one queue)."""
        return self.stream.handle if self.stream is not None else 0

    def __int__(self) -> int:
        return self.handle

    def synchronize(self) -> None:
        """Wait until the work queued on this stream has finished."""
        if self.stream is not None:
            self.stream.synchronize()
        else:
            self.device.synchronize()

    @contextlib.contextmanager
    def auto_synchronize(self) -> Iterator[Stream]:
        """``with s.auto_synchronize():`` synchronizes the stream when the block ends."""
        yield self
        self.synchronize()

    def add_callback(self, callback: Callable[[Stream, Any, Any], None], arg: Any = None) -> None:
        """Call ``callback(stream, None, arg)`` once the work queued so far has finished (here: now,
        after waiting for it, on the calling thread)."""
        self.synchronize()
        callback(self, None, arg)

    def async_done(self) -> Any:
        raise NotImplementedError("Stream.async_done(): hetero's compat streams have no asyncio futures; call "
                                  "stream.synchronize() (in a thread executor from async code)")

    def scope(self) -> contextlib.AbstractContextManager[Any]:
        """A ``with`` block in which hetero's launches and copies go to this stream."""
        return self.stream if self.stream is not None else contextlib.nullcontext()

    def __repr__(self) -> str:
        return f"<hetero.compat.cuda {self.kind} on {self.device.name}: {self.stream!r}>"


def stream() -> Stream:
    """A new stream on the current device."""
    return Stream(HeteroStream(hetero.device()))


def default_stream() -> Stream:
    """The current device's default stream."""
    return Stream(None, "default stream")


def legacy_default_stream() -> Stream:
    """CUDA's legacy default stream: the device's default queue, as :func:`default_stream`."""
    return Stream(None, "legacy default stream")


def per_thread_default_stream() -> Stream:
    """CUDA's per-thread default stream: hetero queues it on the device's default queue (see the module)."""
    return Stream(None, "per-thread default stream")


def external_stream(ptr: int) -> Stream:
    raise NotImplementedError(f"cuda.external_stream(0x{int(ptr):x}): hetero cannot adopt a stream made by another "
                              "library; launch inside `with hetero.Stream(device):`, or use cuda.stream()")


def scope(value: Any) -> contextlib.AbstractContextManager[Any]:
    """The ``with`` block that sends work to ``value``: a :class:`Stream`, a :class:`hetero.Stream`,
    or ``0``/None (the default stream). Anything else is a TypeError naming it."""
    if isinstance(value, Stream):
        return value.scope()
    if isinstance(value, HeteroStream):
        return value
    if value is None or (isinstance(value, int) and value == 0):
        return contextlib.nullcontext()
    raise TypeError(f"{value!r} is not a stream: pass one from cuda.stream() or cuda.default_stream(), or 0")


class Event:
    """Numba-CUDA's event (see the module docstring for what its time is)."""

    def __init__(self, timing: bool = True) -> None:
        self.timing = timing
        self._time: float | None = None
        self._stream: Stream | None = None

    def record(self, stream: Any = 0) -> None:
        """Mark this point of ``stream``: waits for it to get there, then notes the time."""
        target = stream if isinstance(stream, Stream) else default_stream() if not stream else None
        if target is None:
            raise TypeError(f"Event.record: {stream!r} is not a stream from cuda.stream() or cuda.default_stream()")
        target.synchronize()
        self._stream = target
        self._time = time.perf_counter()

    def synchronize(self) -> None:
        """Wait for the event (it completed when it was recorded)."""

    def wait(self, stream: Any = 0) -> None:
        """Make ``stream`` wait for the event (it completed when it was recorded: nothing to wait for)."""

    def query(self) -> bool:
        """Whether the event has completed: recorded events have."""
        return self._time is not None

    def elapsed_time(self, evtend: Event) -> float:
        """Milliseconds from this event to ``evtend``."""
        return event_elapsed_time(self, evtend)

    def __repr__(self) -> str:
        return f"<hetero.compat.cuda event {'recorded' if self._time is not None else 'not recorded'}>"


def event(timing: bool = True) -> Event:
    """A new event (``timing=False``: one that cannot be timed, as in CUDA)."""
    return Event(timing)


def event_elapsed_time(evtstart: Event, evtend: Event) -> float:
    """Milliseconds between two recorded events."""
    times: list[float] = []
    for name, ev in (("start", evtstart), ("end", evtend)):
        if not ev.timing:
            raise RuntimeError(f"event_elapsed_time: the {name} event was made with timing=False; make it with "
                               "cuda.event(timing=True)")
        if ev._time is None:
            raise RuntimeError(f"event_elapsed_time: the {name} event was never recorded; call event.record(stream)")
        times.append(ev._time)
    return (times[1] - times[0]) * 1000.0
