"""Entering ``hetero.guard`` starts the health monitor (interval from the config), so a health
change of a (fake, registered) device is published as a ``health`` event while guarded; the
last guard out stops the monitor it started, and leaves alone one the program started."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.fake_device import fake_backend

import hetero
from hetero.core.device import HealthState
from hetero.recovery import monitor as guard_monitor
from hetero.fault import monitor


@pytest.fixture
def sick(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[hetero.Device]:
    """The fake device, opened through the registry; a private state dir; a fast poll interval."""
    monkeypatch.setenv("HETERO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("HETERO_HEALTH_INTERVAL", "0.02")
    hetero.reload_config()
    monitor.stop()
    hetero.register_backend(fake_backend("sick"))
    try:
        yield hetero.device("sick:0")
    finally:
        monitor.stop()
        hetero.core.registry.reset()
        monkeypatch.delenv("HETERO_STATE_DIR")
        monkeypatch.delenv("HETERO_HEALTH_INTERVAL")
        hetero.reload_config()


def _wait_for(sub: Any, device: str, state: str, seconds: float = 20.0) -> dict[str, Any] | None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        event = sub.get(timeout=0.5)
        if event and event["device"] == device and event["state"] == state:
            return event
    return None


def test_entering_a_guard_starts_the_monitor_and_a_health_change_is_an_event(sick: hetero.Device) -> None:
    assert not monitor.running()
    with hetero.fault.events(kind="health") as sub:
        with hetero.guard(state={}, device="cpu", standby=False) as g:
            assert monitor.running() and guard_monitor.users() == 1
            assert monitor.current() is not None and monitor.current().interval == 0.02  # from the config
            assert _wait_for(sub, "sick:0", "ok") is not None  # first sight
            sick.runtime.state = HealthState.DEGRADED
            seen = _wait_for(sub, "sick:0", "degraded")
            g.run(lambda: None)
        assert seen is not None and seen["previous"] == "ok" and seen["reason"] == "simulated"
    assert not monitor.running() and guard_monitor.users() == 0  # the guard started it: the last one out stops it


def test_nested_guards_share_one_monitor_until_the_last_leaves(sick: hetero.Device) -> None:
    with hetero.guard(state={}, device="cpu", standby=False):
        first = monitor.current()
        with hetero.guard(state={}, device="cpu", standby=False):
            assert monitor.current() is first and guard_monitor.users() == 2
        assert monitor.running() and monitor.current() is first
    assert not monitor.running()


def test_guards_in_threads_keep_it_running_while_any_is_inside(sick: hetero.Device) -> None:
    inside, leave = threading.Event(), threading.Event()

    def other() -> None:
        with hetero.guard(state={}, device="cpu", standby=False):
            inside.set()
            leave.wait(30)

    thread = threading.Thread(target=other)
    thread.start()
    try:
        assert inside.wait(30)
        with hetero.guard(state={}, device="cpu", standby=False):
            pass
        assert monitor.running()  # the other thread's guard is still inside
    finally:
        leave.set()
        thread.join(30)
    assert not monitor.running()


def test_a_monitor_the_program_started_keeps_running(sick: hetero.Device) -> None:
    started = monitor.start(interval=0.05)
    with hetero.guard(state={}, device="cpu", standby=False):
        assert monitor.current() is started
    assert monitor.running() and monitor.current() is started
    monitor.stop()


def test_a_guard_that_fails_on_entry_does_not_leak_a_user() -> None:
    with pytest.raises(TypeError):
        hetero.guard(state=[1, 2])  # type: ignore[arg-type]
    assert guard_monitor.users() == 0 and not monitor.running()
