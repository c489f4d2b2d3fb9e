"""Placement on this machine's devices: ``hetero.device("auto", policy=...)``,
``hetero.scheduler.place``, the quarantine and health it respects, the cached decision and
what invalidates it, holds taken inside tasks, and queued low-priority requests."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import hetero
from hetero.array import ndarray as hetero_array
from hetero.core.device import Health, HealthState
from hetero.scheduler import LEDGER, NoDeviceAvailable, explain, forget_decisions, place, placement, quota, task, usage
from hetero.scheduler.usage import Ledger

DEVICES = [d.name for d in hetero.devices()]


@pytest.fixture(autouse=True)
def fresh_decisions() -> Iterator[None]:
    forget_decisions()
    yield
    forget_decisions()


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private quarantine store for the test."""
    monkeypatch.setenv("HETERO_STATE_DIR", str(tmp_path))
    hetero.reload_config()
    forget_decisions()
    yield tmp_path
    monkeypatch.undo()
    hetero.reload_config()


@pytest.fixture
def counted_places(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    calls: list[str] = []
    real = placement.place

    def counting(*args: object, **kwargs: object) -> hetero.Device:
        device = real(*args, **kwargs)  # type: ignore[arg-type]
        calls.append(device.name)
        return device

    monkeypatch.setattr(placement, "place", counting)
    return calls


def test_auto_takes_the_first_device_in_configured_order() -> None:
    assert hetero.device("auto").name == DEVICES[0]
    assert hetero.device("auto", policy="first-fit") is hetero.devices()[0]
    assert place().name == DEVICES[0]


@pytest.fixture(autouse=True)
def private_ledger(monkeypatch: pytest.MonkeyPatch) -> Iterator[Ledger]:
    """Each test starts from a fresh usage table, read and written by every module that holds one:
    what earlier tests in this worker still hold (arrays not yet collected) must not decide a
    usage-ranked policy's choice (binpack chose opencl:0 over oneapi:0 in CI for that reason)."""
    ledger = Ledger()
    for module in (usage, placement, quota, hetero_array):
        monkeypatch.setattr(module, "LEDGER", ledger)
    monkeypatch.setitem(globals(), "LEDGER", ledger)
    forget_decisions()
    yield ledger
    forget_decisions()


def test_auto_with_a_request_and_a_policy(private_ledger: Ledger) -> None:
    assert hetero.device("auto", policy="spread", kinds=("cpu",)).name in DEVICES
    chosen = hetero.device("auto", policy="binpack", exclude=(DEVICES[0],))
    assert chosen.name == DEVICES[1]
    if len(DEVICES) > 2:
        private_ledger.note_outside(DEVICES[2], 1 << 20)
        forget_decisions()
        assert hetero.device("auto", policy="binpack", exclude=(DEVICES[0],)).name == DEVICES[2]
    with pytest.raises(NoDeviceAvailable) as caught:
        hetero.device("auto", memory="1000TiB")
    assert isinstance(caught.value, hetero.DeviceNotFoundError)
    for name in DEVICES:
        assert f"{name} needs 1000 TiB" in str(caught.value)


def test_request_arguments_with_a_named_device_are_refused() -> None:
    with pytest.raises(ValueError, match="they go with 'auto', not 'cpu'"):
        hetero.device("cpu", policy="spread")
    with pytest.raises(ValueError, match="unknown placement policy 'fastes'.*did you mean 'fastest'"):
        hetero.device("auto", policy="fastes")


def test_the_decision_is_remembered(counted_places: list[str]) -> None:
    first = hetero.device("auto")
    for _ in range(50):
        assert hetero.device("auto") is first
    assert counted_places == [first.name]
    hetero.device("auto", policy="spread")
    assert len(counted_places) == 2  # another policy is another decision


def test_quarantine_is_respected_at_once(state_dir: Path, counted_places: list[str]) -> None:
    quarantine = pytest.importorskip("hetero.fault.quarantine")
    first = hetero.device("auto")
    quarantine.add(first, "test: simulated Xid 79", "device-lost")
    try:
        moved = hetero.device("auto")  # no waiting: this process's quarantine is seen at once
        assert moved.name != first.name and moved.name == DEVICES[1]
        for policy in ("first-fit", "binpack", "spread", "fastest", "priority"):
            assert place(policy=policy).name != first.name
        text = str(explain())
        assert f"{first.name}" in text and "rejected: quarantined" in text
    finally:
        quarantine.release(first)
    assert hetero.device("auto") is first
    assert len(counted_places) == 3


def test_quarantine_from_another_process_is_seen_within_the_recheck(monkeypatch: pytest.MonkeyPatch) -> None:
    first = hetero.device("auto")
    monkeypatch.setattr(placement, "quarantined", lambda: frozenset({first.stable_id}))
    monkeypatch.setattr(placement, "QUARANTINE_RECHECK", 0.0)
    assert hetero.device("auto").name != first.name


def test_unhealthy_devices_are_never_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    first = hetero.devices()[0]
    monkeypatch.setattr(first.runtime, "health", lambda: Health(HealthState.UNHEALTHY, "probe kernel failed"))
    assert hetero.device("auto").name != first.name
    assert "rejected: unhealthy: probe kernel failed" in str(explain())


def test_a_device_whose_health_query_raises_is_not_chosen(monkeypatch: pytest.MonkeyPatch) -> None:
    first = hetero.devices()[0]

    def broken() -> Health:
        raise hetero.DeviceLostError("device fell off the bus", backend=first.backend, device=first.name)

    monkeypatch.setattr(first.runtime, "health", broken)
    assert place().name != first.name
    assert "rejected: unhealthy: health query raised DeviceLostError" in str(explain())


def test_a_device_going_unhealthy_is_noticed_after_the_health_interval(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETERO_HEALTH_INTERVAL", "0.05")
    hetero.reload_config()
    try:
        first = hetero.device("auto")
        monkeypatch.setattr(first.runtime, "health", lambda: Health(HealthState.UNHEALTHY, "gone"))
        time.sleep(0.1)  # the remembered decision expires: health is asked again
        assert hetero.device("auto").name != first.name
    finally:
        monkeypatch.undo()
        hetero.reload_config()


def test_usage_changes_re_decide_load_based_policies(counted_places: list[str]) -> None:
    before = hetero.device("auto", policy="spread")
    with task("fill"):
        data = hetero.empty(1 << 16, device=before)
        after = hetero.device("auto", policy="spread")
        assert after.name != before.name  # the first is now the most used
        assert hetero.device("auto", policy="binpack") is before
    del data
    assert hetero.device("auto", policy="first-fit").name == DEVICES[0]
    assert len(counted_places) == 4


def test_a_task_holds_the_devices_it_is_placed_on() -> None:
    with task("holder", priority="low") as holder:
        device = hetero.device("auto")
        load = LEDGER.load(device.name)
        assert (load.tasks, load.held_by, load.holders) == (1, "low", ("holder",))
        hetero.device("auto")  # a cached decision holds too, once
        assert LEDGER.load(device.name).tasks == 1
        assert holder.held == {device.name}
    assert LEDGER.load(device.name).tasks == 0 and not holder.held


def test_a_task_is_not_in_its_own_way(counted_places: list[str]) -> None:
    with task("steady", priority="normal"):
        for policy in ("spread", "priority"):
            first = hetero.device("auto", policy=policy)
            assert all(hetero.device("auto", policy=policy) is first for _ in range(5))
            assert place(policy=policy) is first


def test_high_priority_takes_a_device_held_by_low_and_signals_it() -> None:
    with contextlib.ExitStack() as stack:
        background = []
        for i, name in enumerate(DEVICES):  # one low task on each device
            background.append(stack.enter_context(task(f"background{i}", priority="low")))
            assert place(policy="priority").name == name
        with pytest.raises(NoDeviceAvailable) as caught, task("late", priority="low"):
            place(policy="priority")
        assert caught.value.queued
        with task("urgent", priority="high"):
            device = place(policy="priority")
        assert device.name == DEVICES[0]
        assert background[0].preempted.is_set() and not background[1].preempted.is_set()


def test_low_priority_requests_queue_until_a_device_frees() -> None:
    holding = threading.Event()
    release = threading.Event()

    def hold_everything() -> None:
        with contextlib.ExitStack() as stack:
            for i, _ in enumerate(DEVICES):
                stack.enter_context(task(f"resident{i}", priority="normal"))
                place(policy="priority")
            holding.set()
            release.wait(30)

    holder = threading.Thread(target=hold_everything)
    holder.start()
    assert holding.wait(30)
    try:
        with pytest.raises(NoDeviceAvailable) as caught:
            place(policy="priority", priority="low")
        assert caught.value.queued and "queued" in str(caught.value)
        timer = threading.Timer(0.2, release.set)
        timer.start()
        started = time.monotonic()
        device = place(policy="priority", priority="low", wait=30)
        assert device.name == DEVICES[0] and time.monotonic() - started < 30
    finally:
        release.set()
        holder.join()


def test_the_configured_policy_is_the_default(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETERO_POLICY", "spread")
    hetero.reload_config()
    try:
        assert explain().policy == "spread"
    finally:
        monkeypatch.undo()
        hetero.reload_config()
    assert explain().policy == "first-fit"
