"""A foreign library's error read as a hetero device error: the shape :mod:`hetero.fault.foreign_errors`
(torch, CuPy) and :mod:`hetero.fault.ort_errors` (ONNX Runtime) both answer in."""

from __future__ import annotations

import dataclasses

from hetero.core.errors import ContextCorruptedError, DeviceDegradedError, DeviceError, DeviceLostError
from hetero.fault.taxonomy import FaultClass

#: The device name a recognised error gets when the caller knows none.
UNKNOWN_DEVICE = "unknown device"
#: The hetero error of each fault class (out of memory is told apart by its code).
ERROR_OF_CLASS: dict[FaultClass, type[DeviceError]] = {
    FaultClass.CONTEXT_CORRUPTING: ContextCorruptedError, FaultClass.DEVICE_LOST: DeviceLostError,
    FaultClass.DEGRADED: DeviceDegradedError, FaultClass.RECOVERABLE: DeviceError, FaultClass.NONE: DeviceError,
}


@dataclasses.dataclass(frozen=True)
class Recognised:
    """A foreign error read as ``error`` (whose ``__cause__`` is the original); ``basis`` says
    what decided it, for the classification's reason."""

    error: DeviceError
    basis: str


def injected(error: BaseException) -> bool:
    """Whether a fault rule raised ``error``: the hetero error read from it keeps the mark, so a
    drill stays out of the real quarantine."""
    return getattr(error, "injected", False) is True


__all__ = ["ERROR_OF_CLASS", "UNKNOWN_DEVICE", "Recognised", "injected"]
