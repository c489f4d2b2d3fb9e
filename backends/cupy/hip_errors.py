"""HIP runtime errors (``hipError_t``) for the ``rocm`` backend: code -> (HIP name, hetero error class).

Source: HIP's ``include/hip/hip_runtime_api.h`` (``typedef enum hipError_t``, ROCm/HIP). HIP
reuses CUDA's numbers for the codes it shares, but names them its own way and lacks some
(no 714-718: AMD GPUs report those faults as hipErrorLaunchFailure or hipErrorIllegalAddress).
The classes follow the CUDA rows of the same meaning (see :mod:`hetero.backends.cupy.cuda_errors`).
"""

from __future__ import annotations

from hetero.core.errors import ContextCorruptedError, DeviceDegradedError, DeviceError, DeviceLostError, DeviceOutOfMemoryError

HIP_ERRORS: dict[int, tuple[str, type[DeviceError]]] = {
    1: ("hipErrorInvalidValue", DeviceError),
    2: ("hipErrorOutOfMemory", DeviceOutOfMemoryError),  # hipErrorMemoryAllocation is its deprecated alias
    3: ("hipErrorNotInitialized", DeviceError),
    4: ("hipErrorDeinitialized", DeviceError),
    9: ("hipErrorInvalidConfiguration", DeviceError),
    35: ("hipErrorInsufficientDriver", DeviceError),
    53: ("hipErrorPriorLaunchFailure", ContextCorruptedError),  # an earlier kernel faulted: the context is poisoned
    98: ("hipErrorInvalidDeviceFunction", DeviceError),
    100: ("hipErrorNoDevice", DeviceLostError),  # "hipGetDeviceCount returned 0 devices": mid-run, it left
    101: ("hipErrorInvalidDevice", DeviceError),
    200: ("hipErrorInvalidImage", DeviceError),
    201: ("hipErrorInvalidContext", DeviceError),
    209: ("hipErrorNoBinaryForGpu", DeviceError),
    214: ("hipErrorECCNotCorrectable", DeviceDegradedError),
    218: ("hipErrorInvalidKernelFile", DeviceError),
    400: ("hipErrorInvalidHandle", DeviceError),
    700: ("hipErrorIllegalAddress", ContextCorruptedError),
    701: ("hipErrorLaunchOutOfResources", DeviceError),  # a launch configuration error: recoverable
    702: ("hipErrorLaunchTimeOut", ContextCorruptedError),
    709: ("hipErrorContextIsDestroyed", DeviceError),
    710: ("hipErrorAssert", ContextCorruptedError),  # "produced when the kernel calls assert"
    719: ("hipErrorLaunchFailure", ContextCorruptedError),  # "an exception occurred on the device while executing a kernel"
    720: ("hipErrorCooperativeLaunchTooLarge", DeviceError),
    801: ("hipErrorNotSupported", DeviceError),
    999: ("hipErrorUnknown", DeviceError),
    1052: ("hipErrorRuntimeMemory", DeviceError),  # an HSA runtime memory call failed
    1053: ("hipErrorRuntimeOther", DeviceError),  # another HSA runtime call failed
}
