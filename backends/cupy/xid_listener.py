"""NVIDIA Xid events as they happen: a daemon thread registers the devices with NVML
(``nvmlDeviceRegisterEvents`` for critical Xid errors, and double-bit ECC where the GPU supports
it) and waits in ``nvmlEventSetWait``; each event becomes a dict in that device's queue::

    {"kind": "xid", "xid": 79, "device_uuid": "GPU-…", "time": <epoch seconds>}
    {"kind": "ecc", "error": "double_bit", "device_uuid": "GPU-…", "time": …}
    {"kind": "lost", "device_uuid": "GPU-…", "time": …, "reason": "…"}   (NVML: GPU is lost)

``CuPyRuntime.drain_health_events()`` takes its device's events; the fault layer consumes them.
The last Xid per device is also kept (not drained), so an error raised right after an Xid 79 is
classified as a lost device.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from typing import Any

from hetero.backends.cupy.nvml_health import Nvml, nvml_uuid

log = logging.getLogger("hetero.backends.nvml")

#: Events kept per device between drains (older ones are dropped, counted in ``dropped``).
QUEUE_LIMIT = 1024
#: How long one nvmlEventSetWait blocks, in milliseconds (also how fast ``stop()`` takes effect).
WAIT_MS = 500


class XidListener:
    """One thread watching NVML events of a set of devices (by UUID)."""

    def __init__(self, nvml: Nvml, uuids: list[str], wait_ms: int = WAIT_MS) -> None:
        self._nvml = nvml
        self.uuids = [nvml_uuid(u) for u in uuids]
        self._wait_ms = wait_ms
        self._queues: dict[str, collections.deque[dict[str, Any]]] = {
            u: collections.deque(maxlen=QUEUE_LIMIT) for u in self.uuids}
        self._last_xid: dict[str, tuple[int, float]] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: str | None = None  # why the listener is not (or no longer) listening
        self.dropped = 0

    # -- the consumer side ----------------------------------------------------------------
    def drain(self, uuid: str) -> list[dict[str, Any]]:
        """Events of device ``uuid`` since the last drain, oldest first."""
        queue = self._queues.get(nvml_uuid(uuid))
        if queue is None:
            return []
        with self._lock:
            events = list(queue)
            queue.clear()
        return events

    def last_xid(self, uuid: str, within: float = 60.0) -> int | None:
        """The last Xid seen on ``uuid`` if it came within ``within`` seconds, else None."""
        seen = self._last_xid.get(nvml_uuid(uuid))
        return seen[0] if seen is not None and time.time() - seen[1] <= within else None

    # -- the thread -------------------------------------------------------------------------
    def start(self) -> bool:
        """Start listening (idempotent); False, with :attr:`error` set, when NVML cannot."""
        with self._lock:
            if self._thread is not None:
                return self._thread.is_alive()
            self._thread = threading.Thread(target=self._run, name="hetero-nvml-xid", daemon=True)
            self._ready = threading.Event()
            self._thread.start()
        self._ready.wait(timeout=10)
        return self.error is None

    def stop(self, timeout: float = 5.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    def _put(self, uuid: str, event: dict[str, Any]) -> None:
        with self._lock:
            queue = self._queues.setdefault(uuid, collections.deque(maxlen=QUEUE_LIMIT))
            if len(queue) == queue.maxlen:
                self.dropped += 1
            queue.append(event)
            if event["kind"] == "xid":
                self._last_xid[uuid] = (int(event["xid"]), float(event["time"]))
        log.warning("NVML event on %s: %s", uuid, event)

    def _register(self, nvml: Any) -> Any:
        event_set = nvml.nvmlEventSetCreate()
        wanted = nvml.nvmlEventTypeXidCriticalError
        optional = getattr(nvml, "nvmlEventTypeDoubleBitEccError", 0)
        for uuid in self.uuids:
            handle = nvml.nvmlDeviceGetHandleByUUID(uuid)
            try:
                supported = int(nvml.nvmlDeviceGetSupportedEventTypes(handle))
            except nvml.NVMLError:
                supported = wanted
            nvml.nvmlDeviceRegisterEvents(handle, (wanted | optional) & supported or wanted, event_set)
        return event_set

    def _run(self) -> None:
        nvml = self._nvml.module()
        if nvml is None:
            self.error = self._nvml.error or "NVML is not available"
            self._ready.set()
            return
        try:
            event_set = self._register(nvml)
        except Exception as exc:  # noqa: BLE001 - NVMLError (not supported, no permission, lost): reported, not raised
            self.error = f"cannot register for NVML events: {exc}"
            self._ready.set()
            return
        self._ready.set()
        try:
            while not self._stop.is_set():
                if not self._wait_once(nvml, event_set):
                    break
        finally:
            try:
                nvml.nvmlEventSetFree(event_set)
            except Exception as exc:  # noqa: BLE001 - freeing after a lost GPU may fail too
                log.debug("nvmlEventSetFree failed: %s", exc)

    def _wait_once(self, nvml: Any, event_set: Any) -> bool:
        """Wait for one event and queue it; False when listening must stop."""
        try:
            data = nvml.nvmlEventSetWait(event_set, self._wait_ms)
        except nvml.NVMLError as exc:
            code = getattr(exc, "value", None)
            if code == nvml.NVML_ERROR_TIMEOUT:
                return True
            if code == nvml.NVML_ERROR_GPU_IS_LOST:
                now = time.time()
                for uuid in self.uuids:  # the set does not say which GPU; each is checked by health()
                    self._put(uuid, {"kind": "lost", "device_uuid": uuid, "time": now,
                                     "reason": "NVML event wait: GPU is lost"})
                self.error = "NVML reports a GPU lost; event listening stopped"
                return False
            self.error = f"NVML event wait failed: {exc}"
            log.warning("%s", self.error)
            return False
        uuid = _text(nvml.nvmlDeviceGetUUID(data.device))
        now = time.time()
        if int(data.eventType) & nvml.nvmlEventTypeXidCriticalError:
            self._put(uuid, {"kind": "xid", "xid": int(data.eventData), "device_uuid": uuid, "time": now})
        elif int(data.eventType) & getattr(nvml, "nvmlEventTypeDoubleBitEccError", 0):
            self._put(uuid, {"kind": "ecc", "error": "double_bit", "device_uuid": uuid, "time": now})
        return True


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


_LISTENERS: dict[int, XidListener] = {}
_LISTENERS_LOCK = threading.Lock()


def listener_for(nvml: Nvml, uuids: list[str]) -> XidListener:
    """The one listener of this NVML instance, started on first use over ``uuids``."""
    with _LISTENERS_LOCK:
        listener = _LISTENERS.get(id(nvml))
        if listener is None:
            listener = _LISTENERS[id(nvml)] = XidListener(nvml, uuids)
    listener.start()
    return listener
