"""ONNX Runtime's device errors (as its CUDA and ROCm providers word them) read as hetero's, and
classified as hetero's own would be; its other errors are no device faults."""

from __future__ import annotations

import pytest

import hetero
from hetero.core.errors import ContextCorruptedError, DeviceError, DeviceLostError, DeviceOutOfMemoryError
from hetero.fault import ort_errors
from hetero.fault.taxonomy import FaultClass

state = pytest.importorskip("onnxruntime.capi.onnxruntime_pybind11_state", reason="needs onnxruntime")

# The format of onnxruntime/core/providers/cuda/cuda_call.cc: "%s failure %d: %s ; GPU=%d ; hostname=%s ; expr=%s; %s"
ILLEGAL = ("[ONNXRuntimeError] : 1 : FAIL : CUDA failure 700: an illegal memory access was encountered ; GPU=0 ; "
           "hostname=node7 ; file=cuda_call.cc ; line=129 ; expr=cudaStreamSynchronize(stream);")


@pytest.mark.parametrize("kind, text, error_type, fault_class, code", [
    ("Fail", ILLEGAL, ContextCorruptedError, FaultClass.CONTEXT_CORRUPTING, 700),
    ("RuntimeException", "HIP failure 2: out of memory ; GPU=1 ; hostname=h ; expr=hipMalloc(&p, n);",
     DeviceOutOfMemoryError, FaultClass.RECOVERABLE, 2),
    ("Fail", "Failed to allocate memory for requested buffer of size 8589934592", DeviceOutOfMemoryError,
     FaultClass.RECOVERABLE, None),  # the CPU arena's: no runtime code
    ("EPFail", "CUDA failure 999: unknown error ; GPU=0 ; hostname=h ; expr=cudaLaunchKernel(...);", DeviceError,
     None, 999),
    ("DeviceReset", "device reset", DeviceLostError, FaultClass.DEVICE_LOST, None),
])
def test_provider_errors_become_hetero_device_errors(kind: str, text: str, error_type: type, fault_class, code) -> None:
    device = hetero.device("cpu") if kind == "Fail" and "allocate" in text else None
    error = getattr(state, kind)(text)
    found = ort_errors.recognise(error, device)
    assert found is not None and isinstance(found.error, error_type)
    assert found.error.code == code and found.error.__cause__ is error
    verdict = hetero.fault.classify(error)
    if fault_class is not None:
        assert verdict.fault_class is fault_class, verdict.reason
    assert verdict.is_fault


def test_library_failures_are_read_by_their_status_names() -> None:
    error = state.Fail("CUBLAS failure 13: CUBLAS_STATUS_EXECUTION_FAILED ; GPU=0 ; hostname=h ; expr=cublasSgemm(...);")
    found = ort_errors.recognise(error)
    assert found is not None and found.error.backend == "cuda"
    assert "CUBLAS_STATUS_EXECUTION_FAILED" in str(found.error)


@pytest.mark.parametrize("kind, text", [
    ("InvalidArgument", "[ONNXRuntimeError] : 2 : INVALID_ARGUMENT : Got invalid dimensions for input: x"),
    ("NotImplemented", "Could not find an implementation for Foo(1) node with name ''"),
    ("Fail", "Load model from m.onnx failed: Protobuf parsing failed."),
])
def test_other_onnxruntime_errors_are_no_device_faults(kind: str, text: str) -> None:
    error = getattr(state, kind)(text)
    assert ort_errors.recognise(error) is None
    assert not hetero.fault.classify(error).is_fault


def test_only_onnxruntime_types_are_read() -> None:
    assert not ort_errors.is_ort_error(RuntimeError(ILLEGAL))
    assert ort_errors.is_ort_error(state.Fail("x"))
