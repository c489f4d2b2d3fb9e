"""NVML health and the Xid listener, against a fake pynvml (tests/fakes) replaying scenarios:
healthy, uncorrectable ECC with pending retirement, thermal throttling, Xid 79/48/31 events,
a board without ECC, and NVML_ERROR_GPU_IS_LOST; plus NVML absent or failing -> unknown."""

from __future__ import annotations

import sys
import time
import types
from typing import Any

import pytest
from fakes.fake_pynvml import NVML_ERROR_DRIVER_NOT_LOADED, FakePynvml

from hetero.backends.cupy import nvml_health
from hetero.backends.cupy.nvml_health import Nvml, nvml_uuid
from hetero.backends.cupy.xid_listener import XidListener
from hetero.core.device import HealthState

H200 = "2f0e9c4e-5a1b-4c3d-9e8f-0123456789ab"  # hetero's stable id; NVML calls it GPU-<uuid>
OTHER = "99999999-0000-4000-8000-000000000001"


def reading(scenario: str, stable_id: str = H200) -> nvml_health.Reading:
    return Nvml(FakePynvml(scenario)).read(stable_id)


def test_a_healthy_device_reads_every_field() -> None:
    result = reading("healthy")
    assert result.health.state is HealthState.OK and result.health.reason == ""
    assert result.fields == {
        "ecc_volatile_corrected": 0, "ecc_volatile_uncorrected": 0, "ecc_aggregate_corrected": 12,
        "ecc_aggregate_uncorrected": 0, "retired_pages_sbe": 0, "retired_pages_dbe": 0, "retired_pages_pending": False,
        "remapped_rows_corrected": 3, "remapped_rows_uncorrected": 0, "remapped_rows_pending": False,
        "remapped_rows_failed": False, "temperature_c": 41, "throttle_reasons": ["gpu_idle"], "recovery_action": "none",
    }


def test_uncorrectable_ecc_with_pending_retirement_is_degraded() -> None:
    result = reading("ecc_uncorrectable_pending_retirement")
    assert result.health.state is HealthState.DEGRADED
    for words in ("2 uncorrectable ECC", "pending retirement", "pending remapping"):
        assert words in result.health.reason
    assert result.fields["retired_pages_dbe"] == 2 and result.fields["remapped_rows_uncorrected"] == 1


def test_thermal_throttling_is_degraded_and_names_the_reasons() -> None:
    result = reading("thermal_throttle")
    assert result.health.state is HealthState.DEGRADED
    assert "sw_thermal_slowdown" in result.health.reason and "hw_thermal_slowdown" in result.health.reason
    assert "93 C" in result.health.reason


def test_a_recovery_action_from_the_driver_is_unhealthy() -> None:
    result = reading("xid_79_48_31")
    assert result.health.state is HealthState.UNHEALTHY and "gpu_reset" in result.health.reason
    assert reading("xid_79_48_31", OTHER).health.state is HealthState.OK


def test_a_board_without_ecc_has_none_counters_and_is_ok() -> None:
    result = reading("consumer_board_without_ecc")
    assert result.health.state is HealthState.OK
    assert result.fields["ecc_volatile_uncorrected"] is None and result.fields["remapped_rows_failed"] is None
    assert result.fields["recovery_action"] is None and result.fields["temperature_c"] == 38


def test_gpu_is_lost_is_unhealthy() -> None:
    result = reading("gpu_is_lost")
    assert result.health.state is HealthState.UNHEALTHY and "lost" in result.health.reason


def test_an_unknown_device_or_failing_nvml_is_unknown_with_the_reason() -> None:
    assert reading("healthy", OTHER).health.state is HealthState.UNKNOWN
    failing = Nvml(FakePynvml("healthy", init_error=NVML_ERROR_DRIVER_NOT_LOADED)).read(H200)
    assert failing.health.state is HealthState.UNKNOWN and "Driver Not Loaded" in failing.health.reason


def test_nvml_absent_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)  # import pynvml -> ImportError
    result = Nvml().read(H200)
    assert result.health.state is HealthState.UNKNOWN and "pip install nvidia-ml-py" in result.health.reason


def test_the_real_pynvml_on_this_machine_gives_a_reason_not_an_error() -> None:
    pytest.importorskip("pynvml")
    result = Nvml().read(H200)  # no NVIDIA driver here: NVML cannot start
    assert result.health.state in (HealthState.UNKNOWN, HealthState.OK, HealthState.DEGRADED, HealthState.UNHEALTHY)
    if result.health.state is HealthState.UNKNOWN:
        assert result.health.reason


def test_uuid_spelling() -> None:
    assert nvml_uuid(H200) == f"GPU-{H200}" and nvml_uuid(f"MIG-{H200}") == f"MIG-{H200}"


# -- the Xid listener ---------------------------------------------------------------------
def drain_until(listener: XidListener, uuid: str, count: int, timeout: float = 5.0) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    deadline = time.monotonic() + timeout
    while len(events) < count and time.monotonic() < deadline:
        events += listener.drain(uuid)
        time.sleep(0.01)
    return events


def test_xid_events_are_queued_per_device_in_order() -> None:
    fake = FakePynvml("xid_79_48_31")
    listener = XidListener(Nvml(fake), [H200, OTHER], wait_ms=20)
    try:
        assert listener.start() and listener.error is None
        mine = drain_until(listener, H200, 2)
        other = drain_until(listener, OTHER, 1)
    finally:
        listener.stop()
    assert [e["xid"] for e in mine] == [48, 79] and [e["xid"] for e in other] == [31]
    assert all(e["kind"] == "xid" and e["device_uuid"] == f"GPU-{H200}" for e in mine)
    assert all(abs(e["time"] - time.time()) < 60 for e in mine + other)
    assert listener.last_xid(H200) == 79 and listener.last_xid(OTHER) == 31
    assert listener.drain(H200) == []  # drained once
    xid_bit = fake.nvmlEventTypeXidCriticalError
    assert all(mask & xid_bit for mask in fake.registered.values()) and len(fake.registered) == 2
    assert "nvmlEventSetFree" in fake.calls


def test_double_bit_ecc_events_are_queued_too() -> None:
    listener = XidListener(Nvml(FakePynvml("ecc_uncorrectable_pending_retirement")), [H200], wait_ms=20)
    try:
        listener.start()
        events = drain_until(listener, H200, 2)
    finally:
        listener.stop()
    assert [e["kind"] for e in events] == ["ecc", "xid"] and events[1]["xid"] == 48


def test_a_lost_gpu_during_the_wait_queues_a_lost_event_and_stops() -> None:
    fake = FakePynvml("healthy")
    fake.events = [{"device": 0, "type": "lost"}]
    listener = XidListener(Nvml(fake), [H200], wait_ms=20)
    listener.start()
    events = drain_until(listener, H200, 1)
    listener.stop()
    assert events and events[0]["kind"] == "lost" and "lost" in (listener.error or "")


def test_registering_a_lost_gpu_is_reported_not_raised() -> None:
    listener = XidListener(Nvml(FakePynvml("gpu_is_lost")), [H200], wait_ms=20)
    assert listener.start() is False and "GPU is lost" in (listener.error or "")
    assert listener.drain(H200) == []


def test_the_runtime_drains_its_devices_events_and_classifies_after_xid_79() -> None:
    from test_cuda_errors import make_runtime  # a CuPyRuntime over real CuPy with a stand-in device

    import hetero

    runtime = make_runtime()
    fake = FakePynvml("xid_79_48_31")
    fake.devices[0]["recovery_action"] = 0
    runtime._nvml = Nvml(fake)
    listener = XidListener(runtime._nvml, [H200, OTHER], wait_ms=20)
    runtime._listener = listener
    listener.start()
    try:
        events: list[dict[str, Any]] = []
        deadline = time.monotonic() + 5
        while len(events) < 2 and time.monotonic() < deadline:
            events += runtime.drain_health_events()
            time.sleep(0.01)
    finally:
        listener.stop()
    assert [e["xid"] for e in events] == [48, 79] and all(e["device"] == "cuda:0" for e in events)
    error = runtime.fault_error("code", code=999)
    assert isinstance(error, hetero.DeviceLostError) and error.xid == 79
    assert runtime.health().state is HealthState.OK  # NVML's own reading is fine; no error was seen yet


def test_the_runtime_health_uses_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    from test_cuda_errors import make_runtime

    runtime = make_runtime()
    runtime._nvml = Nvml(FakePynvml("thermal_throttle"))
    assert runtime.health().state is HealthState.DEGRADED
    assert runtime.health_fields()["temperature_c"] == 93
    monkeypatch.setattr(nvml_health, "_SHARED", Nvml(types.SimpleNamespace()))  # type: ignore[arg-type]
    runtime._nvml = None
    assert runtime.health().state is HealthState.UNKNOWN  # a module without nvmlInit: NVML could not start
