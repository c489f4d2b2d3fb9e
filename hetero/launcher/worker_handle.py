"""One ``hetero-run`` worker process: its environment, start, heartbeat reading, and stop.

Each worker runs in its own session (``start_new_session=True``), so its process group
holds it and most of what it spawns; stopping it signals the whole group, and after the
worker exits the group is swept, and so is every process its environment marks as this
incarnation's (a ``setsid`` child, a daemon: see :mod:`hetero.launcher.descendants`), so
nothing it started outlives it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hetero.checkpoint.store import ENV_VERIFIED
from hetero.core.device import DeviceInfo
from hetero.fault import protocol
from hetero.launcher.assign import device_env
from hetero.launcher.descendants import kill_marked
from hetero.launcher.events import Progress
from hetero.launcher.faults import sanitize_report
from hetero.launcher.state import WorkerState, check_transition
from hetero.launcher.worker_main import WarmStandby

BOOTSTRAP = "hetero.launcher.worker_main"


def bootstrap_command(command: Sequence[str]) -> list[str]:
    """The argv that runs the user's ``script.py args`` / ``-m module args`` under the worker
    bootstrap (fault reports, heartbeat flush)."""
    return [sys.executable, "-m", BOOTSTRAP, *command]


#: Modules a reserve standby imports ahead of a restart, when this launcher has them loaded: what
#: a restarted worker's first ``hetero.device()`` and ``hetero.checkpoint.store.load()`` import, plus
#: every ``hetero.backends.*`` module device discovery imported. Pure Python over NumPy: no vendor
#: library is loaded, so the worker's environment still decides which devices it sees. (Not
#: PyOpenCL: its ICD loader must not be loaded before the standby takes the worker's environment;
#: loaded ahead, opening a device then crashes with SIGSEGV.)
WARM_MODULES = ("importlib.metadata", "hetero.checkpoint.store")


def warm_modules() -> list[str]:
    """The modules of :data:`WARM_MODULES` and ``hetero.backends.*`` this process has imported."""
    loaded = set(sys.modules)
    return [m for m in WARM_MODULES if m in loaded] + sorted(m for m in loaded if m.startswith("hetero.backends."))


def spawn_standby(env: Mapping[str, str], preload: Sequence[str] = ()) -> WarmStandby:
    """A warm worker interpreter (the bootstrap's :class:`WarmStandby`: hetero and ``preload``
    already imported, waiting for its job)."""
    return WarmStandby(env=env, preload=preload)


@dataclasses.dataclass
class Worker:
    """A rank and its current incarnation (the process now running for it, if any)."""

    rank: int
    device: DeviceInfo
    checkpoint_dir: Path
    state: WorkerState = WorkerState.INIT  # moved by the supervisor only, through enter()
    restarts: int = 0
    returncode: int | None = None  # the exit status of its last incarnation that ended
    proc: subprocess.Popen[bytes] | None = None
    started: float = 0.0  # monotonic
    resume_step: int | None = None
    verified_checkpoint: str | None = None  # hetero.checkpoint.store.ENV_VERIFIED for the resume step's checkpoint
    progress: Progress = dataclasses.field(default_factory=Progress)
    heartbeat_file: Path | None = None
    fault_report: Path | None = None
    last_mtime: int = -1
    launches: int = 0  # the latest launch count this incarnation reported
    host_fallbacks: int = 0  # the latest host-fallback count this incarnation reported
    torch_device: str | None = None  # where torch runs for this incarnation, as its heartbeat says
    failed_at: float | None = None  # monotonic time the previous incarnation was seen failing
    lost_since: float | None = None  # last progress of the previous incarnation that was kept
    pidfd: int | None = None  # readable once the process exits (Linux >= 5.3), to wake the launcher at once
    run_id: str | None = None  # protocol.ENV_RUN_ID: marks what this incarnation started
    incarnation: int = 0  # the restart count the running process was started with (its HETERO_RESTART)

    @property
    def alive(self) -> bool:
        """Whether a process of this rank is running (and not yet reaped)."""
        return self.proc is not None

    def enter(self, state: WorkerState) -> None:
        """Move to ``state`` (see :data:`hetero.launcher.state.TRANSITIONS`)."""
        check_transition(self.rank, self.state, state)
        self.state = state

    def start(self, argv: Sequence[str], run_dir: Path, base_env: Mapping[str, str],
              dist: Mapping[str, str], standby: WarmStandby | None = None, command: Sequence[str] = (),
              output: Path | None = None, cwd: Path | None = None) -> None:
        """Start a new incarnation on ``self.device`` (fresh heartbeat and report files): hand
        ``command`` to ``standby`` when given and alive, else run ``argv`` afresh. ``output``: a
        file for its stdout and stderr when started afresh (default: this process's; a standby's is
        the one it was started with); ``cwd``: its working directory (default: this process's)."""
        self.heartbeat_file = run_dir / f"heartbeat-{self.rank}-{self.restarts}.json"
        self.fault_report = run_dir / f"fault-{self.rank}-{self.restarts}.json"
        self.checkpoint_dir.mkdir(parents=True, exist_ok=True)
        env = dict(base_env)
        for variable in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ONEAPI_DEVICE_SELECTOR"):
            env.pop(variable, None)  # the launcher's own view must not leak into a worker's
        env.update(device_env(self.device))
        env.update(dist)
        env.update({
            protocol.ENV_RUN_DIR: str(run_dir),
            protocol.ENV_WORKER: str(self.rank),
            protocol.ENV_HEARTBEAT_FILE: str(self.heartbeat_file),
            protocol.ENV_FAULT_REPORT: str(self.fault_report),
            protocol.ENV_CHECKPOINT_DIR: str(self.checkpoint_dir),
            protocol.ENV_RESTART: str(self.restarts),
        })
        env.pop(protocol.ENV_RESUME_STEP, None)
        env.pop(ENV_VERIFIED, None)
        if self.resume_step is not None:
            env[protocol.ENV_RESUME_STEP] = str(self.resume_step)
            if self.verified_checkpoint:
                env[ENV_VERIFIED] = self.verified_checkpoint
        self.run_id = env.get(protocol.ENV_RUN_ID)
        self.incarnation = self.restarts
        self.progress = Progress()
        self.last_mtime = -1
        self.launches = 0
        self.host_fallbacks = 0
        self.torch_device = None
        proc = standby.activate(list(command), env, None if cwd is None else str(cwd)) if standby is not None else None
        if proc is None and output is not None:
            fd = os.open(output, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)  # private, as event logs
            with open(fd, "ab", buffering=0) as sink:  # the child keeps its own descriptor
                proc = subprocess.Popen(list(argv), env=env, start_new_session=True, stdout=sink,
                                        stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, cwd=cwd)
        self.proc = proc or subprocess.Popen(list(argv), env=env, start_new_session=True, cwd=cwd)
        self.started = time.monotonic()
        self.close_pidfd()
        with contextlib.suppress(AttributeError, OSError):  # no pidfd_open here: the launcher polls
            self.pidfd = os.pidfd_open(self.proc.pid)

    def close_pidfd(self) -> None:
        fd, self.pidfd = self.pidfd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def exited(self) -> int | None:
        """The exit status if the process has ended (reaped, with its group swept), else None.
        Negative: killed by that signal."""
        if self.proc is None:
            return None
        pid = self.proc.pid
        try:  # look without reaping: while unreaped, the pid (and so the group id) cannot be reused
            info = os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT)
        except ChildProcessError:  # reaped already (by Popen): its group id may be reused, leave it
            code = self.proc.poll()
            self.proc = None
            self.close_pidfd()
            self.sweep()
            return code if code is not None else 0
        if info is None:
            return None
        kill_group(pid, signal.SIGKILL)  # children it left behind go with it
        code = self.proc.wait()
        self.proc = None
        self.close_pidfd()
        reap_group(pid)
        self.sweep()
        return code

    def sweep(self) -> None:
        """Kill what the ended incarnation started outside its process group (setsid, daemons)."""
        if self.run_id:
            kill_marked(self.run_id, self.rank, self.incarnation)

    def read_heartbeat(self, now: float) -> dict[str, Any] | None:
        """The heartbeat record if the file changed since the last look, else None."""
        if self.heartbeat_file is None:
            return None
        try:
            mtime = self.heartbeat_file.stat().st_mtime_ns
        except FileNotFoundError:
            return None
        if mtime == self.last_mtime:
            return None
        try:
            record = json.loads(self.heartbeat_file.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None  # replaced atomically by the worker, so this is rare: look again next time
        self.last_mtime = mtime
        step = record.get("step")
        self.progress.beats.append((now, step if isinstance(step, int) else None))
        return record if isinstance(record, dict) else None

    def silent_for(self, now: float) -> float | None:
        """Seconds since the last heartbeat, or None before the first (hang detection is armed
        by the first heartbeat: a script that never calls ``hetero.heartbeat`` is never a hang).
        Reads the beats once: a metrics scrape asks from another thread while a restart replaces them."""
        beats = self.progress.beats
        return now - beats[-1][0] if beats else None

    def read_fault_report(self) -> dict[str, Any] | None:
        if self.fault_report is None:
            return None
        try:
            report = json.loads(self.fault_report.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError, RecursionError) as exc:
            print(f"hetero-run: worker {self.rank}: unreadable fault report {self.fault_report}: "
                  f"{exc if not isinstance(exc, RecursionError) else 'nested too deeply'}; classifying the "
                  f"failure by its exit status", file=sys.stderr)
            return None
        return sanitize_report(report) if isinstance(report, dict) else None  # plain fields only: see faults.py


def become_subreaper() -> bool:
    """Make this process the reaper of its orphaned descendants (Linux ``PR_SET_CHILD_SUBREAPER``),
    so what a worker started and left behind is reaped here, not left as a zombie of pid 1
    (container inits often never reap). False where the platform has no such thing."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return bool(libc.prctl(36, 1, 0, 0, 0) == 0)  # 36: PR_SET_CHILD_SUBREAPER
    except (OSError, AttributeError):
        return False


def reap_group(pgid: int, timeout: float = 2.0) -> None:
    """Reap the members of a killed worker's group that were reparented to this process
    (see :func:`become_subreaper`), waiting up to ``timeout`` for them to die."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pid, _ = os.waitpid(-pgid, os.WNOHANG)
        except ChildProcessError:
            return  # none of that group is our child (any more)
        if pid == 0:
            if time.monotonic() >= deadline:
                return
            time.sleep(0.01)


def kill_group(pgid: int, sig: int) -> bool:
    """Signal a process group; False when it no longer exists."""
    try:
        os.killpg(pgid, sig)
    except ProcessLookupError:
        return False
    except PermissionError:  # the pgid was reused by someone else's group: it is not ours any more
        return False
    return True


def stop_workers(workers: Iterable[Worker], grace: float) -> dict[int, int]:
    """SIGTERM every live worker's process group, SIGKILL what is left after ``grace``
    seconds, reap; returns rank -> exit status of those that were running."""
    live = [w for w in workers if w.proc is not None]
    codes: dict[int, int] = {}
    for sig in (signal.SIGTERM, signal.SIGKILL):
        for worker in live:
            assert worker.proc is not None
            kill_group(worker.proc.pid, sig)
        live = await_exits(live, codes, grace)
    for worker in live:  # unkillable (stuck in the kernel): report it, do not hang the launcher
        print(f"hetero-run: worker {worker.rank} (pid {worker.proc.pid if worker.proc else '?'}) did not "
              "exit after SIGKILL; it may be stuck in a driver call", file=sys.stderr)
        codes[worker.rank] = -signal.SIGKILL
    return codes


def await_exits(live: list[Worker], codes: dict[int, int], timeout: float) -> list[Worker]:
    """Reap the workers of ``live`` that exit within ``timeout`` seconds, recording their exit
    status in ``codes``; return those still running."""
    live = list(live)
    deadline = time.monotonic() + timeout
    while live:
        for worker in list(live):
            code = worker.exited()
            if code is not None:
                codes[worker.rank] = code
                live.remove(worker)
        left = deadline - time.monotonic()
        if not live or left <= 0:
            break
        wait_for_exit(live, min(left, 0.05))
    return live


def wait_for_exit(workers: Iterable[Worker], timeout: float) -> None:
    """Sleep up to ``timeout`` seconds, returning as soon as one of ``workers`` exits (its pidfd
    becomes readable; a plain sleep where there are no pidfds)."""
    fds = [w.pidfd for w in workers if w.pidfd is not None]
    if not fds:
        time.sleep(timeout)
        return
    try:
        select.select(fds, [], [], timeout)
    except (OSError, ValueError):  # a pidfd closed meanwhile: just sleep this round
        time.sleep(timeout)
