"""The ``hetero-run`` supervisor: starts one worker per rank on its device, watches exit
statuses, fault reports and heartbeats, and restarts what failed on a healthy device from
its newest checkpoint.

What a failure does:

- exit :data:`~hetero.fault.protocol.FAULT_EXIT_CODE` with a fault report: the fault is
  classified; a device the classifier says to quarantine (context-corrupting, lost,
  degraded) is quarantined and never used again by this run; the worker restarts elsewhere;
- killed by a signal (a crash): restarted, on another device when there is one; the device
  is *not* quarantined (a crash says nothing certain about the device), but the restart
  prefers a different one;
- any other non-zero exit (an exception of the program, named by its exception report, or its
  own ``sys.exit(N)``): an error of the program, not of a device, so the run ends (every
  worker stopped), as torchrun's does; ``restart_on="any"`` (``--restart-on any``) restarts
  it as a crash;
- no heartbeat for ``--heartbeat-timeout`` seconds after at least one: a hang; its process
  group is SIGKILLed (a hung device call does not answer SIGTERM) and it restarts.

Only the failed worker restarts unless ``restart="group"``; ``max_restarts`` counts
restarts of the whole run (a group restart is one). Past it, every worker is stopped and
the run fails.

The loop (:meth:`Supervisor._loop`) does five jobs, each in its own place:

1. *starting* workers: :class:`~hetero.launcher.starter.Starter` (environment, standbys);
2. *watching* them: :meth:`~Supervisor._watch` (exits, heartbeats, hangs);
3. *classifying* what ended one: :meth:`~Supervisor._classify`, over
   :func:`hetero.launcher.faults.diagnose` (and quarantining the device);
4. *choosing* what follows: :meth:`~Supervisor._choose_restart` (restart whom, where, or give up);
5. *keeping the books*: the events, the goodput/recovery accounting and the metrics
   (:meth:`~Supervisor._close_incarnation`, :meth:`~Supervisor._look_around`).

Each rank's life is a :class:`~hetero.launcher.state.WorkerState`; :meth:`Supervisor.run`
returns a :class:`~hetero.launcher.state.RunResult`.
"""

from __future__ import annotations

import dataclasses
import json
import signal
import sys
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

from hetero.core.device import DeviceInfo
from hetero.core.errors import HeteroError
from hetero.core.exit_status import USAGE_ERRORS
from hetero.fault import quarantine
from hetero.launcher.assign import assign, candidate_devices, check_nproc, restart_device, usable
from hetero.launcher.config import LaunchConfig
from hetero.launcher.descendants import kill_marked, new_run_id
from hetero.launcher.events import EventLog, Progress, Summary
from hetero.launcher.faults import Diagnosis, diagnose, exit_reason, restartable, signal_name
from hetero.launcher.metrics import Metrics, WorkerView
from hetero.launcher.starter import Starter, starting_torch_device
from hetero.launcher.state import Failure, RunResult, WorkerResult, WorkerState
from hetero.launcher.warmup import Warmup
from hetero.launcher.worker_handle import Worker, await_exits, become_subreaper, kill_group, stop_workers, wait_for_exit

POLL_SECONDS = 0.05
QUARANTINE_POLL_SECONDS = 1.0


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
        self.run_id = new_run_id()  # in every worker's environment: what the run started is found by it
        self.starter = Starter(config, self.log, self.run_id)
        self.warmup = Warmup()  # checkpoints verified and spare devices' health probed ahead of a restart
        self._quarantined_seen: frozenset[str] = frozenset()
        self._excluded: set[str] = set()  # stable ids this run quarantined: never reused
        self._next_quarantine_poll = 0.0
        self._abandoned: list[Any] = []  # processes SIGKILL could not end (reaped at exit if they die)
        self._probed = False
        # how the run ends (see _finish)
        self._state = WorkerState.FAILED  # until it ends otherwise
        self._reason: str | None = None  # why it failed (the gave_up reason) or stopped (the signal)
        self._bad_option = False
        self._stopped_by: int | None = None  # the signal the loop stopped for
        self._failures: list[Failure] = []
        self.metrics.watch_workers(self._worker_views)

    def _worker_views(self) -> list[WorkerView]:
        """The ranks as a metrics scrape sees them (called from the HTTP server's thread: reads only)."""
        now = time.monotonic()
        return [WorkerView(w.rank, w.device.name, w.state, w.silent_for(now) if w.alive else None)
                for w in list(self.workers)]

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
            self.starter.begin()  # the first standbys' start-up overlaps device discovery
            discovery = time.monotonic()
            self.candidates = candidate_devices(config.devices)
            self._quarantined_seen = quarantine.quarantined_ids() & {d.stable_id for d in self.candidates}
            check_nproc(config.nproc, self.candidates)
            devices = assign(config.nproc, config.policy, usable(self.candidates))
            self.log.emit("run_started", run_dir=str(config.run_dir), nproc=config.nproc,
                          devices=[d.name for d in self.candidates], policy=config.policy,
                          max_restarts=config.max_restarts, restart=config.restart, command=config.command,
                          discovery_s=round(time.monotonic() - discovery, 4))
            self.workers = [Worker(rank, device, config.checkpoint_dir / f"worker-{rank}")
                            for rank, device in enumerate(devices)]
            for worker in self.workers:
                self._resume_step(worker)  # a --checkpoint-dir from an earlier run resumes it
                self.warmup.watch(worker.checkpoint_dir)
                self.starter.start(worker)
            self._state = self._loop()
        except HeteroError as exc:  # LaunchError, or a --devices spec naming nothing usable
            bad_option = isinstance(exc, USAGE_ERRORS)  # OptionError, a device name that names nothing
            self.log.emit("gave_up", worker=None, reason=str(exc), bad_option=bad_option)  # announced on stderr, once
            self._stop_all()
            self._reason, self._bad_option = str(exc), bad_option
        finally:
            if any(w.alive for w in self.workers):  # an unexpected error: leave no orphans
                self._stop_all()
            result = self._finish()
        return result

    def _loop(self) -> WorkerState:
        """Watch until the run ends; the run's state then (SUCCEEDED, FAILED or STOPPED)."""
        while True:
            if self.stop_signal is not None:
                return self._shut_down(self.stop_signal)
            now = time.monotonic()
            self._watch(now)  # an exit or a hang goes on to _classify and _choose_restart
            if all(w.state is WorkerState.SUCCEEDED for w in self.workers):
                return WorkerState.SUCCEEDED
            if self._reason is not None:
                return WorkerState.FAILED  # gave up (max restarts, no device left): _give_up said why
            self._look_around(now)
            wait_for_exit([w for w in self.workers if w.alive], POLL_SECONDS)  # wakes at once on an exit

    def _shut_down(self, signum: int) -> WorkerState:
        self._stopped_by, self._reason = signum, signal.Signals(signum).name
        self.log.emit("shutdown", signal=self._reason)
        self._stop_all()
        return WorkerState.STOPPED

    # -- job 2: watching -----------------------------------------------------------------
    def _watch(self, now: float) -> None:
        """Each live worker: reap it if it exited, else read its heartbeat and look for a hang."""
        for worker in self.workers:
            if not worker.alive:
                continue
            code = worker.exited()
            if code is not None:
                self._on_exit(worker, code)
                continue
            self._read_heartbeat(worker, now)
            self._check_hang(worker, now)

    def _read_heartbeat(self, worker: Worker, now: float) -> None:
        record = worker.read_heartbeat(now)
        if worker.state is WorkerState.STARTING and worker.progress.beats:
            worker.enter(WorkerState.HEALTHY)  # hang detection is armed (silent_for is no longer None)
        if record is None:
            return
        launches = record.get("launches")
        if isinstance(launches, int) and launches > worker.launches:
            self.metrics.add_launches(worker.device.name, launches - worker.launches)
            worker.launches = launches
        fallbacks = record.get("host_fallbacks")
        if isinstance(fallbacks, int) and fallbacks > worker.host_fallbacks:
            self.metrics.add_host_fallbacks(worker.device.name, fallbacks - worker.host_fallbacks)
            worker.host_fallbacks = fallbacks
        torch_device = record.get("torch_device")
        if isinstance(torch_device, str) and torch_device != worker.torch_device:
            worker.torch_device = torch_device  # where the worker's torch really runs (hetero.torch_device)
            self.log.emit("torch_device", worker=worker.rank, device=worker.device.name, torch_device=torch_device)
        if worker.failed_at is not None:  # first progress after a restart: recovered
            self._recovered(worker, now)

    def _check_hang(self, worker: Worker, now: float) -> None:
        """A worker silent past ``--heartbeat-timeout`` since its last heartbeat is hung: killed,
        then handled as any other exit."""
        timeout = self.config.heartbeat_timeout
        silent = worker.silent_for(now)
        if timeout > 0 and silent is not None and silent > timeout:
            self.log.emit("heartbeat_lost", worker=worker.rank, device=worker.device.name, silent_s=round(silent, 3))
            self._on_exit(worker, self._kill_hung(worker), reason="hang")

    def _kill_hung(self, worker: Worker) -> int:
        """SIGKILL a hung worker's group; its exit status (-SIGKILL when it will not die)."""
        assert worker.proc is not None  # _watch looks at live workers only
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
        return code

    def _on_exit(self, worker: Worker, code: int, reason: str | None = None) -> None:
        """An incarnation ended with exit status ``code``: a success, or a failure to classify
        (job 3) and act on (job 4)."""
        now = time.monotonic()
        worker.returncode = code
        reason = reason or exit_reason(code)
        self.log.emit("worker_exited", worker=worker.rank, device=worker.device.name, returncode=code,
                      signal=signal_name(code), reason=reason, runtime_s=round(now - worker.started, 3))
        if code == 0 and reason == "ok":
            worker.enter(WorkerState.SUCCEEDED)
            self._close_incarnation(worker, kept_up_to=None, now=now, failed=False)
            return
        diagnosis = self._classify(worker, code, reason)
        self._choose_restart(worker, diagnosis, code, now)

    # -- job 3: classifying --------------------------------------------------------------
    def _classify(self, worker: Worker, code: int, reason: str) -> Diagnosis:
        """The failure's diagnosis, recorded (event, summary, metrics, the run's failures); its
        device quarantined when the fault report's verdict says so."""
        # exit 86: the fault report; another exit status: the report of the program's exception, if any
        report = worker.read_fault_report() if code > 0 else None
        diagnosis = diagnose(code, reason, report)
        device, fault_class = worker.device, diagnosis.fault_class
        self.log.emit("fault_detected", worker=worker.rank, device=device.name, fault_class=fault_class,
                      **diagnosis.fields)
        self._failures.append(Failure(worker.rank, device.name, fault_class, code, diagnosis.fields.get("message")))
        self.summary.faults[fault_class] += 1
        self.metrics.inc_fault(fault_class, device.name)
        if report is not None and diagnosis.verdict is not None and diagnosis.verdict.quarantine:
            self._quarantine(device, report, fault_class, diagnosis.verdict.ttl)
        return diagnosis

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

    # -- job 4: choosing what follows a failure ------------------------------------------
    def _choose_restart(self, worker: Worker, diagnosis: Diagnosis, code: int, now: float) -> None:
        """Restart ``worker`` (and, under ``--restart group``, every other rank) for a failure
        ``--restart-on`` restarts, while restarts are left and a usable device is; otherwise give
        up on it, which ends the run."""
        fault_class = diagnosis.fault_class
        if not restartable(fault_class, self.config.restart_on):
            self._close_incarnation(worker, kept_up_to=None, now=now, failed=False)
            self._give_up(worker, f"{_program_error(diagnosis, code, worker.device.name)}; not a device fault, so not "
                                  "restarted (hetero-run --restart-on any restarts such failures)")
            return
        if self.summary.restarts >= self.config.max_restarts:
            why = f"worker {worker.rank} failed ({fault_class}) and --max-restarts {self.config.max_restarts} is used up"
            self._close_incarnation(worker, kept_up_to=None, now=now, failed=False)
            self._give_up(worker, why)
            return
        try:
            restarting = self._restarting_ranks(worker, now)
            self.summary.restarts += 1
            self.metrics.inc_restarts()
            for each in restarting:
                self._restart(each, because=worker, reason=fault_class)
        except HeteroError as exc:  # LaunchError: no usable device left
            self._give_up(worker, str(exc))

    def _restarting_ranks(self, worker: Worker, now: float) -> list[Worker]:
        """The ranks that restart because ``worker`` failed, moved to RESTARTING (the others of a
        group restart stopped first), each incarnation's accounts closed."""
        restarting = [worker]
        if self.config.restart == "group":
            others = [w for w in self.workers if w is not worker and w.alive]
            self._stop(others, "group-restart", now)
            restarting += others + [w for w in self.workers if w.state is WorkerState.SUCCEEDED]
        for each in restarting:
            if each.state is WorkerState.SUCCEEDED:  # finished ranks too; their work was counted
                self._resume_step(each)
            else:
                self._close_incarnation(each, kept_up_to=self._resume_step(each), now=now, failed=True)
            each.enter(WorkerState.RESTARTING)
        return restarting

    def _restart(self, worker: Worker, because: Worker, reason: str) -> None:
        from_device = worker.device
        worker.device = self._restart_device(worker, because)
        worker.restarts += 1
        self.log.emit("restart", worker=worker.rank, from_device=from_device.name, to_device=worker.device.name,
                      restart=worker.restarts, reason=reason, group=worker is not because)
        self.starter.start(worker)

    def _restart_device(self, worker: Worker, because: Worker) -> DeviceInfo:
        """Where ``worker`` starts again: elsewhere when it is the rank that failed or its device
        is no longer usable (quarantined), by ``--policy`` among the usable devices; else where it was."""
        current = worker.device
        pool = usable(self.candidates, self._excluded)
        if worker is not because and current.stable_id not in self._excluded and current in pool:
            return current
        group = self.config.restart == "group"  # then every other rank is about to start again too
        in_use = Counter(w.device.name for w in self.workers if w is not worker and (w.alive or group))
        return restart_device(current, self.config.policy, pool, in_use)

    def _resume_step(self, worker: Worker) -> int | None:
        # verified, mostly ahead of time; the token spares the worker hashing it again
        worker.resume_step, worker.verified_checkpoint = self.warmup.latest(worker.checkpoint_dir)
        return worker.resume_step

    def _give_up(self, worker: Worker, why: str) -> None:
        self.log.emit("gave_up", worker=worker.rank, reason=why)
        self._reason = why
        worker.enter(WorkerState.FAILED)
        self._stop_all()

    # -- job 5: the books (goodput, recovery, quarantines seen, metrics) -----------------
    def _look_around(self, now: float) -> None:
        """Between watches: devices quarantined or released elsewhere, and, once calm, the work
        done ahead of a restart (first health checks of spare devices, a reserve standby)."""
        if now >= self._next_quarantine_poll:
            self._poll_quarantine(now)
        if self.starter.calm(now):
            if not self._probed:
                self._probed = True  # the devices a restart may move to: their first health check, ahead
                self.warmup.probe(d.name for d in usable(self.candidates, self._excluded))
            self.starter.keep_reserve()  # the next restart starts warm

    def _poll_quarantine(self, now: float) -> None:
        """Devices quarantined or released by others (another run, ``hetero quarantine``, a TTL)."""
        self._next_quarantine_poll = now + QUARANTINE_POLL_SECONDS
        self._update_goodput()  # the live gauge, once a second like this poll
        current = quarantine.quarantined_ids() & {d.stable_id for d in self.candidates}
        by_id = {d.stable_id: d for d in self.candidates}
        for stable_id in sorted(current - self._quarantined_seen):
            self.log.emit("device_quarantined", device=by_id[stable_id].name, stable_id=stable_id,
                          reason="quarantined outside this run", fault_class=None)
            self.metrics.set_quarantined(by_id[stable_id].name, True)
        for stable_id in sorted(self._quarantined_seen - current):
            self.log.emit("device_released", device=by_id[stable_id].name, stable_id=stable_id)
            self.metrics.set_quarantined(by_id[stable_id].name, False)
        self._quarantined_seen = current

    def _recovered(self, worker: Worker, now: float) -> None:
        assert worker.failed_at is not None  # _read_heartbeat checked it
        recovery = now - worker.failed_at
        self.summary.recoveries.append(recovery)
        self.metrics.observe_recovery(recovery)
        if worker.lost_since is not None:
            self.summary.time_lost += now - worker.lost_since
        worker.failed_at = worker.lost_since = None

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

    def _update_goodput(self) -> None:
        goodput = self.summary.goodput([w.progress for w in self.workers if w.alive])
        if goodput is not None:
            self.metrics.set_goodput(goodput)

    # -- stopping ------------------------------------------------------------------------
    def _stop(self, workers: list[Worker], reason: str, now: float) -> list[Worker]:
        """Stop ``workers`` (SIGTERM, then SIGKILL after the grace period), record and log each exit."""
        stopped = []
        for rank, code in stop_workers(workers, self.grace).items():
            worker = self.workers[rank]
            worker.returncode = code
            self.log.emit("worker_exited", worker=rank, device=worker.device.name, returncode=code,
                          signal=signal_name(code), reason=reason, runtime_s=round(now - worker.started, 3))
            stopped.append(worker)
        return stopped

    def _stop_all(self) -> None:
        self.starter.retire_standbys()
        now = time.monotonic()
        for worker in self._stop([w for w in self.workers if w.alive], "stopped", now):
            self._close_incarnation(worker, kept_up_to=None, now=now, failed=False)
            if worker.state is not WorkerState.FAILED:  # the rank the run gave up on stays failed
                worker.enter(WorkerState.STOPPED)

    def _finish(self) -> RunResult:
        self.starter.retire_standbys()
        kill_marked(self.run_id)  # nothing the run started outlives it (daemons of finished workers...)
        self.warmup.close()
        for proc in self._abandoned:
            proc.poll()
        self.summary.ended = time.monotonic()
        self.summary.worker_results = {w.rank: w.state.describe(w.device.name) for w in self.workers}
        torch_devices = {w.rank: w.torch_device or starting_torch_device(w.device) for w in self.workers}
        self.summary.torch_devices = {rank: where for rank, where in torch_devices.items() if where}
        self._update_goodput()
        result = RunResult(
            state=self._state, reason=self._reason, failures=tuple(self._failures), bad_option=self._bad_option,
            stop_signal=self._stopped_by,
            workers={w.rank: WorkerResult(w.rank, w.state, w.device.name, w.returncode, w.restarts) for w in self.workers})
        self.log.emit("finished", returncode=result.exit_code, **self.summary.as_dict())
        self.log.close()
        if result.bad_option:  # said in one line already ("hetero-run: error: ..."): nothing ran to sum up
            return result
        if self.config.summary_json:  # after every worker's own output: the last line of stdout
            print(json.dumps(self._summary_json(result)), flush=True)
        else:
            print(self.summary.table(result.exit_code, self.config.events, result.reason), file=sys.stderr)
        return result

    def _summary_json(self, result: RunResult) -> dict[str, Any]:
        """What ``--json`` prints: the table's content, how the run ended and each failure."""
        return {"exit_status": result.exit_code, "state": result.state.value, "reason": result.reason,
                **self.summary.as_dict(), "failures": [dataclasses.asdict(f) for f in result.failures],
                "events": None if self.config.events is None else str(self.config.events)}


def _program_error(diagnosis: Diagnosis, code: int, device: str) -> str:
    """``its program on cpu raised ValueError: bad value`` or ``its program on cpu exited with status 3``."""
    error_type, message = diagnosis.fields.get("error_type"), diagnosis.fields.get("message")
    if error_type:
        return f"its program on {device} raised {error_type}" + (f": {message}" if message else "")
    return f"its program on {device} exited with status {code}"


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
