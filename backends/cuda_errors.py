"""CUDA/HIP runtime errors as hetero errors: a table from vendor code to name and error class.

Every CuPy call inside the ``cuda``/``rocm`` backends that fails becomes a
:class:`~hetero.errors.DeviceError` carrying the backend, the device, the vendor code
and its name, so fault handling can classify it without parsing text. The names are
those of ``cudaError_t`` (CUDA Runtime API, "Data types" -> enum cudaError); HIP's
``hipError_t`` uses the same numbers for these codes (HIP's hip_runtime_api.h).
"""

from __future__ import annotations

from typing import Any

from hetero.errors import DeviceError, DeviceOutOfMemoryError

#: code -> (CUDA runtime name, error class). Source: CUDA Runtime API, enum cudaError.
CUDA_RUNTIME_ERRORS: dict[int, tuple[str, type[DeviceError]]] = {
    1: ("cudaErrorInvalidValue", DeviceError),
    2: ("cudaErrorMemoryAllocation", DeviceOutOfMemoryError),  # out of memory: recoverable
    3: ("cudaErrorInitializationError", DeviceError),
    9: ("cudaErrorInvalidConfiguration", DeviceError),  # bad launch configuration: recoverable
    35: ("cudaErrorInsufficientDriver", DeviceError),
    46: ("cudaErrorDevicesUnavailable", DeviceError),  # busy or unavailable (exclusive mode, lost)
    100: ("cudaErrorNoDevice", DeviceError),
    101: ("cudaErrorInvalidDevice", DeviceError),
    200: ("cudaErrorInvalidKernelImage", DeviceError),
    201: ("cudaErrorDeviceUninitialized", DeviceError),
    209: ("cudaErrorNoKernelImageForDevice", DeviceError),
    214: ("cudaErrorECCUncorrectable", DeviceError),  # uncorrectable ECC: degraded device
    400: ("cudaErrorInvalidResourceHandle", DeviceError),
    700: ("cudaErrorIllegalAddress", DeviceError),  # context-corrupting ("sticky") from here to 719
    701: ("cudaErrorLaunchOutOfResources", DeviceError),
    702: ("cudaErrorLaunchTimeout", DeviceError),
    709: ("cudaErrorContextIsDestroyed", DeviceError),
    710: ("cudaErrorAssert", DeviceError),
    714: ("cudaErrorHardwareStackError", DeviceError),
    715: ("cudaErrorIllegalInstruction", DeviceError),
    716: ("cudaErrorMisalignedAddress", DeviceError),
    717: ("cudaErrorInvalidAddressSpace", DeviceError),
    718: ("cudaErrorInvalidPc", DeviceError),
    719: ("cudaErrorLaunchFailure", DeviceError),
    720: ("cudaErrorCooperativeLaunchTooLarge", DeviceError),
    801: ("cudaErrorNotSupported", DeviceError),
    802: ("cudaErrorSystemNotReady", DeviceError),
    803: ("cudaErrorSystemDriverMismatch", DeviceError),
    999: ("cudaErrorUnknown", DeviceError),  # often what a GPU that fell off the bus reports
}


def translate(exc: BaseException, backend: str, device: str, doing: str) -> DeviceError:
    """The hetero error for a CuPy exception raised while ``doing`` something on ``device``."""
    if type(exc).__name__ == "OutOfMemoryError":  # CuPy's memory pool: no vendor code attached
        return DeviceOutOfMemoryError(f"{doing} failed: {exc}", backend=backend, device=device,
                                      code=2, code_name="cudaErrorMemoryAllocation")
    code: Any = getattr(exc, "status", None)
    code = code if isinstance(code, int) else None
    text = str(exc)
    prefix = text.split(":", 1)[0].strip() if ":" in text else None
    if type(exc).__name__ == "CUDADriverError":  # driver API: CUDA_ERROR_* names, same numbers for these codes
        name, kind = prefix, (DeviceOutOfMemoryError if code == 2 else DeviceError)
    else:
        name, kind = CUDA_RUNTIME_ERRORS.get(code, (prefix, DeviceError)) if code is not None else (prefix, DeviceError)
    return kind(f"{doing} failed: {text}", backend=backend, device=device, code=code, code_name=name)
