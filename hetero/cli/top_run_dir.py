"""What ``hetero top --run-dir DIR`` reads of a ``hetero-run`` run: its events file (``events.jsonl``,
read on from where the last frame stopped) and its workers' heartbeat files
(``heartbeat-RANK-RESTART.json``): each rank's device, state, restarts, last step and heartbeat
age, and the kernel launches the heartbeats report per device.

Only reads, and never trusts: a line or file that does not parse is skipped.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

EVENTS_FILE = "events.jsonl"
#: The most of the events file read per frame (the rest is read by the frames after).
MAX_READ = 4 * 2**20
#: The most heartbeat files looked at (ranks x incarnations; hetero-run bounds both).
MAX_HEARTBEAT_FILES = 4096
_HEARTBEAT = re.compile(r"^heartbeat-(\d+)-(\d+)\.json$")


@dataclasses.dataclass(frozen=True)
class WorkerRow:
    """One rank: ``state`` a :class:`hetero.launcher.state.WorkerState` value where the supervisor's
    metrics say it, else what the events say (``starting``, ``healthy``, ``exited 1``...)."""

    rank: int
    device: str
    state: str
    restarts: int | None = None
    step: int | None = None
    heartbeat_age: float | None = None  # seconds since its last heartbeat


@dataclasses.dataclass(frozen=True)
class RunReading:
    """A run directory now: ``note`` says what could not be read."""

    run_dir: Path
    workers: tuple[WorkerRow, ...] = ()
    restarts: int = 0
    faults: int = 0
    launches: Mapping[str, int] = dataclasses.field(default_factory=dict)  # by device, all incarnations
    ended: str | None = None  # "finished (exit 0)", "stopped (SIGINT)"...
    note: str | None = None


@dataclasses.dataclass
class _Rank:
    device: str = "?"
    state: str = "starting"
    restarts: int = 0
    last_fault: str | None = None


class RunDirWatch:
    """Reads one run directory, frame after frame (the events file incrementally)."""

    def __init__(self, run_dir: Path) -> None:
        self.run_dir = run_dir
        self.events = run_dir / EVENTS_FILE
        self._forget()

    def _forget(self) -> None:
        """Start over: nothing of the events file read yet."""
        self._offset = 0
        self._ranks: dict[int, _Rank] = {}
        self._restarts = 0
        self._faults = 0
        self._ended: str | None = None

    def read(self, now: float) -> RunReading:
        """The run as of wall-clock time ``now``."""
        if not self.run_dir.is_dir():
            return RunReading(self.run_dir, note=f"{self.run_dir} is not a directory (yet)")
        note = self._read_events()
        beats = _heartbeats(self.run_dir)
        workers = []
        for rank, seen in sorted(self._ranks.items()):
            beat = beats.get((rank, seen.restarts))
            state = "healthy" if beat is not None and seen.state == "starting" else seen.state
            age = now - beat["time"] if beat is not None and isinstance(beat.get("time"), (int, float)) else None
            step = beat.get("step") if beat is not None and isinstance(beat.get("step"), int) else None
            workers.append(WorkerRow(rank, seen.device, state, seen.restarts, step,
                                     max(age, 0.0) if age is not None and state == "healthy" else None))
        return RunReading(self.run_dir, tuple(workers), self._restarts, self._faults, _launches(beats.values()),
                          self._ended, note)

    def _read_events(self) -> str | None:
        try:
            size = self.events.stat().st_size
            if size < self._offset:  # a new run in the same directory: start over
                self._forget()
            with self.events.open("rb") as file:
                file.seek(self._offset)
                chunk = file.read(MAX_READ)
        except FileNotFoundError:
            return f"no {EVENTS_FILE} in {self.run_dir} yet"
        except OSError as exc:
            return f"cannot read {self.events}: {exc}"
        complete = chunk[:chunk.rfind(b"\n") + 1]  # a line being written is read next frame
        self._offset += len(complete)
        for line in complete.splitlines():
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                self._fold(record)
        return None

    def _fold(self, record: Mapping[str, Any]) -> None:
        """One event into the ranks' states and the run's counts."""
        kind, rank = record.get("event"), record.get("worker")
        seen = self._ranks.setdefault(rank, _Rank()) if isinstance(rank, int) else None
        if seen is not None and isinstance(record.get("device"), str):
            seen.device = record["device"]
        if kind == "worker_started" and seen is not None:
            seen.state, seen.restarts = "starting", int(record.get("restart") or 0)
        elif kind == "worker_exited" and seen is not None:
            code, signal = record.get("returncode"), record.get("signal")
            seen.state = "succeeded" if code == 0 else f"killed ({signal})" if signal else f"exited {code}"
        elif kind in ("fault_detected", "heartbeat_lost"):
            self._faults += 1
        elif kind == "restart" and seen is not None:
            seen.state, seen.device = "restarting", str(record.get("to_device") or seen.device)
            seen.restarts = int(record.get("restart") or seen.restarts + 1)
            self._restarts += 0 if record.get("group") else 1  # a group restart counts once, as the metric does
        elif kind == "gave_up" and seen is not None:
            seen.state = "failed"
        elif kind == "finished":
            self._ended = f"finished (exit {record.get('returncode')})"
        elif kind == "shutdown":
            self._ended = f"stopped ({record.get('signal')})"


def _heartbeats(run_dir: Path) -> dict[tuple[int, int], dict[str, Any]]:
    """(rank, restart) -> the heartbeat record of that incarnation."""
    found: dict[tuple[int, int], dict[str, Any]] = {}
    try:
        paths = sorted(run_dir.glob("heartbeat-*-*.json"))[:MAX_HEARTBEAT_FILES]
    except OSError:
        return found
    for path in paths:
        match = _HEARTBEAT.match(path.name)
        if match is None:
            continue
        try:
            record = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue  # replaced atomically, so rare: read again next frame
        if isinstance(record, dict):
            found[(int(match.group(1)), int(match.group(2)))] = record
    return found


def _launches(records: Iterable[Mapping[str, Any]]) -> dict[str, int]:
    """Kernel launches by device: each incarnation's last count, summed."""
    total: dict[str, int] = {}
    for record in records:
        device, launches = record.get("device"), record.get("launches")
        if isinstance(device, str) and isinstance(launches, int):
            total[device] = total.get(device, 0) + launches
    return total
