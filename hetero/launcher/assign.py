"""Which device each ``hetero-run`` worker gets, and the environment that tells it so.

Candidates come from ``--devices`` (default: every device hetero lists), minus
quarantined devices; health is asked of a device when it is chosen, and an unhealthy one
is passed over. The first placement goes through the scheduler's policy
(``hetero.scheduler.assign``); a replacement after a failure is the scheduler's
:func:`hetero.scheduler.replacement`: a device other than the one that failed and, under
``spread``, the least loaded one.

A worker sees its device twice: ``HETERO_DEVICE`` (what ``hetero.device()`` returns) and
the vendor's visibility variable, so vendor libraries and torch see only that device.
Under ``CUDA_VISIBLE_DEVICES``/``HIP_VISIBLE_DEVICES`` the one visible GPU is number 0 in
the worker, so ``HETERO_DEVICE`` is ``cuda:0``/``rocm:0`` there; the launcher's logs name
the device as the launcher sees it (``cuda:3``). ``ONEAPI_DEVICE_SELECTOR`` only filters
SYCL/Level Zero runtimes, not hetero's OpenCL enumeration, so ``oneapi:N`` keeps its name.
"""

from __future__ import annotations

import socket
from collections import Counter
from collections.abc import Iterable, Sequence

from hetero.core.device import DeviceInfo, HealthState
from hetero.core.device_list import parse_devices
from hetero.core.errors import HeteroError
from hetero.core.exit_status import UsageError
from hetero.fault.quarantine import quarantined_ids
from hetero.core.registry import backend_status, enabled_backends
from hetero.core.registry import device as find_device
from hetero.core.registry import devices as all_devices
from hetero.scheduler.placement import assign as scheduler_assign
from hetero.scheduler.request import Candidate
from hetero.scheduler.failover import replacement as scheduler_replacement

POLICIES = ("spread", "binpack")
#: The visibility variable each vendor stack reads, and the value that shows device ``i``.
VISIBILITY = {
    "cuda": ("CUDA_VISIBLE_DEVICES", "{index}"),
    "rocm": ("HIP_VISIBLE_DEVICES", "{index}"),
    "oneapi": ("ONEAPI_DEVICE_SELECTOR", "opencl:{index}"),
}
#: Backends whose device is renumbered to 0 inside the worker by its visibility variable.
_RENUMBERED = ("cuda", "rocm")


#: The most workers ``hetero-run`` starts per device it may use: ``--nproc`` past this many times
#: the devices is refused (a typo such as ``--nproc 100000`` must not fork-bomb the machine).
MAX_WORKERS_PER_DEVICE = 32


class LaunchError(HeteroError):
    """hetero-run cannot start or continue a run (no device left, bad arguments)."""


class OptionError(LaunchError, UsageError):
    """A command-line option is out of range for this machine (``hetero-run`` exits 2)."""


def check_nproc(nproc: int, candidates: Sequence[DeviceInfo]) -> None:
    """Refuse more workers than :data:`MAX_WORKERS_PER_DEVICE` per candidate device."""
    most = MAX_WORKERS_PER_DEVICE * max(len(candidates), 1)
    if nproc > most:
        names = ", ".join(d.name for d in candidates) or "none"
        raise OptionError(f"--nproc {nproc} is more than {MAX_WORKERS_PER_DEVICE} workers per device on the "
                          f"{len(candidates)} device(s) this run may use ({names}); give --nproc 1..{most}, or "
                          f"name more devices with --devices")


def candidate_devices(spec: str | None) -> list[DeviceInfo]:
    """The devices ``--devices SPEC`` names, in order, without repeats.

    ``SPEC`` is comma-separated (:func:`hetero.core.device_list.parse_devices`): ``auto``/``all``
    (every device), a backend (``oneapi``: all its devices) or one device (``cuda:1``). A name that
    names nothing raises :class:`~hetero.core.errors.DeviceNotFoundError`. Health is not asked here
    (an OpenCL device's health runs a probe kernel): :func:`assign` asks it of the devices it is
    about to use."""
    found: list[DeviceInfo] = []
    for entry in map(str, parse_devices(spec or "auto", "--devices")):  # a string parses to names only
        if entry in ("auto", "all"):
            chosen = list(all_devices())
        elif ":" in entry:
            chosen = [find_device(entry)]
        else:
            status = backend_status(entry) if entry in enabled_backends() else None
            if status is None or not status.available:
                find_device(entry)  # raises the error naming the backend and the remedy
                continue
            chosen = list(status.devices)
        for device in chosen:
            if all(device.info.name != info.name for info in found):
                found.append(device.info)
    if not found:
        raise LaunchError(f"--devices {spec or 'auto'!r} names no device; "
                          "run 'hetero devices --all' to see what is present and why")
    return found


def usable(candidates: Iterable[DeviceInfo], excluded: Iterable[str] = ()) -> list[DeviceInfo]:
    """Candidates that are neither quarantined nor excluded (by name or stable id)."""
    blocked = set(quarantined_ids()) | set(excluded)
    return [d for d in candidates if d.stable_id not in blocked and d.name not in blocked]


def healthy(info: DeviceInfo) -> bool:
    """Whether the device's backend reports it anything but UNHEALTHY now."""
    return find_device(info.name).health().state is not HealthState.UNHEALTHY


def assign(count: int, policy: str, candidates: Sequence[DeviceInfo]) -> list[DeviceInfo]:
    """One healthy device per worker for ``count`` workers, by the scheduler's ``policy``
    (health is asked of the chosen devices only; an unhealthy one is dropped and the choice
    made again)."""
    pool = list(candidates)
    while True:
        chosen = _assign(count, policy, pool)
        sick = {d.name for d in chosen if not healthy(d)}
        if not sick:
            return chosen
        pool = [d for d in pool if d.name not in sick]


def _assign(count: int, policy: str, candidates: Sequence[DeviceInfo]) -> list[DeviceInfo]:
    if not candidates:
        raise LaunchError("no usable device: every candidate is quarantined or unhealthy; "
                          "see 'hetero quarantine list', release one, or name others with --devices")
    # Fresh views, not this process's usage: the workers run in processes of their own, so
    # what the launcher itself holds on a device (a probe buffer, a cached constant) is not
    # their load and must not tip ``spread`` (quarantine was filtered by usable(), health is
    # asked by assign()).
    fresh = [Candidate(info, order=order) for order, info in enumerate(candidates)]
    return list(scheduler_assign(count, policy, fresh))


def restart_device(failed: DeviceInfo, policy: str, candidates: Sequence[DeviceInfo],
                in_use: Counter[str]) -> DeviceInfo:
    """The device a failed worker restarts on (:func:`hetero.scheduler.replacement`): usable and
    healthy, preferably not ``failed``; under ``spread`` the least loaded (``in_use`` counts live
    workers per device name), under ``binpack`` the most loaded, ties broken by candidate order."""
    chosen = scheduler_replacement(failed, candidates, prefer="binpack" if policy == "binpack" else "spread",
                                   load=in_use, allow_failed=True, healthy=healthy)
    if chosen is None:
        raise LaunchError(f"no usable device to restart the worker of {failed.name} on: every candidate "
                          "is quarantined or unhealthy; release one ('hetero quarantine release') or add "
                          "devices with --devices")
    return chosen


def device_env(info: DeviceInfo) -> dict[str, str]:
    """``HETERO_DEVICE`` and the vendor visibility variable for a worker on ``info``."""
    env = {"HETERO_DEVICE": f"{info.backend}:0" if info.backend in _RENUMBERED else info.name}
    if info.backend in VISIBILITY:
        variable, template = VISIBILITY[info.backend]
        env[variable] = template.format(index=info.index)
    return env


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port free now on ``host`` (for ``MASTER_PORT``)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])
