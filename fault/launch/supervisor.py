"""The ``hetero-run`` supervisor: starts one worker per rank on its device, watches exit
statuses, fault reports and heartbeats, and restarts what failed on a healthy device from
its newest checkpoint.

What a failure does:

- exit :data:`~hetero.fault.protocol.FAULT_EXIT_CODE` with a fault report: the fault is
  classified; a device the classifier says to quarantine (context-corrupting, lost,
  degraded) is quarantined and never used again by this run; the worker restarts elsewhere;
- killed by a signal (a crash), or any other non-zero exit: restarted, on another device
  when there is one; the device is *not* quarantined (a crash says nothing certain about
  the device), but the restart prefers a different one;
- no heartbeat for ``--heartbeat-timeout`` seconds after at least one: a hang; its process
  group is SIGKILLed (a hung device call does not answer SIGTERM) and it restarts.

Only the failed worker restarts unless ``restart="group"``; ``max_restarts`` counts
restarts of the whole run (a group restart is one). Past it, every worker is stopped and
the run fails.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from hetero.device import DeviceInfo
from hetero.errors import HeteroError
from hetero.fault import quarantine
from hetero.fault.launch.assign import (
    OptionError,
    assign,
    candidate_devices,
    check_nproc,
    free_port,
    quarantined_ids,
    replacement,
    usable,
)
from hetero.fault.launch.config import LaunchConfig
from hetero.fault.launch.descendants import kill_marked, new_run_id
from hetero.fault.launch.events import EventLog, Progress, Summary
from hetero.fault.launch.faults import classify_report
from hetero.fault.launch.metrics import Metrics
from hetero.fault.launch.state import Failure, RunResult, WorkerResult, WorkerState
from hetero.fault.launch.warmup import Warmup
from hetero.fault.launch.worker_handle import (
    Worker,
    await_exits,
    become_subreaper,
    bootstrap_command,
    kill_group,
    spawn_standby,
    stop_workers,
    wait_for_exit,
    warm_modules,
)
from hetero.fault.launch.worker_main import WarmStandby
from hetero.fault.protocol import ENV_LAUNCHER_PID, ENV_RUN_ID, FAULT_EXIT_CODE

POLL_SECONDS = 0.05
#: A reserve worker interpreter is started once the workers have run this long (not at once:
#: it would compete with their start-up for the CPU).
RESERVE_AFTER_SECONDS = 1.0
QUARANTINE_POLL_SECONDS = 1.0
#: Standbys started for the first workers while devices are discovered (more workers start fresh).
EARLY_STANDBYS = 8


class Supervisor:
    """Runs one job to completion, failure, or a stop signal. Use :meth:`run`."""

    def __init__(self, config: LaunchConfig, metrics: Metrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or Metrics()
        self.log = EventLog(config.events)
        self.summary = Summary(nproc=config.nproc)
        self.stop_signal: int | None = None  # set from a signal handler
        self.grace = config.grace  # seconds from SIGTERM to SIGKILL; a second Ctrl-C makes it 0
        self.workers: list[Worker] = []
        self.candidates: list[DeviceInfo] = []
        self._quarantined_seen: frozenset[str] = frozenset()
        self._excluded: set[str] = set()  # stable ids this run quarantined: never reused
        self._next_quarantine_poll = 0.0
        self._standbys: list[WarmStandby] = []  # started ahead: the first workers', then one reserve
        self._last_start = 0.0
        self._abandoned: list[Any] = []  # processes SIGKILL could not end (reaped at exit if they die)
        self.warmup = Warmup()  # checkpoints verified and spare devices' health probed ahead of a restart
        self._probed = False
        self._state = WorkerState.FAILED  # the run's, until it ends otherwise
        self._reason: str | None = None  # why it failed (the gave_up reason) or stopped (the signal)
        self._bad_option = False
        self._stopped_by: int | None = None  # the signal the loop stopped for
        self._failures: list[Failure] = []
        self.run_id = new_run_id()  # in every worker's environment: what the run started is found by it

    # -- the run -------------------------------------------------------------------------
    def run(self) -> RunResult:
        """Run to the end; quarantines for injected faults stay within the run (its drill store)."""
        with quarantine.run_scope(self.config.run_dir):
            return self._run()

    def _run(self) -> RunResult:
        config = self.config
        config.run_dir.mkdir(parents=True, exist_ok=True)
        become_subreaper()
        try:
            self.base_env = self._base_env()
            if config.standby:  # their start-up overlaps device discovery
                early = min(config.nproc, EARLY_STANDBYS)
                self._standbys = [self._spawn_standby() for _ in range(early)]
            discovery = time.monotonic()
            self.candidates = candidate_devices(config.devices)
            self._quarantined_seen = quarantined_ids() & {d.stable_id for d in self.candidates}
            check_nproc(config.nproc, self.candidates)
            devices = assign(config.nproc, config.policy, usable(self.candidates))
            self.log.emit("run_started", run_dir=str(config.run_dir), nproc=config.nproc,
                          devices=[d.name for d in self.candidates], policy=config.policy,
                          max_restarts=config.max_restarts, restart=config.restart, command=config.command,
                          discovery_s=round(time.monotonic() - discovery, 4))
            self.argv = bootstrap_command(config.command)
            self.dist = {"MASTER_ADDR": config.master_addr,
                         "MASTER_PORT": str(config.master_port or free_port(config.master_addr)),
                         "WORLD_SIZE": str(config.nproc), "LOCAL_WORLD_SIZE": str(config.nproc)}
            self.workers = [Worker(rank, device, config.checkpoint_dir / f"worker-{rank}")
                            for rank, device in enumerate(devices)]
            for worker in self.workers:
                self._resume_step(worker)  # a --checkpoint-dir from an earlier run resumes it
                self.warmup.watch(worker.checkpoint_dir)
                self._start(worker)
            self._state = self._loop()
        except HeteroError as exc:  # LaunchError, or a --devices spec naming nothing usable
            self.log.emit("gave_up", worker=None, reason=str(exc))  # announced on stderr, once
            self._stop_all()
            self._reason, self._bad_option = str(exc), isinstance(exc, OptionError)
        finally:
            if any(w.alive for w in self.workers):  # an unexpected error: leave no orphans
                self._stop_all()
            result = self._finish()
        return result

    def _loop(self) -> WorkerState:
        while True:
            if self.stop_signal is not None:
                signum = self._stopped_by = self.stop_signal
                self._reason = signal.Signals(signum).name
                self.log.emit("shutdown", signal=self._reason)
                self._stop_all()
                return WorkerState.STOPPED
            now = time.monotonic()
            for worker in self.workers:
                if not worker.alive:
                    continue
                code = worker.exited()
                if code is not None:
                    self._on_exit(worker, code, reason=None)
                    continue
                self._watch_heartbeat(worker, now)
            if all(w.state is WorkerState.SUCCEEDED for w in self.workers):
                return WorkerState.SUCCEEDED
            if self._reason is not None:
                return WorkerState.FAILED  # gave up (max restarts, no device left): _give_up said why
            if now >= self._next_quarantine_poll:
                self._poll_quarantine(now)
            if not self._probed and now - self._last_start > RESERVE_AFTER_SECONDS:
                self._probed = True  # the devices a restart may move to: their first health check, ahead
                self.warmup.probe(d.name for d in usable(self.candidates, self._excluded))
            if self.config.standby and not self._standbys and now - self._last_start > RESERVE_AFTER_SECONDS:
                self._standbys.append(self._spawn_standby(warm=True))  # the next restart starts warm
            wait_for_exit([w for w in self.workers if w.alive], POLL_SECONDS)  # wakes at once on an exit

    # -- watching ------------------------------------------------------------------------
    def _watch_heartbeat(self, worker: Worker, now: float) -> None:
        record = worker.read_heartbeat(now)
        if worker.state is WorkerState.STARTING and worker.progress.beats:
            worker.enter(WorkerState.HEALTHY)  # hang detection is armed (silent_for is no longer None)
        if record is not None:
            launches = record.get("launches")
            if isinstance(launches, int) and launches > worker.launches:
                self.metrics.add_launches(worker.device.name, launches - worker.launches)
                worker.launches = launches
            if worker.failed_at is not None:  # first progress after a restart: recovered
                self._recovered(worker, now)
        timeout = self.config.heartbeat_timeout
        silent = worker.silent_for(now)
        if timeout > 0 and silent is not None and silent > timeout:
            self.log.emit("heartbeat_lost", worker=worker.rank, device=worker.device.name, silent_s=round(silent, 3))
            assert worker.proc is not None
            kill_group(worker.proc.pid, signal.SIGKILL)
            codes: dict[int, int] = {}
            await_exits([worker], codes, max(self.grace, 1.0))
            code = codes.get(worker.rank)
            if code is None:  # stuck in an uninterruptible driver call: leave it, restart elsewhere
                print(f"hetero-run: worker {worker.rank} (pid {worker.proc.pid}) does not die after SIGKILL; "
                      f"it is stuck in the kernel (driver) on {worker.device.name}; restarting it elsewhere",
                      file=sys.stderr)
                self._abandoned.append(worker.proc)
                worker.proc, code = None, -signal.SIGKILL
                worker.close_pidfd()
            self._on_exit(worker, code, reason="hang")

    def _recovered(self, worker: Worker, now: float) -> None:
        assert worker.failed_at is not None
        recovery = now - worker.failed_at
        self.summary.recoveries.append(recovery)
        self.metrics.observe_recovery(recovery)
        if worker.lost_since is not None:
            self.summary.time_lost += now - worker.lost_since
        worker.failed_at = worker.lost_since = None

    def _poll_quarantine(self, now: float) -> None:
        """Devices quarantined or released by others (another run, ``hetero quarantine``, a TTL)."""
        self._next_quarantine_poll = now + QUARANTINE_POLL_SECONDS
        self._update_goodput()  # the live gauge, once a second like this poll
        current = quarantined_ids() & {d.stable_id for d in self.candidates}
        by_id = {d.stable_id: d for d in self.candidates}
        for stable_id in sorted(current - self._quarantined_seen):
            self.log.emit("device_quarantined", device=by_id[stable_id].name, stable_id=stable_id,
                          reason="quarantined outside this run", fault_class=None)
            self.metrics.set_quarantined(by_id[stable_id].name, True)
        for stable_id in sorted(self._quarantined_seen - current):
            self.log.emit("device_released", device=by_id[stable_id].name, stable_id=stable_id)
            self.metrics.set_quarantined(by_id[stable_id].name, False)
        self._quarantined_seen = current

    # -- failures and restarts -----------------------------------------------------------
    def _on_exit(self, worker: Worker, code: int, reason: str | None) -> None:
        now = time.monotonic()
        worker.returncode = code
        signame = _signal_name(code)
        if reason is None:
            reason = "ok" if code == 0 else "fault" if code == FAULT_EXIT_CODE else "crash" if code < 0 else "error"
        self.log.emit("worker_exited", worker=worker.rank, device=worker.device.name, returncode=code,
                      signal=signame, reason=reason, runtime_s=round(now - worker.started, 3))
        if code == 0 and reason == "ok":
            worker.enter(WorkerState.SUCCEEDED)
            self._close_incarnation(worker, kept_up_to=None, now=now, failed=False)
            return
        fault_class = self._record_fault(worker, code, reason, signame)
        if self.summary.restarts >= self.config.max_restarts:
            why = f"worker {worker.rank} failed ({fault_class}) and --max-restarts {self.config.max_restarts} is used up"
            self._close_incarnation(worker, kept_up_to=None, now=now, failed=False)
            self._give_up(worker, why)
            return
        try:
            failed = [worker]
            if self.config.restart == "group":
                others = [w for w in self.workers if w is not worker and w.alive]
                for rank, other_code in stop_workers(others, self.grace).items():
                    self.workers[rank].returncode = other_code
                    self.log.emit("worker_exited", worker=rank, device=self.workers[rank].device.name,
                                  returncode=other_code, signal=_signal_name(other_code), reason="group-restart",
                                  runtime_s=round(now - self.workers[rank].started, 3))
                failed += others + [w for w in self.workers if w.state is WorkerState.SUCCEEDED]
            for each in failed:
                if each.state is WorkerState.SUCCEEDED:  # a group restart takes finished ranks too; their work was counted
                    self._resume_step(each)
                else:
                    self._close_incarnation(each, kept_up_to=self._resume_step(each), now=now, failed=True)
                each.enter(WorkerState.RESTARTING)
            self.summary.restarts += 1
            self.metrics.inc_restarts()
            for each in failed:
                self._restart(each, because=worker, reason=fault_class)
        except HeteroError as exc:  # LaunchError: no usable device left
            self._give_up(worker, str(exc))

    def _record_fault(self, worker: Worker, code: int, reason: str, signame: str | None) -> str:
        report = worker.read_fault_report() if code == FAULT_EXIT_CODE else None
        fields: dict[str, Any] = {}
        verdict = classify_report(report) if report is not None else None
        if report is not None and verdict is not None:
            fault_class = verdict.fault_class
            fields = {key: report.get(key) for key in ("error_type", "code", "code_name", "xid", "injected",
                                                       "message", "action")}
        elif reason == "hang":
            fault_class = "hang"
        elif code < 0:
            fault_class = "crash"
            fields = {"message": f"killed by {signame or code}"}
        else:
            fault_class = "fault" if code == FAULT_EXIT_CODE else "error"
            fields = {"message": f"exit status {code}" + (" without a fault report" if code == FAULT_EXIT_CODE else "")}
        device = worker.device
        self.log.emit("fault_detected", worker=worker.rank, device=device.name, fault_class=fault_class, **fields)
        self._failures.append(Failure(worker.rank, device.name, fault_class, code, fields.get("message")))
        self.summary.faults[fault_class] += 1
        self.metrics.inc_fault(fault_class, device.name)
        if report is not None and verdict is not None and verdict.quarantine:
            self._quarantine(device, report, fault_class, verdict.ttl)
        return fault_class

    def _quarantine(self, device: DeviceInfo, report: dict[str, Any], fault_class: str, ttl: float | None) -> None:
        why = f"{report.get('error_type')}: {report.get('message')}"[:500]
        entry = quarantine.add(device, why, fault_class, ttl=ttl, name=device.name,
                               injected=bool(report.get("injected")), quiet=True)  # announced below
        scope = " for this drill" if entry.drill else ""
        self._excluded.add(device.stable_id)
        self._quarantined_seen = self._quarantined_seen | {device.stable_id}
        if device.name not in self.summary.quarantined:
            self.summary.quarantined.append(device.name)
        self.log.emit("device_quarantined", device=device.name, stable_id=device.stable_id, reason=why,
                      fault_class=fault_class, scope=scope)
        self.metrics.set_quarantined(device.name, True)

    def _restart(self, worker: Worker, because: Worker, reason: str) -> None:
        from_device = worker.device
        group = self.config.restart == "group"  # then every other rank is about to start again too
        in_use = Counter(w.device.name for w in self.workers if w is not worker and (w.alive or group))
        pool = usable(self.candidates, self._excluded)
        if worker is because or from_device.stable_id in self._excluded or from_device not in pool:
            worker.device = replacement(from_device, self.config.policy, pool, in_use)
        worker.restarts += 1
        self.log.emit("restart", worker=worker.rank, from_device=from_device.name, to_device=worker.device.name,
                      restart=worker.restarts, reason=reason, group=worker is not because)
        self._start(worker)

    def _close_incarnation(self, worker: Worker, kept_up_to: int | None, now: float, failed: bool) -> None:
        """Account for the incarnation that just ended (once): the useful time it kept and,
        when it failed, where the time lost starts (its last kept heartbeat, else its start)."""
        progress, worker.progress = worker.progress, Progress()
        self.summary.close_incarnation(progress, kept_up_to)
        if worker.failed_at is not None and worker.lost_since is not None:
            # it ended without progress after a restart: that whole stretch was lost
            self.summary.time_lost += now - worker.lost_since
            worker.failed_at = worker.lost_since = None
        if failed:
            last_kept = progress.last_kept_time(kept_up_to) if kept_up_to is not None else None
            worker.failed_at = now
            worker.lost_since = last_kept if last_kept is not None else worker.started
        self._update_goodput()

    def _resume_step(self, worker: Worker) -> int | None:
        # verified, mostly ahead of time; the token spares the worker hashing it again
        worker.resume_step, worker.verified_checkpoint = self.warmup.latest(worker.checkpoint_dir)
        return worker.resume_step

    def _give_up(self, worker: Worker, why: str) -> None:
        self.log.emit("gave_up", worker=worker.rank, reason=why)
        self._reason = why
        worker.enter(WorkerState.FAILED)
        self._stop_all()

    # -- starting and stopping -----------------------------------------------------------
    def _base_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["HETERO_DRILL_QUARANTINE"] = str(quarantine.drill_store())  # the run's drill scope, shared with its workers
        env[ENV_RUN_ID] = self.run_id
        env[ENV_LAUNCHER_PID] = str(os.getpid())  # the bootstrap dies with this process (PR_SET_PDEATHSIG)
        if self.config.inject:
            rules = [r for r in env.get("HETERO_FAULTS", "").split(";") if r.strip()]
            env["HETERO_FAULTS"] = ";".join([*rules, *self.config.inject])
        return env

    def _start(self, worker: Worker) -> None:
        dist = {**self.dist, "RANK": str(worker.rank), "LOCAL_RANK": str(worker.rank),
                "GROUP_RANK": "0", "ROLE_RANK": str(worker.rank)}
        standby = self._standbys.pop(0) if self._standbys else None
        worker.start(self.argv, self.config.run_dir, self.base_env, dist, standby, self.config.command)
        worker.enter(WorkerState.STARTING)
        self._last_start = time.monotonic()
        assert worker.proc is not None
        self.log.emit("worker_started", worker=worker.rank, device=worker.device.name, pid=worker.proc.pid,
                      pgid=worker.proc.pid, restart=worker.restarts, resume_step=worker.resume_step)
        if worker.resume_step is not None:  # a restart, or a first start in an earlier run's --checkpoint-dir
            self.log.emit("resumed_from_step", worker=worker.rank, device=worker.device.name, step=worker.resume_step)

    def _spawn_standby(self, warm: bool = False) -> WarmStandby:
        """A standby; ``warm``: also importing what device discovery imported here (for a reserve,
        started once things are calm: the first workers' standbys must be ready at once)."""
        return spawn_standby(self.base_env, (*self.config.preload, *(warm_modules() if warm else ())))

    def _retire_standbys(self) -> None:
        standbys, self._standbys = self._standbys, []
        for standby in standbys:
            standby.close()

    def _stop_all(self) -> None:
        self._retire_standbys()
        live = [w for w in self.workers if w.alive]
        now = time.monotonic()
        for rank, code in stop_workers(live, self.grace).items():
            worker = self.workers[rank]
            worker.returncode = code
            self.log.emit("worker_exited", worker=rank, device=worker.device.name, returncode=code,
                          signal=_signal_name(code), reason="stopped",
                          runtime_s=round(now - worker.started, 3))
            self._close_incarnation(worker, kept_up_to=None, now=now, failed=False)
            if worker.state is not WorkerState.FAILED:  # the rank the run gave up on stays failed
                worker.enter(WorkerState.STOPPED)

    def _update_goodput(self) -> None:
        goodput = self.summary.goodput([w.progress for w in self.workers if w.alive])
        if goodput is not None:
            self.metrics.set_goodput(goodput)

    def _finish(self) -> RunResult:
        self._retire_standbys()
        kill_marked(self.run_id)  # nothing the run started outlives it (daemons of finished workers...)
        self.warmup.close()
        for proc in self._abandoned:
            proc.poll()
        self.summary.ended = time.monotonic()
        self.summary.worker_results = {w.rank: w.state.describe(w.device.name) for w in self.workers}
        self._update_goodput()
        result = RunResult(
            state=self._state, reason=self._reason, failures=tuple(self._failures), bad_option=self._bad_option,
            stop_signal=self._stopped_by,
            workers={w.rank: WorkerResult(w.rank, w.state, w.device.name, w.returncode, w.restarts) for w in self.workers})
        self.log.emit("finished", returncode=result.exit_code, **self.summary.as_dict())
        self.log.close()
        print(self.summary.table(result.exit_code, self.config.events), file=sys.stderr)
        return result


def _signal_name(code: int) -> str | None:
    """``SIGKILL`` for an exit status of -9; None for a normal exit."""
    try:
        return signal.Signals(-code).name if code < 0 else None
    except ValueError:
        return f"signal {-code}"


def run(config: LaunchConfig, metrics: Metrics | None = None, handle_signals: Sequence[int] = ()) -> RunResult:
    """Run ``config`` under a :class:`Supervisor`; ``handle_signals`` (e.g. SIGINT, SIGTERM) stop it
    cleanly: workers get SIGTERM, then SIGKILL after ``config.grace`` seconds (at once after a
    second signal)."""
    supervisor = Supervisor(config, metrics)

    def on_signal(signum: int, frame: object) -> None:
        if supervisor.stop_signal is not None:  # a second Ctrl-C: no more grace
            supervisor.grace = 0.0
        supervisor.stop_signal = signum

    previous = {sig: signal.signal(sig, on_signal) for sig in handle_signals}
    try:
        return supervisor.run()
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
