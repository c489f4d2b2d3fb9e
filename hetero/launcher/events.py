"""What ``hetero-run`` records: the JSONL event log, and the summary printed at exit.

Every event is one JSON object on its own line with ``"event"`` (its kind), ``"time"``
(wall clock, epoch seconds) and ``"monotonic"`` (``time.monotonic()`` of the launcher, so
intervals survive clock jumps), plus the fields of that kind:

=================== ==========================================================
event               fields
=================== ==========================================================
run_started         run_dir, nproc, devices, policy, max_restarts, command
worker_started      worker, device, pid, pgid, restart, resume_step, torch_device (``cpu`` for a
                    CPU or OpenCL device; null for a GPU: the ``torch_device`` event tells)
torch_device        worker, device, torch_device: where torch runs for the worker's device
                    (:func:`hetero.torch_device` in the worker, from its heartbeat), when first
                    known and whenever it changes
worker_exited       worker, device, pid, returncode, signal, reason, runtime_s
heartbeat_lost      worker, device, silent_s (a hang: no heartbeat for that long)
fault_detected      worker, device, fault_class, error_type, code, code_name, xid,
                    injected, message, action, torch_device (the fault report's)
device_quarantined  device, stable_id, reason, fault_class, scope (`` for this drill`` or empty)
device_released     device, stable_id
restart             worker, from_device, to_device, restart, reason, group
resumed_from_step   worker, device, step
gave_up             worker, reason (``--max-restarts`` exhausted, no device left, an error of the
                    program not restarted), bad_option (true: an option named nothing, exit 2)
shutdown            signal (the launcher was asked to stop)
finished            returncode, and the summary's fields (``torch_devices``: rank -> the torch
                    device its worker last reported)
=================== ==========================================================

Where torch runs: hetero may give a worker a device torch has no backend for (``oneapi:0`` on a
torch without XPU, a PoCL device); its torch state then lives on the host CPU. The console line
of the ``torch_device`` event says both ("worker 0: hetero device oneapi:0, torch device cpu"),
as do the summary's ``workers`` row and ``fault_detected``'s line when the worker reported it.

Goodput is *useful step time / wall time*: the useful step time of a worker is the sum
of the intervals between its consecutive heartbeats (same incarnation) that end at a step
that was kept, i.e. not redone after a restart (a step <= the step its next incarnation
resumed from; every step of the last incarnation is kept). Startup before the first
heartbeat, recovery, and work thrown away are not useful. Over ``nproc`` workers it is
the sum of their useful time divided by ``nproc x wall time``. Time lost by a failure runs
from the failed worker's last *kept* heartbeat to the first heartbeat after its restart.
Without heartbeats (a script that never calls ``hetero.heartbeat``) goodput is unknown.
"""

from __future__ import annotations

import dataclasses
import json
import os
import sys
import time
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import IO, Any

#: Event logs are readable by their owner only (an existing file keeps its mode).
PRIVATE_FILE = 0o600

#: Events also announced on stderr as they happen (one line each), so an operator watching the
#: run sees a fault and where the work went without opening the log.
ANNOUNCED = {
    "heartbeat_lost": "worker {worker} on {device}: no heartbeat for {silent_s}s; killing it",
    "fault_detected": "worker {worker} on {device}: {fault_class} ({reason_text}){torch_text}",
    "torch_device": "worker {worker}: hetero device {device}, torch device {torch_device}",
    "device_quarantined": "quarantined {device}{scope}: {reason}",
    "restart": "restarting worker {worker} on {to_device} (was {from_device}; restart {restart})",
    "resumed_from_step": "worker {worker} resumes from the checkpoint of step {step}",
    "gave_up": "giving up on worker {worker}: {reason}",
}


def announce(record: dict[str, Any], stream: IO[str] | None = None) -> None:
    """Print the one-line form of an :data:`ANNOUNCED` event on ``stream`` (stderr)."""
    template = ANNOUNCED.get(record["event"])
    if template is None:
        return
    if record["event"] == "gave_up" and record.get("worker") is None:  # the run as a whole (no device...)
        template = "error: {reason}" if record.get("bad_option") else "giving up: {reason}"
    fields = {"scope": "", **record}
    torch_device = record.get("torch_device")
    fields["torch_text"] = f" [hetero device {record.get('device')}, torch device {torch_device}]" \
        if torch_device else ""
    fields["reason_text"] = " ".join(str(part) for part in (
        record.get("error_type"), record.get("code_name"), record.get("message") or record.get("reason"),
    ) if part) or "no report"
    try:
        text = template.format_map(fields)
    except (KeyError, IndexError, ValueError):
        text = f"{record['event']} " + " ".join(f"{k}={v}" for k, v in record.items() if k not in ("time", "monotonic"))
    print(f"hetero-run: {text}", file=stream or sys.stderr, flush=True)


class EventLog:
    """Appends events to a JSONL file (one ``write`` per line, flushed) and keeps them in memory;
    :data:`ANNOUNCED` ones are also printed on stderr unless ``quiet``."""

    def __init__(self, path: Path | None, quiet: bool = False) -> None:
        self.path = path
        self.quiet = quiet
        self.records: list[dict[str, Any]] = []
        self._file: IO[str] | None = None
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            # private, like checkpoints and the cache: events carry commands, paths and error messages
            fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
            self._file = open(fd, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        record = {"event": event, "time": time.time(), "monotonic": time.monotonic(), **fields}
        self.records.append(record)
        if self._file is not None:
            self._file.write(json.dumps(record, default=str) + "\n")
            self._file.flush()
        if not self.quiet:
            announce(record)
        return record

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def append_event(path: str | os.PathLike[str], event: str, **fields: Any) -> None:
    """Append one event from another process (the per-rank shim of a multi-node run).
    One ``write`` of one line to an ``O_APPEND`` file, so concurrent writers do not interleave."""
    record = {"event": event, "time": time.time(), "monotonic": time.monotonic(), **fields}
    line = (json.dumps(record, default=str) + "\n").encode()
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, PRIVATE_FILE)
    try:
        os.write(fd, line)
    finally:
        os.close(fd)


@dataclasses.dataclass
class Progress:
    """Heartbeats of one worker incarnation, as (monotonic time, step) the launcher saw."""

    beats: list[tuple[float, int | None]] = dataclasses.field(default_factory=list)

    def useful_seconds(self, kept_up_to: int | None) -> float:
        """Sum of the intervals between consecutive heartbeats ending at a kept step
        (every step when ``kept_up_to`` is None: this incarnation's work all stands)."""
        total = 0.0
        for (t0, _), (t1, step) in zip(self.beats, self.beats[1:]):
            if kept_up_to is None or step is None or step <= kept_up_to:
                total += t1 - t0
        return total

    def last_kept_time(self, kept_up_to: int | None) -> float | None:
        kept = [t for t, step in self.beats if kept_up_to is None or step is None or step <= kept_up_to]
        return kept[-1] if kept else None


@dataclasses.dataclass
class Summary:
    """Counts and times for the table printed at exit (and the ``finished`` event)."""

    nproc: int
    started: float = dataclasses.field(default_factory=time.monotonic)
    restarts: int = 0
    faults: Counter[str] = dataclasses.field(default_factory=Counter)
    quarantined: list[str] = dataclasses.field(default_factory=list)
    time_lost: float = 0.0
    useful: float = 0.0
    any_heartbeat: bool = False
    recoveries: list[float] = dataclasses.field(default_factory=list)
    worker_results: dict[int, str] = dataclasses.field(default_factory=dict)
    torch_devices: dict[int, str] = dataclasses.field(default_factory=dict)  # rank -> its worker's torch device
    ended: float | None = None  # monotonic; set when the run is over, so the wall time stays put

    def close_incarnation(self, progress: Progress, kept_up_to: int | None) -> None:
        if progress.beats:
            self.any_heartbeat = True
        self.useful += progress.useful_seconds(kept_up_to)

    def wall(self) -> float:
        return (time.monotonic() if self.ended is None else self.ended) - self.started

    def goodput(self, running: Sequence[Progress] = ()) -> float | None:
        """Useful step time / (wall time x nproc); ``running``: the progress of live processes,
        counted as kept so far (for the live metric)."""
        wall = self.wall()
        useful = self.useful + sum(p.useful_seconds(None) for p in running)
        if not (self.any_heartbeat or any(p.beats for p in running)) or wall <= 0:
            return None
        return min(1.0, useful / (wall * self.nproc))

    def as_dict(self) -> dict[str, Any]:
        goodput = self.goodput()
        return {
            "wall_s": round(self.wall(), 3),
            "restarts": self.restarts,
            "faults": dict(self.faults),
            "quarantined": list(self.quarantined),
            "time_lost_s": round(self.time_lost, 3),
            "useful_step_s": round(self.useful, 3),
            "goodput": None if goodput is None else round(goodput, 4),
            "recovery_s": [round(r, 3) for r in self.recoveries],
            "workers": {str(rank): result for rank, result in sorted(self.worker_results.items())},
            "torch_devices": {str(rank): where for rank, where in sorted(self.torch_devices.items())},
        }

    def table(self, returncode: int, events_path: Path | None, reason: str | None = None) -> str:
        """The summary table; ``reason``: why the run failed or stopped (a row of its own)."""
        data = self.as_dict()
        faults = ", ".join(f"{name}: {count}" for name, count in sorted(self.faults.items())) or "none"
        goodput = "n/a (no heartbeats: call hetero.heartbeat(step) each step)" if data["goodput"] is None \
            else f"{data['goodput']:.1%}"
        recovery = ", ".join(f"{r:.2f}s" for r in self.recoveries) or "-"
        rows = [
            ("exit status", str(returncode)),
            *([("reason", reason)] if reason and returncode != 0 else []),
            ("wall time", f"{data['wall_s']:.2f}s"),
            ("workers", ", ".join(f"{rank}: {result}{_torch_part(data['torch_devices'].get(rank))}"
                                  for rank, result in data["workers"].items()) or "-"),
            ("restarts", str(self.restarts)),
            ("faults", faults),
            ("quarantined", ", ".join(self.quarantined) or "none"),
            ("recovery", recovery),
            ("time lost", f"{self.time_lost:.2f}s"),
            ("goodput", goodput),
        ]
        if events_path is not None:
            rows.append(("events", str(events_path)))
        width = max(len(name) for name, _ in rows)
        lines = ["hetero-run summary", "-" * 18] + [f"{name.ljust(width)}  {value}" for name, value in rows]
        return "\n".join(lines)


def _torch_part(torch_device: str | None) -> str:
    return f" (torch device {torch_device})" if torch_device else ""
