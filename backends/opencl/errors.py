"""OpenCL status codes as hetero errors: which codes mean out of memory, a corrupted context or a
lost device, and the PyOpenCL error object a real failing call raises for a code.

Used by :mod:`hetero.backends.opencl.runtime` for every failing call and for fault injection
(``fault_error``), so an injected ``opencl:-5`` goes through exactly the translation a real one
does. Names and meanings: the OpenCL 3.0 API specification, appendix "Error Codes"
(``CL_*`` constants in ``CL/cl.h``).
"""

from __future__ import annotations

from types import ModuleType
from typing import Any

from hetero.core.errors import ContextCorruptedError, DeviceError, DeviceLostError, DeviceOutOfMemoryError

CL_DEVICE_NOT_AVAILABLE = -2
CL_MEM_OBJECT_ALLOCATION_FAILURE = -4
CL_OUT_OF_RESOURCES = -5
CL_OUT_OF_HOST_MEMORY = -6
CL_INVALID_VALUE = -30
CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST = -14

#: code -> error class, for the codes fault handling must tell apart (others are DeviceError).
#: -2: the device went away (OpenCL's "device lost"). -4/-6: device or host memory exhausted
#: (recoverable). -5 is the ambiguous one: after a kernel was enqueued it is how drivers (Intel,
#: NVIDIA, AMD) report a kernel that faulted (out-of-bounds access, watchdog), and the context is
#: unusable; on an allocation or copy with no kernel involved it means resources ran out.
#: -14: a command this one waited on failed (a faulted kernel earlier in the in-order queue).
#: -33/-34/-36: the device, context or queue hetero created and still holds became invalid: drivers
#: answer every call this way once a device is gone or a kernel crashed the queue (hetero never
#: passes a handle it did not create, so these are not caller bugs here).
#: -9999: not in the specification; NVIDIA's OpenCL driver returns it after a kernel's illegal memory
#: access, after which the context is unusable (the same reading as hetero.fault.taxonomy).
OPENCL_ERRORS: dict[int, type[DeviceError]] = {
    CL_DEVICE_NOT_AVAILABLE: DeviceLostError,
    CL_MEM_OBJECT_ALLOCATION_FAILURE: DeviceOutOfMemoryError,
    CL_OUT_OF_HOST_MEMORY: DeviceOutOfMemoryError,
    CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST: ContextCorruptedError,
    -33: DeviceLostError,  # CL_INVALID_DEVICE
    -34: ContextCorruptedError,  # CL_INVALID_CONTEXT
    -36: ContextCorruptedError,  # CL_INVALID_COMMAND_QUEUE
    -9999: ContextCorruptedError,  # NVIDIA: illegal memory access
}

#: Codes outside the specification that drivers are known to return, by the name fault handling uses.
_VENDOR_NAMES = {-9999: "NVIDIA_ILLEGAL_MEMORY_ACCESS"}

#: The OpenCL code a fault kind is injected as (``degraded`` has no OpenCL code: hardware
#: degradation reaches OpenCL applications only through vendor health tools).
KIND_CODES: dict[str, int | None] = {
    "lost": CL_DEVICE_NOT_AVAILABLE,
    "sticky": CL_OUT_OF_RESOURCES,
    "oom": CL_MEM_OBJECT_ALLOCATION_FAILURE,
    "degraded": None,
}

#: The OpenCL entry point that reports an error while doing each operation (for the error record).
ROUTINES = {"launch": "clEnqueueNDRangeKernel", "sync": "clFinish", "alloc": "clCreateBuffer",
            "copy": "clEnqueueCopyBuffer", "health": "clWaitForEvents"}


def code_name(cl: ModuleType, code: int | None) -> str | None:
    """``CL_OUT_OF_RESOURCES`` for -5 (None for no code, ``CL_ERROR_<code>`` for one PyOpenCL does not know)."""
    if code is None:
        return None
    if code in _VENDOR_NAMES:
        return _VENDOR_NAMES[code]
    try:
        name = str(cl.status_code.to_string(code))
    except (ValueError, TypeError, AttributeError):
        name = ""
    return f"CL_{name}" if name and name.replace("_", "").isalnum() else f"CL_ERROR_{code}"


def error_class(code: int | None, after_kernel: bool) -> type[DeviceError]:
    """The hetero error class for an OpenCL status ``code``; ``after_kernel``: a kernel was
    enqueued since the queue last drained (or the call is a launch or a wait)."""
    if code == CL_OUT_OF_RESOURCES:
        return ContextCorruptedError if after_kernel else DeviceOutOfMemoryError
    return OPENCL_ERRORS.get(code, DeviceError) if code is not None else DeviceError


def translate(cl: ModuleType, exc: BaseException, backend: str, device: str, doing: str,
              after_kernel: bool) -> DeviceError:
    """The hetero error for a PyOpenCL error raised while ``doing`` something on ``device``;
    its ``__cause__`` is the PyOpenCL error."""
    code: Any = getattr(exc, "code", None)
    code = code if isinstance(code, int) else None
    kind = error_class(code, after_kernel)
    error = kind(f"{doing} failed: {exc}", backend=backend, device=device, code=code, code_name=code_name(cl, code))
    error.__cause__ = exc
    return error


def pyopencl_error(cl: ModuleType, code: int, routine: str, message: str) -> BaseException:
    """The PyOpenCL exception a failing call with status ``code`` raises, built as PyOpenCL builds it:
    an ``_ErrorRecord`` in ``MemoryError`` (allocation failure), ``LogicError`` (codes at or below
    CL_INVALID_VALUE: programming errors) or ``RuntimeError`` (the rest)."""
    record = cl._cl._ErrorRecord(msg=message, code=code, routine=routine)
    if code == CL_MEM_OBJECT_ALLOCATION_FAILURE:
        return cl.MemoryError(record)
    if code <= CL_INVALID_VALUE:
        return cl.LogicError(record)
    if code < 0:
        return cl.RuntimeError(record)
    return cl.Error(record)
