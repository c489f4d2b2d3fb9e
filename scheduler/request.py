"""What a placement decision reads: the :class:`Request` (what the work needs), one
:class:`Candidate` per device (descriptor, health, accounted usage, holds), and the
:class:`CostModel` protocol the ``fastest`` policy asks for predicted run times.

Pure data: nothing here touches a device, a vendor library or a file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any, Protocol, runtime_checkable

from hetero.core.config import DEVICE_KINDS
from hetero.core.device import DeviceInfo, HealthState
from hetero.core.errors import ArgumentError, did_you_mean
from hetero.core.registry import CHECK_REQUEST
from hetero.core.sizes import format_size, parse_size  # moved there; still importable from here

#: Priority classes, lowest first; a request may take a device held only by lower classes.
PRIORITIES = ("low", "normal", "high")
PRIORITY_RANK = {name: rank for rank, name in enumerate(PRIORITIES)}

def _names(value: str | Iterable[str] | None, what: str, valid: tuple[str, ...] | None = None) -> tuple[str, ...]:
    if value is None:
        return ()
    items = (value,) if isinstance(value, str) else tuple(value)
    names = tuple(str(item).strip().lower() for item in items if str(item).strip())
    for name in names:
        if valid is not None and name not in valid:
            raise ValueError(f"request {what} has {name!r}; valid: {', '.join(valid)}{did_you_mean(name, valid)}")
    return names


@dataclasses.dataclass(frozen=True)
class Request:
    """What a piece of work needs from a device.

    ``memory``: bytes it will allocate (``"2GiB"`` accepted); devices with less free memory
    are rejected. ``kinds`` / ``vendors`` / ``backends``: the acceptable ones, most preferred
    first (``kinds=("gpu", "cpu")``: a GPU when one qualifies, else a CPU); empty accepts
    all. ``priority``: ``low``/``normal``/``high`` (read by the ``priority`` policy).
    ``kernel`` and ``n``: a kernel key and problem size for the cost model (``fastest``).
    ``exclude``: device names or stable ids never to choose.
    """

    memory: int = 0
    kinds: tuple[str, ...] = ()
    vendors: tuple[str, ...] = ()
    backends: tuple[str, ...] = ()
    priority: str = "normal"
    kernel: str | None = None
    n: int | None = None
    exclude: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        setattr_ = object.__setattr__
        setattr_(self, "memory", parse_size(self.memory, "request memory"))
        setattr_(self, "kinds", _names(self.kinds, "kinds", DEVICE_KINDS))
        setattr_(self, "vendors", _names(self.vendors, "vendors"))
        setattr_(self, "backends", _names(self.backends, "backends"))
        priority = str(self.priority).strip().lower()
        if priority not in PRIORITY_RANK:
            raise ValueError(f"request priority {self.priority!r} is not one of {', '.join(PRIORITIES)}"
                             + did_you_mean(priority, PRIORITIES))
        setattr_(self, "priority", priority)
        if self.kernel is not None and not isinstance(self.kernel, str):
            setattr_(self, "kernel", kernel_key(self.kernel))
        if self.n is not None and (isinstance(self.n, bool) or int(self.n) < 0):
            raise ValueError(f"request n (problem size) must be a non-negative int, got {self.n!r}")
        excluded = (self.exclude,) if isinstance(self.exclude, str) else tuple(self.exclude)
        setattr_(self, "exclude", tuple(getattr(item, "name", item) for item in excluded))

    def describe(self) -> str:
        """``memory=1 GiB, kinds=gpu, priority=high``: the fields that differ from the defaults."""
        parts = [f"memory={format_size(self.memory)}"] if self.memory else []
        for name in ("kinds", "vendors", "backends", "exclude"):
            value = getattr(self, name)
            if value:
                parts.append(f"{name}={','.join(value)}")
        parts.append(f"priority={self.priority}")
        if self.kernel is not None:
            parts.append(f"kernel={self.kernel}" + (f"[n={self.n}]" if self.n is not None else ""))
        return ", ".join(parts)


def check_fields(names: Iterable[str]) -> None:
    """Refuse a keyword that is no :class:`Request` field (nor ``policy``), with the valid ones
    and the close one: ``hetero.device("auto", polcy="spread")`` says "did you mean 'policy'"."""
    valid = ("policy", *(field.name for field in dataclasses.fields(Request)))
    for name in names:
        if name not in valid:
            raise ArgumentError(f"unknown keyword {name!r} for a placement request; valid keywords: "
                                f"{', '.join(valid)}{did_you_mean(name, valid)}")


def kernel_key(kernel: Any) -> str:
    """The cost-model key of a kernel given as a key string or a kernel object."""
    for attribute in ("cost_key", "key", "name", "__name__"):
        value = getattr(kernel, attribute, None)
        if callable(value) and attribute == "cost_key":
            value = value()  # hetero.Kernel.cost_key(): name and source fingerprint
        if isinstance(value, str) and value:
            return value
    raise ValueError(f"request kernel must be a kernel key (str) or a kernel object with a name, got {kernel!r}")


@dataclasses.dataclass(frozen=True, slots=True)
class Candidate:
    """One device as a placement decision sees it.

    ``used``: bytes in use on it: hetero's allocations (inside scheduler tasks and outside
    them), or what the device itself reports in use where its backend can tell and that is more;
    ``tasks``: active tasks holding it; ``held_by``: the highest priority class among
    them (None when free) and ``holders`` their names; ``order``: its position in the
    configured device order (``hetero.devices()``), the final tie-break.
    """

    info: DeviceInfo
    health: HealthState = HealthState.OK
    health_reason: str = ""
    used: int = 0
    tasks: int = 0
    quarantined: bool = False
    held_by: str | None = None
    holders: tuple[str, ...] = ()
    order: int = 0

    @property
    def name(self) -> str:
        return self.info.name

    @property
    def free(self) -> int:
        return max(self.info.memory - self.used, 0)

    @property
    def load(self) -> float:
        """Fraction of the device's memory in use (0 when its size is unknown)."""
        return self.used / self.info.memory if self.info.memory > 0 else 0.0


@runtime_checkable
class CostModel(Protocol):
    """Predicted run times for the ``fastest`` policy (implemented in ``scheduler/cost_model.py``).

    ``predict`` returns seconds for one launch of ``kernel_key`` over ``n`` items on the
    device with ``device_stable_id``, or None when it has no data for that device.
    """

    def predict(self, kernel_key: str, device_stable_id: str, n: int) -> float | None: ...


CHECK_REQUEST.register(check_fields)  # hetero.device(..., **request) checks its keywords here (see hetero.core.hooks)
