"""A split launch whose rows all go to one other device that can work on the arrays' host memory
in place (an OpenCL CPU device over ``cpu`` arrays): no copy in or out, as fast as that device
on its own buffers.

``DeviceRuntime.alias_host`` gives the device's buffer over a host array, or None where the device
cannot use it without a copy (then the split copies, as for any other device); ``end_alias``
makes what the kernel wrote visible in the host memory, waiting for it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hetero.array.ndarray import Array
from hetero.core.device import Device


def alias(device: Device, array: Array) -> Any | None:
    """``device``'s buffer over the host memory of ``array`` (a host device's), or None where it
    cannot work on it in place."""
    if not array.nbytes:
        return None
    return device.runtime.alias_host(array.buffer[:array.nbytes])


def aliases(device: Device, args: Sequence[Any], indices: Sequence[int]) -> dict[int, Any] | None:
    """A buffer of ``device`` over each of ``args[i]`` for ``i`` in ``indices``, or None unless
    every one of them can be worked on in place."""
    found: dict[int, Any] = {}
    for i in indices:
        buffer = alias(device, args[i])
        if buffer is None:
            return None
        found[i] = buffer
    return found


def arguments(device: Device, args: Sequence[Any], buffers: dict[int, Any]) -> list[Any]:
    """``args`` with each aliased array replaced by an array of ``device`` over its alias."""
    local = list(args)
    for i, buffer in buffers.items():
        local[i] = Array(buffer, device, args[i].shape, args[i].dtype)
    return local


def finish(device: Device, written: Sequence[Any]) -> None:
    """Wait for the launch on ``device`` and leave what it wrote through ``written`` (aliases) in
    host memory."""
    if not written:
        device.synchronize()
    for buffer in written:
        device.runtime.end_alias(buffer)


def run(device: Device, launcher: Any, args: Sequence[Any], indices: Sequence[int], written: Sequence[int]) -> bool:
    """Launch with every array of ``indices`` aliased on ``device`` and wait: False (nothing run)
    when one of them cannot be."""
    buffers = aliases(device, args, indices)
    if buffers is None:
        return False
    try:
        launcher(*arguments(device, args, buffers))
        finish(device, [buffers[i] for i in written])
    except Exception as exc:  # the device's own error, so that fault handling classifies it as usual
        exc.add_note(f"raised by a split launch run whole on {device.name}, on the arrays' host memory in place")
        raise
    return True
