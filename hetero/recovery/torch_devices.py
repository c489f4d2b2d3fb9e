"""What a guard recovery means for torch: the torch devices on both sides of a move
(:func:`hetero.torch_device`), and whether torch state moved at all.

hetero may move the work to a device torch has no backend for (``oneapi:0`` on a torch without
XPU, a PoCL device): hetero arrays go there, torch state stays on the CPU. The recovery reports
say so, rather than naming only the hetero device.
"""

from __future__ import annotations

import dataclasses

from hetero.core.device import Device
from hetero.core.torch_devices import is_gpu, loaded_torch_device


@dataclasses.dataclass(frozen=True)
class TorchMove:
    """The torch side of one recovery; ``None`` devices: this process has not imported torch."""

    failed_torch_device: str | None
    torch_device: str | None
    note: str  # for the log line and the ``recovery`` event: what happened to torch state
    unusable: bool  # the target is a GPU torch cannot use here (its torch device is ``cpu``)


def torch_move(failed: Device, target: Device) -> TorchMove:
    """The torch side of moving the guarded work from ``failed`` to ``target`` (the same device for
    a recovery in place). Never imports torch."""
    before, after = loaded_torch_device(failed), loaded_torch_device(target)
    unusable = after == "cpu" and is_gpu(target)
    if after is None:
        note = "torch not imported"
    elif target is failed:
        note = f"torch device {after}"
    elif before == after:
        note = f"torch device {after}; torch state stays on {after}"
    else:
        note = f"torch device {after}; torch state moved from {before} to {after}"
    return TorchMove(before, after, note, unusable)


def unusable_warning(target: Device) -> str:
    """The warning for a move to a GPU this torch cannot use (given once per guard)."""
    return (f"hetero.guard: the work moved to {target.name}, a GPU this torch has no backend for: torch state "
            f"stays on the host CPU (hetero.torch_device({target.name!r}) == 'cpu'), only hetero arrays run on "
            f"{target.name}; install a torch build for that GPU, or leave it out of the guard's devices")
