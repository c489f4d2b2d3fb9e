"""The exception torch itself raises for a fault kind, built for a torch fault rule
(``cpu:torch:nth=20:oom``) from the rows of :data:`hetero.fault.torch_errors.TORCH_ERRORS`, so that
the injected error and the table :mod:`hetero.fault.foreign_errors` reads cannot disagree.

============  =============================================  ==========================================
kind          CUDA/HIP torch device (``cuda:N``)              CPU (``cpu``)
============  =============================================  ==========================================
``oom``       ``torch.OutOfMemoryError`` "CUDA out of         ``RuntimeError`` "... DefaultCPUAllocator:
              memory. Tried to allocate ..."                  can't allocate memory: ..." (what torch's
                                                              CPU allocator raises)
``sticky``    ``torch.AcceleratorError`` "CUDA error: an illegal memory access was encountered" (700)
``lost``      ``torch.AcceleratorError`` "CUDA error: no CUDA-capable device is detected" (100)
``degraded``  ``torch.AcceleratorError`` "CUDA error: uncorrectable ECC error encountered" (214)
============  =============================================  ==========================================

torch's CPU ops raise no device errors but out of memory: on ``cpu`` the other kinds are the CUDA
spellings, which is what a drill of a GPU loop run on a CPU machine needs. On a ROCm device the
spellings are hipified ("HIP error: ..."). Every error is marked ``injected = True`` and names its
rule. Nothing here imports torch: it is loaded already when a torch op fires a rule.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable

from hetero.fault.taxonomy import FaultClass
from hetero.fault.torch_errors import RUNTIME, TORCH_ERRORS, TorchErrorRow

#: The runtime code each non-memory kind is raised with (the first row of that code and class).
KIND_CODES: dict[str, tuple[int, FaultClass]] = {
    "sticky": (700, FaultClass.CONTEXT_CORRUPTING),
    "lost": (100, FaultClass.DEVICE_LOST),
    "degraded": (214, FaultClass.DEGRADED),
}
#: What follows each allocator's spelling in its message (sizes made up, the wording torch's).
_OOM_TAILS = {
    "cpu": ": you tried to allocate 268435456 bytes. Error code 12 (Cannot allocate memory)",
    "gpu": (". Tried to allocate 256.00 MiB. GPU {index} has a total capacity of 80.00 GiB of which 12.00 MiB is "
            "free. Of the allocated memory 79.10 GiB is allocated by PyTorch, and 310.00 MiB is reserved by "
            "PyTorch but unallocated."),
}
_ESCAPE = re.compile(r"\\(.)")


def torch_fault_error(kind: str, torch_device: str, rule: str, *, hip: bool = False) -> BaseException:
    """torch's exception for ``kind`` (lost, sticky, oom, degraded) on ``torch_device`` (``cpu``,
    ``cuda:0``), raised by fault rule ``rule``; ``hip``: a ROCm build's spelling."""
    torch = sys.modules.get("torch")
    if torch is None:
        raise RuntimeError(f"fault rule {rule!r} fired on a torch op, but torch is not imported")
    runtime = "HIP" if hip else "CUDA"
    family = "hip" if hip else "cuda"
    if kind == "oom":
        if torch_device == "cpu":
            row = _row(lambda r: r.family == "cpu" and r.fault_class is FaultClass.RECOVERABLE)
            message = "[enforce fail at alloc_cpu.cpp:127] err == 0. " + _literal(row) + _OOM_TAILS["cpu"]
        else:
            row = _row(lambda r: r.family == family and r.raised_as == "torch.OutOfMemoryError")
            index = torch_device.partition(":")[2] or "0"
            message = _literal(row) + _OOM_TAILS["gpu"].format(index=index)
    elif kind in KIND_CODES:
        code, fault_class = KIND_CODES[kind]
        row = _row(lambda r: r.code == code and r.fault_class is fault_class and r.family in (None, family))
        message = f"{runtime} error: " + _literal(row)
    else:
        raise ValueError(f"fault rule {rule!r}: torch has no error of kind {kind!r}; kinds: oom, "
                         f"{', '.join(KIND_CODES)}")
    if row.pattern.search(message) is None or _first_row(message) is not row:
        raise RuntimeError(f"hetero.fault.torch_errors changed: the injected message {message!r} is no longer read "
                           f"as its own row {row.spelling!r}; update {__name__}")
    error = _raised_as(torch, row)(f"{message} (injected by fault rule {rule!r})")
    if row.code is not None and row.raised_as == "torch.AcceleratorError":
        error.error_code = row.code  # type: ignore[attr-defined]  # as torch/csrc/Exceptions.cpp sets it
    error.injected = True  # type: ignore[attr-defined]  # as hetero marks its own injected errors
    return error


def _row(wanted: Callable[[TorchErrorRow], bool]) -> TorchErrorRow:
    found = next((row for row in TORCH_ERRORS if wanted(row)), None)
    if found is None:
        raise LookupError("hetero.fault.torch_errors has no row for this injected fault")
    return found


def _literal(row: TorchErrorRow) -> str:
    """The text a row's spelling matches, as torch writes it (the runtime prefix removed)."""
    return _ESCAPE.sub(r"\1", row.spelling.removeprefix(RUNTIME))


def _first_row(message: str) -> TorchErrorRow | None:
    """The row :mod:`hetero.fault.foreign_errors` reads ``message`` as (the first one found in it)."""
    return next((row for row in TORCH_ERRORS if row.pattern.search(message)), None)


def _raised_as(torch: object, row: TorchErrorRow) -> type[BaseException]:
    name = row.raised_as.removeprefix("torch.")
    found = getattr(torch, name, None) if row.raised_as.startswith("torch.") else None
    return found if isinstance(found, type) and issubclass(found, BaseException) else RuntimeError
