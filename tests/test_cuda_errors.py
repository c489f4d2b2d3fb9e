"""CUDA/HIP errors raised inside the cuda/rocm backends become hetero errors of the right class
carrying backend, device, vendor code and name. Checked without a GPU: the exceptions are CuPy's
own classes built with real codes (CuPy names runtime errors without a driver); driver-API names
are checked against NVIDIA's cuda.bindings enum. A context-corrupting error marks the device
unhealthy for the rest of the process."""

from __future__ import annotations

import contextlib
import types
from typing import Any

import pytest

import hetero
from hetero.backends.cupy import cuda_errors, hip_errors
from hetero.backends.cupy.runtime import FAULT_CODES, CuPyRuntime
from hetero.core.device import DeviceInfo, Health, HealthState, Kind

runtime_api = pytest.importorskip("cupy_backends.cuda.api.runtime", reason="CuPy is not installed (pip install 'hetero[cuda]')")
driver_api = pytest.importorskip("cupy_backends.cuda.api.driver")
import cupy

EXPECTED_CLASS = {
    2: hetero.DeviceOutOfMemoryError, 214: hetero.DeviceDegradedError, 46: hetero.DeviceLostError,
    100: hetero.DeviceLostError, **{code: hetero.ContextCorruptedError for code in (700, 702, 710, 714, 715, 716, 717, 718, 719)},
    701: hetero.DeviceError, 9: hetero.DeviceError, 999: hetero.DeviceError, 1: hetero.DeviceError,
}


def driver_error(code: int) -> BaseException:
    """A real CUDADriverError: CuPy's constructor asks libcuda for the name, so without a driver the
    object is made the way Cython exceptions unpickle (class, then status) with CuPy's message format."""
    try:
        return driver_api.CUDADriverError(code)
    except RuntimeError:  # "CuPy failed to load libcuda.so.1"
        from cuda.bindings import driver as cu

        error = driver_api.CUDADriverError.__new__(driver_api.CUDADriverError)
        error.status = code
        error.args = (f"{cu.CUresult(code).name}: (no driver here)",)
        return error


@pytest.mark.parametrize("code", sorted(cuda_errors.CUDA_RUNTIME_ERRORS))
def test_runtime_table_names_match_the_cuda_runtime(code: int) -> None:
    name, _ = cuda_errors.CUDA_RUNTIME_ERRORS[code]
    assert str(runtime_api.CUDARuntimeError(code)).split(":")[0] == name


@pytest.mark.parametrize("code", sorted(cuda_errors.CUDA_DRIVER_ERRORS))
def test_driver_table_names_match_cuda_h(code: int) -> None:
    cu = pytest.importorskip("cuda.bindings.driver")
    assert cuda_errors.CUDA_DRIVER_ERRORS[code][0] == cu.CUresult(code).name


@pytest.mark.parametrize("code", sorted(cuda_errors.CUDA_RUNTIME_ERRORS))
def test_every_runtime_row_translates_to_its_class_code_and_name(code: int) -> None:
    name, kind = cuda_errors.CUDA_RUNTIME_ERRORS[code]
    error = cuda_errors.translate(runtime_api.CUDARuntimeError(code), "cuda", "cuda:1", "launching k")
    assert type(error) is kind
    assert (error.backend, error.device, error.code, error.code_name) == ("cuda", "cuda:1", code, name)
    assert str(error).startswith("cuda:1: launching k failed") and f"code {code}" in str(error)
    if code in EXPECTED_CLASS:
        assert type(error) is EXPECTED_CLASS[code]


@pytest.mark.parametrize("code", sorted(cuda_errors.CUDA_DRIVER_ERRORS))
def test_every_driver_row_translates_like_the_runtime_row(code: int) -> None:
    error = cuda_errors.translate(driver_error(code), "cuda", "cuda:0", "loading k")
    assert type(error) is cuda_errors.CUDA_DRIVER_ERRORS[code][1] and error.code == code
    assert error.code_name == cuda_errors.CUDA_DRIVER_ERRORS[code][0]
    if code in cuda_errors.CUDA_RUNTIME_ERRORS:
        assert cuda_errors.CUDA_RUNTIME_ERRORS[code][1] is cuda_errors.CUDA_DRIVER_ERRORS[code][1]


@pytest.mark.parametrize("code", sorted(hip_errors.HIP_ERRORS))
def test_rocm_errors_carry_hip_names(code: int) -> None:
    name, kind = hip_errors.HIP_ERRORS[code]
    assert name.startswith("hipError")
    error = cuda_errors.translate(runtime_api.CUDARuntimeError(code), "rocm", "rocm:0", "launching k")
    assert type(error) is kind and (error.code, error.code_name, error.backend) == (code, name, "rocm")
    if code in EXPECTED_CLASS and code not in (46, 702):
        assert type(error) is EXPECTED_CLASS[code]


def test_hip_numbers_agree_with_cuda_where_both_name_a_code() -> None:
    both = set(hip_errors.HIP_ERRORS) & set(cuda_errors.CUDA_RUNTIME_ERRORS)
    assert {2, 214, 700, 710, 719, 999} <= both
    for code in both:
        assert hip_errors.HIP_ERRORS[code][1] is cuda_errors.CUDA_RUNTIME_ERRORS[code][1], code


def test_unknown_codes_keep_cupys_name() -> None:
    error = cuda_errors.translate(runtime_api.CUDARuntimeError(12345), "cuda", "cuda:0", "x")
    assert type(error) is hetero.DeviceError and error.code == 12345 and error.code_name


def test_cupy_pool_out_of_memory_is_a_device_out_of_memory_error() -> None:
    pool_error = cupy.cuda.memory.OutOfMemoryError(1 << 40, 0, 0)
    error = cuda_errors.translate(pool_error, "cuda", "cuda:0", "allocating")
    assert isinstance(error, hetero.DeviceOutOfMemoryError) and error.code == 2
    assert cuda_errors.translate(pool_error, "rocm", "rocm:0", "allocating").code_name == "hipErrorOutOfMemory"


def test_an_error_after_xid_79_means_the_device_is_lost() -> None:
    error = cuda_errors.translate(runtime_api.CUDARuntimeError(999), "cuda", "cuda:0", "synchronizing", xid=79)
    assert type(error) is hetero.DeviceLostError and error.xid == 79 and error.code == 999
    error = cuda_errors.translate(runtime_api.CUDARuntimeError(700), "cuda", "cuda:0", "launching", xid=31)
    assert type(error) is hetero.ContextCorruptedError and error.xid == 31


# -- the runtime: translation on its calls, fault_error, sticky health ----------------------------
def make_runtime(backend: str = "cuda") -> CuPyRuntime:
    """A CuPyRuntime over real CuPy whose device is a stand-in context (no GPU here), and a fake
    NVML reading "ok", so what is checked is the backend's own logic."""
    info = DeviceInfo(f"{backend}:0", backend, 0, "NVIDIA", Kind.GPU, "test", 1, 1, 1, True, "0",
                      "2f0e9c4e-5a1b-4c3d-9e8f-0123456789ab", {"arch": "sm_90", "pci_bus_id": "0000:19:00.0"})
    fake = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Device=lambda index: contextlib.nullcontext(), runtime=cupy.cuda.runtime, driver=cupy.cuda.driver,
        memory=cupy.cuda.memory))
    ok = types.SimpleNamespace(read=lambda stable_id: types.SimpleNamespace(health=Health(HealthState.OK), fields={}))
    runtime = CuPyRuntime(fake, info, "test", nvml=ok)  # type: ignore[arg-type]
    runtime.cupy = cupy
    return runtime


def test_runtime_calls_raise_hetero_errors() -> None:
    runtime = make_runtime()
    with pytest.raises(hetero.ContextCorruptedError) as caught, runtime._on_device("copying 4 bytes host->device"):
        raise runtime_api.CUDARuntimeError(700)
    assert caught.value.code == 700 and caught.value.code_name == "cudaErrorIllegalAddress"
    assert caught.value.device == "cuda:0" and isinstance(caught.value.__cause__, runtime_api.CUDARuntimeError)


@pytest.mark.parametrize("kind,cls", [("lost", hetero.DeviceLostError), ("sticky", hetero.ContextCorruptedError),
                                      ("oom", hetero.DeviceOutOfMemoryError), ("degraded", hetero.DeviceDegradedError)])
@pytest.mark.parametrize("backend", ["cuda", "rocm"])
def test_fault_error_builds_the_native_error_and_translates_it(backend: str, kind: str, cls: type) -> None:
    runtime = make_runtime(backend)
    before = runtime.health()
    error: Any = runtime.fault_error(kind, doing="launch")
    assert type(error) is cls and error.code == FAULT_CODES[backend][kind] and error.backend == backend
    table = hip_errors.HIP_ERRORS if backend == "rocm" else cuda_errors.CUDA_RUNTIME_ERRORS
    assert error.code_name == table[error.code][0]
    assert isinstance(error.__cause__, runtime_api.CUDARuntimeError)
    assert error.xid == (79 if (backend, kind) == ("cuda", "lost") else None)
    assert runtime.health() == before  # building an error is not seeing one


def test_fault_error_for_an_allocation_is_cupys_pool_error_and_explicit_codes_work() -> None:
    runtime = make_runtime()
    error: Any = runtime.fault_error("oom", doing="alloc")
    assert isinstance(error.__cause__, cupy.cuda.memory.OutOfMemoryError) and error.code == 2
    assert type(runtime.fault_error("code", code=716)) is hetero.ContextCorruptedError
    with pytest.raises(ValueError, match="valid kinds"):
        runtime.fault_error("melted")
    with pytest.raises(ValueError, match="needs a vendor code"):
        runtime.fault_error("code")


def test_a_context_corrupting_error_makes_the_device_unhealthy_for_the_process() -> None:
    runtime = make_runtime()
    with pytest.raises(hetero.DeviceOutOfMemoryError), runtime._on_device("allocating"):
        raise runtime_api.CUDARuntimeError(2)
    assert runtime.health().state is HealthState.OK  # out of memory is recoverable
    with pytest.raises(hetero.ContextCorruptedError), runtime._on_device("launching k"):
        raise runtime_api.CUDARuntimeError(719)
    health = runtime.health()
    assert health.state is HealthState.UNHEALTHY and "cudaErrorLaunchFailure" in health.reason
    assert "restart the process" in health.reason
    with pytest.raises(hetero.DeviceError), runtime._on_device("launching k"):
        raise runtime_api.CUDARuntimeError(1)
    assert runtime.health() == health  # stays, whatever comes after


def test_uncorrectable_ecc_degrades_and_loss_is_unhealthy() -> None:
    runtime = make_runtime()
    with pytest.raises(hetero.DeviceDegradedError), runtime._on_device("synchronizing"):
        raise runtime_api.CUDARuntimeError(214)
    assert runtime.health().state is HealthState.DEGRADED
    with pytest.raises(hetero.DeviceLostError), runtime._on_device("synchronizing"):
        raise runtime_api.CUDARuntimeError(46)
    assert runtime.health().state is HealthState.UNHEALTHY and "lost" in runtime.health().reason


def test_a_failing_launch_is_translated_and_marks_the_device() -> None:
    runtime = make_runtime()

    def kernel(grid: Any, block: Any, args: Any) -> None:
        raise runtime_api.CUDARuntimeError(700)

    with pytest.raises(hetero.ContextCorruptedError) as caught:
        runtime.launch(kernel, (1000,), None, [])
    assert "(grid (4,), block (250,))" in str(caught.value) and caught.value.code == 700
    assert runtime.health().state is HealthState.UNHEALTHY
