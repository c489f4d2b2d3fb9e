"""The health monitor: a background thread that polls every opened device's health.

Every ``health_interval`` seconds (config, ``HETERO_HEALTH_INTERVAL``) it asks each device
of the backends opened in this process (:func:`hetero.opened_devices`) for its health
(NVML on CUDA, amdsmi/sysfs on ROCm, an OpenCL query or probe kernel, the CPU is always
healthy) and for the events its backend saw (NVML Xid events), and publishes:

* ``health`` — ``{"device", "backend", "stable_id", "state", "reason", "previous"}`` when a
  device's state changes (and on its first poll);
* the backend's own events (``xid`` with ``"xid": 79`` …), with the device added;
* ``monitor-error`` — when a backend's health call raises (the monitor keeps going).

A device-level Xid (lost or degraded hardware: 48, 79, 95, ... in the taxonomy's Xid table)
quarantines the device at once, before any application error. After each poll the monitor
releases expired quarantine entries of devices that read ``ok``.
Start it with :func:`start` (idempotent; the returned monitor is a context manager that
stops it)::

    with hetero.fault.monitor.start(interval=1.0):
        train()
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

from hetero.core.config import get_config
from hetero.core.device import Device, Health, HealthState, Kind
from hetero.fault import event_bus

log = logging.getLogger("hetero.fault.monitor")


def device_health(device: Device) -> Health:
    """The device's health; the CPU backend's devices are always healthy (nothing to ask)."""
    if device.backend == "cpu" and device.kind is Kind.CPU:
        return Health(HealthState.OK)
    return device.health()


def drain_device_events(device: Device, bus: event_bus.EventBus | None = None) -> list[dict[str, Any]]:
    """Publish the events the device's backend saw since the last drain; returns them as published."""
    bus = bus or event_bus.BUS
    published = []
    for raw in device.runtime.drain_health_events():
        fields = dict(raw)
        kind = str(fields.pop("kind", "health-event"))
        fields.setdefault("device", device.name)
        fields.setdefault("backend", device.backend)
        fields.setdefault("stable_id", device.stable_id)
        published.append(bus.publish(kind, **fields))
    return published


class HealthMonitor:
    """Polls devices' health on a daemon thread. ``devices`` returns what to poll (default:
    every opened device); ``interval`` defaults to the config's ``health_interval``."""

    def __init__(self, interval: float | None = None, devices: Callable[[], Sequence[Device]] | None = None,
                 bus: event_bus.EventBus | None = None, release_quarantine: bool = True,
                 quarantine_on_xid: bool = True) -> None:
        if interval is not None and not interval > 0:
            raise ValueError(f"the health monitor's interval must be a positive number of seconds, got {interval!r}")
        self.interval = float(interval) if interval is not None else get_config().health_interval
        self._devices = devices
        self._bus = bus or event_bus.BUS
        self._release_quarantine = release_quarantine
        self._quarantine_on_xid = quarantine_on_xid
        self._states: dict[str, HealthState] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self.polls = 0

    # -- one poll -------------------------------------------------------------------------
    def _targets(self) -> Sequence[Device]:
        if self._devices is not None:
            return self._devices()
        from hetero.core.registry import opened_devices

        return opened_devices()

    def poll(self) -> list[dict[str, Any]]:
        """Poll every device once (synchronously); returns the events published."""
        published: list[dict[str, Any]] = []
        try:
            devices = list(self._targets())
        except Exception as exc:  # noqa: BLE001 - a backend's failure is reported, not raised
            published.append(self._bus.publish("monitor-error", operation="list devices",
                                               error=f"{type(exc).__name__}: {exc}"))
            return published
        for device in devices:
            published.extend(self._poll_device(device))
        if self._release_quarantine:
            try:
                from hetero.fault import quarantine

                quarantine.auto_release(devices)
            except Exception as exc:  # noqa: BLE001 - a backend's failure is reported, not raised
                published.append(self._bus.publish("monitor-error", operation="quarantine auto-release",
                                                   error=f"{type(exc).__name__}: {exc}"))
        self.polls += 1
        return published

    def _poll_device(self, device: Device) -> list[dict[str, Any]]:
        published: list[dict[str, Any]] = []
        ids = {"device": device.name, "backend": device.backend, "stable_id": device.stable_id}
        try:
            drained = drain_device_events(device, self._bus)
        except Exception as exc:  # noqa: BLE001 - a backend's failure is reported, not raised
            drained = []
            published.append(self._bus.publish("monitor-error", operation="drain_health_events",
                                               error=f"{type(exc).__name__}: {exc}", **ids))
        published.extend(drained)
        if self._quarantine_on_xid:
            published.extend(self._quarantine_for_xids(device, drained))
        try:
            health = device_health(device)
        except Exception as exc:  # noqa: BLE001 - a raising backend is reported, never fatal to the monitor
            published.append(self._bus.publish("monitor-error", operation="health",
                                               error=f"{type(exc).__name__}: {exc}", **ids))
            return published
        previous = self._states.get(device.stable_id)
        if health.state is not previous:
            self._states[device.stable_id] = health.state
            published.append(self._bus.publish("health", state=str(health.state), reason=health.reason,
                                               previous=None if previous is None else str(previous), **ids))
        return published

    def _quarantine_for_xids(self, device: Device, events: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Quarantine a device on a device-level Xid (lost or degraded hardware: 48, 79, 95...) even
        when no error has reached the application yet, so that no process places work there."""
        from hetero.fault.taxonomy import XIDS, FaultClass, XidRow

        worst: tuple[int, XidRow] | None = None
        injected = False  # an injected Xid quarantines within the drill only
        for event in events:
            number = event.get("xid") if event.get("kind") == "xid" else None
            row = XIDS.get(number) if isinstance(number, int) else None
            if row is None or not isinstance(number, int):
                continue
            hardware = row.fault_class in (FaultClass.DEVICE_LOST, FaultClass.DEGRADED)
            if hardware and (worst is None or row.fault_class is FaultClass.DEVICE_LOST):
                worst, injected = (number, row), bool(event.get("injected"))
        if worst is None:
            return []
        xid, row = worst
        try:
            from hetero.fault import quarantine

            quarantine.add(device, f"Xid {xid} {row.name} (NVIDIA: {row.nvidia_action})", row.fault_class,
                           name=device.name, injected=injected)
        except Exception as exc:  # noqa: BLE001 - a store problem is reported, the monitor keeps going
            return [self._bus.publish("monitor-error", operation="quarantine", device=device.name,
                                      stable_id=device.stable_id, error=f"{type(exc).__name__}: {exc}")]
        return []

    def state(self, device: Device | str) -> HealthState | None:
        """The last state seen for a device (by Device or stable id), or None before its first poll."""
        return self._states.get(device.stable_id if isinstance(device, Device) else device)

    # -- the thread -----------------------------------------------------------------------
    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.poll()
            except Exception:  # pragma: no cover - poll() catches what backends raise
                log.exception("health monitor poll failed")
            self._stop.wait(self.interval)

    def start(self) -> HealthMonitor:
        """Start polling (idempotent)."""
        with self._lock:
            if self._thread is None or not self._thread.is_alive():
                self._stop.clear()
                self._thread = threading.Thread(target=self._run, name="hetero-health-monitor", daemon=True)
                self._thread.start()
                log.info("health monitor started (every %.3g s)", self.interval)
        return self

    def stop(self, timeout: float | None = 10.0) -> None:
        """Stop polling and wait for the thread to finish (idempotent)."""
        with self._lock:
            thread, self._thread = self._thread, None
            self._stop.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            log.info("health monitor stopped")

    @property
    def running(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def __enter__(self) -> HealthMonitor:  # noqa: PYI034
        return self.start()

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


_monitor: HealthMonitor | None = None
_module_lock = threading.Lock()


def start(interval: float | None = None) -> HealthMonitor:
    """Start the process's health monitor (or return the running one: idempotent; a different
    ``interval`` restarts it at that interval). Use the result as a context manager to stop it."""
    global _monitor
    with _module_lock:
        if _monitor is not None and _monitor.running and (interval is None or interval == _monitor.interval):
            return _monitor
        if _monitor is not None:
            _monitor.stop()
        _monitor = HealthMonitor(interval)
        return _monitor.start()


def stop() -> None:
    """Stop the process's health monitor (idempotent)."""
    global _monitor
    with _module_lock:
        monitor, _monitor = _monitor, None
    if monitor is not None:
        monitor.stop()


def running() -> bool:
    """True while the process's health monitor runs."""
    return _monitor is not None and _monitor.running


def current() -> HealthMonitor | None:
    """The process's health monitor, or None when not started."""
    return _monitor
