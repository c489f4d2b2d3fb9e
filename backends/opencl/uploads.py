"""Host->device copies that do not wait for the device: small uploads on an OpenCL queue.

A blocking ``clEnqueueWriteBuffer`` returns once its copy is done, and on an in-order queue that is
once everything queued before it is done. A training step that uploads its batch first therefore
waited for the previous step's kernels, and for a guard snapshot's copies, before it could queue
anything: on Intel's OpenCL CPU runtime the digits step of ``benchmarks/guard_overhead.py`` ran
20-40% slower for it, and a snapshot cost the step after it the latency of its four copies.

Up to :data:`ASYNC_UPLOAD_MAX` bytes, when work is queued before it (on an idle queue a blocking
write waits for nothing else, and costs less), :meth:`OpenCLRuntime.upload` copies the source into a private
host array (so the caller may reuse its own at once, as ``upload`` promises) and queues the write
without waiting. PyOpenCL's event for that write keeps the private array alive, and dropping such an
event waits for its copy, so :class:`InFlight` keeps the events until they are known done: when the
queue has been waited for (:meth:`InFlight.settle`), or, beyond :data:`KEEP` of them, the oldest
ones that are done (beyond twice that, the oldest is waited for). A write that failed is raised
at the next of those, as the device's error, never dropped: the array it was to fill does not
hold the data.
"""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

#: Uploads up to this many bytes are queued without waiting (after a host copy: above this size
#: the copy costs more than the wait it saves, and a large upload's wait is a small part of it).
ASYNC_UPLOAD_MAX = 1 << 18
#: Events kept before the oldest done ones are let go (each holds a private copy of its source, so
#: at most 2 * KEEP * ASYNC_UPLOAD_MAX bytes are held: 16 MiB).
KEEP = 32


class InFlight:
    """The events of the writes queued without waiting on one queue, oldest first."""

    def __init__(self, cl: Any, flush: Callable[[], None]) -> None:
        self._events: collections.deque[Any] = collections.deque()
        self._lock = threading.Lock()  # threads may share a device's queue
        self._cl = cl  # PyOpenCL: its constants are read at the first write kept
        self._complete: int | None = None  # CL_COMPLETE
        self._status_info: Any = None  # CL_EVENT_COMMAND_EXECUTION_STATUS
        self._flush = flush  # the queue's clFlush: before waiting for a write, it must be on its way

    def __len__(self) -> int:
        return len(self._events)

    def add(self, event: Any, failed: Callable[[int], None]) -> None:
        """Keep ``event``; past :data:`KEEP`, let go of the oldest that are done, and past twice
        that wait for the oldest (``failed(status)`` for one that failed: it raises)."""
        if self._complete is None:
            self._complete = self._cl.command_execution_status.COMPLETE
            self._status_info = self._cl.event_info.COMMAND_EXECUTION_STATUS
        with self._lock:
            events = self._events
            events.append(event)
            while len(events) > KEEP:
                oldest = events[0]
                status = oldest.get_info(self._status_info)
                if status < 0:
                    failed(status)
                if status != self._complete:
                    if len(events) <= 2 * KEEP:
                        return  # in order: the ones after it are not done either
                    try:  # the host is far ahead of the device: wait for the oldest (bounds the copies held)
                        self._flush()
                        oldest.wait()
                    except Exception:  # noqa: BLE001 - its status says why, read next
                        pass
                    status = oldest.get_info(self._status_info)
                    if status < 0:
                        failed(status)
                events.popleft()

    def settle(self, failed: Callable[[int], None]) -> None:
        """After the queue has been waited for: check every write kept, then let them go.
        ``failed(status)`` for the first that failed (it raises; the others are let go too)."""
        with self._lock:
            events, self._events = self._events, collections.deque()
        for event in events:
            status = event.get_info(self._status_info)
            if status < 0:
                failed(status)


def private_copy(src: np.ndarray) -> np.ndarray | None:
    """A C-contiguous copy of ``src`` to queue a write from, or None: ``src`` is too large (or not
    an array), and is written with a blocking copy."""
    if type(src) is not np.ndarray or src.nbytes > ASYNC_UPLOAD_MAX:
        return None
    return np.array(src, copy=True, order="C")
