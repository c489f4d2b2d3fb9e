"""Device vocabulary: what a device is (:class:`DeviceInfo`), its health, and the
public :class:`Device` handle users hold.

A ``Device`` pairs the descriptor with the backend's runtime object that does the
work (allocate, copy, synchronize). The scheduler and fault layers reason over
descriptors only; arrays and kernels use the runtime.
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from hetero.core import fusion_state as _fusion
from hetero.core.hooks import Hook

if TYPE_CHECKING:
    from hetero.core.plugin import DeviceRuntime


class Kind(str, enum.Enum):
    """What sort of processor a device is."""

    GPU = "gpu"
    ACCELERATOR = "accelerator"
    CPU = "cpu"

    def __str__(self) -> str:
        return self.value


class HealthState(str, enum.Enum):
    OK = "ok"
    DEGRADED = "degraded"
    UNHEALTHY = "unhealthy"
    UNKNOWN = "unknown"

    def __str__(self) -> str:
        return self.value


@dataclasses.dataclass(frozen=True)
class Health:
    """A device's health as its backend sees it, with the reason when not ``ok``."""

    state: HealthState
    reason: str = ""

    def __str__(self) -> str:
        return f"{self.state}" + (f" ({self.reason})" if self.reason else "")


@dataclasses.dataclass(frozen=True)
class DeviceInfo:
    """Everything known about a device without touching its runtime again.

    ``memory`` is in bytes. ``stable_id`` survives reboots and renumbering: the
    vendor's UUID where it gives one, else a hash of identifying properties.
    ``local_memory``: the bytes of work-group (shared) memory one work-group may hold
    (OpenCL's ``CL_DEVICE_LOCAL_MEM_SIZE``, CUDA's ``sharedMemPerBlock``); 0 when the backend
    does not say, and then a kernel's is not checked against it.
    """

    name: str
    backend: str
    index: int
    vendor: str
    kind: Kind
    model: str
    memory: int
    compute_units: int
    max_work_group_size: int
    fp64: bool
    driver_version: str
    stable_id: str
    extra: Mapping[str, str] = dataclasses.field(default_factory=dict)
    local_memory: int = 0

    def as_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["kind"] = str(self.kind)
        data["extra"] = dict(self.extra)
        return data


class Device:
    """A device of any backend: ``cuda:0``, ``rocm:0``, ``oneapi:0``, ``opencl:1``, ``cpu``.

    Get one with :func:`hetero.device` or :func:`hetero.devices`; there is one
    ``Device`` object per device in a process, so ``a.device is b.device`` works.
    """

    __slots__ = ("info", "runtime", "__weakref__")

    def __init__(self, info: DeviceInfo, runtime: DeviceRuntime) -> None:
        self.info = info
        self.runtime = runtime

    # The descriptor's fields, read-only.
    name = property(lambda self: self.info.name)
    backend = property(lambda self: self.info.backend)
    index = property(lambda self: self.info.index)
    vendor = property(lambda self: self.info.vendor)
    kind = property(lambda self: self.info.kind)
    model = property(lambda self: self.info.model)
    memory = property(lambda self: self.info.memory)
    compute_units = property(lambda self: self.info.compute_units)
    max_work_group_size = property(lambda self: self.info.max_work_group_size)
    fp64 = property(lambda self: self.info.fp64)
    driver_version = property(lambda self: self.info.driver_version)
    stable_id = property(lambda self: self.info.stable_id)

    def synchronize(self) -> None:
        """Wait until all work queued on this device has finished (recorded elementwise work
        is computed first)."""
        if _fusion.PENDING:
            _fusion.flush(self)
        self.runtime.synchronize()

    def health(self) -> Health:
        """The device's health as its backend reports it now."""
        return self.runtime.health()

    def __repr__(self) -> str:
        return f"<hetero.Device {self.info.name} {self.info.model!r}>"

    def __str__(self) -> str:
        return self.info.name

    def __reduce__(self) -> tuple[Any, ...]:
        # A device travels between processes by name and is looked up again there.
        return (_reopen, (self.info.name,))


#: The registry's ``device(name)``, registered by :mod:`hetero.core.registry` (which builds on this module).
FIND_DEVICE: Hook[Callable[[str], Device]] = Hook("find_device", "the device of a name, from the registry")


def _reopen(name: str) -> Device:
    """The device named ``name`` in this process (how a pickled Device comes back)."""
    return FIND_DEVICE.call(name)
