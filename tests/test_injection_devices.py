"""Injected faults on every device of this machine: each operation raises the backend's own error
class (OpenCL: a genuine PyOpenCL error run through the real translation), Xid events, health
faults; and the OpenCL error translation and probe-kernel health check themselves."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from kernels import corpus

import hetero
from hetero.core.device import HealthState
from hetero.core.errors import ConfigError, ContextCorruptedError, DeviceDegradedError, DeviceError, DeviceLostError, DeviceOutOfMemoryError
from hetero.fault.injection import inject, wrapped_methods

CLASSES: dict[str, type[DeviceError]] = {"lost": DeviceLostError, "sticky": ContextCorruptedError,
                                         "oom": DeviceOutOfMemoryError, "degraded": DeviceDegradedError}
#: The OpenCL status code each kind is injected as on OpenCL devices (degraded has none).
OPENCL_CODES = {"lost": -2, "sticky": -5, "oom": -4, "degraded": None}


def is_opencl(device: hetero.Device) -> bool:
    return device.backend in ("oneapi", "opencl")


def operation(device: hetero.Device, op: str) -> Callable[[], Any]:
    """One call of ``op`` at the backend boundary, on real buffers (launch: a real kernel launch)."""
    runtime = device.runtime
    x = hetero.ones(16, device=device)
    y = hetero.zeros(16, device=device)
    host = np.arange(16, dtype=np.float32)
    return {
        "alloc": lambda: runtime.allocate(64),
        "copy": lambda: runtime.upload(y.buffer, host),
        "sync": lambda: runtime.synchronize(),  # looked up per call, as hetero does (a bound method kept from before would bypass)
        "launch": lambda: corpus.saxpy[16](2.0, x, y),
    }[op]


@pytest.mark.parametrize("kind", list(CLASSES))
@pytest.mark.parametrize("op", ["launch", "copy", "alloc", "sync"])
def test_each_op_raises_the_backends_own_error(device: hetero.Device, op: str, kind: str) -> None:
    call = operation(device, op)
    call()  # compiles the kernel before counting starts
    with inject(f"{device.name}:{op}:nth=2:{kind}") as inj:
        call()
        with pytest.raises(CLASSES[kind]) as info:
            call()
        call()  # nth=2: the third call goes through
    error = info.value
    assert error.injected and error.device == device.name and error.backend == device.backend
    assert "injected" in str(error)
    if is_opencl(device):
        assert error.code == OPENCL_CODES[kind]
        if error.code is not None:
            cl: Any = getattr(device.runtime, "cl")  # noqa: B009  (OpenCL runtimes only)
            assert isinstance(error.__cause__, cl.Error) and error.__cause__.code == error.code
            assert error.code_name == "CL_" + cl.status_code.to_string(error.code)
    elif device.backend == "cpu":
        assert error.code is None and error.code_name and error.code_name.startswith("CPU_")
    assert [(r.device, r.op, r.call) for r in inj.fired] == [(device.name, op, 2)]
    assert wrapped_methods(device.runtime) == []


def test_download_and_device_copies_count_as_copy(device: hetero.Device) -> None:
    runtime = device.runtime
    a, b = hetero.ones(8, device=device), hetero.zeros(8, device=device)
    out = np.empty(8, np.float32)
    with inject(f"{device.name}:copy:every=1:lost") as inj:
        with pytest.raises(DeviceLostError):
            runtime.download(out, a.buffer)
        with pytest.raises(DeviceLostError):
            runtime.copy(b.buffer, a.buffer, 32)
    assert [r.method for r in inj.fired] == ["download", "copy"]


def test_cached_kernel_references_see_the_injection(device: hetero.Device) -> None:
    x, y = hetero.ones(16, device=device), hetero.zeros(16, device=device)
    corpus.saxpy[16](1.0, x, y)  # the specialisation now holds device.runtime
    with inject(f"{device.name}:launch:every=1:sticky"), pytest.raises(ContextCorruptedError):
        corpus.saxpy[16](1.0, x, y)
    corpus.saxpy[16](1.0, x, y)
    np.testing.assert_allclose(y.numpy(), 2.0)  # the injected launch did not run; the others did


def test_wildcards_match_device_names(device: hetero.Device) -> None:
    backend_pattern = f"{device.backend}:*" if ":" in device.name else device.backend
    for pattern in ("*", backend_pattern, device.name):
        with inject(f"{pattern}:alloc:nth=1:oom"):
            assert wrapped_methods(device.runtime) == ["allocate"]
    with inject("nosuchdevice*:alloc:nth=1:oom"):
        assert wrapped_methods(device.runtime) == []


# -- vendor codes -----------------------------------------------------------------------------
def test_vendor_codes_only_reach_devices_of_their_backend(device: hetero.Device) -> None:
    with inject("*:launch:nth=1:cuda:700"):
        assert wrapped_methods(device.runtime) == ([] if device.backend != "cuda" else ["launch"])
    if device.backend != "cuda":
        with pytest.raises(ConfigError, match="cuda codes apply to cuda devices"):
            inject(f"{device.name}:launch:nth=1:cuda:700")


def test_opencl_codes_go_through_the_real_translation(opencl_device_fixture: hetero.Device) -> None:
    device = opencl_device_fixture
    call = operation(device, "launch")
    call()
    device.synchronize()
    cases = [("launch", -5, ContextCorruptedError), ("alloc", -5, DeviceOutOfMemoryError),  # -5 after a kernel only
             ("alloc", -6, DeviceOutOfMemoryError), ("sync", -2, DeviceLostError), ("launch", -52, DeviceError)]
    for op, code, cls in cases:
        step = operation(device, op)
        with inject(f"{device.name}:{op}:nth=1:opencl:{code}"), pytest.raises(DeviceError) as info:
            step()
        assert type(info.value) is cls, (op, code)
        assert info.value.code == code and info.value.injected


def test_a_real_opencl_error_is_translated_the_same_way(opencl_device_fixture: hetero.Device) -> None:
    runtime = opencl_device_fixture.runtime
    with pytest.raises(DeviceError) as info:
        runtime.allocate(1 << 62)  # beyond any device: CL_INVALID_BUFFER_SIZE from the driver
    real = info.value
    assert type(real) is DeviceError and real.code == -61 and real.code_name == "CL_INVALID_BUFFER_SIZE"
    injected = runtime.fault_error("code", code=-61, doing="alloc")
    assert type(injected) is type(real) and type(injected.__cause__) is type(real.__cause__)
    assert (injected.code, injected.code_name) == (real.code, real.code_name)


def test_opencl_error_table() -> None:
    from hetero.backends.opencl import errors as opencl_errors

    assert opencl_errors.error_class(-5, after_kernel=True) is ContextCorruptedError
    assert opencl_errors.error_class(-5, after_kernel=False) is DeviceOutOfMemoryError
    assert opencl_errors.error_class(-2, after_kernel=False) is DeviceLostError
    assert opencl_errors.error_class(-4, after_kernel=True) is DeviceOutOfMemoryError
    assert opencl_errors.error_class(-6, after_kernel=False) is DeviceOutOfMemoryError
    assert opencl_errors.error_class(-14, after_kernel=True) is ContextCorruptedError
    assert opencl_errors.error_class(-36, after_kernel=True) is ContextCorruptedError
    assert opencl_errors.error_class(-9999, after_kernel=False) is ContextCorruptedError
    assert opencl_errors.error_class(-33, after_kernel=False) is DeviceLostError
    assert opencl_errors.error_class(-30, after_kernel=True) is DeviceError
    assert opencl_errors.error_class(None, after_kernel=True) is DeviceError
    pyopencl = pytest.importorskip("pyopencl")

    assert opencl_errors.code_name(pyopencl, -5) == "CL_OUT_OF_RESOURCES"
    assert opencl_errors.code_name(pyopencl, -9999) == "NVIDIA_ILLEGAL_MEMORY_ACCESS"
    assert opencl_errors.code_name(pyopencl, -12345) == "CL_ERROR_-12345"


def test_a_real_cpu_out_of_memory_matches_the_injected_one() -> None:
    runtime = hetero.device("cpu").runtime
    with pytest.raises(DeviceOutOfMemoryError) as info:
        runtime.allocate(1 << 62)  # NumPy's MemoryError, translated
    injected = runtime.fault_error("oom", doing="alloc")
    assert isinstance(info.value, MemoryError) and not info.value.injected
    assert type(injected) is type(info.value) and injected.code_name == info.value.code_name == "CPU_OUT_OF_MEMORY"


def test_the_cpu_has_no_vendor_codes() -> None:
    runtime = hetero.device("cpu").runtime
    with pytest.raises(ValueError, match="no vendor error codes"):
        runtime.fault_error("code", code=700)
    error = runtime.fault_error("lost", doing="sync")
    assert isinstance(error, DeviceLostError) and error.code is None and error.code_name == "CPU_DEVICE_LOST"


# -- Xid events and health --------------------------------------------------------------------
def test_xid_79_is_an_event_and_the_device_lost_error(device: hetero.Device) -> None:
    device.runtime.drain_health_events()
    with inject(f"{device.name}:sync:nth=1:xid:79"):
        with pytest.raises(DeviceLostError) as info:
            device.synchronize()
        events = device.runtime.drain_health_events()
        assert device.runtime.drain_health_events() == []  # drained once
    assert info.value.xid == 79 and info.value.injected
    assert [(e["kind"], e["xid"], e["injected"], e["device"]) for e in events] == [("xid", 79, True, device.name)]
    assert "drain_health_events" not in vars(device.runtime)


def test_an_xid_without_an_application_error_only_reports(device: hetero.Device) -> None:
    launch = operation(device, "launch")
    with inject(f"{device.name}:launch:nth=1:xid:63"), inject(f"{device.name}:alloc:nth=1:xid:79"):
        launch()  # Xid 63 (row remap) is reported, the launch goes through
        device.runtime.allocate(64)  # an Xid on an allocation: the event only
        assert [e["xid"] for e in device.runtime.drain_health_events()] == [63, 79]


@pytest.mark.parametrize("what, state", [("degraded", HealthState.DEGRADED), ("lost", HealthState.UNHEALTHY),
                                         ("xid:95", HealthState.DEGRADED), ("xid:79", HealthState.UNHEALTHY)])
def test_health_faults(device: hetero.Device, what: str, state: HealthState) -> None:
    rule = f"{device.name}:health:nth=2:{what}"
    assert device.health().state is HealthState.OK
    with inject(rule) as inj:
        first, second, third = device.health(), device.health(), device.health()
    assert first.state is HealthState.OK
    assert second.state is state and second.reason == f"injected: {rule}"
    assert third == second and len(inj.fired) == 1  # latched, logged once
    assert device.health().state is HealthState.OK


def test_opencl_probe_kernel_health(opencl_device_fixture: hetero.Device, monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.backends.opencl import runtime as opencl_runtime

    runtime: Any = opencl_device_fixture.runtime
    assert runtime.health().state is HealthState.OK and runtime._probe is not None
    monkeypatch.setattr(opencl_runtime, "_event_status", lambda cl, event: 1)  # the probe never finishes
    hung = runtime._run_probe(0.01)
    assert hung.state is HealthState.UNHEALTHY and "did not finish within 0.01 s" in hung.reason
    assert "has not finished" in runtime.health().reason  # no second probe piles up behind a hung one
    monkeypatch.undo()
    assert runtime.health().state is HealthState.OK  # the stuck probe finished: healthy again


def test_opencl_unavailable_device_is_unhealthy(opencl_device_fixture: hetero.Device,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    runtime = opencl_device_fixture.runtime

    class Unavailable:
        def get_info(self, what: Any) -> bool:
            return False

    monkeypatch.setattr(runtime, "cl_device", Unavailable())
    health = runtime.health()
    assert health.state is HealthState.UNHEALTHY and "CL_DEVICE_AVAILABLE" in health.reason


def test_injected_events_outlive_the_block_until_drained(device: hetero.Device) -> None:
    device.runtime.drain_health_events()
    with inject(f"{device.name}:alloc:nth=1:xid:48"):
        device.runtime.allocate(64)
    assert "allocate" not in vars(device.runtime)
    assert [e["xid"] for e in device.runtime.drain_health_events()] == [48]  # the monitor still sees it
    assert wrapped_methods(device.runtime) == []  # drained: the last wrapper is gone


def test_injected_errors_survive_pickling(device: hetero.Device) -> None:
    import pickle

    with inject(f"{device.name}:alloc:nth=1:sticky"), pytest.raises(ContextCorruptedError) as info:
        device.runtime.allocate(64)
    copy = pickle.loads(pickle.dumps(info.value))  # fault reports cross process boundaries
    assert type(copy) is ContextCorruptedError and copy.injected and str(copy) == str(info.value)
    assert (copy.code, copy.code_name, copy.device) == (info.value.code, info.value.code_name, device.name)


def test_xids_follow_the_catalog(device: hetero.Device) -> None:
    from hetero.fault.injection import xid_error_kind

    assert [xid_error_kind(x) for x in (79, 48, 31, 63, 92, 45, 99999)] == \
        ["lost", "degraded", "sticky", None, None, None, None]
    launch = operation(device, "launch")
    with inject(f"{device.name}:launch:every=1,times=1:xid:31"), pytest.raises(ContextCorruptedError) as info:
        launch()
    assert info.value.xid == 31
    with inject(f"{device.name}:health:nth=1:xid:31"):  # an application fault: the GPU itself stays healthy
        assert device.health().state is HealthState.OK
    assert [e["xid"] for e in device.runtime.drain_health_events()] == [31, 31]


@pytest.mark.parametrize("kind, fault_class", [("lost", "device-lost"), ("sticky", "context-corrupting"),
                                               ("oom", "recoverable"), ("degraded", "degraded")])
def test_injected_errors_classify_as_their_kind(device: hetero.Device, kind: str, fault_class: str) -> None:
    from hetero.fault import classify

    with inject(f"{device.name}:launch:nth=1:{kind}"), pytest.raises(DeviceError) as info:
        operation(device, "launch")()
    result = classify(info.value, events=[])
    assert str(result.fault_class) == fault_class and result.injected
