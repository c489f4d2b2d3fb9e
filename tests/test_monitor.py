"""The health monitor: health-change and Xid events from a registered fake backend, survival of
a raising backend, start/stop, and quarantine auto-release."""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from fakes.fake_device import FakeRuntime, fake_backend

import hetero
from hetero.core.device import HealthState
from hetero.fault import monitor, quarantine
from hetero.fault.event_bus import EventBus
from hetero.fault.monitor import HealthMonitor

FlakyRuntime = FakeRuntime  # devices flaky:0 and flaky:1, whose health and Xid events the tests set


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A private quarantine store (the monitor releases expired entries after each poll)."""
    monkeypatch.setenv("HETERO_STATE_DIR", str(tmp_path / "state"))
    hetero.reload_config()
    yield
    monitor.stop()
    monkeypatch.delenv("HETERO_STATE_DIR")
    hetero.reload_config()


@pytest.fixture
def flaky() -> Iterator[list[hetero.Device]]:
    """The two flaky devices, opened through the registry as a plugin's would be."""
    hetero.register_backend(fake_backend("flaky", count=2))
    try:
        yield [hetero.device("flaky:0"), hetero.device("flaky:1")]
    finally:
        monitor.stop()
        hetero.core.registry.reset()


def runtime(device: hetero.Device) -> FlakyRuntime:
    assert isinstance(device.runtime, FlakyRuntime)
    return device.runtime


def test_poll_publishes_health_on_first_sight_and_on_change_only(flaky: list[hetero.Device]) -> None:
    bus = EventBus()
    watcher = HealthMonitor(interval=1, devices=lambda: flaky, bus=bus)
    first = watcher.poll()
    assert [(e["device"], e["state"], e["previous"]) for e in first] == [("flaky:0", "ok", None), ("flaky:1", "ok", None)]
    assert watcher.poll() == []  # nothing changed
    runtime(flaky[1]).state = HealthState.UNHEALTHY
    changed = watcher.poll()
    assert [(e["kind"], e["device"], e["state"], e["previous"], e["reason"]) for e in changed] == [
        ("health", "flaky:1", "unhealthy", "ok", "simulated")]
    assert changed[0]["stable_id"] == "flaky-1" and changed[0]["backend"] == "flaky"
    assert watcher.state(flaky[1]) is HealthState.UNHEALTHY and watcher.state("flaky-0") is HealthState.OK


def test_backend_events_are_published_with_the_device(flaky: list[hetero.Device]) -> None:
    bus = EventBus()
    watcher = HealthMonitor(interval=1, devices=lambda: flaky, bus=bus)
    runtime(flaky[0]).pending = [{"kind": "xid", "xid": 79, "time": 1000.0}, {"kind": "xid", "xid": 45, "time": 1001.0}]
    events = [e for e in watcher.poll() if e["kind"] == "xid"]
    assert [(e["xid"], e["device"], e["stable_id"], e["time"]) for e in events] == [
        (79, "flaky:0", "flaky-0", 1000.0), (45, "flaky:0", "flaky-0", 1001.0)]
    assert [e["xid"] for e in bus.recent("xid")] == [79, 45]
    assert [e for e in watcher.poll() if e["kind"] == "xid"] == []  # drained once


def test_a_raising_backend_is_reported_and_the_others_still_polled(flaky: list[hetero.Device]) -> None:
    bus = EventBus()
    watcher = HealthMonitor(interval=1, devices=lambda: flaky, bus=bus)
    runtime(flaky[0]).raises = RuntimeError("NVML_ERROR_GPU_IS_LOST")
    events = watcher.poll()
    errors = [e for e in events if e["kind"] == "monitor-error"]
    assert len(errors) == 1 and errors[0]["device"] == "flaky:0" and "GPU_IS_LOST" in errors[0]["error"]
    assert [e["device"] for e in events if e["kind"] == "health"] == ["flaky:1"]


def test_the_cpu_is_always_healthy_without_asking() -> None:
    cpu = hetero.device("cpu")
    bus = EventBus()
    events = HealthMonitor(interval=1, devices=lambda: [cpu], bus=bus, release_quarantine=False).poll()
    assert [(e["device"], e["state"]) for e in events] == [("cpu", "ok")]


def test_default_devices_are_the_opened_ones(flaky: list[hetero.Device]) -> None:
    bus = EventBus()
    polled = {e["device"] for e in HealthMonitor(interval=1, bus=bus).poll()}
    assert {"flaky:0", "flaky:1"} <= polled
    assert polled <= {d.name for d in hetero.opened_devices()}


def test_background_thread_reports_a_change(flaky: list[hetero.Device]) -> None:
    with hetero.fault.events(kind="health") as sub:
        with monitor.start(interval=0.02) as running:
            assert monitor.running() and running.running and monitor.current() is running
            runtime(flaky[0]).state = HealthState.DEGRADED
            deadline = time.monotonic() + 10
            seen = None
            while time.monotonic() < deadline:
                event = sub.get(timeout=0.5)
                if event and event["device"] == "flaky:0" and event["state"] == "degraded":
                    seen = event
                    break
        assert seen is not None and seen["previous"] == "ok"
    assert not monitor.running()


def test_start_and_stop_are_idempotent() -> None:
    try:
        first = monitor.start(interval=30)
        assert monitor.start() is first and monitor.start(interval=30) is first
        other = monitor.start(interval=20)  # another interval: restarted at that interval
        assert other is not first and other.interval == 20 and not first.running
    finally:
        monitor.stop()
        monitor.stop()
    assert not monitor.running() and monitor.current() is None


def test_stop_returns_promptly_with_a_long_interval() -> None:
    watcher = HealthMonitor(interval=3600, devices=list, bus=EventBus()).start()
    deadline = time.monotonic() + 10
    while watcher.polls == 0 and time.monotonic() < deadline:  # now waiting out its hour
        time.sleep(0.01)
    watcher.stop(timeout=5)
    assert watcher.polls == 1 and not watcher.running  # woken, not left waiting


def test_bad_interval_is_rejected() -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        HealthMonitor(interval=0)


def test_poll_releases_expired_quarantine_of_healthy_devices(flaky: list[hetero.Device]) -> None:
    quarantine.add(flaky[0], "drill", "device-lost", ttl=0.01)
    quarantine.add(flaky[1], "drill", "device-lost", ttl=0.01)
    runtime(flaky[1]).state = HealthState.UNHEALTHY
    time.sleep(0.05)
    HealthMonitor(interval=1, devices=lambda: flaky, bus=EventBus()).poll()
    assert quarantine.quarantined_ids() == frozenset({"flaky-1"})
    runtime(flaky[1]).state = HealthState.OK
    HealthMonitor(interval=1, devices=lambda: flaky, bus=EventBus()).poll()
    assert quarantine.quarantined_ids() == frozenset()


def test_a_device_level_xid_quarantines_the_device_before_any_error(flaky: list[hetero.Device]) -> None:
    watcher = HealthMonitor(interval=1, devices=lambda: flaky, bus=EventBus())
    runtime(flaky[0]).pending = [{"kind": "xid", "xid": 31}, {"kind": "xid", "xid": 45}]  # application-level
    watcher.poll()
    assert quarantine.quarantined_ids() == frozenset()
    runtime(flaky[1]).pending = [{"kind": "xid", "xid": 95}, {"kind": "xid", "xid": 79}]
    watcher.poll()
    entry = quarantine.entry("flaky-1")
    assert entry is not None and entry.fault_class == "device-lost" and "Xid 79" in entry.reason
    assert entry.name == "flaky:1"


def test_the_xid_quarantine_can_be_turned_off(flaky: list[hetero.Device]) -> None:
    watcher = HealthMonitor(interval=1, devices=lambda: flaky, bus=EventBus(), quarantine_on_xid=False)
    runtime(flaky[0]).pending = [{"kind": "xid", "xid": 48}]
    assert [e["xid"] for e in watcher.poll() if e["kind"] == "xid"] == [48]
    assert quarantine.quarantined_ids() == frozenset()
