"""The process's fault event bus: health changes, Xid events, quarantines, recoveries.

Anything may :func:`publish` an event (a dict with ``kind``, ``time`` (wall clock,
epoch seconds), ``monotonic`` and the caller's fields); consumers either read the
bounded recent history (:func:`recent`, which the classifier joins errors with) or
subscribe (:func:`events`) and iterate::

    with hetero.fault.events(kind="health", timeout=10) as sub:
        for event in sub:          # blocks for the next event; ends after 10 s of quiet
            print(event["device"], event["state"])

Every event is logged at INFO on the ``hetero.fault.events`` logger. Thread-safe.
"""

from __future__ import annotations

import collections
import logging
import queue
import threading
import time
from collections.abc import Iterable, Iterator
from types import TracebackType
from typing import Any

from hetero.scheduler.inputs import SUBSCRIBE

log = logging.getLogger("hetero.fault.events")

#: Events kept in the recent history (the oldest drop out first).
HISTORY_SIZE = 2048
#: Events a subscriber may fall behind by before the oldest unread ones are dropped.
SUBSCRIBER_BACKLOG = 10_000

Event = dict[str, Any]


def _kinds(kind: str | Iterable[str] | None) -> frozenset[str] | None:
    if kind is None:
        return None
    return frozenset([kind] if isinstance(kind, str) else kind)


class Subscription:
    """Events published after :func:`events` was called, in order. Iterate it (blocking
    for each next event, ending after ``timeout`` seconds without one, or when closed),
    or call :meth:`get`. Close it (or use it as a context manager) when done."""

    def __init__(self, bus: EventBus, kinds: frozenset[str] | None, timeout: float | None) -> None:
        self._bus = bus
        self._kinds = kinds
        self.timeout = timeout
        self._queue: queue.Queue[Event | None] = queue.Queue()
        self._closed = False
        #: Events dropped because this subscriber fell more than SUBSCRIBER_BACKLOG behind.
        self.dropped = 0

    def _offer(self, event: Event) -> None:
        if self._closed or (self._kinds is not None and event["kind"] not in self._kinds):
            return
        if self._queue.qsize() >= SUBSCRIBER_BACKLOG:
            try:
                self._queue.get_nowait()
                self.dropped += 1
            except queue.Empty:
                pass
        self._queue.put(event)

    def get(self, timeout: float | None = None) -> Event | None:
        """The next event, waiting up to ``timeout`` seconds (None: forever); None on timeout or
        once the subscription is closed and drained."""
        if self._closed and self._queue.empty():
            return None
        try:
            return self._queue.get(timeout=timeout)
        except queue.Empty:
            return None

    def pending(self) -> list[Event]:
        """Every event received and not read yet, without waiting."""
        found: list[Event] = []
        while True:
            try:
                event = self._queue.get_nowait()
            except queue.Empty:
                return found
            if event is not None:
                found.append(event)

    def __iter__(self) -> Iterator[Event]:
        while True:
            event = self.get(self.timeout)
            if event is None:
                return
            yield event

    def close(self) -> None:
        """Stop receiving events; an iteration in another thread ends."""
        if not self._closed:
            self._closed = True
            self._bus._unsubscribe(self)
            self._queue.put(None)  # wakes a blocked reader

    @property
    def closed(self) -> bool:
        return self._closed

    def __enter__(self) -> Subscription:  # noqa: PYI034
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()


class EventBus:
    """Publish/subscribe with a bounded recent history. Use the module functions for the
    process-wide bus; make your own instance for isolated tests."""

    def __init__(self, history: int = HISTORY_SIZE) -> None:
        self._lock = threading.Lock()
        self._history: collections.deque[Event] = collections.deque(maxlen=history)
        self._subscribers: list[Subscription] = []

    def publish(self, kind: str, **fields: Any) -> Event:
        """Record and deliver an event; returns it. ``time`` may be given (e.g. when the backend
        timestamped the event); ``monotonic`` is always the time of publishing."""
        if not isinstance(kind, str) or not kind:
            raise ValueError(f"an event kind must be a non-empty string, got {kind!r}")
        event: Event = {"kind": kind, "time": time.time(), "monotonic": time.monotonic()}
        event.update(fields)
        event["kind"] = kind
        with self._lock:
            self._history.append(event)
            subscribers = list(self._subscribers)
        for subscriber in subscribers:
            subscriber._offer(event)
        if log.isEnabledFor(logging.INFO):
            details = " ".join(f"{k}={v}" for k, v in event.items() if k not in ("kind", "time", "monotonic"))
            log.info("event %s %s", kind, details)
        return event

    def events(self, kind: str | Iterable[str] | None = None, timeout: float | None = None) -> Subscription:
        """Subscribe to events published from now on, of one kind, several, or all (None)."""
        subscription = Subscription(self, _kinds(kind), timeout)
        with self._lock:
            self._subscribers.append(subscription)
        return subscription

    def recent(self, kind: str | Iterable[str] | None = None, since: float | None = None,
               within: float | None = None) -> list[Event]:
        """Events from the recent history, oldest first: of ``kind`` (one, several, or any),
        published at or after wall-clock time ``since`` (``time.time()`` seconds, compared with
        each event's ``time``), and/or in the last ``within`` seconds (monotonic clock)."""
        kinds = _kinds(kind)
        horizon = None if within is None else time.monotonic() - within
        with self._lock:
            history = list(self._history)
        return [event for event in history
                if (kinds is None or event["kind"] in kinds)
                and (since is None or event["time"] >= since)
                and (horizon is None or event["monotonic"] >= horizon)]

    def clear(self) -> None:
        """Forget the recent history (subscriptions stay open)."""
        with self._lock:
            self._history.clear()

    def _unsubscribe(self, subscription: Subscription) -> None:
        with self._lock:
            if subscription in self._subscribers:
                self._subscribers.remove(subscription)


BUS = EventBus()


def publish(kind: str, **fields: Any) -> Event:
    """Publish an event on the process-wide bus (see :meth:`EventBus.publish`)."""
    return BUS.publish(kind, **fields)


def events(kind: str | Iterable[str] | None = None, timeout: float | None = None) -> Subscription:
    """Subscribe to the process-wide bus (see :class:`Subscription`)."""
    return BUS.events(kind, timeout)


def recent(kind: str | Iterable[str] | None = None, since: float | None = None,
           within: float | None = None) -> list[Event]:
    """Recent events of the process-wide bus (see :meth:`EventBus.recent`)."""
    return BUS.recent(kind, since, within)


SUBSCRIBE.register(events)  # the scheduler's "auto" cache listens for quarantine changes (see hetero.core.hooks)
