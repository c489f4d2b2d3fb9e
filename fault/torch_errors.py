"""torch's device errors as data: each spelling torch uses for a device fault, the CUDA/HIP code it
stands for, its fault class, and where the spelling comes from.

torch raises its device errors as ``torch.OutOfMemoryError`` (an allocator could not allocate),
``torch.AcceleratorError`` (a failed CUDA/HIP runtime call: ``C10_CUDA_CHECK``; it carries the
runtime's code as ``error_code``), ``torch.distributed.DistBackendError`` (NCCL) or a plain
``RuntimeError`` (cuBLAS, cuDNN, MIOpen, the CUDA driver API). None names a hetero device, and
only the accelerator error carries a code: the message is what says which fault it is.
:mod:`hetero.fault.foreign_errors` reads :data:`TORCH_ERRORS` in order and the first row whose
``spelling`` (a regular expression) is found in the message decides; each row's class is the one
:mod:`hetero.fault.taxonomy` gives its code, so a torch error classifies as hetero's own error
for the same code would (tests/test_torch_errors.py holds the two tables together).

Sources, cited by the rows (paths in the torch source tree; the installed wheel ships the headers
under ``torch/include``):

* ``c10/cuda/CUDAException.cpp`` ``c10_cuda_check_implementation``: ``"CUDA error: "`` followed
  by ``cudaGetErrorString(code)``, raised as ``c10::AcceleratorError`` (``c10/util/Exception.h``),
  which ``torch/csrc/Exceptions.cpp`` (``_new_accelerator_error_object``) turns into
  ``torch.AcceleratorError`` with ``error_code`` set. ROCm builds are hipified: ``"HIP error: "``
  and ``hipGetErrorString`` (e.g. the comment "torch.AcceleratorError: HIP error: unspecified
  launch failure" in ``torch/testing/_internal/common_methods_invocations.py``).
* The runtimes' strings: CUDA ``cudaGetErrorString`` (CUDA Runtime API, enum cudaError; CuPy's
  ``CUDARuntimeError(code)`` prints the same text), HIP ``ihipGetErrorString`` in
  ``hipamd/src/hip_error.cpp`` (ROCm clr).
* ``aten/src/ATen/cuda/Exceptions.h``: ``TORCH_CUDABLAS_CHECK`` ("CUDA error: <CUBLAS_STATUS_...>
  when calling ..."), ``AT_CUDNN_CHECK`` ("cuDNN error: <CUDNN_STATUS_...>"),
  ``AT_CUDA_DRIVER_CHECK`` ("CUDA driver error: ..."); ``aten/src/ATen/miopen/Exceptions.h``
  ``MIOPEN_CHECK`` (``miopenGetErrorString``) and ``HIP_CHECK``.
* ``c10/core/impl/alloc_cpu.cpp`` ("DefaultCPUAllocator: can't allocate memory: ..."), and
  ``c10/cuda/CUDACachingAllocator.cpp`` ("CUDA out of memory. Tried to allocate ..."; hipified
  "HIP out of memory"), ``c10/xpu/XPUCachingAllocator.cpp`` ("XPU out of memory"),
  ``aten/src/ATen/mps/MPSAllocator.mm`` ("MPS backend out of memory").
* ``torch/csrc/distributed/c10d/NCCLUtils.hpp`` ``C10D_NCCL_CHECK`` ("NCCL error in: file:line,
  <ncclGetErrorString> ... <getNcclErrorDetailStr>", which names the ncclResult_t, e.g.
  "ncclUnhandledCudaError: Call to CUDA function failed.") raised as ``DistBackendError``.

Nothing here imports torch.
"""

from __future__ import annotations

import dataclasses
import re

from hetero.fault.taxonomy import FaultClass


@dataclasses.dataclass(frozen=True)
class TorchErrorRow:
    """One spelling of a device fault in a torch error message.

    ``spelling``: a regular expression searched for in the message. ``code``: the cudaError_t /
    hipError_t it stands for (hetero's tables in :mod:`hetero.fault.taxonomy` use the same
    numbers), None where the fault has no runtime code (a library status, an allocator's message).
    ``family``: where the code or ``name`` comes from: ``cuda``, ``hip``, or None for a spelling
    both runtimes share (then the message's "HIP" says which); for rows without a code, the
    library (``xpu``, ``mps``, ``cublas``, ``hipblas``, ``cudnn``, ``miopen``, ``nccl``).
    ``raised_as``: the exception type torch raises it with. ``source``: where the spelling comes
    from. A row without a code names the fault by the text it matched (``CUBLAS_STATUS_...``).
    """

    spelling: str
    fault_class: FaultClass
    source: str
    raised_as: str
    code: int | None = None
    family: str | None = None
    note: str = ""
    pattern: re.Pattern[str] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "pattern", re.compile(self.spelling))


R, C, L, D, N = (FaultClass.RECOVERABLE, FaultClass.CONTEXT_CORRUPTING, FaultClass.DEVICE_LOST,
                 FaultClass.DEGRADED, FaultClass.NONE)
#: the prefix c10_cuda_check_implementation (and AT_CUDA_DRIVER_CHECK, HIP_CHECK) writes before the runtime's string
RUNTIME = r"(?:CUDA|HIP)(?: driver)? error: "
CHECK = "c10/cuda/CUDAException.cpp (c10_cuda_check_implementation: \"CUDA error: \" + cudaGetErrorString; hipified \"HIP error: \")"
ACCEL = "torch.AcceleratorError"
HIP_STRINGS = "ROCm clr hipamd/src/hip_error.cpp (ihipGetErrorString)"
CUBLAS = "aten/src/ATen/cuda/Exceptions.h TORCH_CUDABLAS_CHECK (\"CUDA error: \" + _cublasGetErrorEnum, aten/src/ATen/cuda/CUDABlas.cpp)"
NCCL = ("torch/csrc/distributed/c10d/NCCLUtils.hpp C10D_NCCL_CHECK (\"NCCL error in: ...\" + getNcclErrorDetailStr, "
        "which names the ncclResult_t; NCCL src/nccl.h.in enum ncclResult_t)")
DIST = "torch.distributed.DistBackendError"

#: torch's device-fault spellings, most specific first: the first row found in a message decides.
TORCH_ERRORS: tuple[TorchErrorRow, ...] = (
    # -- out of memory: the caching allocators raise torch.OutOfMemoryError ------------------------
    TorchErrorRow(r"CUDA out of memory", R, "c10/cuda/CUDACachingAllocator.cpp (\"CUDA out of memory. Tried to "
                  "allocate ...\")", "torch.OutOfMemoryError", code=2, family="cuda"),
    TorchErrorRow(r"HIP out of memory", R, "c10/cuda/CUDACachingAllocator.cpp hipified for ROCm builds (\"HIP out "
                  "of memory. Tried to allocate ...\")", "torch.OutOfMemoryError", code=2, family="hip"),
    TorchErrorRow(r"XPU out of memory", R, "c10/xpu/XPUCachingAllocator.cpp (\"XPU out of memory. Tried to "
                  "allocate ...\")", "torch.OutOfMemoryError", family="xpu"),
    TorchErrorRow(r"MPS backend out of memory", R, "aten/src/ATen/mps/MPSAllocator.mm (\"MPS backend out of memory "
                  "(MPS allocated: ...). Tried to allocate ...\")", "torch.OutOfMemoryError", family="mps"),
    # the CPU allocator fails through TORCH_CHECK's enforce: a plain RuntimeError, not torch.OutOfMemoryError
    TorchErrorRow(r"DefaultCPUAllocator: can't allocate memory", R, "c10/core/impl/alloc_cpu.cpp (alloc_cpu: "
                  "\"[enforce fail at alloc_cpu.cpp:N] err == 0. DefaultCPUAllocator: can't allocate memory: you tried "
                  "to allocate N bytes. Error code 12 (Cannot allocate memory)\")", "RuntimeError", family="cpu"),
    # -- a failed runtime call (C10_CUDA_CHECK): torch.AcceleratorError, the runtime's string -------
    # hipErrorPriorLaunchFailure before 719: "unspecified launch failure" is the start of its string
    TorchErrorRow(RUNTIME + r"unspecified launch failure in prior launch", C, f"{CHECK}; {HIP_STRINGS}", ACCEL,
                  code=53, family="hip"),
    TorchErrorRow(RUNTIME + r"an illegal memory access was encountered", C, f"{CHECK}; cudaGetErrorString(700); "
                  f"{HIP_STRINGS}", ACCEL, code=700),
    TorchErrorRow(r"device-side assert triggered", C, f"{CHECK}; cudaGetErrorString(710); {HIP_STRINGS}", ACCEL,
                  code=710, note="a kernel's assert (e.g. an index out of range in an embedding or a loss)"),
    TorchErrorRow(RUNTIME + r"unspecified launch failure", C, f"{CHECK}; cudaGetErrorString(719); {HIP_STRINGS}",
                  ACCEL, code=719),
    TorchErrorRow(RUNTIME + r"the launch timed out and was terminated", C, f"{CHECK}; cudaGetErrorString(702); "
                  f"{HIP_STRINGS}", ACCEL, code=702),
    TorchErrorRow(RUNTIME + r"hardware stack error", C, f"{CHECK}; cudaGetErrorString(714)", ACCEL, code=714,
                  family="cuda"),
    TorchErrorRow(RUNTIME + r"an illegal instruction was encountered", C, f"{CHECK}; cudaGetErrorString(715)", ACCEL,
                  code=715, family="cuda"),
    TorchErrorRow(RUNTIME + r"misaligned address", C, f"{CHECK}; cudaGetErrorString(716)", ACCEL, code=716,
                  family="cuda"),
    TorchErrorRow(RUNTIME + r"operation not supported on global/shared address space", C,
                  f"{CHECK}; cudaGetErrorString(717)", ACCEL, code=717, family="cuda"),
    TorchErrorRow(RUNTIME + r"invalid program counter", C, f"{CHECK}; cudaGetErrorString(718)", ACCEL, code=718,
                  family="cuda"),
    TorchErrorRow(RUNTIME + r"context is destroyed", C, f"{CHECK}; cudaGetErrorString(709); {HIP_STRINGS}", ACCEL,
                  code=709),
    TorchErrorRow(RUNTIME + r"initialization error", C, f"{CHECK}; cudaGetErrorString(3); {HIP_STRINGS}", ACCEL,
                  code=3, note="the runtime failed to initialise in this process: restart it"),
    TorchErrorRow(RUNTIME + r"unknown error", C, f"{CHECK}; cudaGetErrorString(999); {HIP_STRINGS}", ACCEL, code=999,
                  note="what a GPU that fell off the bus reports too"),
    TorchErrorRow(RUNTIME + r"uncorrectable ECC error encountered", D, f"{CHECK}; cudaGetErrorString(214); "
                  f"{HIP_STRINGS}", ACCEL, code=214),
    TorchErrorRow(RUNTIME + r"uncorrectable NVLink error detected during the execution", D,
                  f"{CHECK}; cudaGetErrorString(220)", ACCEL, code=220, family="cuda"),
    TorchErrorRow(RUNTIME + r"no CUDA-capable device is detected", L, f"{CHECK}; cudaGetErrorString(100)", ACCEL,
                  code=100, family="cuda"),
    TorchErrorRow(RUNTIME + r"no ROCm-capable device is detected", L, f"{CHECK}; {HIP_STRINGS} (hipErrorNoDevice)",
                  ACCEL, code=100, family="hip"),
    TorchErrorRow(RUNTIME + r"CUDA-capable device\(s\) is/are busy or unavailable", L,
                  f"{CHECK}; cudaGetErrorString(46)", ACCEL, code=46, family="cuda"),
    TorchErrorRow(RUNTIME + r"out of memory", R, f"{CHECK}; cudaGetErrorString(2); {HIP_STRINGS}", ACCEL, code=2),
    TorchErrorRow(RUNTIME + r"too many resources requested for launch", R, f"{CHECK}; cudaGetErrorString(701); "
                  f"{HIP_STRINGS}", ACCEL, code=701),
    TorchErrorRow(RUNTIME + r"invalid configuration argument", R, f"{CHECK}; cudaGetErrorString(9); {HIP_STRINGS}",
                  ACCEL, code=9),
    TorchErrorRow(RUNTIME + r"no kernel image is available for execution on the device", N,
                  f"{CHECK}; cudaGetErrorString(209); {HIP_STRINGS} (hipErrorNoBinaryForGpu)", ACCEL, code=209,
                  note="torch was not built for this GPU's arch: a build problem, not a device fault"),
    TorchErrorRow(RUNTIME + r"invalid device ordinal", N, f"{CHECK}; cudaGetErrorString(101); {HIP_STRINGS}", ACCEL,
                  code=101, note="a bad device index: the caller's mistake"),
    # -- libraries: cuBLAS / hipBLAS (RuntimeError "CUDA error: <status> when calling ..."), cuDNN, MIOpen
    TorchErrorRow(r"CUBLAS_STATUS_ALLOC_FAILED", R, CUBLAS, "RuntimeError", family="cublas", note="cuBLAS could not allocate its workspace"),
    TorchErrorRow(r"CUBLAS_STATUS_EXECUTION_FAILED", C, f"{CUBLAS}; cuBLAS docs: \"the GPU program failed to "
                  "execute\" (a kernel launch failure)", "RuntimeError", family="cublas"),
    TorchErrorRow(r"CUBLAS_STATUS_(?:INTERNAL_ERROR|NOT_INITIALIZED)", N, f"{CUBLAS}; cuBLAS docs (cublasStatus_t)",
                  "RuntimeError", family="cublas",
                  note="ambiguous (a prior fault, a full device, a bad setup): left to the caller, not quarantined"),
    TorchErrorRow(r"HIPBLAS_STATUS_ALLOC_FAILED", R, f"{CUBLAS}, hipified for ROCm builds (hipBLAS hipblasStatus_t)",
                  "RuntimeError", family="hipblas"),
    TorchErrorRow(r"HIPBLAS_STATUS_EXECUTION_FAILED", C, f"{CUBLAS}, hipified for ROCm builds (hipBLAS "
                  "hipblasStatus_t)", "RuntimeError", family="hipblas"),
    TorchErrorRow(r"CUDNN_STATUS_ALLOC_FAILED", R, "aten/src/ATen/cuda/Exceptions.h AT_CUDNN_CHECK (\"cuDNN error: \" "
                  "+ cudnnGetErrorString)", "RuntimeError (c10::CuDNNError)", family="cudnn"),
    TorchErrorRow(r"CUDNN_STATUS_EXECUTION_FAILED\w*", C, "aten/src/ATen/cuda/Exceptions.h AT_CUDNN_CHECK; cuDNN docs: "
                  "\"the GPU program failed to execute\" (cuDNN 9 adds _CUDART/_CUDA_DRIVER suffixes)",
                  "RuntimeError (c10::CuDNNError)", family="cudnn"),
    TorchErrorRow(r"miopenStatusAllocFailed|MIOPEN_STATUS_ALLOC_FAILED", R, "aten/src/ATen/miopen/Exceptions.h "
                  "MIOPEN_CHECK (miopenGetErrorString, ROCm MIOpen src/errors.cpp)", "RuntimeError", family="miopen"),
    # -- NCCL (DistBackendError): only a failed CUDA call inside NCCL is about this device -----------
    TorchErrorRow(r"ncclUnhandledCudaError|unhandled cuda error", C, NCCL, DIST, family="nccl", note="a CUDA call inside NCCL failed (a sticky fault on this GPU)"),
    TorchErrorRow(r"ncclSystemError|ncclRemoteError", N, NCCL, DIST, family="nccl",
                  note="a system call, the network or another rank failed, not this device: restart the group "
                       "(hetero-run, torch elastic)"),
    TorchErrorRow(r"ncclInternalError|ncclInvalidArgument|ncclInvalidUsage", N, NCCL, DIST, family="nccl", note="a bug in NCCL or in its use, not a device fault"),
)
del R, C, L, D, N


def first_match(text: str) -> tuple[TorchErrorRow | None, str | None]:
    """The first row of :data:`TORCH_ERRORS` whose spelling ``text`` has, and the text it matched."""
    for row in TORCH_ERRORS:
        match = row.pattern.search(text)
        if match is not None:
            return row, match.group(0)
    return None, None
