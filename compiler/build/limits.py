"""What a device allows one work-group of a kernel, checked once per specialization before the
vendor builds it: its work-group (shared) memory against the device's limit.

Nothing checked it before: 8 GiB of ``hetero.local_array`` on Intel's CPU runtime was a SIGSEGV,
256 MiB on PoCL an assertion abort, 256 MiB on Intel's runtime a ``ContextCorruptedError`` (which
``hetero.guard`` took for a device fault and quarantined a healthy device for), and on the cpu
device NumPy's "Allocation failed". A :class:`~hetero.core.errors.KernelLaunchError` is a bug in
the launch, not a device fault: the fault classifier re-raises it and quarantines nothing.
"""

from __future__ import annotations

from hetero.core.device import DeviceInfo
from hetero.core.errors import KernelLaunchError

from hetero.compiler.emit.base import EmittedSource

#: The prefix of hetero's own work-group arrays (CUDA's warps through work-group memory).
_WARP_PREFIX = "_warp_"


def check_work_group_memory(source: EmittedSource, info: DeviceInfo, signature: str) -> None:
    """KernelLaunchError when one work-group of ``source`` holds more work-group memory than the
    device of ``info`` gives one (nothing is checked where the backend gives no limit)."""
    limit = info.local_memory
    total = source.local_bytes
    if not limit or total <= limit:
        return
    largest = sorted(source.local_arrays, key=lambda item: -item[1])[:3]
    arrays = ", ".join(f"{_array_name(name)} {_size(size)}" for name, size in largest)
    raise KernelLaunchError(
        f"{signature} on {info.name}: a work-group of it holds {total:,} bytes ({_size(total)}) of work-group "
        f"(shared) memory ({arrays}), more than the {limit:,} bytes ({_size(limit)}) {info.name} gives one work-group; "
        "use smaller hetero.local_array / cuda.shared.array arrays or a smaller shared_mem at the launch, or a device "
        "with more (Device.info.local_memory)")


def _array_name(name: str) -> str:
    return "hetero's warp exchange" if name.startswith(_WARP_PREFIX) else repr(name)


def _size(count: int) -> str:
    """``count`` bytes in the largest binary unit it reaches (``256 KiB``, ``8 GiB``)."""
    size = float(count)
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:g} {unit}" if unit != "bytes" else f"{count} bytes"
        size /= 1024
    raise AssertionError("unreachable")  # pragma: no cover


__all__ = ["check_work_group_memory"]
