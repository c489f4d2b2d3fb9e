"""One training worker on a Ray node: an actor that holds a hetero device and runs the user's script
on it, as ``hetero-run`` runs a worker.

The actor (placed by :mod:`hetero.ray.placement`, its device leased by :mod:`hetero.ray.lease`)
starts the worker process with the launcher's own pieces: the bootstrap
(``python -m hetero.launcher.worker_main script.py args``), the worker protocol's environment
(``HETERO_DEVICE`` and the vendor's visibility variable, ``HETERO_CHECKPOINT_DIR``,
``HETERO_RESUME_STEP``, ``HETERO_HEARTBEAT_FILE``...) and :class:`hetero.launcher.worker_handle.Worker`
for the start, the heartbeats, the exit and the sweep of what the process left behind. It then
watches it (:meth:`TrainWorker.run` returns when it ends) and tells the driver how it ended, with the
fault report's diagnosis (:func:`hetero.launcher.faults.diagnose`); a device the verdict quarantines is
quarantined here, on its node, so the entry lands in the cluster's store under the right host.

Why a process under an actor, not the script inside the actor: a crash of the script (a segfault in a
vendor library, the OOM killer) then ends one worker process, which the actor reports, and the
script runs exactly as under ``hetero-run`` (its own ``__main__``, ``sys.argv``, fault reports, exit
86). A lost node takes the actor with it: the driver sees the node go (see :mod:`hetero.ray.train`), and
the worker process dies with its actor (the bootstrap's parent-death signal, ``HETERO_LAUNCHER_PID``);
an actor that outlives its raylet for a moment (a node whose raylet was killed) kills its worker at
once, so a worker of a lost node never writes a checkpoint after its restart has read the newest.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import tempfile
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hetero.fault import protocol

#: Seconds between two looks at the worker process (its exit wakes the actor at once through a pidfd).
POLL_SECONDS = 0.05
#: The end of a worker's output the driver gets back when it ends (the whole stays in its log file).
OUTPUT_TAIL = 16 * 1024


@dataclasses.dataclass(frozen=True)
class WorkerSpec:
    """What one incarnation of a rank runs: sent by the driver to the actor (picklable)."""

    rank: int
    world_size: int
    restart: int  # HETERO_RESTART: 0 for the first start
    command: tuple[str, ...]  # ("/abs/script.py", *args) or ("-m", "module", *args)
    checkpoint_root: str  # the run's checkpoint folder, on storage every node reads; this rank's: worker-<rank>
    run_id: str
    cwd: str | None = None  # the driver's working directory, used where it exists on the node
    env: Mapping[str, str] = dataclasses.field(default_factory=dict)  # added to the node's environment
    heartbeat_timeout: float = 0.0  # 0: no hang detection
    grace: float = 5.0

    @property
    def incarnation_id(self) -> str:
        """``HETERO_RUN_ID`` of this incarnation: one per rank and restart, so sweeping what one worker
        left (or its watchdog, when its actor dies) never touches another's processes on a shared machine."""
        return f"{self.run_id}.{self.rank}.{self.restart}"


def node_run_dir(run_id: str) -> Path:
    """This node's folder for a run's heartbeats, fault reports and worker logs (node-local: only the
    checkpoints need storage every node reads)."""
    path = Path(tempfile.gettempdir()) / "hetero-ray-runs" / run_id
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def worker_env(spec: WorkerSpec, node_env: Mapping[str, str], run_dir: Path, launcher_pid: int) -> dict[str, str]:
    """The environment a worker process starts from, before :meth:`Worker.start` adds its device and the
    protocol's variables: the node's, the driver's additions, and the run's markers. ``LOCAL_RANK`` is 0
    because the visibility variable shows the worker one device (torch's ``cuda:0`` is its GPU)."""
    env = {k: v for k, v in node_env.items() if k != "HETERO_DEVICE"}  # the actor's own lease variable
    faults = [r for r in (env.get("HETERO_FAULTS", ""), spec.env.get("HETERO_FAULTS", "")) if r.strip()]
    env.update(spec.env)
    if faults:
        env["HETERO_FAULTS"] = ";".join(faults)
    env.update({
        protocol.ENV_RUN_ID: spec.incarnation_id,
        protocol.ENV_LAUNCHER_PID: str(launcher_pid),  # the worker dies with its actor (a lost node)
        "HETERO_DRILL_QUARANTINE": str(run_dir / f"drill-quarantine-{spec.rank}.json"),
    })
    return env


def dist_env(spec: WorkerSpec) -> dict[str, str]:
    """torch.distributed's rank variables (no ``MASTER_*``: workers restarted one by one train apart)."""
    return {"RANK": str(spec.rank), "WORLD_SIZE": str(spec.world_size), "LOCAL_RANK": "0",
            "LOCAL_WORLD_SIZE": "1", "GROUP_RANK": str(spec.rank), "ROLE_RANK": str(spec.rank)}


def read_tail(path: Path, size: int = OUTPUT_TAIL) -> str:
    """The last ``size`` bytes of ``path`` as text ('' when it is missing)."""
    try:
        with open(path, "rb") as file:
            file.seek(0, os.SEEK_END)
            file.seek(max(0, file.tell() - size))
            return file.read().decode("utf-8", "replace")
    except OSError:
        return ""


class TrainWorker:
    """The actor's class (wrapped by :func:`hetero.ray.remote.actor_class`, which leases its device and
    sets ``HETERO_DEVICE``; a threaded actor: ``max_concurrency`` > 1).

    It starts a warm worker interpreter at once (the launcher's
    :class:`~hetero.launcher.worker_main.WarmStandby`: hetero imported, no device opened), so an actor
    created ahead of need (the run's spare) takes a restarted worker without Ray's or Python's start-up.
    Then :meth:`assign` gives it a rank's incarnation, :meth:`run` runs it to its end; :meth:`beats` and
    :meth:`stop` meanwhile."""

    def __init__(self, run_id: str, env: Mapping[str, str] | None = None, preload: Sequence[str] = ()) -> None:
        import ray

        import hetero
        from hetero.launcher.assign import device_env
        from hetero.launcher.worker_handle import warm_modules
        from hetero.launcher.worker_main import WarmStandby
        from hetero.ray.node_share import host_id

        self.device = hetero.device(os.environ["HETERO_DEVICE"]).info
        self.node_id = str(ray.get_runtime_context().get_node_id())
        self.host = host_id()
        self.run_dir = node_run_dir(run_id)
        self.log_file = self.run_dir / f"worker-{self.device.name.replace(':', '-')}-{os.getpid()}.log"
        base = worker_env(WorkerSpec(-1, 0, 0, (), "", run_id, env=dict(env or {})), os.environ, self.run_dir, os.getpid())
        # Unlike hetero-run's standby, this one knows its device: it starts with the device's visibility
        # variables, so it may import the backend modules (and the vendor library they load) ahead.
        base.update(device_env(self.device))
        self._standby: Any = WarmStandby(env=base, preload=(*preload, *warm_modules()), output=self.log_file)
        self.spec: WorkerSpec | None = None
        self.checkpoint_dir: Path | None = None
        self.resume_step: int | None = None
        self._beats: list[tuple[float, int | None]] = []  # (wall time, step) of each heartbeat seen
        self._pid: int | None = None
        self._stopping = False
        self._ended = threading.Event()
        self._raylet = os.getppid()  # Ray's worker processes are its raylet's children

    def info(self) -> dict[str, Any]:
        """Where this actor is: its device, node and host (and, once assigned, the step it resumes from)."""
        return {"device": self.device.name, "stable_id": self.device.stable_id, "node_id": self.node_id,
                "host": self.host, "resume_step": self.resume_step, "log": str(self.log_file)}

    def assign(self, spec: WorkerSpec) -> dict[str, Any]:
        """Take ``spec``'s incarnation: its checkpoint folder and the newest valid step there (read from this
        node: the storage every node reads); :meth:`info` then."""
        from hetero.checkpoint.store import latest_step

        self.spec = spec
        self.checkpoint_dir = Path(spec.checkpoint_root) / f"worker-{spec.rank}"
        self.resume_step = latest_step(self.checkpoint_dir) if self.checkpoint_dir.is_dir() else None
        return self.info()

    def beats(self, since: int = 0) -> dict[str, Any]:
        """The heartbeats from the ``since``-th on, as (wall time, step), and the worker's pid."""
        return {"pid": self._pid, "beats": self._beats[since:]}

    def run(self) -> dict[str, Any]:
        """Start the assigned worker (in the warm interpreter when it is usable) and watch it to its end.
        Returns how it ended: ``returncode``, ``reason`` (``ok``, ``fault``, ``crash``, ``error``, ``hang``,
        ``stopped``), ``fault_class`` and the fault report's ``fields``, ``quarantined`` (the entry this
        node recorded, or None), ``runtime_s`` and the end of its ``output``."""
        from hetero.launcher.worker_handle import Worker, become_subreaper, bootstrap_command

        spec, checkpoint_dir = self.spec, self.checkpoint_dir
        if spec is None or checkpoint_dir is None:
            raise RuntimeError("hetero.ray internal error: TrainWorker.run before assign")
        become_subreaper()  # what the worker leaves behind is reaped here
        worker = Worker(spec.rank, self.device, checkpoint_dir, restarts=spec.restart, resume_step=self.resume_step)
        cwd = Path(spec.cwd) if spec.cwd and Path(spec.cwd).is_dir() else None
        standby, self._standby = self._standby, None
        worker.start(bootstrap_command(spec.command), self.run_dir,
                     worker_env(spec, os.environ, self.run_dir, os.getpid()), dist_env(spec), standby=standby,
                     command=spec.command, output=self.log_file, cwd=cwd)
        assert worker.proc is not None  # start() made one or raised
        self._pid = worker.proc.pid
        try:
            code, reason = self._watch(worker, spec)
        finally:
            self._ended.set()
        return self._outcome(worker, code, reason)

    def close(self) -> None:
        """Retire the warm interpreter of an actor that will run nothing (the run's spare at its end)."""
        standby, self._standby = self._standby, None
        if standby is not None:
            standby.close()

    def _watch(self, worker: Any, spec: WorkerSpec) -> tuple[int, str]:
        from hetero.launcher.faults import exit_reason
        from hetero.launcher.worker_handle import await_exits, kill_group, wait_for_exit

        started = time.monotonic()
        while True:
            code = worker.exited()
            if code is not None:
                return code, "stopped" if self._stopping and code != 0 else exit_reason(code)
            if os.getppid() != self._raylet:  # the node's raylet died: the node is lost, so is its work
                kill_group(worker.proc.pid, signal.SIGKILL)  # before its checkpoints race its restart's
                codes: dict[int, int] = {}
                await_exits([worker], codes, 1.0)
                return codes.get(worker.rank, -signal.SIGKILL), "node-lost"
            now = time.monotonic()
            if worker.read_heartbeat(now) is not None:
                step = worker.progress.beats[-1][1]
                self._beats.append((time.time(), step))
            silent = worker.silent_for(now)
            timeout = spec.heartbeat_timeout
            if timeout > 0 and silent is not None and silent > timeout and not self._stopping:
                kill_group(worker.proc.pid, signal.SIGKILL)  # a hung device call does not answer SIGTERM
                codes = {}
                await_exits([worker], codes, max(spec.grace, 1.0))
                return codes.get(worker.rank, -signal.SIGKILL), "hang"
            wait_for_exit([worker], POLL_SECONDS if now - started > 1.0 else 0.02)

    def _outcome(self, worker: Any, code: int, reason: str) -> dict[str, Any]:
        from hetero.launcher.faults import diagnose

        if reason == "node-lost":
            return {"returncode": code, "reason": reason, "fault_class": reason, "quarantined": None,
                    "fields": {"message": f"node {self.node_id[:8]} lost: its raylet died"},
                    "runtime_s": round(time.monotonic() - worker.started, 3), "output": read_tail(self.log_file)}
        report = worker.read_fault_report() if code > 0 else None
        diagnosis = diagnose(code, reason, report)
        quarantined = None
        if report is not None and diagnosis.verdict is not None and diagnosis.verdict.quarantine:
            quarantined = self._quarantine(report, diagnosis.fault_class, diagnosis.verdict.ttl)
        return {"returncode": code, "reason": reason, "fault_class": None if code == 0 else diagnosis.fault_class,
                "fields": diagnosis.fields, "quarantined": quarantined,
                "runtime_s": round(time.monotonic() - worker.started, 3), "output": read_tail(self.log_file)}

    def _quarantine(self, report: Mapping[str, Any], fault_class: str, ttl: float | None) -> dict[str, Any]:
        """Quarantine this actor's device for the cluster (from its node: the entry's host is this one)."""
        from hetero.fault import quarantine

        why = f"{report.get('error_type')}: {report.get('message')}"[:500]
        entry = quarantine.add(self.device, why, fault_class, ttl=ttl, name=self.device.name,
                               injected=bool(report.get("injected")), quiet=True)
        return {"device": self.device.name, "stable_id": self.device.stable_id, "host": self.host, "reason": why,
                "fault_class": fault_class, "scope": " for this drill" if entry.drill else ""}

    def stop(self, grace: float | None = None) -> None:
        """Stop the worker process as ``hetero-run`` does: SIGTERM to its group, SIGKILL after ``grace``
        seconds; :meth:`run` then returns (reason ``stopped``)."""
        from hetero.launcher.worker_handle import kill_group

        pid = self._pid
        if pid is None or self._ended.is_set():
            return
        self._stopping = True
        kill_group(pid, signal.SIGTERM)
        if not self._ended.wait((self.spec.grace if self.spec else 5.0) if grace is None else grace):
            kill_group(pid, signal.SIGKILL)
            self._ended.wait(5.0)
