"""The guard's reports name where torch really runs: each recovery's ``torch_device`` and
``failed_torch_device``, the log line's "(torch device cpu)", "torch state stays on cpu" for a
move between two devices that are one torch device, and one warning per guard for a move to a
GPU this torch cannot use (an Intel GPU without XPU: fake devices stand in for it)."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

import numpy as np
import pytest
from fakes.fake_device import FakeRuntime

import hetero
from hetero.core.device import Device, Kind

torch = pytest.importorskip("torch")

pytestmark = pytest.mark.usefixtures("state_dir")  # quarantine entries go to a private store


def intel_gpu(index: int) -> Device:
    """``oneapi:<index>``, a GPU-kind device over host memory: where this torch (no XPU) cannot go."""
    runtime = FakeRuntime("oneapi", index)
    runtime.info = dataclasses.replace(runtime.info, kind=Kind.GPU, vendor="Intel")
    return Device(runtime.info, runtime)


def lost_on(state: dict[str, Any], faults: dict[int, str]):  # type: ignore[no-untyped-def]
    """A step that trains ``state["model"]`` and loses device ``faults[step]`` once at that step."""

    def step(k: int) -> float:
        with torch.no_grad():
            state["model"].weight.add_(1.0)
        where = hetero.device().name
        if faults.get(k) == where:
            del faults[k]
            raise hetero.DeviceLostError("lost (test)", backend=where.split(":")[0], device=where)
        return float(k)

    return step


def run(devices: list[Device | str], start: Device | str, faults: dict[int, str], steps: int = 4) -> Any:
    state: dict[str, Any] = {"model": torch.nn.Linear(2, 2), "w": np.zeros(2)}
    step = lost_on(state, faults)
    with hetero.guard(state, snapshot_every=1, devices=devices, device=start, standby=False) as g:
        for k in range(steps):
            g.run(step, k)
    return g, state


def test_a_recovery_in_place_names_the_torch_device(caplog: pytest.LogCaptureFixture) -> None:
    state: dict[str, Any] = {"model": torch.nn.Linear(2, 2)}
    failed = [False]

    def step(k: int) -> None:
        if k == 1 and not failed[0]:
            failed[0] = True
            raise hetero.DeviceOutOfMemoryError("oom (test)", backend="cpu", device="cpu")

    with caplog.at_level(logging.WARNING, logger="hetero.recovery.guard"), \
            hetero.guard(state, devices=["cpu"], device="cpu", standby=False) as g:
        for k in range(3):
            g.run(step, k)
    (event,) = g.recoveries
    assert (event["device"], event["torch_device"], event["failed_torch_device"]) == ("cpu", "cpu", "cpu")
    assert event["in_place"] and event["torch"] == "torch device cpu"
    assert "resumed on cpu (torch device cpu)" in caplog.text


def test_a_move_between_two_cpu_torch_devices_moves_nothing_for_torch(caplog: pytest.LogCaptureFixture) -> None:
    other = next((d for d in hetero.devices() if d.name != "cpu" and str(d.kind) == "cpu"), None)
    if other is None:
        pytest.skip("needs a second CPU-kind device (oneAPI's CPU runtime, PoCL)")
    with caplog.at_level(logging.WARNING, logger="hetero.recovery.guard"), hetero.fault.events(kind="recovery") as sub:
        g, state = run(["cpu", other], "cpu", {2: "cpu"})
        published = sub.get(timeout=5)
    (event,) = g.recoveries
    assert (event["failed_device"], event["device"]) == ("cpu", other.name)
    assert (event["failed_torch_device"], event["torch_device"]) == ("cpu", "cpu")
    assert event["torch"] == "torch device cpu; torch state stays on cpu"
    assert published is not None and published["torch_device"] == "cpu" and published["failed_torch_device"] == "cpu"
    assert f"resumed on {other.name} (torch device cpu; torch state stays on cpu)" in caplog.text
    assert "no backend for" not in caplog.text  # a CPU-kind device: torch on the CPU is what it is
    assert state["model"].weight.device.type == "cpu"


def test_a_move_to_a_gpu_torch_cannot_use_warns_once_per_guard(caplog: pytest.LogCaptureFixture,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(torch.xpu, "is_available", lambda: False)  # whatever this torch is built with
    first, second = intel_gpu(7), intel_gpu(8)
    with caplog.at_level(logging.WARNING, logger="hetero.recovery.guard"):
        g, state = run([hetero.device("cpu"), first, second], "cpu", {1: "cpu", 2: first.name})
    assert [(e["device"], e["torch_device"], e["failed_torch_device"]) for e in g.recoveries] == [
        (first.name, "cpu", "cpu"), (second.name, "cpu", "cpu")]
    assert g.device is second and state["model"].weight.device.type == "cpu"  # torch state stayed on the host
    warnings = [r for r in caplog.records if "a GPU this torch has no backend for" in r.getMessage()]
    assert len(warnings) == 1 and first.name in warnings[0].getMessage()
    assert warnings[0].levelno == logging.WARNING


def test_where_torch_has_the_gpu_the_move_is_reported_as_one(caplog: pytest.LogCaptureFixture,
                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the report is exercised: the torch device is faked, the state holds no torch object."""
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    first = intel_gpu(7)
    state: dict[str, Any] = {"w": np.zeros(2)}
    failed = [False]

    def step(k: int) -> None:
        if k == 1 and not failed[0]:
            failed[0] = True
            raise hetero.DeviceLostError("lost (test)", backend="cpu", device="cpu")

    with caplog.at_level(logging.WARNING, logger="hetero.recovery.guard"), \
            hetero.guard(state, devices=[hetero.device("cpu"), first], device="cpu", standby=False, rng=False) as g:
        for k in range(3):
            g.run(step, k)
    (event,) = g.recoveries
    assert (event["failed_torch_device"], event["torch_device"]) == ("cpu", "xpu:7")
    assert event["torch"] == "torch device xpu:7; torch state moved from cpu to xpu:7"
    assert "no backend for" not in caplog.text
