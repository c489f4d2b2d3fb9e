"""No process a ``hetero-run`` run started outlives it: every process is found by the marker
its environment inherited, and killed when its worker ends and when the run ends.

A worker's process group does not hold everything it starts: a ``setsid`` child or a
double-forked daemon leaves the group (and, once its parent exits, is re-parented to the
launcher, a child subreaper, where nothing else says whose it was). What it keeps is its
environment: the launcher gives every worker ``HETERO_RUN_ID`` (one per run), and
``HETERO_WORKER``/``HETERO_RESTART`` say which incarnation; ``/proc/PID/environ`` shows
what a process was started with, however often it forked or changed session since.

If the launcher itself dies without cleaning up (SIGKILL, the OOM killer), each worker dies
with it (``PR_SET_PDEATHSIG``, set by the worker bootstrap), and the bootstrap's watchdog,
a forked process waiting on the launcher's pidfd, kills every other process of the run.

Limits: a process that replaced its environment wholesale when it exec'd (``env -i``, a
sandbox that clears it) or runs as another user is not found. Linux only (elsewhere these
functions find nothing).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import sys
import time
import uuid
from collections.abc import Iterable
from typing import Any

from hetero.fault.protocol import ENV_LAUNCHER_PID, ENV_RESTART, ENV_RUN_ID, ENV_WORKER

#: The name (``/proc/PID/comm``) the worker bootstrap's watchdog gives itself, so that the
#: watchdogs of a run's workers do not kill each other while they clean up.
WATCHDOG_NAME = "hetero-watchdog"


def new_run_id() -> str:
    return uuid.uuid4().hex


def marked(run_id: str, worker: int | None = None, restart: int | None = None,
           skip_names: Iterable[str] = ()) -> list[int]:
    """The pids of the processes started with ``HETERO_RUN_ID=run_id`` (and, when given, that
    worker's rank and restart count), this process excepted."""
    needle = f"{ENV_RUN_ID}={run_id}".encode()
    wanted = {}
    if worker is not None:
        wanted[ENV_WORKER.encode()] = str(worker).encode()
    if restart is not None:
        wanted[ENV_RESTART.encode()] = str(restart).encode()
    skip = set(skip_names)
    me = os.getpid()
    found = []
    try:
        entries = os.listdir("/proc")
    except OSError:
        return []
    for entry in entries:
        if not entry.isdigit() or int(entry) == me:
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as file:
                data = file.read()
        except OSError:  # gone, or another user's
            continue
        if needle + b"\0" not in data + b"\0":
            continue
        variables = dict(item.partition(b"=")[::2] for item in data.split(b"\0") if item)
        if variables.get(ENV_RUN_ID.encode()) != run_id.encode():
            continue
        if any(variables.get(key) != value for key, value in wanted.items()):
            continue
        if skip and _name(int(entry)) in skip:
            continue
        found.append(int(entry))
    return found


def kill_marked(run_id: str, worker: int | None = None, restart: int | None = None, reap_for: float = 1.0,
                skip_names: Iterable[str] = ()) -> list[int]:
    """SIGKILL every process :func:`marked` finds; reap those that are this process's children
    (orphans re-parented to the launcher), waiting up to ``reap_for`` seconds. Returns the pids."""
    pids = marked(run_id, worker, restart, skip_names)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + reap_for
    pending = list(pids)
    while pending:
        for pid in list(pending):
            try:
                done, _ = os.waitpid(pid, os.WNOHANG)
            except ChildProcessError:  # not ours: its own parent reaps it
                pending.remove(pid)
                continue
            if done:
                pending.remove(pid)
        if not pending or time.monotonic() >= deadline:
            break
        time.sleep(0.01)
    return pids


def _name(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/comm", encoding="utf-8", errors="replace") as file:
            return file.read().strip()
    except OSError:
        return ""


_LIBC: Any = None  # loaded before the watchdog forks: no dlopen (and its loader lock) in the child


def _prctl(option: int, arg: Any) -> bool:
    global _LIBC
    if not sys.platform.startswith("linux"):
        return False
    try:
        if _LIBC is None:
            import ctypes

            _LIBC = ctypes.CDLL(None, use_errno=True)
        return bool(_LIBC.prctl(option, arg, 0, 0, 0) == 0)
    except (OSError, AttributeError):
        return False


def set_parent_death_signal(sig: int = signal.SIGKILL) -> bool:
    """``prctl(PR_SET_PDEATHSIG, sig)``: this process gets ``sig`` when the thread that started it
    ends. False where the platform has no such thing."""
    return _prctl(1, int(sig))  # 1: PR_SET_PDEATHSIG


def set_process_name(name: str) -> None:
    """``prctl(PR_SET_NAME)``: what ``/proc/PID/comm`` (and ``ps -o comm``) shows."""
    _prctl(15, name.encode()[:15])  # 15: PR_SET_NAME


def guard_launcher_death() -> None:
    """Called by the worker bootstrap first thing: when ``hetero-run`` started this process (it set
    ``HETERO_LAUNCHER_PID``), die with the launcher (``PR_SET_PDEATHSIG``), and fork the watchdog
    that kills the run's other processes if the launcher dies without doing so (see the module
    docstring). Exits at once if the launcher is already gone. The variable is removed so that
    the program's own children (which may run the bootstrap too) do not take it as theirs."""
    value = os.environ.pop(ENV_LAUNCHER_PID, "")
    run_id = os.environ.get(ENV_RUN_ID, "")
    if not value.isdigit() or not sys.platform.startswith("linux"):
        return
    launcher = int(value)
    if not set_parent_death_signal(signal.SIGKILL):
        return
    if os.getppid() != launcher:  # it died before the death signal was armed: nobody supervises us
        print(f"hetero.launcher.worker_main: the launcher (pid {launcher}) is gone; exiting", file=sys.stderr)
        os._exit(1)
    if not run_id or os.environ.get(ENV_WORKER) is None:
        return  # a standby: it ends on its own when the launcher closes its stdin (or dies)
    try:
        launcher_fd = os.pidfd_open(launcher)
        worker_fd = os.pidfd_open(os.getpid())
    except (AttributeError, OSError):
        return  # no pidfds (Linux < 5.3): the worker still dies with the launcher, its descendants may not
    if os.getppid() != launcher:  # the pid was reused between the check and the open
        os._exit(1)
    sys.stdout.flush()
    sys.stderr.flush()
    if os.fork() == 0:
        try:
            _watch(launcher_fd, worker_fd, run_id)
        finally:
            os._exit(0)
    os.close(launcher_fd)
    os.close(worker_fd)


def _watch(launcher_fd: int, worker_fd: int, run_id: str) -> None:
    """The watchdog: wait for the launcher or the worker to end; if the launcher ended (and so
    could not clean up), kill every process of the run."""
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    set_process_name(WATCHDOG_NAME)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):  # hold none of the launcher's pipes open
        os.dup2(null, fd)
    keep = sorted({launcher_fd, worker_fd})
    os.closerange(3, keep[0])
    os.closerange(keep[0] + 1, keep[1])
    os.closerange(keep[1] + 1, 65536)
    ready, _, _ = select.select([launcher_fd, worker_fd], [], [])
    if launcher_fd not in ready:
        # the worker ended: the launcher sweeps up after it, unless it is dying too (a worker killed
        # by its parent-death signal ends an instant before the launcher's pidfd says so)
        ready, _, _ = select.select([launcher_fd], [], [], 0.5)
        if not ready:
            return
    for _ in range(3):  # processes forking meanwhile: look again
        if not kill_marked(run_id, reap_for=0.0, skip_names=(WATCHDOG_NAME,)):
            break
