"""The fault taxonomy as data: which vendor error or NVIDIA Xid means what, and what to do.

Four fault classes (plus ``none`` for errors that are not device faults):

* **recoverable** — out of memory, a bad launch configuration: retry (or shrink) on the
  same device;
* **context-corrupting** — a "sticky" error (CUDA 700, 710, 714-719, the HIP equivalents,
  OpenCL ``CL_OUT_OF_RESOURCES`` after a kernel): the device is unusable in this process;
  migrate the work (another process may use the device again);
* **device-lost** — the device fell off the bus (Xid 79) or was removed: quarantine it;
* **degraded** — the hardware reports a problem (uncorrectable ECC, pending page retirement
  or row remap, thermal): quarantine it until it is reset and reports healthy.

The tables below are the single source: each row cites where its meaning comes from.
``hetero.fault.classify`` reads them; nothing here imports a vendor library. torch's messages
map onto these codes through :mod:`hetero.fault.torch_errors` (CuPy's errors carry the codes
themselves), so a torch or CuPy error classifies as hetero's own error for the same code.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Mapping


class FaultClass(str, enum.Enum):
    """What a device error means for the device."""

    RECOVERABLE = "recoverable"
    CONTEXT_CORRUPTING = "context-corrupting"
    DEVICE_LOST = "device-lost"
    DEGRADED = "degraded"
    NONE = "none"  # not a device fault (a bug, bad input, a missing toolchain): re-raise

    def __str__(self) -> str:
        return self.value


class Action(str, enum.Enum):
    """What the fault calls for. ``none``: nothing to recover; the error goes to the caller."""

    RETRY = "retry"  # same device, perhaps with less memory or a smaller work-group
    MIGRATE = "migrate"  # move the work to another device; this device is unusable in this process
    RESTART_PROCESS = "restart-process"  # the runtime of the whole process is broken: restart it
    QUARANTINE = "quarantine"  # quarantine the device, then migrate
    NONE = "none"

    def __str__(self) -> str:
        return self.value


#: How severe each class is: a join of several signals keeps the most severe.
SEVERITY: Mapping[FaultClass, int] = {
    FaultClass.NONE: 0, FaultClass.RECOVERABLE: 1, FaultClass.CONTEXT_CORRUPTING: 2,
    FaultClass.DEGRADED: 3, FaultClass.DEVICE_LOST: 4,
}

#: The action each class calls for unless a row says otherwise.
DEFAULT_ACTION: Mapping[FaultClass, Action] = {
    FaultClass.NONE: Action.NONE, FaultClass.RECOVERABLE: Action.RETRY,
    FaultClass.CONTEXT_CORRUPTING: Action.MIGRATE, FaultClass.DEGRADED: Action.QUARANTINE,
    FaultClass.DEVICE_LOST: Action.QUARANTINE,
}

#: Seconds a device stays quarantined per class (None: not quarantined). Override in the
#: config file: ``quarantine_ttl: {device-lost: 86400, application-bug: 0, ...}``.
DEFAULT_TTL: Mapping[str, float | None] = {
    "recoverable": None,
    "context-corrupting": 3600.0,  # a sticky error with no sign of an application bug
    "application-bug": 60.0,  # a sticky error with Xid 13/31/43: the GPU itself is fine
    "degraded": 6 * 3600.0,
    "device-lost": 24 * 3600.0,
    "none": None,
}


@dataclasses.dataclass(frozen=True)
class CodeRow:
    """One vendor error code: its name, class, and (when it differs from the class default)
    the action and quarantine TTL it calls for."""

    name: str
    fault_class: FaultClass
    note: str = ""
    action: Action | None = None
    ttl: float | None = None  # overrides the class's default TTL when set


R, C, L, D, N = (FaultClass.RECOVERABLE, FaultClass.CONTEXT_CORRUPTING, FaultClass.DEVICE_LOST,
                 FaultClass.DEGRADED, FaultClass.NONE)

# --- CUDA runtime API, enum cudaError (docs.nvidia.com/cuda/cuda-runtime-api, "Data types",
# group__CUDART__TYPES). The driver API's CUresult uses the same numbers for these codes. ---
CUDA_CODES: Mapping[int, CodeRow] = {
    1: CodeRow("cudaErrorInvalidValue", N, "a bad argument: a bug, not a device fault"),  # cudaError doc
    2: CodeRow("cudaErrorMemoryAllocation", R, "out of device memory: free or shrink, then retry"),  # cudaError doc
    # cudaError doc: "the CUDA driver and runtime could not be initialized": nothing on this device works here
    3: CodeRow("cudaErrorInitializationError", C, "the runtime failed to initialise in this process",
               action=Action.RESTART_PROCESS),
    4: CodeRow("cudaErrorCudartUnloading", N, "called during process shut-down"),  # cudaError doc
    9: CodeRow("cudaErrorInvalidConfiguration", R, "bad launch configuration: retry with a smaller block"),  # doc
    35: CodeRow("cudaErrorInsufficientDriver", N, "the driver is older than the runtime: update it"),  # doc
    # cudaError doc: "all CUDA-capable devices are busy or unavailable" (exclusive-process mode, or lost);
    # often another process holds the GPU, so quarantine it briefly only
    46: CodeRow("cudaErrorDevicesUnavailable", L, "busy (exclusive mode) or unavailable", ttl=300.0),
    100: CodeRow("cudaErrorNoDevice", L, "no CUDA device is present any more"),  # cudaError doc
    # cudaError doc: "the device ordinal supplied by the user does not correspond to a valid CUDA
    # device or ... the action requested is invalid for the specified device": the caller's mistake
    101: CodeRow("cudaErrorInvalidDevice", N, "a bad device ordinal or an action the device cannot do"),
    200: CodeRow("cudaErrorInvalidKernelImage", N, "the kernel image is invalid: rebuild it"),  # doc
    209: CodeRow("cudaErrorNoKernelImageForDevice", N, "no kernel image for this GPU's arch"),  # doc
    # cudaError doc: "an uncorrectable ECC error was detected during execution"; NVIDIA's Xid doc
    # pairs it with Xid 48 (DBE) / 94 / 95 and page retirement or row remapping
    214: CodeRow("cudaErrorECCUncorrectable", D, "uncorrectable ECC error"),
    # cudaError doc: "an uncorrectable NVLink error was detected during the execution"
    220: CodeRow("cudaErrorNvlinkUncorrectable", D, "uncorrectable NVLink error"),
    400: CodeRow("cudaErrorInvalidResourceHandle", N, "a bad stream/event handle: a bug"),  # doc
    # cudaError doc, 700 and 714-719: "This leaves the process in an inconsistent state and any
    # further CUDA work will return the same error. To continue using CUDA, the process must be
    # terminated and relaunched."
    700: CodeRow("cudaErrorIllegalAddress", C, "illegal memory access by a kernel"),
    # cudaError doc: "a launch did not occur because it did not have appropriate resources"
    # (too many registers/threads per block): retry with a smaller block
    701: CodeRow("cudaErrorLaunchOutOfResources", R, "too many resources requested for launch"),
    # cudaError doc: kernel exceeded the watchdog time; same "must be terminated" text as 700
    702: CodeRow("cudaErrorLaunchTimeout", C, "the kernel hit the launch time-out (watchdog)"),
    709: CodeRow("cudaErrorContextIsDestroyed", C, "the context was destroyed"),  # cudaError doc
    710: CodeRow("cudaErrorAssert", C, "a device-side assert fired"),  # cudaError doc, same text as 700
    714: CodeRow("cudaErrorHardwareStackError", C, "device-side stack corruption"),  # cudaError doc
    715: CodeRow("cudaErrorIllegalInstruction", C, "illegal instruction"),  # cudaError doc
    716: CodeRow("cudaErrorMisalignedAddress", C, "misaligned address"),  # cudaError doc
    717: CodeRow("cudaErrorInvalidAddressSpace", C, "invalid address space"),  # cudaError doc
    718: CodeRow("cudaErrorInvalidPc", C, "invalid program counter"),  # cudaError doc
    719: CodeRow("cudaErrorLaunchFailure", C, "exception while executing a kernel"),  # cudaError doc
    720: CodeRow("cudaErrorCooperativeLaunchTooLarge", R, "cooperative grid too large: shrink it"),  # doc
    801: CodeRow("cudaErrorNotSupported", N, "operation not supported on this device"),  # cudaError doc
    802: CodeRow("cudaErrorSystemNotReady", N, "the system is not ready (fabric manager?)"),  # cudaError doc
    803: CodeRow("cudaErrorSystemDriverMismatch", N, "driver and kernel module versions differ"),  # doc
    # cudaError doc: "an unknown internal error"; in practice what every call returns after the GPU
    # fell off the bus (then an Xid 79 is logged) or after a sticky fault
    999: CodeRow("cudaErrorUnknown", C, "unknown error (a lost GPU reports this too)"),
}

# --- HIP, enum hipError_t in hip/hip_runtime_api.h (ROCm): the same numbers as CUDA for these
# codes (HIP has no 714-718). ---
HIP_CODES: Mapping[int, CodeRow] = {
    1: CodeRow("hipErrorInvalidValue", N, "a bad argument: a bug, not a device fault"),  # hip_runtime_api.h
    2: CodeRow("hipErrorOutOfMemory", R, "out of device memory: free or shrink, then retry"),  # hip_runtime_api.h
    3: CodeRow("hipErrorNotInitialized", C, "the runtime failed to initialise in this process",
               action=Action.RESTART_PROCESS),  # hip_runtime_api.h
    9: CodeRow("hipErrorInvalidConfiguration", R, "bad launch configuration"),  # hip_runtime_api.h
    35: CodeRow("hipErrorInsufficientDriver", N, "the driver is too old: update it"),  # hip_runtime_api.h
    100: CodeRow("hipErrorNoDevice", L, "no HIP device is present any more"),  # hip_runtime_api.h
    # hip_runtime_api.h: "DeviceID must be in range from 0 to compute-devices": the caller's mistake
    101: CodeRow("hipErrorInvalidDevice", N, "a bad device ordinal"),
    # hip_runtime_api.h (deprecated code, still raised): an earlier kernel faulted, the context is poisoned
    53: CodeRow("hipErrorPriorLaunchFailure", C, "a previous launch failed"),
    200: CodeRow("hipErrorInvalidImage", N, "the code object is invalid: rebuild it"),  # hip_runtime_api.h
    209: CodeRow("hipErrorNoBinaryForGpu", N, "no code object for this GPU's arch"),  # hip_runtime_api.h
    214: CodeRow("hipErrorECCNotCorrectable", D, "uncorrectable ECC error"),  # hip_runtime_api.h
    400: CodeRow("hipErrorInvalidHandle", N, "a bad stream/event handle: a bug"),  # hip_runtime_api.h
    700: CodeRow("hipErrorIllegalAddress", C, "illegal memory access by a kernel"),  # hip_runtime_api.h
    701: CodeRow("hipErrorLaunchOutOfResources", R, "too many resources requested for launch"),  # hip_runtime_api.h
    702: CodeRow("hipErrorLaunchTimeOut", C, "the kernel hit the launch time-out"),  # hip_runtime_api.h
    709: CodeRow("hipErrorContextIsDestroyed", C, "the context was destroyed"),  # hip_runtime_api.h
    710: CodeRow("hipErrorAssert", C, "a device-side assert fired"),  # hip_runtime_api.h
    719: CodeRow("hipErrorLaunchFailure", C, "exception while executing a kernel"),  # hip_runtime_api.h
    720: CodeRow("hipErrorCooperativeLaunchTooLarge", R, "cooperative grid too large"),  # hip_runtime_api.h
    801: CodeRow("hipErrorNotSupported", N, "operation not supported"),  # hip_runtime_api.h
    999: CodeRow("hipErrorUnknown", C, "unknown error (a lost GPU reports this too)"),  # hip_runtime_api.h
    # hip_runtime_api.h (ROCm 5+): "internal runtime memory/other error" — the runtime itself broke
    1052: CodeRow("hipErrorRuntimeMemory", C, "HIP runtime internal memory error", action=Action.RESTART_PROCESS),
    1053: CodeRow("hipErrorRuntimeOther", C, "HIP runtime internal error", action=Action.RESTART_PROCESS),
}

# --- OpenCL, error codes of CL/cl.h (Khronos OpenCL API specification, "Error codes"). ---
OPENCL_CODES: Mapping[int, CodeRow] = {
    -1: CodeRow("CL_DEVICE_NOT_FOUND", L, "no device of the requested type any more"),  # cl.h / spec
    # spec: "device is not currently available" (clCreateContext; device info CL_DEVICE_AVAILABLE)
    -2: CodeRow("CL_DEVICE_NOT_AVAILABLE", L, "the device is not available"),
    -3: CodeRow("CL_COMPILER_NOT_AVAILABLE", N, "the platform has no compiler"),  # spec
    -4: CodeRow("CL_MEM_OBJECT_ALLOCATION_FAILURE", R, "buffer allocation failed: free or shrink"),  # spec
    # spec: "failure to allocate resources required by the OpenCL implementation on the device";
    # NVIDIA's and other GPU drivers report a kernel's out-of-bounds access this way, after which the
    # context is unusable (the backend raises ContextCorruptedError when it follows a kernel)
    -5: CodeRow("CL_OUT_OF_RESOURCES", C, "out of resources / a kernel faulted"),
    -6: CodeRow("CL_OUT_OF_HOST_MEMORY", R, "host memory exhausted: free some, then retry"),  # spec
    -11: CodeRow("CL_BUILD_PROGRAM_FAILURE", N, "the program failed to build"),  # spec
    # spec: a command in the event wait list failed (a previous kernel crashed)
    -14: CodeRow("CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST", C, "a command this one waits on failed"),
    -30: CodeRow("CL_INVALID_VALUE", N, "a bad argument: a bug"),  # spec
    -33: CodeRow("CL_INVALID_DEVICE", L, "the device is no longer valid"),  # spec
    -34: CodeRow("CL_INVALID_CONTEXT", C, "the context is no longer valid"),  # spec
    # spec: invalid queue; drivers return it on every call after a kernel crashed the queue
    -36: CodeRow("CL_INVALID_COMMAND_QUEUE", C, "the command queue is no longer valid"),
    -38: CodeRow("CL_INVALID_MEM_OBJECT", N, "a bad buffer: a bug"),  # spec
    -48: CodeRow("CL_INVALID_KERNEL", N, "a bad kernel object: a bug"),  # spec
    -52: CodeRow("CL_INVALID_KERNEL_ARGS", N, "kernel arguments not set: a bug"),  # spec
    -54: CodeRow("CL_INVALID_WORK_GROUP_SIZE", R, "work-group size not allowed: retry with another"),  # spec
    -55: CodeRow("CL_INVALID_WORK_ITEM_SIZE", R, "work-item sizes exceed the device's limits"),  # spec
    -61: CodeRow("CL_INVALID_BUFFER_SIZE", N, "buffer size invalid (zero or above the max)"),  # spec
    -63: CodeRow("CL_INVALID_GLOBAL_WORK_SIZE", N, "global work size invalid"),  # spec
    -1001: CodeRow("CL_PLATFORM_NOT_FOUND_KHR", N, "no OpenCL platform (ICD loader)"),  # cl_khr_icd
    # not in the spec: NVIDIA's OpenCL driver returns -9999 after a kernel's illegal memory access
    # (widely reported; the context is unusable afterwards)
    -9999: CodeRow("NVIDIA_ILLEGAL_MEMORY_ACCESS", C, "illegal memory access (NVIDIA OpenCL)"),
}

#: code table per error family; backends map to families in classify.
CODE_TABLES: Mapping[str, Mapping[int, CodeRow]] = {"cuda": CUDA_CODES, "hip": HIP_CODES, "opencl": OPENCL_CODES}


@dataclasses.dataclass(frozen=True)
class XidRow:
    """One NVIDIA Xid: what it means, NVIDIA's recommended immediate action, and our class.
    ``app_bug``: NVIDIA lists a user-application error as the usual cause and the GPU stays
    healthy (so a sticky error joined with it is quarantined only briefly)."""

    name: str
    fault_class: FaultClass
    nvidia_action: str
    app_bug: bool = False


# --- NVIDIA Xid catalog. Sources: NVIDIA "Xid Errors" (GPU Deployment and Management
# Documentation, docs.nvidia.com/deploy/xid-errors), its Xid catalog for Ampere and newer
# ("Analyzing Xid Errors with the Xid Catalog": mnemonic and Resolution Bucket (Immediate
# Action): RESTART_APP, RESET_GPU, RESTART_BM, WORKFLOW_XID_48, WORKFLOW_NVLINK_ERR, IGNORE,
# CONTACT_SUPPORT), and "Dynamic Page Retirement" (Xid 48/63/64). ---
XIDS: Mapping[int, XidRow] = {
    8: XidRow("GPU stopped processing (idle timeout)", C, "RESTART_APP"),  # catalog: ..._IDLE_TIMEOUT
    13: XidRow("Graphics Engine Exception", C, "RESTART_APP", app_bug=True),  # Xid doc: usually user app error
    31: XidRow("GPU memory page fault (MMU error)", C, "RESTART_APP", app_bug=True),  # Xid doc: illegal access by app
    32: XidRow("Invalid or corrupted push buffer stream", C, "RESTART_APP"),  # Xid doc: driver/bus/app
    38: XidRow("Driver firmware error", D, "RESET_GPU"),  # Xid doc: driver firmware error
    43: XidRow("GPU stopped processing (reset channel)", C, "RESTART_APP", app_bug=True),  # Xid doc: app fault, GPU healthy
    45: XidRow("Preemptive cleanup, due to previous errors", N, "IGNORE"),  # Xid doc: follows other errors / app killed
    48: XidRow("Double Bit ECC Error (DBE)", D, "WORKFLOW_XID_48"),  # Xid doc + Dynamic Page Retirement
    61: XidRow("Internal micro-controller breakpoint/warning", D, "RESET_GPU"),  # Xid doc
    62: XidRow("Internal micro-controller halt", D, "RESET_GPU"),  # Xid doc
    63: XidRow("ECC page retirement or row remapping recording event", D, "RESET_GPU"),  # Xid doc: pending, reset to apply
    64: XidRow("ECC page retirement or row remapper recording failure", D, "RESET_GPU"),  # Xid doc
    68: XidRow("NVDEC0 Exception (video processor)", C, "RESTART_APP"),  # Xid doc: HW, driver or app
    69: XidRow("Graphics Engine class error", C, "RESTART_APP"),  # Xid doc
    74: XidRow("NVLINK Error", D, "WORKFLOW_NVLINK_ERR"),  # Xid doc: link hardware; check mechanicals, reset
    79: XidRow("GPU has fallen off the bus", L, "RESTART_BM"),  # Xid doc: restart the bare-metal node
    92: XidRow("High single-bit ECC error rate", D, "RESET_GPU"),  # Xid doc
    # Xid doc: only the faulting app is affected and NVIDIA's A100 memory-error guide lets new work
    # land without a reset (the page is offlined); the row remap applies at the next reset. hetero
    # drains it like the other ECC Xids (the fault-handling issue groups 48/94/95 as degraded).
    94: XidRow("Contained ECC error", D, "RESTART_APP"),
    95: XidRow("Uncontained ECC error", D, "RESET_GPU"),  # Xid doc: all apps on the GPU affected
    109: XidRow("Context Switch Timeout Error", C, "RESTART_APP"),  # Xid doc
    119: XidRow("GSP RPC Timeout", L, "RESET_GPU"),  # Xid doc: GSP unresponsive until reset
    120: XidRow("GSP Error", L, "RESET_GPU"),  # Xid doc: GSP error; reset the GPU
    121: XidRow("C2C Link corrected error", D, "RESET_GPU"),  # Xid catalog (Grace Hopper C2C link)
    140: XidRow("Unrecovered ECC Error", D, "RESET_GPU"),  # Xid catalog: ECC unrecovered
    154: XidRow("GPU Recovery Action Changed", D, "RESET_GPU"),  # Xid catalog: the driver asks for a reset/drain
}
del R, C, L, D, N


def ttl_for(key: str, overrides: Mapping[str, float] | None = None) -> float | None:
    """Seconds to quarantine for a class (or ``application-bug``): the config's
    ``quarantine_ttl`` first, then :data:`DEFAULT_TTL`. None: do not quarantine; a TTL <= 0
    in the config turns quarantine off for that class."""
    if overrides and key in overrides:
        value = float(overrides[key])
        return value if value > 0 else None
    return DEFAULT_TTL.get(key)
