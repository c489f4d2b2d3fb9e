"""One frame of ``hetero top``: everything it shows, gathered from this machine's devices and
quarantine, a ``hetero-run`` run directory, and the metrics endpoints it was pointed at, merged
where two sources tell of the same thing (a rank's state from the supervisor's metrics, its step
from its heartbeat file; launches from the metrics, else from the heartbeats)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Sequence
from pathlib import Path

from hetero.cli.top_devices import DeviceRow, DeviceWatch, QuarantineRow, quarantine_rows
from hetero.cli.top_endpoint import EndpointView, EndpointWatch
from hetero.cli.top_run_dir import RunDirWatch, RunReading, WorkerRow


@dataclasses.dataclass(frozen=True)
class Frame:
    """What one refresh shows."""

    taken: float  # wall-clock time
    devices: tuple[DeviceRow, ...]
    quarantine: tuple[QuarantineRow, ...]
    workers: tuple[WorkerRow, ...] = ()
    run: RunReading | None = None
    endpoints: tuple[EndpointView, ...] = ()
    notes: tuple[str, ...] = ()  # what could not be read (devices, the quarantine store)


class Gatherer:
    """Builds frame after frame; keeps what must persist between them (the devices found, the
    events file's read position, the last request counts)."""

    def __init__(self, run_dir: Path | None = None, metrics: Sequence[str] = (), timeout: float = 2.0) -> None:
        self.run_dir = run_dir
        self.devices = DeviceWatch()
        self.run = RunDirWatch(run_dir) if run_dir is not None else None
        self.endpoints = [EndpointWatch(url, timeout) for url in metrics]

    def frame(self) -> Frame:
        now = time.time()
        endpoints = tuple(watch.read() for watch in self.endpoints)
        run = self.run.read(now) if self.run is not None else None
        quarantine, quarantine_note = quarantine_rows(self.run_dir)
        held = {row.stable_id: row for row in quarantine}
        devices = self.devices.rows(held, launches(run, endpoints))
        notes = tuple(note for note in (self.devices.note, quarantine_note) if note)
        return Frame(now, tuple(devices), tuple(quarantine), merge_workers(run, endpoints), run, endpoints, notes)


def launches(run: RunReading | None, endpoints: Sequence[EndpointView]) -> dict[str, int]:
    """Kernel launches by device: the supervisors' metrics where any reports them (summed over the
    endpoints), else the run directory's heartbeats."""
    counted: dict[str, int] = {}
    for view in endpoints:
        for device, count in view.launches.items():
            counted[device] = counted.get(device, 0) + count
    return counted or dict(run.launches if run is not None else {})


def merge_workers(run: RunReading | None, endpoints: Sequence[EndpointView]) -> tuple[WorkerRow, ...]:
    """The ranks: state, device and heartbeat age from the first endpoint that reports workers (the
    supervisor's own view), restarts and step from the run directory; either alone where only one
    is given."""
    from_files = {row.rank: row for row in (run.workers if run is not None else ())}
    live = next((view.workers for view in endpoints if view.workers), ())
    if not live:
        return tuple(from_files.values())
    merged = []
    for row in live:
        known = from_files.get(row.rank)
        merged.append(row if known is None else dataclasses.replace(row, restarts=known.restarts, step=known.step))
    return tuple(merged)
