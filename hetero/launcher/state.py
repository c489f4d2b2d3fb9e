"""Where each ``hetero-run`` worker is in its life, as the supervisor sees it, and what a run
returns: the :class:`WorkerState` machine and the :class:`RunResult` record (the shape of
torch elastic's ``WorkerState`` and ``RunResult``, for one node's ranks restarted one by one).

A worker's transitions (:data:`TRANSITIONS`; any other is a bug in the supervisor)::

    INIT ──started──▶ STARTING ──first heartbeat──▶ HEALTHY
    STARTING, HEALTHY ──exit 0──▶ SUCCEEDED
    STARTING, HEALTHY ──failed, restarts left──▶ RESTARTING ──started──▶ STARTING
    SUCCEEDED ──another rank failed under --restart group──▶ RESTARTING
    STARTING, HEALTHY, RESTARTING ──failed, no restart left or no usable device──▶ FAILED
    STARTING, HEALTHY ──the run stops (a signal, or it gave up on another rank)──▶ STOPPED

STARTING and HEALTHY are the live states (an incarnation is running). SUCCEEDED, FAILED and
STOPPED end a rank (SUCCEEDED only until a group restart takes it back). A heartbeat arms
hang detection: a HEALTHY worker silent for ``--heartbeat-timeout`` is a hang; a STARTING
one (a script that never calls ``hetero.heartbeat``) never is.

The run's own state is SUCCEEDED (every rank SUCCEEDED), FAILED (the supervisor gave up, or an
option was out of range for this machine) or STOPPED (by a signal).
"""

from __future__ import annotations

import dataclasses
import enum


class WorkerState(enum.Enum):
    """A rank's place in its life (see the module docstring for the transitions)."""

    INIT = "init"  # created, not started yet
    STARTING = "starting"  # an incarnation runs; no heartbeat from it yet
    HEALTHY = "healthy"  # an incarnation runs and its heartbeats arrive
    RESTARTING = "restarting"  # its incarnation failed; it is about to start again (elsewhere, maybe)
    SUCCEEDED = "succeeded"  # exited 0
    FAILED = "failed"  # the run gave up on it (--max-restarts used up, no usable device)
    STOPPED = "stopped"  # stopped by the supervisor (a signal, or the run giving up on another rank)

    @property
    def running(self) -> bool:
        return self in (WorkerState.STARTING, WorkerState.HEALTHY)

    def describe(self, device: str) -> str:
        """This rank's line in the summary table: ``ok on cpu``, ``failed on oneapi:0``..."""
        word = _SUMMARY_WORD.get(self)
        return f"{word} on {device}" if word else "not finished"


_SUMMARY_WORD = {WorkerState.SUCCEEDED: "ok", WorkerState.FAILED: "failed", WorkerState.STOPPED: "stopped"}

#: The moves a rank may make (the diagram in the module docstring).
TRANSITIONS: dict[WorkerState, frozenset[WorkerState]] = {
    WorkerState.INIT: frozenset({WorkerState.STARTING}),
    WorkerState.STARTING: frozenset({WorkerState.HEALTHY, WorkerState.SUCCEEDED, WorkerState.RESTARTING,
                                     WorkerState.FAILED, WorkerState.STOPPED}),
    WorkerState.HEALTHY: frozenset({WorkerState.SUCCEEDED, WorkerState.RESTARTING, WorkerState.FAILED,
                                    WorkerState.STOPPED}),
    WorkerState.RESTARTING: frozenset({WorkerState.STARTING, WorkerState.FAILED}),
    WorkerState.SUCCEEDED: frozenset({WorkerState.RESTARTING}),
    WorkerState.FAILED: frozenset(),
    WorkerState.STOPPED: frozenset(),
}


def check_transition(rank: int, old: WorkerState, new: WorkerState) -> None:
    """Raise when ``old`` -> ``new`` is not a move of the state machine (a supervisor bug, never
    the user's: the message says so)."""
    if new not in TRANSITIONS[old]:
        raise RuntimeError(f"hetero-run internal error: worker {rank} cannot go from {old.value} to {new.value}; "
                           "please report this with the run's events file")


@dataclasses.dataclass(frozen=True)
class WorkerResult:
    """How one rank ended."""

    rank: int
    state: WorkerState
    device: str  # where it ran last
    returncode: int | None  # its last incarnation's exit status (negative: a signal); None: never ended
    restarts: int


@dataclasses.dataclass(frozen=True)
class Failure:
    """One failed incarnation: which rank, where, and what the supervisor made of it."""

    rank: int
    device: str | None  # None under torch elastic: its agent sees ranks, the per-rank shim the device
    fault_class: str  # a taxonomy class from the fault report, or crash, hang, error, fault
    returncode: int
    message: str | None  # the report's message, or how the process ended


@dataclasses.dataclass(frozen=True)
class RunResult:
    """What a run returns (:meth:`hetero.launcher.supervisor.Supervisor.run`, and
    :func:`hetero.launcher.elastic.run_elastic` for this node, without ``workers``: torch
    elastic's agent keeps those)."""

    state: WorkerState  # SUCCEEDED, FAILED or STOPPED
    workers: dict[int, WorkerResult] = dataclasses.field(default_factory=dict)
    failures: tuple[Failure, ...] = ()  # every failed incarnation, in order
    reason: str | None = None  # why the run failed (the gave_up reason) or stopped (the signal's name)
    stop_signal: int | None = None  # STOPPED: the signal that stopped it
    bad_option: bool = False  # FAILED because an option does not fit this machine (exit status 2)

    @property
    def exit_code(self) -> int:
        """``hetero-run``'s exit status: 0 done, 1 gave up, 2 an option out of range, 128+N stopped
        by signal N."""
        if self.state is WorkerState.SUCCEEDED:
            return 0
        if self.state is WorkerState.STOPPED and self.stop_signal is not None:
            return 128 + self.stop_signal
        return 2 if self.bad_option else 1
