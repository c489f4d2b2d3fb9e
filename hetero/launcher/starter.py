"""Starting ``hetero-run``'s worker incarnations, the first of the supervisor's jobs: the
environment every worker shares (the run's drill quarantine and id, fault rules, the
``MASTER_*``/``WORLD_SIZE`` variables of ``torch.distributed``), a warm standby to take each start
when one is ready (:class:`~hetero.launcher.worker_main.WarmStandby`), and the reserve
standby started once the run is calm, so the next restart starts warm too.
"""

from __future__ import annotations

import os
import time

from hetero.core.device import DeviceInfo
from hetero.fault import quarantine
from hetero.launcher.assign import free_port
from hetero.launcher.config import LaunchConfig
from hetero.launcher.events import EventLog
from hetero.launcher.state import WorkerState
from hetero.launcher.worker_handle import Worker, bootstrap_command, spawn_standby, warm_modules
from hetero.launcher.worker_main import WarmStandby
from hetero.fault.protocol import ENV_LAUNCHER_PID, ENV_RUN_ID
from hetero.core.torch_devices import is_gpu

#: A reserve worker interpreter is started once the workers have run this long (not at once:
#: it would compete with their start-up for the CPU).
RESERVE_AFTER_SECONDS = 1.0
#: Standbys started for the first workers while devices are discovered (more workers start fresh).
EARLY_STANDBYS = 8


def starting_torch_device(device: DeviceInfo) -> str | None:
    """Where torch runs for a worker on ``device``, as far as the launcher can tell before it starts:
    ``cpu`` for a CPU-kind device or an OpenCL one; None for a GPU, whose torch device depends on the
    worker's torch (and numbering: ``cuda:3`` is the worker's ``cuda:0``): its heartbeat says (the
    ``torch_device`` event)."""
    return None if is_gpu(device) else "cpu"


class Starter:
    """Starts workers for one run (see the module docstring). :meth:`begin` inside the run's
    quarantine scope, then :meth:`start` each incarnation; :meth:`retire_standbys` at the end."""

    def __init__(self, config: LaunchConfig, log: EventLog, run_id: str) -> None:
        self.config = config
        self.log = log
        self.run_id = run_id
        self.argv = bootstrap_command(config.command)
        self.base_env: dict[str, str] = {}
        self.dist: dict[str, str] = {}
        self._standbys: list[WarmStandby] = []  # started ahead: the first workers', then one reserve
        self._last_start = 0.0  # monotonic

    def begin(self) -> None:
        """Build the shared environment and start the first workers' standbys, whose start-up
        then overlaps device discovery."""
        self.base_env = self._base_env()
        if self.config.standby:
            self._standbys = [self._spawn_standby() for _ in range(min(self.config.nproc, EARLY_STANDBYS))]

    def start(self, worker: Worker) -> None:
        """Start an incarnation of ``worker`` on ``worker.device``, in a standby when one is ready."""
        config = self.config
        if not self.dist:  # once the devices are known: the port is picked as late as it can be
            self.dist = {"MASTER_ADDR": config.master_addr,
                         "MASTER_PORT": str(config.master_port or free_port(config.master_addr)),
                         "WORLD_SIZE": str(config.nproc), "LOCAL_WORLD_SIZE": str(config.nproc)}
        dist = {**self.dist, "RANK": str(worker.rank), "LOCAL_RANK": str(worker.rank),
                "GROUP_RANK": "0", "ROLE_RANK": str(worker.rank)}
        standby = self._standbys.pop(0) if self._standbys else None
        worker.start(self.argv, config.run_dir, self.base_env, dist, standby, config.command)
        worker.enter(WorkerState.STARTING)
        self._last_start = time.monotonic()
        assert worker.proc is not None  # start() either made one or raised
        self.log.emit("worker_started", worker=worker.rank, device=worker.device.name, pid=worker.proc.pid,
                      pgid=worker.proc.pid, restart=worker.restarts, resume_step=worker.resume_step,
                      torch_device=starting_torch_device(worker.device))
        if worker.resume_step is not None:  # a restart, or a first start in an earlier run's --checkpoint-dir
            self.log.emit("resumed_from_step", worker=worker.rank, device=worker.device.name, step=worker.resume_step)

    def calm(self, now: float) -> bool:
        """Whether no worker has started for :data:`RESERVE_AFTER_SECONDS`: time for work ahead of
        a restart, which would otherwise compete with start-up for the CPU."""
        return now - self._last_start > RESERVE_AFTER_SECONDS

    def keep_reserve(self) -> None:
        """Start the reserve standby when none is ready (call when :meth:`calm`)."""
        if self.config.standby and not self._standbys:
            self._standbys.append(self._spawn_standby(warm=True))

    def retire_standbys(self) -> None:
        standbys, self._standbys = self._standbys, []
        for standby in standbys:
            standby.close()

    def _base_env(self) -> dict[str, str]:
        env = dict(os.environ)
        env["HETERO_DRILL_QUARANTINE"] = str(quarantine.drill_store())  # the run's drill scope, shared with its workers
        env[ENV_RUN_ID] = self.run_id
        env[ENV_LAUNCHER_PID] = str(os.getpid())  # the bootstrap dies with this process (PR_SET_PDEATHSIG)
        if self.config.inject:
            rules = [r for r in env.get("HETERO_FAULTS", "").split(";") if r.strip()]
            env["HETERO_FAULTS"] = ";".join([*rules, *self.config.inject])
        return env

    def _spawn_standby(self, warm: bool = False) -> WarmStandby:
        """A standby; ``warm``: also importing what device discovery imported here (for a reserve,
        started once things are calm: the first workers' standbys must be ready at once)."""
        return spawn_standby(self.base_env, (*self.config.preload, *(warm_modules() if warm else ())))
