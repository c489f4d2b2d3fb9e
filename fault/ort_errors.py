"""ONNX Runtime's device errors read as hetero device errors.

ONNX Runtime raises its own exception types (``onnxruntime.capi.onnxruntime_pybind11_state.Fail``,
``RuntimeException``, ``EPFail``, ``DeviceReset`` ...: plain ``Exception`` subclasses) whose
message carries what the execution provider's runtime said. The CUDA and ROCm providers check
each runtime call with one macro (onnxruntime/core/providers/cuda/cuda_call.cc and its ROCm twin)
that writes ``<LIB> failure <code>: <text> ; GPU=<n> ; hostname=... ; expr=...``, with LIB one of
CUDA, CUBLAS, CUDNN, CURAND, CUFFT, NCCL or HIP, ROCBLAS, HIPBLAS, MIOPEN, RCCL; the arena says
``Failed to allocate memory for requested buffer of size N`` when the device is out of memory.

- ``CUDA``/``HIP failure <code>`` -> the CUDA/HIP code table of :mod:`hetero.fault.taxonomy`;
- a library failure (``CUBLAS failure 13: CUBLAS_STATUS_EXECUTION_FAILED``) -> the library status
  spellings of :data:`hetero.fault.torch_errors.TORCH_ERRORS` (the same names torch prints);
- the arena's allocation failure, or an out-of-memory code -> out of memory (recoverable);
- ``DeviceReset`` -> the device is lost.

Anything else (a bad feed, an unsupported operator, a model that does not load) is not a device
error: None. Nothing here imports onnxruntime: types are told apart by their module.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING

from hetero.core.errors import DeviceError, DeviceLostError, DeviceOutOfMemoryError
from hetero.fault.recognised import ERROR_OF_CLASS, UNKNOWN_DEVICE, Recognised, injected
from hetero.fault.taxonomy import CODE_TABLES, FaultClass
from hetero.fault.torch_errors import first_match

if TYPE_CHECKING:
    from hetero.core.device import Device

#: ``<LIB> failure <code>: <text>``, as ONNX Runtime's CUDA and ROCm providers write a failed call.
_FAILURE = re.compile(r"\b(CUDA|CUBLAS|CUDNN|CURAND|CUFFT|NCCL|HIP|ROCBLAS|HIPBLAS|MIOPEN|RCCL) failure (-?\d+): ?([^;\n]*)")
_ARENA_OOM = re.compile(r"Failed to allocate memory for requested buffer of size \d+")
#: The runtime family of each library, and the hetero backend it runs on.
_FAMILY = {"CUDA": "cuda", "CUBLAS": "cuda", "CUDNN": "cuda", "CURAND": "cuda", "CUFFT": "cuda", "NCCL": "cuda",
           "HIP": "hip", "ROCBLAS": "hip", "HIPBLAS": "hip", "MIOPEN": "hip", "RCCL": "hip"}
_BACKEND = {"cuda": "cuda", "hip": "rocm"}
_OOM_CODE = 2  # cudaErrorMemoryAllocation, hipErrorOutOfMemory


def is_ort_error(error: BaseException) -> bool:
    """Whether ONNX Runtime raised ``error`` (its types live in ``onnxruntime.capi``)."""
    return any(cls.__module__.startswith("onnxruntime") for cls in type(error).__mro__)


def recognise(error: BaseException, device: Device | None = None) -> Recognised | None:
    """``error`` (an ONNX Runtime exception) as the hetero :class:`~hetero.core.errors.DeviceError` its
    provider's runtime call means, on ``device``; None when it is no device error."""
    if not is_ort_error(error):
        return None
    text = str(error)
    kind = type(error).__name__
    failure = _FAILURE.search(text)
    family = _FAMILY[failure.group(1)] if failure else None
    backend = device.backend if device is not None else _BACKEND.get(family or "", "cuda")
    name = device.name if device is not None else UNKNOWN_DEVICE
    line = text.strip().splitlines()[0] if text.strip() else kind
    message = f"onnxruntime {kind}: {line}"
    found: DeviceError
    if _ARENA_OOM.search(text):
        found = DeviceOutOfMemoryError(message, backend=backend, device=name, code=_OOM_CODE if family else None,
                                       code_name="arena allocation failed")
        basis = "ONNX Runtime's arena could not allocate (out of memory)"
    elif kind == "DeviceReset":
        found = DeviceLostError(message, backend=backend, device=name)
        basis = "ONNX Runtime DeviceReset"
    elif failure is not None and failure.group(1) in ("CUDA", "HIP"):
        code = int(failure.group(2))
        row = CODE_TABLES[family or "cuda"].get(code)
        fault_class = row.fault_class if row is not None else FaultClass.NONE
        cls = DeviceOutOfMemoryError if code == _OOM_CODE else ERROR_OF_CLASS[fault_class]
        found = cls(message, backend=backend, device=name, code=code,
                    code_name=row.name if row is not None else failure.group(3).strip() or None)
        basis = f"ONNX Runtime '{failure.group(1)} failure {code}' read through hetero's {family} code table"
    elif failure is not None:
        row_, matched = first_match(text)
        if row_ is None:
            found = DeviceError(message, backend=backend, device=name, code=int(failure.group(2)),
                                code_name=failure.group(3).strip() or None)
            basis = f"ONNX Runtime '{failure.group(1)} failure' with a status hetero does not know"
        else:
            cls = ERROR_OF_CLASS[row_.fault_class]
            found = cls(message, backend=backend, device=name, code=row_.code, code_name=matched)
            basis = f"ONNX Runtime {matched!r} (a hetero.fault.torch_errors spelling)"
    else:
        return None
    found.__cause__ = error
    found.injected = injected(error)
    return Recognised(found, basis)


__all__ = ["is_ort_error", "recognise"]
