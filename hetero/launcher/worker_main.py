"""The worker bootstrap ``hetero-run`` starts: ``python -m hetero.launcher.worker_main script.py args…``
or ``python -m hetero.launcher.worker_main -m module args…``.

It runs the user's program exactly as ``python script.py`` / ``python -m module`` would
(``__main__``, ``sys.argv``, ``sys.path[0]``), and adds the worker side of the supervision
protocol (:mod:`hetero.fault.protocol`):

- a hetero :class:`~hetero.core.errors.DeviceError` that escapes the program (directly, or as the
  ``__cause__``/``__context__`` of another error such as the guard's ``RecoveryFailedError``),
  or torch's or CuPy's own device error (``torch.OutOfMemoryError``, "CUDA error: ...", CuPy's
  ``CUDARuntimeError``: read as the hetero error for the same fault, on the worker's device,
  :mod:`hetero.fault.foreign_errors`) is classified, written as a fault report to ``$HETERO_FAULT_REPORT`` (atomically), its
  traceback printed, and the process exits with :data:`FAULT_EXIT_CODE` (86), so the
  supervisor knows which device failed and how, without guessing;
- a DeviceError raised in another thread of the program (``threading.Thread``; the error
  reaches ``threading.excepthook``) is a fault of the worker too: reported the same way, then
  the main thread is interrupted (:class:`ThreadDeviceFault`, by ``SIGUSR2``) so the process
  exits 86 instead of carrying on with a dead thread's work lost; a main thread that does not
  come back to Python within :data:`THREAD_FAULT_GRACE` seconds is ended then. (Errors a
  ``concurrent.futures`` pool keeps in its futures never reach the hook: they are the
  program's, raised where it calls ``result()``.)
- any other exception: the usual traceback and exit status 1, and an *exception report* at
  ``$HETERO_FAULT_REPORT`` (``{"exception": true, "error_type", "message", "quarantine": false}``)
  so the supervisor can name it when it ends the run (it does not restart the program's own
  errors unless ``--restart-on any``); ``SystemExit`` passes through;
- on a clean exit a last heartbeat is written (when ``$HETERO_HEARTBEAT_FILE`` is set);
- ``SIGTERM`` (how a supervisor stops workers) becomes a :class:`WorkerTerminated` exception
  in the main thread, so ``finally`` blocks, exit handlers and pending
  :func:`hetero.checkpoint.store.save_async` writes run; the process then ends by SIGTERM as it
  would have (a second SIGTERM, or a program that installs its own handler, acts at once);
- ``SIGUSR1`` dumps every thread's stack to stderr (what a supervisor sends a hung worker
  before killing it).

Warm standby (``python -m hetero.launcher.worker_main --standby [--preload torch,...]``, driven by
:class:`WarmStandby`): an interpreter that has already imported hetero (and the ``--preload``
modules) waits on its stdin for one JSON line ``{"command": [...], "env": {...}, "cwd": ...}``,
takes that environment and directory, and becomes the worker. A supervisor keeps one ready
so a restart skips interpreter start-up and imports. It opens no device and loads no vendor
library before the request, so the device visibility variables in ``env`` still apply; EOF on
stdin (the supervisor exited or closed it) ends it quietly.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import gc
import importlib
import json
import os
import runpy
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hetero.core.device import Device
from hetero.core.errors import ContextCorruptedError, DeviceDegradedError, DeviceError, DeviceLostError, DeviceOutOfMemoryError
from hetero.core.files import atomic_write
from hetero.fault import foreign_errors
from hetero.fault import heartbeat as _heartbeat
from hetero.fault.protocol import ENV_FAULT_REPORT, ENV_WORKER, FAULT_EXIT_CODE
from hetero.launcher.descendants import guard_launcher_death

USAGE = ("usage: python -m hetero.launcher.worker_main [-m module | script.py] [args...]\n"
         "       python -m hetero.launcher.worker_main --standby [--preload MODULE[,MODULE...]]")
#: Variables read only when an interpreter, the dynamic loader or an already-loaded library
#: (NumPy's BLAS, OpenMP runtimes) starts: a standby started with other values than a request
#: carries cannot honour the request.
STARTUP_ONLY_PREFIXES = ("PYTHON", "LD_", "DYLD_", "OMP_", "GOMP_", "KMP_", "MKL_", "OPENBLAS_", "VECLIB_",
                         "NUMEXPR_")


# By error class, when the classifier (hetero.fault.classify) is not available.
_FALLBACK_CLASS: tuple[tuple[type[DeviceError], str, str], ...] = (
    (DeviceOutOfMemoryError, "recoverable", "retry"),
    (ContextCorruptedError, "context-corrupting", "restart-process"),
    (DeviceLostError, "device-lost", "quarantine"),
    (DeviceDegradedError, "degraded", "migrate"),
)


#: Seconds the main thread has, after a device error in another thread, to unwind (``finally``
#: blocks, pending checkpoint writes) before the process is ended with the fault exit status.
THREAD_FAULT_GRACE = 30.0


class ThreadDeviceFault(BaseException):
    """Raised in the worker's main thread when another thread died of a device error (already
    reported): a BaseException, so ``except Exception`` in the program does not swallow it."""


_thread_fault: dict[str, Any] | None = None  # the report of a device error raised in another thread


def _on_thread_exception(args: threading.ExceptHookArgs) -> None:
    global _thread_fault
    _previous_hook(args)  # the usual "Exception in thread ..." traceback
    error = find_device_error(args.exc_value) if args.exc_value is not None else None
    if error is None or _thread_fault is not None:
        return
    report = fault_report(error)
    report["thread"] = args.thread.name if args.thread is not None else None
    write_report(report)
    _thread_fault = report
    print(f"hetero.launcher.worker_main: device fault on {report['device']} in thread {report['thread']!r} "
          f"({report['fault_class']}, {report['error_type']}); stopping the worker with status {FAULT_EXIT_CODE}",
          file=sys.stderr, flush=True)
    if signal.getsignal(signal.SIGUSR2) is _on_sigusr2:
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR2)
    else:  # the program took SIGUSR2 for itself: a KeyboardInterrupt then (main() knows why)
        import _thread

        _thread.interrupt_main()
    ender = threading.Timer(THREAD_FAULT_GRACE, lambda: os._exit(FAULT_EXIT_CODE))
    ender.daemon = True
    ender.start()


_previous_hook = threading.excepthook


def _on_sigusr2(signum: int, frame: object) -> None:
    if _thread_fault is not None:
        raise ThreadDeviceFault(f"device error in thread {_thread_fault.get('thread')!r}")


class WorkerTerminated(BaseException):
    """Raised in the worker's main thread when the supervisor sends SIGTERM (a BaseException, as
    KeyboardInterrupt is, so ``except Exception`` in the program does not swallow it)."""


_terminated = False


def _on_sigterm(signum: int, frame: object) -> None:
    global _terminated
    _terminated = True
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # a second SIGTERM ends the process at once
    raise WorkerTerminated(f"stopped by signal {signal.Signals(signum).name}")


def _end_by_sigterm() -> None:
    # The last exit handler: everything else ran; now die as the supervisor asked, so it sees
    # "killed by SIGTERM" rather than some exit status.
    if _terminated:
        sys.stdout.flush()
        sys.stderr.flush()
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGTERM)


def _default_sigterm_in_child() -> None:
    # Pool.terminate() SIGTERMs its workers: they should die quietly, as without the bootstrap.
    with contextlib.suppress(ValueError, OSError):
        if signal.getsignal(signal.SIGTERM) is _on_sigterm:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the target program; return the worker's exit status (see the module docstring)."""
    args = list(sys.argv[1:] if argv is None else argv)
    guard_launcher_death()  # under hetero-run: die with it, and take what this worker starts along
    if args[:1] == ["--standby"]:
        return standby(args[1:])
    if args and args[0] == "--":
        args = args[1:]
    if not args or args[0] in ("-h", "--help") or (args[0] == "-m" and len(args) < 2):
        print(USAGE, file=sys.stderr)
        return 0 if args and args[0] in ("-h", "--help") else 2
    if hasattr(signal, "SIGUSR1"):
        faulthandler.register(signal.SIGUSR1, all_threads=True)
    global _previous_hook
    if threading.excepthook is not _on_thread_exception:
        _previous_hook, threading.excepthook = threading.excepthook, _on_thread_exception
    if hasattr(signal, "SIGUSR2") and signal.getsignal(signal.SIGUSR2) is signal.SIG_DFL:
        signal.signal(signal.SIGUSR2, _on_sigusr2)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _on_sigterm)
        atexit.register(_end_by_sigterm)  # registered first, so it runs after the program's own handlers
        if hasattr(os, "register_at_fork"):  # forked children (multiprocessing pools) keep the default
            os.register_at_fork(after_in_child=_default_sigterm_in_child)
    try:
        _apply_quota()
        if args[0] == "-m":
            sys.argv = [args[1], *args[2:]]  # runpy puts the module's file in argv[0]
            runpy.run_module(args[1], run_name="__main__", alter_sys=True)
        else:
            script = Path(args[0])
            if not script.exists():
                print(f"hetero.launcher.worker_main: can't open file {str(script)!r}: no such file", file=sys.stderr)
                return 2
            sys.argv = [args[0], *args[1:]]
            sys.path[0] = str(script.resolve().parent)
            runpy.run_path(args[0], run_name="__main__")
    except (ThreadDeviceFault, KeyboardInterrupt):
        if _thread_fault is None:
            raise  # a real Ctrl-C
        return FAULT_EXIT_CODE  # reported by _on_thread_exception
    except SystemExit as exc:
        if _thread_fault is not None:
            return FAULT_EXIT_CODE
        if exc.code in (None, 0):
            _heartbeat.flush()
        raise
    except WorkerTerminated:
        return 128 + signal.SIGTERM  # what a shell reports; _end_by_sigterm makes it the real signal
    except Exception as exc:  # noqa: BLE001 - every error the program lets escape is reported
        if _thread_fault is not None:
            traceback.print_exception(exc)
            return FAULT_EXIT_CODE
        device_error = find_device_error(exc)
        traceback.print_exception(exc)
        if device_error is None:
            write_report(exception_report(exc))
            return 1
        report = fault_report(device_error)
        write_report(report)
        print(f"hetero.launcher.worker_main: device fault on {report['device']} ({report['fault_class']}, "
              f"{report['error_type']}); exiting with status {FAULT_EXIT_CODE}", file=sys.stderr)
        return FAULT_EXIT_CODE
    if _thread_fault is not None:  # the program ended before the interruption reached it
        return FAULT_EXIT_CODE
    _heartbeat.flush()
    return 0


def _apply_quota() -> None:
    """``HETERO_QUOTA`` (``hetero-run --quota``): cap this worker's allocations as a whole, before
    the program starts (the program's own :func:`hetero.scheduler.set_process_task` replaces it)."""
    from hetero.core.config import get_config

    if get_config().quota:
        from hetero.scheduler.quota import apply_configured_quota

        apply_configured_quota(f"worker {os.environ.get(ENV_WORKER) or os.getpid()}")


def standby(args: Sequence[str]) -> int:
    """Wait for one launch request on stdin, then run it as :func:`main` would (see the module
    docstring). ``args``: ``[--preload MODULE[,MODULE...]]``."""
    if args and (args[0] != "--preload" or len(args) != 2):
        print(USAGE, file=sys.stderr)
        return 2
    for module in filter(None, args[1].split(",") if args else ()):
        try:
            importlib.import_module(module)
        except Exception as exc:  # noqa: BLE001 - the program imports it itself and meets the error there
            print(f"hetero.launcher.worker_main: standby could not preload {module!r} ({type(exc).__name__}: {exc}); "
                  f"going on without it", file=sys.stderr)
    importlib.import_module("pkgutil")  # runpy imports it on first use: paid for while waiting
    gc.freeze()  # what start-up made lives on: the worker's collections, and its exit, need not traverse it
    line = sys.stdin.buffer.readline()
    if not line.strip():
        return 0  # the supervisor went away, or retired this standby
    try:
        request = json.loads(line)
        command, env, cwd = list(request["command"]), dict(request["env"]), request.get("cwd")
    except (ValueError, KeyError, TypeError) as exc:
        print(f"hetero.launcher.worker_main: bad standby request ({exc}); expected one JSON line "
              f'{{"command": [...], "env": {{...}}, "cwd": "..."}}', file=sys.stderr)
        return 2
    if cwd:
        os.chdir(cwd)
    os.environ.clear()
    os.environ.update(env)
    sys.path[0] = os.getcwd()  # as for a fresh `python -m`: main() puts a script's folder there
    devnull = os.open(os.devnull, os.O_RDONLY)
    os.dup2(devnull, 0)  # the program must not read the supervisor's pipe
    os.close(devnull)
    from hetero.core.config import get_config

    get_config.cache_clear()  # parsed again on first use, from the new env and directory, as in a fresh process
    _heartbeat.reset()
    return main(command)


class WarmStandby:
    """A warm worker interpreter the supervisor starts ahead of need and hands a worker to.
    (Not :class:`hetero.recovery.standby.Standby`, the guard's failover device made ready
    in process.)

        >>> spare = WarmStandby(env=base_env)                # start it while things are calm
        >>> proc = spare.activate(["train.py"], worker_env)  # a subprocess.Popen, or None
        >>> proc = proc or subprocess.Popen(...)            # None: start a fresh one instead

    The process runs in its own session (process group = its pid) like any worker. It exits
    by itself when the supervisor closes its stdin or exits, so it cannot be orphaned."""

    def __init__(self, env: Mapping[str, str] | None = None, preload: Sequence[str] = (),
                 python: str = sys.executable, output: Path | None = None) -> None:
        """``output``: a file for the worker's stdout and stderr (default: this process's)."""
        self.env = dict(os.environ if env is None else env)
        argv = [python, "-m", __spec__.name if __spec__ else "hetero.launcher.worker_main", "--standby"]
        if preload:
            argv += ["--preload", ",".join(preload)]
        sink = None
        if output is not None:
            sink = open(os.open(output, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600), "ab", buffering=0)  # noqa: SIM115 - closed below
        try:
            self.proc: subprocess.Popen[bytes] | None = subprocess.Popen(
                argv, env=self.env, stdin=subprocess.PIPE, start_new_session=True, stdout=sink,
                stderr=None if sink is None else subprocess.STDOUT)
        finally:
            if sink is not None:
                sink.close()  # the child keeps its own descriptor

    def usable_for(self, env: Mapping[str, str]) -> bool:
        """Whether a worker with ``env`` can run in this standby: it is still waiting, and every
        variable that only takes effect at interpreter start has the value it started with."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        names = {k for k in (*env, *self.env) if k.startswith(STARTUP_ONLY_PREFIXES)}
        return all(env.get(k) == self.env.get(k) for k in names)

    def activate(self, command: Sequence[str], env: Mapping[str, str], cwd: str | None = None,
                 ) -> subprocess.Popen[bytes] | None:
        """Make this standby run ``command`` (``script.py args`` or ``-m module args``) with ``env``;
        its ``Popen``, or None when it cannot (see :meth:`usable_for`): start a fresh process then."""
        if not self.usable_for(env):
            self.close()
            return None
        proc, self.proc = self.proc, None
        assert proc is not None and proc.stdin is not None  # usable_for checked it
        request = {"command": list(command), "env": dict(env), "cwd": cwd or os.getcwd()}
        try:
            proc.stdin.write(json.dumps(request).encode() + b"\n")
            proc.stdin.close()
        except OSError:  # it died between the check and the write
            proc.wait()
            return None
        return proc

    def close(self) -> None:
        """Retire the standby (it exits on EOF) and reap it."""
        proc, self.proc = self.proc, None
        if proc is None:
            return
        with contextlib.suppress(OSError):
            if proc.stdin is not None:
                proc.stdin.close()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def find_device_error(exc: BaseException) -> DeviceError | None:
    """The first hetero DeviceError in ``exc``, its causes, contexts and group members; failing
    that, the first torch or CuPy device error among them, read as the hetero error for the same
    fault on this worker's device (:func:`hetero.fault.foreign_errors.recognise`)."""
    seen: set[int] = set()
    pending: list[BaseException] = [exc]
    foreign: list[BaseException] = []
    while pending:
        current = pending.pop(0)
        if id(current) in seen:
            continue
        seen.add(id(current))
        if isinstance(current, DeviceError):
            return current
        foreign.append(current)
        pending.extend(e for e in (current.__cause__, current.__context__) if e is not None)
        pending.extend(getattr(current, "exceptions", ()) or ())
    device = _worker_device() if foreign else None
    for current in foreign:
        found = foreign_errors.recognise(current, device)
        if found is not None:
            return found.error
    return None


def _worker_device() -> Device | None:
    """The device this worker computes on, for a torch/CuPy error (theirs name none): the current
    one (``hetero.use_device``), else the opened device ``HETERO_DEVICE`` names; never opening a
    backend on the way out (a broken driver could hang). None when neither is known."""
    registry = sys.modules.get("hetero.core.registry")
    if registry is None:
        return None
    try:
        current = registry.current_device()
        if current is not None:
            return current  # type: ignore[no-any-return]
        name = os.environ.get("HETERO_DEVICE")
        return next((each for each in registry.opened_devices() if each.name == name), None) if name else None
    except Exception:  # noqa: BLE001 - best effort on the way out
        return None


def fault_report(error: DeviceError) -> dict[str, Any]:
    """The fault report of ``error`` (fields in :data:`hetero.fault.protocol.FAULT_REPORT_FIELDS`,
    plus the classifier's action and reason, this worker's rank and pid)."""
    fault_class, action, reason, quarantine, ttl = _classify(error)
    return {
        "device": error.device,
        "stable_id": _stable_id(error.device),
        "backend": error.backend,
        "error_type": type(error).__name__,
        "fault_class": fault_class,
        "code": error.code,
        "code_name": error.code_name,
        "xid": error.xid,
        "injected": bool(error.injected),
        "message": str(error),
        "time": time.time(),
        "action": action,
        "quarantine": quarantine,
        "ttl": ttl,
        "reason": reason,
        "worker": os.environ.get(ENV_WORKER),
        "pid": os.getpid(),
        "torch_device": _heartbeat.worker_torch_device(),
    }


def exception_report(error: BaseException) -> dict[str, Any]:
    """The report of an exception of the program that is not a device fault: what the supervisor
    names when it ends the run (never a quarantine: ``quarantine`` is false for any reader)."""
    lines = str(error).strip().splitlines()
    return {"exception": True, "error_type": type(error).__name__, "message": lines[0] if lines else "",
            "fault_class": None, "quarantine": False, "time": time.time(), "worker": os.environ.get(ENV_WORKER),
            "pid": os.getpid()}


def write_report(report: dict[str, Any]) -> Path | None:
    """Write ``report`` to ``$HETERO_FAULT_REPORT`` atomically (temp + rename); None when unset."""
    target = os.environ.get(ENV_FAULT_REPORT)
    if not target:
        return None
    path = Path(target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(report, default=str))
    except OSError as exc:
        print(f"hetero.launcher.worker_main: cannot write the report to {path}: {exc} "
              "(the supervisor will see the exit status without details)", file=sys.stderr)
        return None
    return path


def _classify(error: DeviceError) -> tuple[str, str | None, str, bool | None, float | None]:
    try:
        from hetero.fault import classify

        result = classify(error)
        fault_class = result.fault_class
        return (str(getattr(fault_class, "value", fault_class)), str(result.action), str(result.reason),
                bool(result.quarantine), result.ttl)
    except Exception as exc:  # noqa: BLE001 - classifier missing or failing: the report must still go out
        for kind, by_class, action in _FALLBACK_CLASS:
            if isinstance(error, kind):
                return by_class, action, f"by error class (classifier unavailable: {exc})", None, None
        return "context-corrupting", "restart-process", f"unknown device error (classifier unavailable: {exc})", None, None


def _stable_id(name: str | None) -> str | None:
    # Only among devices already open (the failing one is): re-probing a broken driver on the way
    # out could hang. The supervisor knows which device it assigned when this is None.
    registry = sys.modules.get("hetero.core.registry")
    if not name or registry is None:
        return None
    try:
        return next((str(each.stable_id) for each in registry.opened_devices() if each.name == name), None)
    except Exception:  # noqa: BLE001 - best effort on the way out
        return None


if __name__ == "__main__":
    sys.exit(main())
