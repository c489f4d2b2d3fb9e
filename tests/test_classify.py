"""classify(): error classes, vendor codes and Xid health events joined into one decision."""

from __future__ import annotations

import importlib
import json
import pickle
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fakes.fake_device import FakeRuntime, fake_backend

import hetero
from hetero.core.device import HealthState
from hetero.core.errors import (
    ContextCorruptedError, DeviceDegradedError, DeviceError, DeviceLostError, DeviceOutOfMemoryError, QuotaExceeded,
)
from hetero.fault import Action, FaultClass, classify

classify_module = importlib.import_module("hetero.fault.classify")


def cuda(code: int, name: str | None = None, cls: type[DeviceError] = DeviceError, **kw: Any) -> DeviceError:
    return cls("launch failed", backend="cuda", device="cuda:0", code=code, code_name=name, **kw)


def xid(number: int, device: str | None = "cuda:0") -> dict[str, Any]:
    event: dict[str, Any] = {"kind": "xid", "xid": number, "time": time.time(), "monotonic": time.monotonic()}
    if device is not None:
        event["device"] = device
    return event


@pytest.mark.parametrize("error", [ValueError("x"), KeyError("k"), MemoryError(), KeyboardInterrupt(),
                                   QuotaExceeded("cpu", "t", 10, 5, 20)], ids=lambda e: type(e).__name__)
def test_errors_that_are_not_device_faults_are_class_none(error: BaseException) -> None:
    result = classify(error, events=[])
    assert result.fault_class is FaultClass.NONE and result.action is Action.NONE
    assert not result.quarantine and result.ttl is None and not result.is_fault
    assert type(error).__name__ in result.reason


@pytest.mark.parametrize(("cls", "fault_class", "action", "ttl"), [
    (DeviceOutOfMemoryError, FaultClass.RECOVERABLE, Action.RETRY, None),
    (ContextCorruptedError, FaultClass.CONTEXT_CORRUPTING, Action.MIGRATE, 3600.0),
    (DeviceLostError, FaultClass.DEVICE_LOST, Action.QUARANTINE, 86400.0),
    (DeviceDegradedError, FaultClass.DEGRADED, Action.QUARANTINE, 6 * 3600.0),
])
def test_the_error_class_alone_decides_without_a_code(cls: type[DeviceError], fault_class: FaultClass,
                                                      action: Action, ttl: float | None) -> None:
    result = classify(cls("failed", backend="cpu", device="cpu"), events=[])
    assert (result.fault_class, result.action, result.ttl, result.quarantine) == (fault_class, action, ttl, ttl is not None)
    assert result.sticky == (fault_class is not FaultClass.RECOVERABLE)
    assert result.device == "cpu" and result.backend == "cpu"


def test_plain_device_error_without_code_is_not_a_fault() -> None:
    result = classify(DeviceError("odd", backend="cpu", device="cpu"), events=[])
    assert result.fault_class is FaultClass.NONE and not result.quarantine


def test_unknown_vendor_code_is_not_a_fault_and_says_so() -> None:
    result = classify(cuda(12345), events=[])
    assert result.fault_class is FaultClass.NONE and "12345" in result.reason


def test_the_backends_error_class_decides_an_ambiguous_opencl_code() -> None:
    # OpenCL -5 on an allocation is out of memory; after a kernel it is a sticky fault.
    alloc = DeviceOutOfMemoryError("alloc failed", backend="opencl", device="opencl:0", code=-5,
                                   code_name="CL_OUT_OF_RESOURCES")
    kernel = ContextCorruptedError("launch failed", backend="opencl", device="opencl:0", code=-5,
                                   code_name="CL_OUT_OF_RESOURCES")
    assert classify(alloc, events=[]).fault_class is FaultClass.RECOVERABLE
    assert classify(alloc, events=[]).action is Action.RETRY
    assert classify(kernel, events=[]).fault_class is FaultClass.CONTEXT_CORRUPTING
    assert "CL_OUT_OF_RESOURCES" in classify(kernel, events=[]).reason


def test_a_lost_device_error_with_an_unknown_code_stays_lost() -> None:
    result = classify(cuda(999, "cudaErrorUnknown", DeviceLostError), events=[])
    assert result.fault_class is FaultClass.DEVICE_LOST and result.ttl == 86400.0


# -- joins with Xid events ------------------------------------------------------------------
def test_illegal_address_with_xid_31_is_an_application_bug_on_a_healthy_gpu() -> None:
    alone = classify(cuda(700, "cudaErrorIllegalAddress"), events=[])
    joined = classify(cuda(700, "cudaErrorIllegalAddress"), events=[xid(31)])
    assert alone.fault_class is joined.fault_class is FaultClass.CONTEXT_CORRUPTING
    assert joined.action is Action.MIGRATE and joined.application_bug and not alone.application_bug
    assert joined.ttl == 60.0 and alone.ttl == 3600.0  # quarantined briefly: the GPU is fine
    assert joined.xids == (31,) and "application bug" in joined.reason and "Xid 31" in joined.reason


def test_graphics_exception_xid_13_is_an_application_bug_too() -> None:
    result = classify(cuda(719, "cudaErrorLaunchFailure"), events=[xid(13)])
    assert result.application_bug and result.ttl == 60.0


@pytest.mark.parametrize("number", [95, 48, 94])
def test_uncorrectable_ecc_with_ecc_xids_is_quarantined(number: int) -> None:
    result = classify(cuda(214, "cudaErrorECCUncorrectable"), events=[xid(number)])
    assert result.fault_class is FaultClass.DEGRADED and result.action is Action.QUARANTINE
    assert result.quarantine and result.ttl == 6 * 3600.0 and number in result.xids


def test_unknown_error_with_xid_79_is_a_lost_device() -> None:
    alone = classify(cuda(999, "cudaErrorUnknown"), events=[])
    joined = classify(cuda(999, "cudaErrorUnknown"), events=[xid(79)])
    assert alone.fault_class is FaultClass.CONTEXT_CORRUPTING
    assert joined.fault_class is FaultClass.DEVICE_LOST and joined.quarantine and joined.ttl == 86400.0
    assert "fallen off the bus" in joined.reason


def test_an_app_bug_xid_does_not_soften_a_hardware_xid() -> None:
    result = classify(cuda(700, "cudaErrorIllegalAddress"), events=[xid(31), xid(95)])
    assert result.fault_class is FaultClass.DEGRADED and not result.application_bug


def test_xid_of_another_device_is_ignored_and_unnamed_device_is_joined() -> None:
    assert classify(cuda(999, "cudaErrorUnknown"), events=[xid(79, "cuda:1")]).fault_class is FaultClass.CONTEXT_CORRUPTING
    assert classify(cuda(999, "cudaErrorUnknown"), events=[xid(79, None)]).fault_class is FaultClass.DEVICE_LOST


def test_the_errors_own_xid_attribute_is_joined() -> None:
    result = classify(cuda(999, "cudaErrorUnknown", xid=79), events=[])
    assert result.fault_class is FaultClass.DEVICE_LOST and result.xids == (79,)


def test_informational_xid_45_changes_nothing() -> None:
    result = classify(cuda(700, "cudaErrorIllegalAddress"), events=[xid(45)])
    assert result.fault_class is FaultClass.CONTEXT_CORRUPTING and result.ttl == 3600.0


def test_recoverable_error_stays_recoverable_with_an_app_xid() -> None:
    # an Xid 31 event may be another process's fault on the same GPU: it does not make an OOM sticky
    result = classify(cuda(2, "cudaErrorMemoryAllocation", DeviceOutOfMemoryError), events=[xid(31)])
    assert result.fault_class is FaultClass.RECOVERABLE and result.action is Action.RETRY and 31 in result.xids
    # ... but an Xid the backend attached to this very error does
    own = classify(cuda(2, "cudaErrorMemoryAllocation", DeviceOutOfMemoryError, xid=31), events=[])
    assert own.fault_class is FaultClass.CONTEXT_CORRUPTING


def test_a_device_level_xid_event_escalates_any_error() -> None:
    result = classify(cuda(2, "cudaErrorMemoryAllocation", DeviceOutOfMemoryError), events=[xid(79)])
    assert result.fault_class is FaultClass.DEVICE_LOST


def test_events_default_to_the_buss_recent_window(monkeypatch: pytest.MonkeyPatch) -> None:
    device = "cuda:7"
    error = DeviceError("launch failed", backend="cuda", device=device, code=999, code_name="cudaErrorUnknown")
    assert classify(error).fault_class is FaultClass.CONTEXT_CORRUPTING
    hetero.fault.publish("xid", xid=79, device=device)
    assert classify(error).fault_class is FaultClass.DEVICE_LOST
    monkeypatch.setattr(classify_module, "WINDOW", 0.0)  # the event is now outside the window
    time.sleep(0.01)
    assert classify(error).fault_class is FaultClass.CONTEXT_CORRUPTING


def test_injected_flag_and_vendor_details_are_kept() -> None:
    result = classify(cuda(700, None, injected=True), events=[])
    assert result.injected and result.code == 700 and result.code_name == "cudaErrorIllegalAddress"
    data = result.as_dict()
    assert json.loads(json.dumps(data))["fault_class"] == "context-corrupting"
    assert pickle.loads(pickle.dumps(result)) == result


def test_code_family_follows_the_name_then_the_backend_then_the_sign() -> None:
    # the cpu backend raising an injected CUDA code (a 'cuda:700' rule on cpu) and an OpenCL one
    on_cpu = DeviceError("x", backend="cpu", device="cpu", code=700)
    assert classify(on_cpu, events=[]).fault_class is FaultClass.CONTEXT_CORRUPTING
    assert classify(DeviceError("x", backend="cpu", device="cpu", code=-2), events=[]).fault_class is FaultClass.DEVICE_LOST
    hip = DeviceError("x", backend="rocm", device="rocm:0", code=53)
    assert classify(hip, events=[]).fault_class is FaultClass.CONTEXT_CORRUPTING  # hip only
    named = DeviceError("x", backend="plugin", device="p:0", code=2, code_name="CUDA_ERROR_OUT_OF_MEMORY")
    assert classify(named, events=[]).fault_class is FaultClass.RECOVERABLE


def test_restart_process_for_a_broken_runtime() -> None:
    result = classify(cuda(3, "cudaErrorInitializationError"), events=[])
    assert result.action is Action.RESTART_PROCESS and result.fault_class is FaultClass.CONTEXT_CORRUPTING
    assert not result.quarantine and result.sticky  # the process is broken, not the device


@pytest.fixture
def ttl_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    config = tmp_path / "hetero.yaml"
    config.write_text("quarantine_ttl:\n  device-lost: 120\n  application-bug: 0\n", encoding="utf-8")
    monkeypatch.setenv("HETERO_CONFIG", str(config))
    hetero.reload_config()
    yield
    monkeypatch.delenv("HETERO_CONFIG")
    hetero.reload_config()


def test_config_quarantine_ttl_overrides_the_defaults(ttl_config: None) -> None:
    assert classify(cuda(999, "cudaErrorUnknown"), events=[xid(79)]).ttl == 120.0
    bug = classify(cuda(700, "cudaErrorIllegalAddress"), events=[xid(31)])
    assert bug.ttl is None and not bug.quarantine and bug.action is Action.MIGRATE  # migrate, no quarantine
    assert classify(cuda(214, "cudaErrorECCUncorrectable"), events=[]).ttl == 6 * 3600.0  # not overridden


def test_row_specific_ttl_for_a_busy_gpu() -> None:
    assert classify(cuda(46, "cudaErrorDevicesUnavailable"), events=[]).ttl == 300.0


# -- classify drains the failing device's health events itself -------------------------------
def _fell_off_the_bus(runtime: FakeRuntime) -> None:
    """A device whose backend has seen an Xid 79 the monitor has not polled yet."""
    runtime.state, runtime.reason = HealthState.UNHEALTHY, "fell off the bus"
    runtime.pending = [{"kind": "xid", "xid": 79, "time": time.time()}]


def test_classify_drains_pending_xids_of_the_failing_device() -> None:
    hetero.register_backend(fake_backend("xidtest", setup=_fell_off_the_bus))
    try:
        device = hetero.device("xidtest:0")
        error = DeviceError("launch failed", backend="xidtest", device=device.name, code=999,
                            code_name="cudaErrorUnknown")
        with hetero.fault.events(kind="xid") as sub:
            result = classify(error)
            published = sub.pending()
        assert result.fault_class is FaultClass.DEVICE_LOST and result.xids == (79,)
        assert [(e["xid"], e["device"], e["stable_id"]) for e in published] == [(79, "xidtest:0", "xidtest-0")]
    finally:
        hetero.core.registry.reset()
