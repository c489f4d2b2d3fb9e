"""How many kernel launches each device has had in this process, how many host writes into
its memory (uploads and copies through :func:`hetero.copyto`), and how many operations on its
arrays ran on the host for want of a library there (host fallbacks, :mod:`hetero.arraylib.host_fallback`).

On the ground floor, so that a heartbeat (the fault floor) reads what the kernel layer counts
without importing it (importing the compiler for a heartbeat would cost more than the step it
reports). :mod:`hetero.kernels.kernel` takes one counter per device; ``next()`` on an
``itertools.count`` is atomic under the GIL, so launches from several threads are all counted,
for the cost of one call.
"""

from __future__ import annotations

import itertools
import threading

_COUNTERS: dict[str, itertools.count[int]] = {}
_READS: dict[str, int] = {}  # how many times launch_counts() has advanced each counter itself
_READS_LOCK = threading.Lock()
_WRITES: dict[str, int] = {}  # device name -> writes into its memory (hetero.array.ndarray counts them)
_FALLBACKS: dict[str, int] = {}  # device name -> host fallbacks of functions on its arrays
_FALLBACKS_LOCK = threading.Lock()


def counter(device_name: str) -> itertools.count[int]:
    """The launch counter of a device (made on first use): ``next()`` it once per launch."""
    return _COUNTERS.setdefault(device_name, itertools.count())


def launch_counts() -> dict[str, int]:
    """Kernel launches per device name so far; devices that never ran a kernel are absent."""
    # Reading an itertools.count advances it (its pickling state, the other way to peek, is
    # deprecated since Python 3.12): the value is launches + earlier reads, so subtract those.
    counts: dict[str, int] = {}
    with _READS_LOCK:
        for name, count in list(_COUNTERS.items()):
            reads = _READS.get(name, 0)
            counts[name] = next(count) - reads
            _READS[name] = reads + 1
    return counts


def launches(device_name: str) -> int:
    """Kernel launches on one device so far (:func:`launch_counts` of it, without walking the others)."""
    count = _COUNTERS.get(device_name)
    if count is None:
        return 0
    with _READS_LOCK:
        reads = _READS.get(device_name, 0)
        _READS[device_name] = reads + 1
        return next(count) - reads


def total() -> int | None:
    """All devices' launches together; None while no kernel has been prepared to launch here."""
    return sum(launch_counts().values()) if _COUNTERS else None


def wrote(device_name: str) -> None:
    """Count one write into a device's memory from the host or another device (an upload, a copy).
    Two threads writing at once may count one: a reader comparing two counts still sees a change."""
    _WRITES[device_name] = _WRITES.get(device_name, 0) + 1


def write_count(device_name: str) -> int:
    """Writes into the memory of ``device_name`` so far (see :func:`wrote`); the guard compares two
    readings to see whether state on that device may have changed between steps."""
    return _WRITES.get(device_name, 0)


def fell_back(device_name: str) -> None:
    """Count one host fallback (a function on this device's arrays computed on the host)."""
    with _FALLBACKS_LOCK:
        _FALLBACKS[device_name] = _FALLBACKS.get(device_name, 0) + 1


def host_fallbacks() -> dict[str, int]:
    """Host fallbacks per device name so far (devices with none are absent); heartbeats carry the
    total to ``hetero-run``, whose metrics count them per device."""
    with _FALLBACKS_LOCK:
        return dict(_FALLBACKS)


def forget_host_fallbacks() -> None:
    """Clear :func:`host_fallbacks` (:func:`hetero.arraylib.host_fallback.reset` calls it)."""
    with _FALLBACKS_LOCK:
        _FALLBACKS.clear()
