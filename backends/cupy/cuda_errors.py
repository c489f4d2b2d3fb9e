"""CUDA runtime/driver errors as hetero errors: tables from vendor code to name and error class.

Every CuPy call inside the ``cuda``/``rocm`` backends that fails becomes a
:class:`~hetero.core.errors.DeviceError` subclass carrying the backend, the device, the vendor
code and its name, so fault handling classifies it without parsing text:

- :class:`~hetero.core.errors.DeviceOutOfMemoryError`: out of memory (recoverable);
- :class:`~hetero.core.errors.ContextCorruptedError`: "sticky" errors, after which every CUDA call
  in the process fails (the CUDA docs say so for each row marked sticky below);
- :class:`~hetero.core.errors.DeviceLostError`: the device is gone or unavailable;
- :class:`~hetero.core.errors.DeviceDegradedError`: uncorrectable ECC;
- :class:`~hetero.core.errors.DeviceError`: everything else (bad arguments, launch configuration).

Names and the sentences quoted in the comments are from NVIDIA's CUDA Runtime API reference,
"Data types used by CUDA Runtime" -> ``enum cudaError`` (CUDA 13), and the Driver API's
``enum CUresult`` (same codes for every row of the driver table). The ROCm backend uses the
HIP table in :mod:`hetero.backends.cupy.hip_errors`.
"""

from __future__ import annotations

from typing import Any

from hetero.core.errors import ContextCorruptedError, DeviceDegradedError, DeviceError, DeviceLostError, DeviceOutOfMemoryError

Row = tuple[str, type[DeviceError]]
STICKY = ContextCorruptedError  # short alias: keeps the table one row a line

#: code -> (cudaError_t name, error class). Source: CUDA Runtime API, enum cudaError.
CUDA_RUNTIME_ERRORS: dict[int, Row] = {
    1: ("cudaErrorInvalidValue", DeviceError),
    2: ("cudaErrorMemoryAllocation", DeviceOutOfMemoryError),  # "unable to allocate enough memory"
    3: ("cudaErrorInitializationError", DeviceError),
    4: ("cudaErrorCudartUnloading", DeviceError),
    9: ("cudaErrorInvalidConfiguration", DeviceError),  # bad launch configuration: recoverable
    35: ("cudaErrorInsufficientDriver", DeviceError),
    46: ("cudaErrorDevicesUnavailable", DeviceLostError),  # "all CUDA devices are busy or unavailable"
    100: ("cudaErrorNoDevice", DeviceLostError),  # "no CUDA-capable devices were detected": mid-run, it left
    101: ("cudaErrorInvalidDevice", DeviceError),  # a bad device ordinal: the caller's mistake
    200: ("cudaErrorInvalidKernelImage", DeviceError),
    201: ("cudaErrorDeviceUninitialized", DeviceError),
    209: ("cudaErrorNoKernelImageForDevice", DeviceError),
    214: ("cudaErrorECCUncorrectable", DeviceDegradedError),  # "uncorrectable ECC error was detected"
    222: ("cudaErrorUnsupportedPtxVersion", DeviceError),  # PTX newer than the driver: compile for the arch
    400: ("cudaErrorInvalidResourceHandle", DeviceError),
    700: ("cudaErrorIllegalAddress", STICKY),  # "leaves the process in an inconsistent state"
    701: ("cudaErrorLaunchOutOfResources", DeviceError),  # too many registers/threads: a launch config error
    702: ("cudaErrorLaunchTimeout", STICKY),  # watchdog timeout: "inconsistent state", process must restart
    709: ("cudaErrorContextIsDestroyed", DeviceError),
    710: ("cudaErrorAssert", STICKY),  # device assert: "the process must be terminated and relaunched"
    714: ("cudaErrorHardwareStackError", STICKY),  # 714-719: "inconsistent state ... terminated and relaunched"
    715: ("cudaErrorIllegalInstruction", STICKY),
    716: ("cudaErrorMisalignedAddress", STICKY),
    717: ("cudaErrorInvalidAddressSpace", STICKY),
    718: ("cudaErrorInvalidPc", STICKY),
    719: ("cudaErrorLaunchFailure", STICKY),  # "an exception occurred on the device while executing a kernel"
    720: ("cudaErrorCooperativeLaunchTooLarge", DeviceError),
    801: ("cudaErrorNotSupported", DeviceError),
    802: ("cudaErrorSystemNotReady", DeviceError),
    803: ("cudaErrorSystemDriverMismatch", DeviceError),
    999: ("cudaErrorUnknown", DeviceError),  # what a GPU that fell off the bus reports: lost with Xid 79 (below)
}

#: code -> (CUresult name, error class). Source: CUDA Driver API, enum CUresult (cuda.h); the
#: classes follow the runtime rows of the same code, whose documented meaning is the same.
CUDA_DRIVER_ERRORS: dict[int, Row] = {
    1: ("CUDA_ERROR_INVALID_VALUE", DeviceError),
    2: ("CUDA_ERROR_OUT_OF_MEMORY", DeviceOutOfMemoryError),
    3: ("CUDA_ERROR_NOT_INITIALIZED", DeviceError),
    4: ("CUDA_ERROR_DEINITIALIZED", DeviceError),
    46: ("CUDA_ERROR_DEVICE_UNAVAILABLE", DeviceLostError),
    100: ("CUDA_ERROR_NO_DEVICE", DeviceLostError),
    101: ("CUDA_ERROR_INVALID_DEVICE", DeviceError),
    200: ("CUDA_ERROR_INVALID_IMAGE", DeviceError),
    201: ("CUDA_ERROR_INVALID_CONTEXT", DeviceError),
    209: ("CUDA_ERROR_NO_BINARY_FOR_GPU", DeviceError),
    214: ("CUDA_ERROR_ECC_UNCORRECTABLE", DeviceDegradedError),
    222: ("CUDA_ERROR_UNSUPPORTED_PTX_VERSION", DeviceError),
    400: ("CUDA_ERROR_INVALID_HANDLE", DeviceError),
    700: ("CUDA_ERROR_ILLEGAL_ADDRESS", STICKY),
    701: ("CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES", DeviceError),
    702: ("CUDA_ERROR_LAUNCH_TIMEOUT", STICKY),
    709: ("CUDA_ERROR_CONTEXT_IS_DESTROYED", DeviceError),
    710: ("CUDA_ERROR_ASSERT", STICKY),
    714: ("CUDA_ERROR_HARDWARE_STACK_ERROR", STICKY),
    715: ("CUDA_ERROR_ILLEGAL_INSTRUCTION", STICKY),
    716: ("CUDA_ERROR_MISALIGNED_ADDRESS", STICKY),
    717: ("CUDA_ERROR_INVALID_ADDRESS_SPACE", STICKY),
    718: ("CUDA_ERROR_INVALID_PC", STICKY),
    719: ("CUDA_ERROR_LAUNCH_FAILED", STICKY),
    720: ("CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE", DeviceError),
    801: ("CUDA_ERROR_NOT_SUPPORTED", DeviceError),
    802: ("CUDA_ERROR_SYSTEM_NOT_READY", DeviceError),
    803: ("CUDA_ERROR_SYSTEM_DRIVER_MISMATCH", DeviceError),
    999: ("CUDA_ERROR_UNKNOWN", DeviceError),
}

#: Xids after which any CUDA error on that device means the device is gone (NVIDIA "Xid Errors"
#: catalogue: 79 "GPU has fallen off the bus"). Other Xids are attached to the error, not reclassified.
LOST_XIDS = frozenset({79})


def tables_for(backend: str, driver: bool) -> dict[int, Row]:
    """The code table a backend's errors are read with (HIP's for ``rocm``: CuPy's ROCm build
    reports hipError_t codes from both its runtime and driver wrappers)."""
    if backend == "rocm":
        from hetero.backends.cupy.hip_errors import HIP_ERRORS

        return HIP_ERRORS
    return CUDA_DRIVER_ERRORS if driver else CUDA_RUNTIME_ERRORS


def error_class(code: int, backend: str = "cuda", driver: bool = False) -> type[DeviceError]:
    """The hetero error class for a vendor ``code`` (DeviceError for codes not in the table)."""
    return tables_for(backend, driver).get(code, ("", DeviceError))[1]


def translate(exc: BaseException, backend: str, device: str, doing: str, xid: int | None = None) -> DeviceError:
    """The hetero error for a CuPy exception raised while ``doing`` something on ``device``;
    ``xid`` is the last NVIDIA Xid seen on that device recently, when known."""
    if type(exc).__name__ == "OutOfMemoryError":  # CuPy's memory pool: no vendor code attached
        oom_name = tables_for(backend, False)[2][0]
        return DeviceOutOfMemoryError(f"{doing} failed: {exc}", backend=backend, device=device,
                                      code=2, code_name=oom_name, xid=xid)
    code: Any = getattr(exc, "status", None)
    code = int(code) if isinstance(code, int) else None
    text = str(exc)
    prefix: str | None = text.split(":", 1)[0].strip() if ":" in text else None
    table = tables_for(backend, driver=type(exc).__name__ == "CUDADriverError")
    row = table.get(code) if code is not None else None
    name: str | None = row[0] if row is not None else prefix
    kind = row[1] if row is not None else DeviceError
    if xid in LOST_XIDS:
        kind = DeviceLostError
    return kind(f"{doing} failed: {text}", backend=backend, device=device, code=code, code_name=name, xid=xid)
