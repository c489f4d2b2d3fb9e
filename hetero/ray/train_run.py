"""One training run across a Ray cluster, from the driver: :class:`TrainRun` starts each rank's worker
actor (:mod:`hetero.ray.train_worker`), watches the ends of their incarnations, their heartbeats and the
nodes they are on, restarts what failed by ``hetero-run``'s policy, and keeps ``hetero-run``'s books
(events, summary, :class:`~hetero.launcher.state.RunResult`). :func:`hetero.ray.run` is its front door
(:mod:`hetero.ray.train`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hetero.core.errors import HeteroError
from hetero.launcher.assign import LaunchError
from hetero.launcher.config import LaunchConfig
from hetero.launcher.descendants import new_run_id
from hetero.launcher.events import EventLog, Progress, Summary
from hetero.launcher.faults import restartable, signal_name
from hetero.launcher.state import Failure, RunResult, WorkerResult, WorkerState, check_transition
from hetero.ray.cluster_connect import node_gone
from hetero.ray.placement import Request
from hetero.ray.train_worker import TrainWorker, WorkerSpec

#: Seconds between two looks at the workers' ends and heartbeats.
POLL_SECONDS = 0.1
#: Seconds between two looks at whether the running workers' nodes are still there.
NODE_CHECK_SECONDS = 0.5
#: Seconds a worker may wait for a device before the run gives up on it (every matching one held).
PLACEMENT_TIMEOUT = 120.0


@dataclasses.dataclass(frozen=True)
class RayRunResult(RunResult):
    """:class:`~hetero.launcher.state.RunResult` plus what only a cluster run has: each rank's node and
    the end of its last incarnation's output (its whole log stays on that node)."""

    nodes: dict[int, str] = dataclasses.field(default_factory=dict)
    outputs: dict[int, str] = dataclasses.field(default_factory=dict)
    events: Path | None = None


@dataclasses.dataclass
class Rank:
    """The driver's view of one rank: its actor (the current incarnation), state and accounts."""

    rank: int
    state: WorkerState = WorkerState.INIT
    restarts: int = 0
    actor: Any = None
    done: Any = None  # ObjectRef of actor.run(): resolves when the incarnation ends, raises if the actor dies
    device: str = "-"
    node_id: str = ""
    resume_step: int | None = None
    returncode: int | None = None
    started: float = 0.0
    progress: Progress = dataclasses.field(default_factory=Progress)
    seen: int = 0  # heartbeats of this incarnation already read
    failed_at: float | None = None  # when the previous incarnation was seen failing
    lost_since: float | None = None  # its last progress that was kept
    output: str = ""
    warm: bool = False  # its current incarnation runs in the run's spare actor (placed and warm ahead)

    @property
    def where(self) -> str:
        return f"{self.device} (node {self.node_id[:8]})" if self.node_id else self.device

    def enter(self, state: WorkerState) -> None:
        check_transition(self.rank, self.state, state)
        self.state = state


def _resolve_command(command: Sequence[str]) -> tuple[str, ...]:
    """The command with a script's path made absolute (the worker runs in the driver's folder only where
    that folder exists on its node)."""
    if command and command[0] != "-m":
        return (str(Path(command[0]).resolve()), *command[1:])
    return tuple(command)


class TrainRun:
    """One run across the cluster, to completion, failure or a stop signal. Use :meth:`run`."""

    def __init__(self, config: LaunchConfig, backend: str | None = None, actor_options: Mapping[str, Any] | None = None,
                 env: Mapping[str, str] | None = None, placement_timeout: float = PLACEMENT_TIMEOUT,
                 echo_output: bool = False) -> None:
        import ray

        from hetero.ray.remote import actor_class

        self.config = config
        self.request = Request(backend)
        self.actor_options = dict(actor_options or {})
        self.placement_timeout = placement_timeout
        self.echo_output = echo_output
        self.log = EventLog(config.events)
        self.summary = Summary(nproc=config.nproc)
        self.run_id = new_run_id()
        self.command = _resolve_command(config.command)
        extra = dict(env or {})
        if config.inject:
            extra["HETERO_FAULTS"] = ";".join([*filter(None, [extra.get("HETERO_FAULTS", "")]), *config.inject])
        if config.quota:
            extra["HETERO_QUOTA"] = config.quota
        self.env = extra
        self.ranks = [Rank(rank) for rank in range(config.nproc)]
        self.stop_signal: int | None = None
        self._actor_class = ray.remote(actor_class(TrainWorker, self.request))
        self._state = WorkerState.FAILED
        self._reason: str | None = None
        self._failures: list[Failure] = []
        self._next_beats = 0.0
        self._next_node_check = 0.0
        self._spare: Any = None  # an actor placed ahead of need, its warm interpreter waiting (config.standby)
        self._spare_info: Any = None  # its info() call: ready once it is placed
        self._last_start = 0.0
        self._gone: set[str] = set()  # nodes seen lost (Ray may offer their resources a while longer)

    # -- the run ---------------------------------------------------------------------------
    def run(self) -> RayRunResult:
        config = self.config
        try:
            config.checkpoint_dir.mkdir(parents=True, exist_ok=True)
            self.log.emit("run_started", run_dir=str(config.run_dir), nproc=config.nproc,
                          devices=[self.request.backend or "auto"], policy="ray", max_restarts=config.max_restarts,
                          restart=config.restart, command=list(config.command), ray=True,
                          checkpoint_dir=str(config.checkpoint_dir))
            actors = [self._new_actor() for _ in self.ranks]  # placed side by side
            for rank, actor in zip(self.ranks, actors):
                self._start(rank, actor)
            self._state = self._loop()
        except HeteroError as exc:  # no device for a worker, a placement that timed out
            self.log.emit("gave_up", worker=None, reason=str(exc))
            self._reason = str(exc)
            self._stop_all()
        except BaseException:
            self._stop_all()
            raise
        return self._finish()

    def _loop(self) -> WorkerState:
        import ray

        while True:
            if self.stop_signal is not None:
                name = signal.Signals(self.stop_signal).name
                self.log.emit("shutdown", signal=name)
                self._reason = name
                self._stop_all()
                return WorkerState.STOPPED
            live = {rank.done: rank for rank in self.ranks if rank.done is not None}
            if not live:
                return WorkerState.SUCCEEDED if all(r.state is WorkerState.SUCCEEDED for r in self.ranks) \
                    else WorkerState.FAILED
            ready, _ = ray.wait(list(live), num_returns=len(live), timeout=POLL_SECONDS)
            for ref in ready:
                self._ended(live[ref], self._outcome(live[ref], ref))
                if self._reason is not None:
                    return WorkerState.FAILED
            self._watch_nodes()
            if self._reason is not None:
                return WorkerState.FAILED
            self._read_beats()
            self._keep_spare(time.monotonic())

    # -- starting --------------------------------------------------------------------------
    def _new_actor(self) -> Any:
        """A worker actor placed on a healthy device of some node (not waited for)."""
        from hetero.ray.placement import ray_options

        options = ray_options(self.request, exclude=self._gone)  # NoDeviceError (a HeteroError): no healthy one
        options.setdefault("scheduling_strategy", "SPREAD")  # one worker per node first, as spread does
        options = {"num_cpus": 0, "max_restarts": 0, "max_concurrency": 4, **options, **self.actor_options}
        return self._actor_class.options(**options).remote(self.run_id, self.env, self.config.preload)

    def _take_spare(self) -> Any:
        """The spare actor when it is ready, its node there and its device not quarantined; else None
        (a spare not ready yet is dropped: it must not take the device a restart is about to ask for)."""
        import ray

        spare, ready, self._spare = self._spare, self._spare_info, None
        self._spare_info = None
        if spare is None:
            return None
        try:
            done, _ = ray.wait([ready], timeout=0)
            info = ray.get(done[0]) if done else None
        except ray.exceptions.RayError:
            info = None
        if info is not None and node_gone(info["node_id"], timeout=0.5) is None:
            from hetero.ray.cluster_quarantine import cluster_entries

            if (info["host"], info["stable_id"]) not in cluster_entries():
                return spare
        _kill(spare)
        return None

    def _keep_spare(self, now: float) -> None:
        """Once every rank trains and none started for a second, start a spare actor (its warm worker
        interpreter waiting), so that a restart skips Ray's and Python's start-up."""
        if (not self.config.standby or self._spare is not None or now - self._last_start < 1.0
                or not all(r.state is WorkerState.HEALTHY for r in self.ranks if r.state.running)):
            return
        try:
            self._spare = self._new_actor()
        except HeteroError:  # no healthy device left over: no spare
            self._last_start = now + 30.0  # ask again later, not every poll
            return
        self._spare_info = self._spare.info.remote()

    def _launch(self, rank: Rank, spare: bool = True) -> Any:
        """The actor for ``rank``'s next incarnation: the spare when usable, else a new one."""
        actor = self._take_spare() if spare else None
        rank.warm = actor is not None
        return actor if actor is not None else self._new_actor()

    def _start(self, rank: Rank, actor: Any = None, because: str | None = None, group: bool = False) -> None:
        """Start ``rank``'s next incarnation on ``actor`` (default: :meth:`_launch`'s); after a failure
        ``because`` names its class."""
        import ray

        actor = self._launch(rank) if actor is None else actor
        spec = WorkerSpec(rank.rank, self.config.nproc, rank.restarts, self.command, str(self.config.checkpoint_dir),
                          self.run_id, os.getcwd(), self.env, self.config.heartbeat_timeout, self.config.grace)
        try:
            info: dict[str, Any] = ray.get(actor.assign.remote(spec), timeout=self.placement_timeout)
        except ray.exceptions.GetTimeoutError:
            _kill(actor)
            raise LaunchError(f"worker {rank.rank} found no free {self.request} for {self.placement_timeout:.0f} s: "
                              "every matching device of the cluster is held (by this run's other workers or other "
                              "tasks); add nodes, or run fewer workers") from None
        except ray.exceptions.RayActorError as exc:
            _kill(actor)
            raise LaunchError(f"worker {rank.rank} could not start on the cluster: {_cause(exc)}") from None
        rank.actor = actor
        from_where = rank.where
        rank.device, rank.node_id, rank.resume_step = info["device"], info["node_id"], info["resume_step"]
        if because is not None:
            self.log.emit("restart", worker=rank.rank, from_device=from_where, to_device=rank.where,
                          restart=rank.restarts, reason=because, group=group, warm=rank.warm)
        rank.done = actor.run.remote()
        rank.started = self._last_start = time.monotonic()
        rank.progress, rank.seen = Progress(), 0
        rank.enter(WorkerState.STARTING)
        self.log.emit("worker_started", worker=rank.rank, device=rank.device, node=rank.node_id, host=info["host"],
                      pid=None, restart=rank.restarts, resume_step=rank.resume_step, log=info["log"])
        if rank.resume_step is not None:
            self.log.emit("resumed_from_step", worker=rank.rank, device=rank.device, step=rank.resume_step)

    # -- watching --------------------------------------------------------------------------
    def _read_beats(self) -> None:
        """The running ranks' new heartbeats (at most every :data:`POLL_SECONDS`); a restarted rank's
        first one ends its recovery."""
        import ray

        now = time.monotonic()
        if now < self._next_beats:
            return
        self._next_beats = now + POLL_SECONDS
        asks = {rank.actor.beats.remote(rank.seen): rank for rank in self.ranks if rank.state.running}
        if not asks:
            return
        ready, _ = ray.wait(list(asks), num_returns=len(asks), timeout=POLL_SECONDS)
        now = time.monotonic()
        for ref in ready:
            rank = asks[ref]
            try:
                beats = ray.get(ref)["beats"]
            except ray.exceptions.RayError:
                continue  # its actor is gone: its run() says so
            if not beats or not rank.state.running:
                continue
            rank.seen += len(beats)
            rank.progress.beats.extend((now, step) for _, step in beats)
            if rank.state is WorkerState.STARTING:
                rank.enter(WorkerState.HEALTHY)
            if rank.failed_at is not None:
                self._recovered(rank, now, beats[0][1])

    def _recovered(self, rank: Rank, now: float, step: int | None) -> None:
        assert rank.failed_at is not None
        recovery = now - rank.failed_at
        self.summary.recoveries.append(recovery)
        if rank.lost_since is not None:
            self.summary.time_lost += now - rank.lost_since
        self.log.emit("recovered", worker=rank.rank, device=rank.device, node=rank.node_id, step=step,
                      recovery_s=round(recovery, 3))
        rank.failed_at = rank.lost_since = None

    def _outcome(self, rank: Rank, ref: Any) -> dict[str, Any]:
        """What ``rank``'s ended ``run`` call returned, or how its actor was lost."""
        import ray

        try:
            outcome: dict[str, Any] = ray.get(ref)
        except ray.exceptions.RayActorError as exc:
            return self._actor_lost(rank, exc)
        return outcome

    def _watch_nodes(self) -> None:
        """Every :data:`NODE_CHECK_SECONDS`, whether the nodes of the running ranks are still there: a lost
        node is seen here within about a second (its raylet refuses connections), where Ray reports its
        actors dead only after its health checks give up on it."""
        now = time.monotonic()
        if now < self._next_node_check:
            return
        self._next_node_check = now + NODE_CHECK_SECONDS
        running = [r for r in self.ranks if r.state.running and r.done is not None]
        for node_id in sorted({r.node_id for r in running}):
            gone = node_gone(node_id, timeout=0.5)
            if gone is None:
                continue
            self._gone.add(node_id)
            for rank in (r for r in running if r.node_id == node_id):
                self._ended(rank, {"returncode": None, "reason": "node-lost", "fault_class": "node-lost",
                                   "fields": {"message": f"node {node_id[:8]} lost: {gone}"}, "quarantined": None})
                if self._reason is not None:
                    return

    def _ended(self, rank: Rank, outcome: Mapping[str, Any]) -> None:
        """``rank``'s incarnation ended (its ``run`` returned) or its actor or node was lost."""
        rank.done = None
        now = time.monotonic()
        if outcome["reason"] == "node-lost":
            self._gone.add(rank.node_id)
        elif outcome["returncode"] is not None:  # its actor is there to ask (not when it or its node was lost)
            self._read_last_beats(rank)
        rank.returncode = outcome["returncode"]
        rank.output = outcome.get("output", "")
        if self.echo_output and rank.output:
            prefix = f"[worker {rank.rank}] "
            sys.stdout.write("".join(prefix + line for line in rank.output.splitlines(keepends=True)))
            sys.stdout.flush()
        self.log.emit("worker_exited", worker=rank.rank, device=rank.device, node=rank.node_id,
                      returncode=outcome["returncode"], signal=signal_name(outcome["returncode"] or 0),
                      reason=outcome["reason"], runtime_s=outcome.get("runtime_s", round(now - rank.started, 3)))
        if outcome["reason"] == "ok":
            rank.enter(WorkerState.SUCCEEDED)
            self._close(rank, kept_up_to=None, now=now, failed=False)
            self._release(rank)
            return
        self._failed(rank, outcome, now)

    def _actor_lost(self, rank: Rank, exc: BaseException) -> dict[str, Any]:
        """How an incarnation whose actor died ended: ``node-lost`` when its node is gone, else ``crash``."""
        gone = node_gone(rank.node_id)
        if gone:
            self._gone.add(rank.node_id)
        reason = "node-lost" if gone else "crash"
        message = f"node {rank.node_id[:8]} lost: {gone}" if gone else f"its actor died: {_cause(exc)}"
        return {"returncode": None, "reason": reason, "fault_class": reason, "fields": {"message": message},
                "quarantined": None}

    def _read_last_beats(self, rank: Rank) -> None:
        """The heartbeats an incarnation sent after the last look (its actor answers once more)."""
        import ray

        if rank.actor is None:
            return
        try:
            beats = ray.get(rank.actor.beats.remote(rank.seen), timeout=2.0)["beats"]
        except (ray.exceptions.RayError, KeyError):
            return
        now = time.monotonic()
        rank.progress.beats.extend((now, step) for _, step in beats)
        rank.seen += len(beats)

    # -- failures --------------------------------------------------------------------------
    def _failed(self, rank: Rank, outcome: Mapping[str, Any], now: float) -> None:
        fault_class = str(outcome["fault_class"])
        fields = dict(outcome.get("fields") or {})
        self.log.emit("fault_detected", worker=rank.rank, device=rank.device, node=rank.node_id,
                      fault_class=fault_class, **fields)
        self._failures.append(Failure(rank.rank, rank.device, fault_class, outcome["returncode"]
                                      if outcome["returncode"] is not None else -signal.SIGKILL, fields.get("message")))
        self.summary.faults[fault_class] += 1
        quarantined = outcome.get("quarantined")
        if quarantined:
            if quarantined["device"] not in self.summary.quarantined:
                self.summary.quarantined.append(quarantined["device"])
            self.log.emit("device_quarantined", **quarantined)
        self._release(rank)
        if not restartable(fault_class, self.config.restart_on):
            self._close(rank, kept_up_to=None, now=now, failed=False)
            self._give_up(rank, f"{_program_error(fields, outcome['returncode'], rank.device)}; not a device "
                                "fault, so not restarted (restart_on='any', hetero-run --restart-on any, restarts it)")
            return
        if self.summary.restarts >= self.config.max_restarts:
            self._close(rank, kept_up_to=None, now=now, failed=False)
            self._give_up(rank, f"worker {rank.rank} failed ({fault_class}) and max_restarts "
                                f"{self.config.max_restarts} is used up")
            return
        self.summary.restarts += 1
        restarting = [rank]
        if self.config.restart == "group":
            others = [r for r in self.ranks if r is not rank and (r.state.running or r.state is WorkerState.SUCCEEDED)]
            self._stop(others, "group-restart")
            restarting += others
        finished = {r.rank for r in restarting if r.state is WorkerState.SUCCEEDED}  # their work was counted
        for each in restarting:
            each.enter(WorkerState.RESTARTING)
        try:
            actors = [self._launch(each, spare=each is rank) for each in restarting]  # placed side by side
            for each, actor in zip(restarting, actors):
                progress, started = each.progress, each.started
                each.restarts += 1
                self._start(each, actor, because=fault_class, group=each is not rank)  # learns its resume step
                if each.rank not in finished:
                    self._close(each, kept_up_to=each.resume_step, now=now, failed=True, progress=progress,
                                started=started)
        except HeteroError as exc:
            self._give_up(rank, str(exc))

    def _close(self, rank: Rank, kept_up_to: int | None, now: float, failed: bool,
               progress: Progress | None = None, started: float | None = None) -> None:
        """Account for an incarnation that ended (as the supervisor does): its useful time and, when it
        failed, where the time lost starts (its last kept heartbeat, else its start). ``progress`` and
        ``started``: the ended incarnation's, when the next one has started already."""
        progress = rank.progress if progress is None else progress
        self.summary.close_incarnation(progress, kept_up_to)
        if rank.failed_at is not None and rank.lost_since is not None:  # it ended with no progress since a restart
            self.summary.time_lost += now - rank.lost_since
            rank.failed_at = rank.lost_since = None
        if failed:
            last_kept = progress.last_kept_time(kept_up_to) if kept_up_to is not None else None
            rank.failed_at = now
            rank.lost_since = last_kept if last_kept is not None else (rank.started if started is None else started)

    def _give_up(self, rank: Rank, why: str) -> None:
        self.log.emit("gave_up", worker=rank.rank, reason=why)
        self._reason = why
        if rank.state is not WorkerState.FAILED:
            rank.enter(WorkerState.FAILED)
        self._stop_all()

    # -- stopping --------------------------------------------------------------------------
    def _release(self, rank: Rank) -> None:
        """End ``rank``'s actor (its device goes back to the cluster)."""
        actor, rank.actor = rank.actor, None
        _kill(actor)

    def _stop(self, ranks: Iterable[Rank], reason: str) -> None:
        """Stop the running ``ranks`` (SIGTERM to their processes, SIGKILL after the grace), record each exit."""
        import ray

        ranks = [r for r in ranks if r.state.running and r.actor is not None]
        stops = [r.actor.stop.remote(self.config.grace) for r in ranks]
        if stops:
            ray.wait(stops, num_returns=len(stops), timeout=self.config.grace + 10.0)
        now = time.monotonic()
        for rank in ranks:
            code = None
            if rank.done is not None:
                try:
                    code = ray.get(rank.done, timeout=5.0)["returncode"]
                except ray.exceptions.RayError:
                    pass
            rank.done = None
            self._read_last_beats(rank)
            rank.returncode = code
            self.log.emit("worker_exited", worker=rank.rank, device=rank.device, node=rank.node_id, returncode=code,
                          signal=signal_name(code or 0), reason=reason, runtime_s=round(now - rank.started, 3))
            self._release(rank)

    def _stop_all(self) -> None:
        running = [r for r in self.ranks if r.state.running]
        self._stop(running, "stopped")
        now = time.monotonic()
        for rank in running:
            self._close(rank, kept_up_to=None, now=now, failed=False)
            rank.enter(WorkerState.STOPPED)
        for rank in self.ranks:
            self._release(rank)

    def _finish(self) -> RayRunResult:
        spare, self._spare, self._spare_info = self._spare, None, None
        _kill(spare)
        self.summary.ended = time.monotonic()
        self.summary.worker_results = {r.rank: r.state.describe(r.where) for r in self.ranks}
        result = RayRunResult(
            state=self._state, reason=self._reason, failures=tuple(self._failures), stop_signal=self.stop_signal,
            workers={r.rank: WorkerResult(r.rank, r.state, r.device, r.returncode, r.restarts) for r in self.ranks},
            nodes={r.rank: r.node_id for r in self.ranks}, outputs={r.rank: r.output for r in self.ranks},
            events=self.config.events)
        self.log.emit("finished", returncode=result.exit_code, **self.summary.as_dict())
        self.log.close()
        if self.config.summary_json:
            print(json.dumps({"exit_status": result.exit_code, "state": result.state.value, "reason": result.reason,
                              **self.summary.as_dict(), "failures": [dataclasses.asdict(f) for f in result.failures],
                              "events": None if self.config.events is None else str(self.config.events)}), flush=True)
        elif not self.log.quiet:
            print(self.summary.table(result.exit_code, self.config.events, result.reason), file=sys.stderr)
        return result


def _kill(actor: Any) -> None:
    """End ``actor`` (None: nothing), gone already or not; its device goes back to the cluster."""
    if actor is None:
        return
    import ray

    with contextlib.suppress(Exception):  # an actor that is gone already
        ray.kill(actor, no_restart=True)


def _cause(exc: BaseException) -> str:
    """The first line of a Ray actor error (its cause, when the actor's ``__init__`` raised)."""
    cause = getattr(exc, "cause", None) or exc
    text = str(cause).strip().splitlines()
    return text[-1] if text else type(cause).__name__


def _program_error(fields: Mapping[str, Any], code: int | None, device: str) -> str:
    error_type, message = fields.get("error_type"), fields.get("message")
    if error_type:
        return f"its program on {device} raised {error_type}" + (f": {message}" if message else "")
    return f"its program on {device} exited with status {code}"
