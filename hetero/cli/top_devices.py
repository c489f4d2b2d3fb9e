"""What ``hetero top`` shows of this machine: its devices (found once, their health, quarantine and
memory read again each frame) and the quarantine store's entries with the time they have left.

It only reads: an expired entry is shown as expired, not released (``hetero devices`` and any
process placing work release expired entries of healthy devices).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from hetero.core.device import Device
from hetero.core.errors import BackendUnavailableError, HeteroError


@dataclasses.dataclass(frozen=True)
class DeviceRow:
    """One device's line: ``memory_used`` None where its backend cannot tell (only CUDA/ROCm can),
    ``launches`` None where nothing watched reports them."""

    name: str
    vendor: str
    kind: str
    health: str  # as `hetero devices` says it: "ok", "degraded (thermal)"...
    quarantined: bool
    memory_total: int
    memory_used: int | None
    launches: int | None


@dataclasses.dataclass(frozen=True)
class QuarantineRow:
    """One quarantine entry; ``expires`` None: until released by hand."""

    name: str
    stable_id: str
    fault_class: str
    reason: str
    expires: float | None
    drill: bool

    def time_left(self, now: float) -> str:
        """``4m 05s``, ``until released``, or ``expired (released once healthy)``."""
        if self.expires is None:
            return "until released"
        left = self.expires - now
        return "expired (released once healthy)" if left <= 0 else duration(left)


def duration(seconds: float) -> str:
    """``42s``, ``4m 05s``, ``3h 07m``, ``2d 04h``."""
    whole = int(seconds)
    if whole < 60:
        return f"{whole}s"
    minutes, secs = divmod(whole, 60)
    if minutes < 60:
        return f"{minutes}m {secs:02d}s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours}h {minutes:02d}m" if hours < 24 else f"{hours // 24}d {hours % 24:02d}h"


class DeviceWatch:
    """The machine's devices, discovered on the first :meth:`rows` (opening backends takes a
    moment) and kept; ``note`` says what discovery could not do."""

    def __init__(self) -> None:
        self._devices: list[Device] | None = None
        self.note: str | None = None

    def devices(self) -> list[Device]:
        if self._devices is None:
            self._devices = self._discover()
        return self._devices

    def _discover(self) -> list[Device]:
        import hetero
        from hetero.core.registry import enabled_backends

        try:
            return list(hetero.devices())
        except BackendUnavailableError as exc:  # HETERO_BACKENDS named one that cannot load: show the rest
            self.note = str(exc)
            enabled = set(enabled_backends())
            return [d for s in hetero.backend_statuses() if s.available and s.name in enabled for d in s.devices]
        except HeteroError as exc:
            self.note = str(exc)
            return []

    def rows(self, held: Mapping[str, QuarantineRow], launches: Mapping[str, int]) -> list[DeviceRow]:
        """Each device now; ``held``: quarantine rows by stable id; ``launches``: by device name."""
        return [DeviceRow(d.name, d.vendor, str(d.kind), _health(d), d.stable_id in held, d.memory,
                          _memory_used(d), launches.get(d.name)) for d in self.devices()]


def _health(device: Device) -> str:
    try:
        return str(device.health())
    except Exception as exc:  # noqa: BLE001 - a failing health query is something to show, not to die of
        return f"unknown (health query failed: {exc})"


def _memory_used(device: Device) -> int | None:
    try:
        used = device.runtime.memory_used()
    except Exception:  # noqa: BLE001 - a query that fails tells nothing: shown as unknown
        return None
    return int(used) if used is not None else None


@contextlib.contextmanager
def _drill_of(run_dir: Path | None) -> Iterator[None]:
    """Within the block, quarantine queries see the run's drill entries too (``hetero-run`` keeps
    quarantines for injected faults in ``RUN_DIR/drill-quarantine.json``)."""
    if run_dir is None:
        yield
        return
    from hetero.fault import quarantine

    with quarantine.drill_scope(run_dir / quarantine.DRILL_FILE_NAME):
        yield


def quarantine_rows(run_dir: Path | None = None) -> tuple[list[QuarantineRow], str | None]:
    """The quarantine's entries (the run's drill entries too, given its directory), oldest first,
    and a note when the store cannot be read."""
    from hetero.fault import quarantine

    try:
        with _drill_of(run_dir):
            entries: list[Any] = quarantine.entries()
    except (HeteroError, OSError) as exc:
        return [], f"quarantine not shown: {exc}"
    return [QuarantineRow(e.name, e.stable_id, e.fault_class, e.reason, e.expires, e.drill) for e in entries], None

