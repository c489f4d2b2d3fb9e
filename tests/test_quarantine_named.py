"""A device the user names that is quarantined (by a real fault or ``hetero quarantine add``) is
refused with :class:`hetero.DeviceQuarantinedError`, which says why, for how long and how to end
it, unless the user allows it; ``"auto"`` and hetero's own choices keep avoiding it, and a
drill's quarantine never blocks a name. Every test uses a private state dir."""

from __future__ import annotations

import math
import pickle
import time
from pathlib import Path

import numpy as np
import pytest
from conftest import run_python

import hetero
from hetero.core import registry
from hetero.fault import quarantine

pytestmark = pytest.mark.usefixtures("state_dir")


def _quarantine(device: hetero.Device, ttl: float = 600) -> None:
    quarantine.add(device, "DeviceLostError: oneapi:0: lost in a test [CL_DEVICE_NOT_AVAILABLE]", "device-lost", ttl=ttl)


def test_a_named_quarantined_device_is_refused_with_the_reason_and_the_remedy(device: hetero.Device) -> None:
    _quarantine(device)
    with pytest.raises(hetero.DeviceQuarantinedError) as caught:
        hetero.device(device.name)
    error = caught.value
    text = str(error)
    assert device.name in text and "device-lost" in text and "lost in a test" in text
    assert "min left" in text and f"hetero quarantine release {device.name}" in text
    assert "allow_quarantined=True" in text and "HETERO_ALLOW_QUARANTINED=1" in text
    assert error.device == device.name and error.fault_class == "device-lost" and error.expires is not None
    assert isinstance(error, hetero.HeteroError) and not isinstance(error, hetero.DeviceError)  # not a fault to recover
    assert str(pickle.loads(pickle.dumps(error))) == text
    for name_it in (lambda: hetero.asarray([1.0], device=device.name), lambda: hetero.zeros(2, device=device.name),
                    lambda: hetero.asarray([1.0], device=hetero.devices()[0]).to(device.name),
                    lambda: hetero.xp.arange(3, device=device.name), lambda: hetero.use_device(device.name).__enter__()):
        with pytest.raises(hetero.DeviceQuarantinedError):
            name_it()


def test_the_user_may_allow_it_by_call_or_by_configuration(device: hetero.Device,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    _quarantine(device)
    assert hetero.device(device.name, allow_quarantined=True) is device
    assert hetero.asarray([1.0], device=device).device is device  # a Device already held is not checked again
    monkeypatch.setenv("HETERO_ALLOW_QUARANTINED", "1")
    hetero.reload_config()
    try:
        assert hetero.get_config().allow_quarantined
        assert hetero.device(device.name) is device
        assert hetero.asarray(np.arange(3), device=device.name).tolist() == [0, 1, 2]
    finally:
        monkeypatch.delenv("HETERO_ALLOW_QUARANTINED")
        hetero.reload_config()
    with pytest.raises(hetero.DeviceQuarantinedError):
        hetero.device(device.name)


def test_a_release_ends_the_refusal_and_a_backend_name_is_checked_too() -> None:
    cpu = hetero.device("cpu")
    _quarantine(cpu, ttl=math.inf)
    with pytest.raises(hetero.DeviceQuarantinedError, match="until released by hand"):
        hetero.device("CPU ")  # the backend's name, spelt loosely: the same device
    assert quarantine.release("cpu")
    assert hetero.device("cpu") is cpu


def test_auto_and_hetero_own_lookups_are_unchanged() -> None:
    devices = hetero.devices()
    first = hetero.device("auto")
    _quarantine(first)
    if len(devices) > 1:
        assert hetero.device("auto") is not first  # auto keeps avoiding it
        assert hetero.device() is not first
    # hetero's floors that choose among devices themselves (hetero-run's --devices, pools, the guard's
    # candidates) look names up in the registry, which finds a quarantined device
    assert registry.device(first.name) is first


def test_an_expired_entry_is_released_when_the_device_is_healthy() -> None:
    cpu = hetero.device("cpu")  # its backend reports it healthy
    _quarantine(cpu, ttl=0.01)
    time.sleep(0.05)
    assert hetero.device("cpu") is cpu
    assert quarantine.entry(cpu) is None


def test_a_drill_quarantine_never_blocks_a_name(device: hetero.Device) -> None:
    quarantine.add(device, "DeviceLostError: x (injected by fault rule)", "device-lost", injected=True)
    assert quarantine.is_quarantined(device)
    assert hetero.device(device.name) is device  # the demo's fault-free comparison run names the drilled device


def test_the_guard_refuses_a_quarantined_starting_device(device: hetero.Device, state_dir: Path) -> None:
    _quarantine(device)
    with pytest.raises(hetero.DeviceQuarantinedError):
        hetero.guard({"w": hetero.zeros(2, device="cpu")}, device=device.name)
    assert (state_dir / "quarantine.json").exists()


def test_an_array_pickled_on_a_quarantined_device_loads_on_the_host(device: hetero.Device) -> None:
    payload = pickle.dumps(hetero.asarray([1, 2], device=device))
    _quarantine(device)
    with pytest.warns(RuntimeWarning, match=f"pickled on {device.name}.*is quarantined") as caught:
        back = pickle.loads(payload)
    host = hetero.device("cpu") if device.name != "cpu" else hetero.device()  # cpu itself is quarantined
    assert len(caught) == 1 and back.device is host and back.tolist() == [1, 2]


def test_another_process_quarantine_is_seen_within_the_recheck(state_dir: Path) -> None:
    cpu = hetero.device("cpu")
    assert hetero.device("cpu") is cpu  # read the store now: empty
    run_python("import hetero; from hetero.fault import quarantine as q; "
               "q.add(hetero.device('cpu'), 'Xid 79 (another process)', 'device-lost')",
               env={"HETERO_STATE_DIR": str(state_dir)})
    time.sleep(quarantine.NAMED_RECHECK + 0.1)
    with pytest.raises(hetero.DeviceQuarantinedError, match="another process"):
        hetero.device("cpu")


def test_the_configured_default_device_is_checked_once(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = hetero.device("cpu")
    _quarantine(cpu)
    monkeypatch.setenv("HETERO_DEVICE", "cpu")
    hetero.reload_config()
    try:
        with pytest.raises(hetero.DeviceQuarantinedError):
            hetero.zeros(2)  # the device HETERO_DEVICE names
        with pytest.raises(hetero.DeviceQuarantinedError):
            hetero.device()  # still refused: it never passed
        quarantine.release(cpu)
        assert hetero.device() is cpu
        _quarantine(cpu)  # quarantined after it passed (hetero-run's workers): not checked again
        assert hetero.zeros(2).device is cpu
    finally:
        monkeypatch.delenv("HETERO_DEVICE")
        hetero.reload_config()


def test_the_quarantine_command_still_handles_a_quarantined_device(state_dir: Path) -> None:
    """`hetero quarantine add` of a device already quarantined updates its entry, and `release` by a
    spec whose entry is under the stable id still finds it: the CLI names quarantined devices by design."""
    import subprocess
    import sys

    def hetero_cli(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "hetero", "quarantine", *args], capture_output=True, text=True,
                              timeout=120, env={**__import__("os").environ, "HETERO_STATE_DIR": str(state_dir)})

    first = hetero_cli("add", "cpu", "--reason", "first")
    assert first.returncode == 0, first.stderr
    again = hetero_cli("add", "cpu", "--reason", "again")
    assert again.returncode == 0, again.stderr
    released = hetero_cli("release", "cpu")
    assert released.returncode == 0, released.stderr
