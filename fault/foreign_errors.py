"""torch's and CuPy's device errors, raised from user code, read as hetero device errors.

A training step that calls torch or CuPy directly meets their exceptions, not hetero's:
:func:`recognise` turns one into the :class:`~hetero.core.errors.DeviceError` subclass hetero's own
backend would have raised for the same fault, so classification and recovery treat both alike.

- CuPy: ``cupy_backends.cuda.api.runtime.CUDARuntimeError`` / ``driver.CUDADriverError`` by their
  ``status`` code, and ``cupy.cuda.memory.OutOfMemoryError``, through the CUDA/HIP code tables the
  ``cuda``/``rocm`` backends use (:func:`hetero.backends.cupy.cuda_errors.translate`).
- torch: ``torch.AcceleratorError`` by its ``error_code`` (the CUDA/HIP runtime's code) when it
  has one; else any ``RuntimeError`` (``torch.OutOfMemoryError``, ``DistBackendError`` ...) by
  the first spelling of :data:`hetero.fault.torch_errors.TORCH_ERRORS` found in its message;
  a ``torch.OutOfMemoryError`` whatever its message is out of memory.

torch and CuPy errors name no hetero device: the caller says which device it was (the guard
passes its current device; :func:`hetero.fault.classify` the current device, ``hetero.device()``
inside a guard or ``use_device``, else none). Types are told apart by their module and name, or
through ``sys.modules`` when the library is already loaded: nothing here imports torch or CuPy.
An error a fault rule raised (``error.injected``) gives a hetero error marked injected too.
"""

from __future__ import annotations

import re
import sys
from typing import TYPE_CHECKING

from hetero.backends.cupy import cuda_errors
from hetero.core.errors import DeviceOutOfMemoryError, HeteroError
from hetero.fault import ort_errors
from hetero.fault.recognised import ERROR_OF_CLASS, UNKNOWN_DEVICE, Recognised, injected
from hetero.fault.taxonomy import CODE_TABLES, FaultClass
from hetero.fault.torch_errors import first_match

if TYPE_CHECKING:
    from hetero.core.device import Device

#: (module, class name) of CuPy's exceptions: the runtime's, the driver's, the memory pool's.
_CUPY_ERRORS = {("cupy_backends.cuda.api.runtime", "CUDARuntimeError"), ("cupy_backends.cuda.api.driver", "CUDADriverError"),
                ("cupy.cuda.memory", "OutOfMemoryError")}
#: The hetero backend a family's errors come from, when no device is given.
_BACKEND_OF_FAMILY = {"cuda": "cuda", "cublas": "cuda", "cudnn": "cuda", "nccl": "cuda", "hip": "rocm",
                      "hipblas": "rocm", "miopen": "rocm", "xpu": "oneapi", "mps": "mps",
                      "cpu": "cpu"}
_HIP = re.compile(r"\bHIP\b")
_RUNTIME_NAMED = re.compile(r"\b(?:CUDA|HIP)\b")


def recognise(error: BaseException, device: Device | None = None) -> Recognised | None:
    """``error`` as a hetero :class:`~hetero.core.errors.DeviceError` on ``device`` when it is a torch or
    CuPy device error this module knows (ONNX Runtime's: :mod:`hetero.fault.ort_errors`); None for anything else (hetero's own errors included)."""
    if isinstance(error, HeteroError):
        return None
    if _is_cupy(error):
        return _from_cupy(error, device)
    if ort_errors.is_ort_error(error):
        return ort_errors.recognise(error, device)
    if isinstance(error, RuntimeError):
        return _from_torch(error, device)
    return None


def type_name(error: BaseException) -> str:
    """The error's type as a user would write it: ``torch.OutOfMemoryError``, ``RuntimeError``."""
    cls = type(error)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def _is_cupy(error: BaseException) -> bool:
    return any((cls.__module__, cls.__name__) in _CUPY_ERRORS for cls in type(error).__mro__)


def _from_cupy(error: BaseException, device: Device | None) -> Recognised:
    if device is not None and device.backend in ("cuda", "rocm"):
        backend = device.backend
    else:  # CuPy is built for one runtime: its ROCm build says so
        runtime = sys.modules.get("cupy_backends.cuda.api.runtime")
        backend = "rocm" if getattr(runtime, "is_hip", False) else "cuda"
    name = device.name if device is not None else UNKNOWN_DEVICE
    found = cuda_errors.translate(error, backend, name, f"a {type_name(error)} call in user code")
    found.__cause__ = error
    found.injected = injected(error) or found.injected
    status = getattr(error, "status", None)
    basis = f"{type_name(error)} status {status}" if status is not None else type_name(error)
    return Recognised(found, f"{basis} read through hetero's {backend} code table")


def _torch_type(name: str) -> type[BaseException] | None:
    torch = sys.modules.get("torch")  # a torch error exists only once torch is loaded
    found = getattr(torch, name, None) if torch is not None else None
    return found if isinstance(found, type) and issubclass(found, BaseException) else None


def _from_torch(error: RuntimeError, device: Device | None) -> Recognised | None:
    text = str(error)
    row, matched = first_match(text)
    oom_type, accelerator_type = _torch_type("OutOfMemoryError"), _torch_type("AcceleratorError")
    is_oom = oom_type is not None and isinstance(error, oom_type)
    is_accelerator = accelerator_type is not None and isinstance(error, accelerator_type)
    raw_code = getattr(error, "error_code", None) if is_accelerator else None
    if row is None and not is_oom and not is_accelerator:
        return None
    family = row.family if row is not None and row.family is not None else ("hip" if _HIP.search(text) else "cuda")
    if isinstance(raw_code, int):  # torch.AcceleratorError: the runtime's own code decides
        code: int | None = raw_code
        table_row = CODE_TABLES.get(family, {}).get(raw_code)
        fault_class = table_row.fault_class if table_row is not None else FaultClass.NONE
        basis = f"{type_name(error)} error_code {raw_code}"
    elif row is not None:
        code, fault_class = row.code, row.fault_class
        basis = f"{type_name(error)} {matched!r} (a hetero.fault.torch_errors spelling)"
        if row.note:
            basis += f": {row.note}"
    elif is_oom:  # torch raises it only when an allocator failed: out of memory, whatever the device
        code = 2 if _RUNTIME_NAMED.search(text) else None  # the CUDA/HIP code only when the message names the runtime
        fault_class, basis = FaultClass.RECOVERABLE, type_name(error)
    else:  # a torch.AcceleratorError with neither a code nor a spelling hetero knows
        code, fault_class, basis = None, FaultClass.NONE, f"{type_name(error)} with no error code"
    if is_oom:
        fault_class = FaultClass.RECOVERABLE
    table = CODE_TABLES.get(family, {})
    code_name = table[code].name if code is not None and code in table else matched
    cls = ERROR_OF_CLASS[fault_class]
    if fault_class is FaultClass.RECOVERABLE and code in (None, 2):
        cls = DeviceOutOfMemoryError
    backend = device.backend if device is not None else _BACKEND_OF_FAMILY.get(family, "cuda")
    first_line = text.strip().splitlines()[0] if text.strip() else ""
    found = cls(f"{type_name(error)}: {first_line}", backend=backend,
                device=device.name if device is not None else UNKNOWN_DEVICE, code=code, code_name=code_name)
    found.__cause__ = error
    found.injected = injected(error)
    return Recognised(found, basis)
