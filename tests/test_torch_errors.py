"""torch's and CuPy's device errors classify as hetero's own errors for the same fault: every row of
hetero.fault.torch_errors on real torch exception objects carrying the messages as torch writes
them, CuPy's runtime/driver/pool errors by their codes, and no torch import to classify."""

from __future__ import annotations

from typing import Any

import pytest

import hetero
from hetero.core.errors import ContextCorruptedError, DeviceOutOfMemoryError, RecoveryFailedError
from hetero.fault import FaultClass, classify
from hetero.fault.foreign_errors import UNKNOWN_DEVICE, recognise
from hetero.fault.taxonomy import CODE_TABLES
from hetero.fault.torch_errors import RUNTIME, TORCH_ERRORS, TorchErrorRow

torch = pytest.importorskip("torch")
dist = pytest.importorskip("torch.distributed")

#: What c10_cuda_check_implementation (c10/cuda/CUDAException.cpp, CUDAMiscFunctions.cpp) appends.
CUDA_SUFFIX = ("\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
               "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
               "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
HIP_SUFFIX = ("\nHIP kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
              "might be incorrect.\nFor debugging consider passing AMD_SERIALIZE_KERNEL=3\n"
              "Compile with `TORCH_USE_HIP_DSA` to enable device-side assertions.\n")
NCCL_AT = "NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, "


def runtime(text: str, stack: str = "CUDA") -> str:
    return f"{stack} error: {text}" + (CUDA_SUFFIX if stack == "CUDA" else HIP_SUFFIX)


def both(text: str) -> list[str]:
    return [runtime(text), runtime(text, "HIP")]


#: Per row (by its spelling, less the "CUDA/HIP error: " prefix), messages exactly as torch writes them.
EXAMPLES: dict[str, list[str]] = {
    r"CUDA out of memory": [
        ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which 1.25 GiB "
        "is free. Including non-PyTorch memory, this process has 77.85 GiB memory in use. Of the allocated memory "
        "75.12 GiB is allocated by PyTorch, and 1.20 GiB is reserved by PyTorch but unallocated. If reserved but "
        "unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid "
        "fragmentation.  See documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)")],
    r"HIP out of memory": [
        ("HIP out of memory. Tried to allocate 4.00 GiB. GPU 0 has a total capacity of 191.98 GiB of which 2.11 GiB "
        "is free. Of the allocated memory 186.01 GiB is allocated by PyTorch, and 1.05 GiB is reserved by PyTorch "
        "but unallocated.")],
    r"XPU out of memory": [
        ("XPU out of memory. Tried to allocate 1024.00 MiB. GPU 0 has a total capacity of 15.11 GiB. Of the allocated "
        "memory 13.50 GiB is allocated by PyTorch, and 512.00 MiB is reserved by PyTorch but unallocated.")],
    r"MPS backend out of memory": [
        ("MPS backend out of memory (MPS allocated: 17.00 GB, other allocations: 1.50 GB, max allowed: 18.13 GB). "
        "Tried to allocate 512.00 MB on private pool. Use PYTORCH_MPS_HIGH_WATERMARK_RATIO=0.0 to disable upper "
        "limit for memory allocations (may cause system failure).")],
    r"DefaultCPUAllocator: can't allocate memory": [  # torch 2.13, torch.empty(2**60, dtype=torch.uint8)
        ("[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
         "allocate 1152921504606846976 bytes. Error code 12 (Cannot allocate memory)")],
    "unspecified launch failure in prior launch": [runtime("unspecified launch failure in prior launch", "HIP")],
    "an illegal memory access was encountered": both("an illegal memory access was encountered")
    + ["CUDA driver error: an illegal memory access was encountered"],
    "device-side assert triggered": both("device-side assert triggered"),
    "unspecified launch failure": both("unspecified launch failure"),
    "the launch timed out and was terminated": both("the launch timed out and was terminated"),
    "hardware stack error": [runtime("hardware stack error")],
    "an illegal instruction was encountered": [runtime("an illegal instruction was encountered")],
    "misaligned address": [runtime("misaligned address")],
    "operation not supported on global/shared address space": [
        runtime("operation not supported on global/shared address space")],
    "invalid program counter": [runtime("invalid program counter")],
    "context is destroyed": both("context is destroyed"),
    "initialization error": both("initialization error"),
    "unknown error": both("unknown error"),
    "uncorrectable ECC error encountered": both("uncorrectable ECC error encountered"),
    "uncorrectable NVLink error detected during the execution": [
        runtime("uncorrectable NVLink error detected during the execution")],
    "no CUDA-capable device is detected": [runtime("no CUDA-capable device is detected")],
    "no ROCm-capable device is detected": [runtime("no ROCm-capable device is detected", "HIP")],
    r"CUDA-capable device\(s\) is/are busy or unavailable": [runtime("CUDA-capable device(s) is/are busy or unavailable")],
    "out of memory": both("out of memory"),
    "too many resources requested for launch": both("too many resources requested for launch"),
    "invalid configuration argument": both("invalid configuration argument"),
    "no kernel image is available for execution on the device": both(
        "no kernel image is available for execution on the device"),
    "invalid device ordinal": both("invalid device ordinal"),
    "CUBLAS_STATUS_ALLOC_FAILED": ["CUDA error: CUBLAS_STATUS_ALLOC_FAILED when calling `cublasCreate(handle)`"],
    "CUBLAS_STATUS_EXECUTION_FAILED": [
        ("CUDA error: CUBLAS_STATUS_EXECUTION_FAILED when calling `cublasSgemm( handle, opa, opb, m, n, k, &alpha, a, "
        "lda, b, ldb, &beta, c, ldc)`")],
    "CUBLAS_STATUS_(?:INTERNAL_ERROR|NOT_INITIALIZED)": [
        ("CUDA error: CUBLAS_STATUS_INTERNAL_ERROR when calling `cublasGemmEx( handle, opa, opb, m, n, k, &falpha, a, "
        "CUDA_R_16F, lda, b, CUDA_R_16F, ldb, &fbeta, c, CUDA_R_16F, ldc, CUDA_R_32F, CUBLAS_GEMM_DEFAULT_TENSOR_OP)`"),
        "CUDA error: CUBLAS_STATUS_NOT_INITIALIZED when calling `cublasCreate(handle)`"],
    "HIPBLAS_STATUS_ALLOC_FAILED": ["CUDA error: HIPBLAS_STATUS_ALLOC_FAILED when calling `hipblasCreate(handle)`"],
    "HIPBLAS_STATUS_EXECUTION_FAILED": [
        ("CUDA error: HIPBLAS_STATUS_EXECUTION_FAILED when calling `hipblasSgemm( handle, opa, opb, m, n, k, &alpha, "
        "a, lda, b, ldb, &beta, c, ldc)`")],
    "CUDNN_STATUS_ALLOC_FAILED": ["cuDNN error: CUDNN_STATUS_ALLOC_FAILED"],
    r"CUDNN_STATUS_EXECUTION_FAILED\w*": ["cuDNN error: CUDNN_STATUS_EXECUTION_FAILED",
                                          "cuDNN error: CUDNN_STATUS_EXECUTION_FAILED_CUDART"],
    "miopenStatusAllocFailed|MIOPEN_STATUS_ALLOC_FAILED": ["miopenStatusAllocFailed"],
    "ncclUnhandledCudaError|unhandled cuda error": [
        NCCL_AT + "unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
        "ncclUnhandledCudaError: Call to CUDA function failed."],
    "ncclSystemError|ncclRemoteError": [
        NCCL_AT + "unhandled system error (run with NCCL_DEBUG=INFO for details), NCCL version 2.21.5\n"
        "ncclSystemError: System call (e.g. socket, malloc) or external library call failed or device error. ",
        NCCL_AT + "remote process exited or there was a network error, NCCL version 2.21.5\n"
        "ncclRemoteError: A call failed possibly due to a network error or a remote process exiting prematurely."],
    "ncclInternalError|ncclInvalidArgument|ncclInvalidUsage": [
        NCCL_AT + "invalid usage (run with NCCL_DEBUG=WARN for details), NCCL version 2.21.5\n"
        "ncclInvalidUsage: This usually reflects invalid usage of NCCL library."],
}


def key(row: TorchErrorRow) -> str:
    return row.spelling.removeprefix(RUNTIME)


def real_error(row: TorchErrorRow, message: str) -> BaseException:
    """The exception torch raises for the row, built from torch's own classes."""
    kinds: dict[str, Any] = {"torch.OutOfMemoryError": torch.OutOfMemoryError,
                             "torch.AcceleratorError": torch.AcceleratorError,
                             "torch.distributed.DistBackendError": dist.DistBackendError}
    return kinds.get(row.raised_as, RuntimeError)(message)


def family_of(row: TorchErrorRow, message: str) -> str:
    return row.family or ("hip" if message.startswith("HIP") else "cuda")


CASES = [pytest.param(row, message, id=f"{row.spelling[:40]}-{i}")
         for row in TORCH_ERRORS for i, message in enumerate(EXAMPLES.get(key(row), []))]


def test_every_row_has_examples_and_cites_its_source() -> None:
    assert [key(row) for row in TORCH_ERRORS] == list(EXAMPLES)
    for row in TORCH_ERRORS:
        assert "/" in row.source or ".h" in row.source, f"{row.spelling}: cite the torch/CUDA/HIP file it comes from"
        assert row.raised_as and row.fault_class in FaultClass
        assert row.code is not None or row.family is not None, f"{row.spelling}: a row names its code or library"


@pytest.mark.parametrize("row", TORCH_ERRORS, ids=lambda r: r.spelling[:40])
def test_coded_rows_agree_with_hetero_code_tables(row: TorchErrorRow) -> None:
    if row.code is None:
        assert row.family not in CODE_TABLES, "a CUDA/HIP row names its code"
        return
    families = [row.family] if row.family is not None else ["cuda", "hip"]
    for family in families:
        table_row = CODE_TABLES[family][row.code]
        assert table_row.fault_class is row.fault_class, f"{row.spelling}: {family} {row.code} is {table_row.fault_class}"


@pytest.mark.parametrize(("row", "message"), CASES)
def test_each_torch_error_classifies_as_its_row_says(row: TorchErrorRow, message: str) -> None:
    error = real_error(row, message)
    result = classify(error, events=[])
    assert result.fault_class is row.fault_class, result.reason
    assert result.code == row.code
    if row.code is not None:
        assert result.code_name == CODE_TABLES[family_of(row, message)][row.code].name
    else:
        assert result.code_name is not None and row.pattern.fullmatch(result.code_name)
    assert result.device == UNKNOWN_DEVICE  # outside a guard, torch's error names no hetero device


@pytest.mark.parametrize(("row", "message"), [c for c in CASES if c.values[0].raised_as == "torch.AcceleratorError"])
def test_an_accelerator_error_is_read_by_its_error_code(row: TorchErrorRow, message: str) -> None:
    error = torch.AcceleratorError(message)
    error.error_code = row.code  # as torch/csrc/Exceptions.cpp sets it
    result = classify(error, events=[])
    assert (result.fault_class, result.code) == (row.fault_class, row.code)
    assert f"error_code {row.code}" in result.reason


def test_the_error_code_decides_over_the_message() -> None:
    error = torch.AcceleratorError(runtime("unspecified launch failure"))
    error.error_code = 214  # uncorrectable ECC: the runtime's code is the truth
    assert classify(error, events=[]).fault_class is FaultClass.DEGRADED
    error.error_code = 123456
    result = classify(error, events=[])
    assert result.fault_class is FaultClass.NONE and "123456" in result.reason


def test_out_of_memory_is_recoverable_whatever_the_message() -> None:
    result = classify(torch.OutOfMemoryError("a new device's allocator gave up"), events=[])
    assert result.fault_class is FaultClass.RECOVERABLE and not result.quarantine
    assert result.code is None  # no runtime named: no CUDA/HIP code made up
    named = classify(torch.OutOfMemoryError("CUDA: the allocator gave up"), events=[])
    assert (named.fault_class, named.code, named.code_name) == (FaultClass.RECOVERABLE, 2, "cudaErrorMemoryAllocation")
    found = recognise(torch.cuda.OutOfMemoryError(EXAMPLES["CUDA out of memory"][0]))
    assert found is not None and isinstance(found.error, DeviceOutOfMemoryError) and found.error.code == 2


@pytest.mark.parametrize("error", [RuntimeError("boom"), RuntimeError("CUDA error: a string no runtime writes"),
                                   RecoveryFailedError(runtime("an illegal memory access was encountered")),
                                   ValueError(runtime("an illegal memory access was encountered"))],
                         ids=["plain", "unknown-cuda-string", "hetero-error", "not-a-runtime-error"])
def test_other_errors_stay_class_none(error: BaseException) -> None:
    assert classify(error, events=[]).fault_class is FaultClass.NONE
    assert recognise(error) is None


def test_the_current_device_is_the_one_named() -> None:
    error = torch.AcceleratorError(runtime("an illegal memory access was encountered"))
    with hetero.use_device("cpu"):
        result = classify(error, events=[])
    assert result.device == "cpu" and result.backend == "cpu" and result.code == 700
    found = recognise(error, hetero.device("cpu"))
    assert found is not None and isinstance(found.error, ContextCorruptedError) and found.error.__cause__ is error
    assert str(found.error).startswith("cpu: torch.AcceleratorError: CUDA error: an illegal memory access")


# -- CuPy's own exceptions, raised from user code -------------------------------------------------
runtime_api = pytest.importorskip("cupy_backends.cuda.api.runtime", reason="CuPy is not installed")


@pytest.mark.parametrize(("code", "fault_class"), [(700, FaultClass.CONTEXT_CORRUPTING), (2, FaultClass.RECOVERABLE),
                                                   (214, FaultClass.DEGRADED), (100, FaultClass.DEVICE_LOST),
                                                   (1, FaultClass.NONE)])
def test_cupy_runtime_errors_classify_by_their_status(code: int, fault_class: FaultClass) -> None:
    error = runtime_api.CUDARuntimeError(code)  # the constructor needs libcudart only, not a driver
    result = classify(error, events=[])
    assert (result.fault_class, result.code) == (fault_class, code)
    assert result.code_name == CODE_TABLES["cuda"][code].name and f"status {code}" in result.reason


def test_cupy_driver_errors_classify_by_their_status() -> None:
    driver_api = pytest.importorskip("cupy_backends.cuda.api.driver")
    try:
        error = driver_api.CUDADriverError(719)
    except RuntimeError:  # "CuPy failed to load libcuda.so.1": the constructor asks the driver for the name
        error = driver_api.CUDADriverError.__new__(driver_api.CUDADriverError)  # as the class unpickles
        error.status = 719
        error.args = ("CUDA_ERROR_LAUNCH_FAILED: unspecified launch failure",)
    result = classify(error, events=[])
    assert (result.fault_class, result.code, result.code_name) == (FaultClass.CONTEXT_CORRUPTING, 719,
                                                                    "CUDA_ERROR_LAUNCH_FAILED")  # the driver's table


def test_cupy_pool_out_of_memory_classifies_without_a_driver() -> None:
    memory = pytest.importorskip("cupy.cuda.memory")
    result = classify(memory.OutOfMemoryError(1 << 30, 0, 0), events=[])
    assert (result.fault_class, result.code, result.code_name) == (FaultClass.RECOVERABLE, 2, "cudaErrorMemoryAllocation")


def test_classify_never_imports_torch_or_cupy() -> None:
    from tests.conftest import run_python

    code = """
import sys
import hetero
from hetero.fault import classify
from hetero.core.errors import ContextCorruptedError
print(classify(ContextCorruptedError("x", backend="cuda", device="cuda:0", code=700), events=[]).fault_class)
print(classify(RuntimeError("CUDA error: an illegal memory access was encountered"), events=[]).fault_class)
print(classify(ValueError("not a device error"), events=[]).fault_class)
print("loaded:", sorted(m for m in sys.modules if m.split(".")[0] in ("torch", "cupy", "cupy_backends")))
"""
    out = run_python(code).stdout
    assert out.splitlines()[:3] == ["context-corrupting", "context-corrupting", "none"]
    assert "loaded: []" in out
