"""Training across a Ray cluster with ``hetero-run``'s policy: :func:`run` (``hetero.ray.run``) and
``hetero-run --ray``.

    result = hetero.ray.run("train.py", args=["--steps", "600"], num_workers=4,
                            checkpoint_dir="/shared/ckpt")          # storage every node reads

Each worker is a Ray actor on a hetero device of some node (:mod:`hetero.ray.placement`: a quarantined
device gets nothing; workers spread over the nodes), which runs the script as ``hetero-run`` runs a
worker (:mod:`hetero.ray.train_worker`: the same bootstrap, environment and checkpoint folders,
``<checkpoint_dir>/worker-<rank>``). When one fails, **only that worker** restarts, on a healthy device
of any node, from its newest checkpoint; the others keep going. A failure is:

- the worker process ending badly: a fault report (its device quarantined for the whole cluster when
  the verdict says so), a crash by a signal, a hang (no heartbeat for ``heartbeat_timeout``); an
  exception of the program ends the run unless ``restart_on="any"``, as with ``hetero-run``;
- its node lost (``node-lost``): the driver asks each running worker's raylet for a connection every
  half second (:func:`hetero.ray.cluster_connect.node_gone`), so a lost machine is seen within about
  a second as one failure of each worker it held, where Ray's health checks take several periods;
- its actor dying otherwise (``crash``): the pending ``run`` call raises
  :class:`ray.exceptions.RayActorError`.

Once the workers train, a spare actor waits on a free device with a warm interpreter (``standby``), so a
restart skips Ray's and Python's start-up. The driver's loop is :class:`hetero.ray.train_run.TrainRun`.

Why not Ray Train: on any worker failure its trainer (``FailureConfig``) tears down and restarts the
whole worker group from the last reported checkpoint, which is not this policy; its workers run a
function inside the actors (a segfault takes the actor down with no report), not the user's script as
``hetero-run`` runs it; and it knows nothing of hetero's quarantine. ``restart="group"`` gives the
restart-everyone policy here when a job needs it (collective training).

Events go to the same JSONL kinds as ``hetero-run`` (each ``worker_started``/``worker_exited`` also
names its ``node``), plus ``recovered`` (a restarted worker's first heartbeat: ``recovery_s`` from the
failure seen); the summary table and :class:`~hetero.launcher.state.RunResult` are ``hetero-run``'s.
"""

from __future__ import annotations

import os
import re
import signal
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from hetero.core.cluster_hooks import RAY_RUN
from hetero.launcher.assign import OptionError
from hetero.launcher.config import DEFAULT_GRACE, DEFAULT_HEARTBEAT_TIMEOUT, DEFAULT_MAX_RESTARTS, LaunchConfig
from hetero.ray.cluster_connect import check_shared_storage, connect
from hetero.ray.train_run import PLACEMENT_TIMEOUT, RayRunResult, TrainRun

__all__ = ["RayRunResult", "backend_of", "run", "run_config"]

#: Backends ``hetero-run --ray --devices`` may name (a device of one node means nothing to a cluster).
_BACKEND = re.compile(r"^[a-z][a-z0-9_]*$")


def backend_of(devices: str | None) -> str | None:
    """The backend a ``--devices`` value names for a cluster run: None for ``auto``/``all``/nothing.
    A device (``cuda:1``) or a list is refused with the remedy: Ray places a worker on any node."""
    spec = (devices or "auto").strip()
    if spec in ("auto", "all", ""):
        return None
    if not _BACKEND.match(spec):
        raise OptionError(f"--devices {spec!r}: with --ray, name one backend (cpu, cuda, rocm, oneapi, opencl) or "
                          "auto; Ray places each worker on a device of that backend on any node, so a device "
                          "number or a list of one machine's devices means nothing across the cluster")
    return spec


def run_config(config: LaunchConfig, address: str | None = None, *, backend: str | None = None,
               actor_options: Mapping[str, Any] | None = None, env: Mapping[str, str] | None = None,
               placement_timeout: float = PLACEMENT_TIMEOUT, echo_output: bool = False,
               handle_signals: Sequence[int] = (), quiet: bool = False) -> RayRunResult:
    """Run a ``hetero-run`` :class:`~hetero.launcher.config.LaunchConfig` across the Ray cluster at
    ``address`` (see :func:`connect`; ``hetero-run --ray``; ``backend`` defaults to the one
    ``config.devices`` names)."""
    backend = backend if backend is not None else backend_of(config.devices)
    started = connect(address)
    try:
        check_shared_storage(config)
        train = TrainRun(config, backend, actor_options, env, placement_timeout, echo_output)
        train.log.quiet = quiet

        def on_signal(signum: int, frame: object) -> None:
            train.stop_signal = signum

        previous = {sig: signal.signal(sig, on_signal) for sig in handle_signals}
        try:
            return train.run()
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    finally:
        if started:
            import ray

            from hetero.ray import cluster_quarantine

            cluster_quarantine.detach()
            ray.shutdown()


def run(script_or_module: str | os.PathLike[str], args: Sequence[str] = (), *, num_workers: int = 1,
        backend: str | None = None, checkpoint_dir: str | os.PathLike[str] | None = None,
        run_dir: str | os.PathLike[str] | None = None, events: str | os.PathLike[str] | None = None,
        address: str | None = None, max_restarts: int = DEFAULT_MAX_RESTARTS, restart: str = "worker",
        restart_on: str = "fault", heartbeat_timeout: float = DEFAULT_HEARTBEAT_TIMEOUT, grace: float = DEFAULT_GRACE,
        inject: Sequence[str] = (), quota: str | None = None, env: Mapping[str, str] | None = None,
        standby: bool = True, preload: Sequence[str] = (), actor_options: Mapping[str, Any] | None = None,
        placement_timeout: float = PLACEMENT_TIMEOUT, quiet: bool = False) -> RayRunResult:
    """Run a training script (``"train.py"``) or module (``"pkg.train"``) with ``args`` as ``num_workers``
    workers across the Ray cluster, each a Ray actor on a hetero device of ``backend`` (None: any), with
    ``hetero-run``'s policy: only a failed worker restarts, on a healthy device of any node, from its
    newest checkpoint in ``checkpoint_dir/worker-<rank>`` (storage every node reads; default
    ``run_dir/checkpoints``, which only a one-machine cluster reads). ``address``: the cluster (default:
    the one this process is connected to, else ``RAY_ADDRESS``, else a new one-node cluster of this
    machine's devices; ``"auto"``: the one Ray finds on this machine).

    The other keywords are ``hetero-run``'s options (checked before anything starts; a value out of range
    raises :class:`~hetero.launcher.assign.OptionError` naming it): ``max_restarts``, ``restart``
    (``"worker"`` or ``"group"``), ``restart_on`` (``"fault"`` or ``"any"``), ``heartbeat_timeout``,
    ``grace``, ``inject`` (fault rules for the workers), ``quota``; ``env``: variables added to every
    worker's environment; ``standby``: once the workers train, keep a spare actor on a free device with a
    warm interpreter (hetero imported), so that a restart skips Ray's and Python's start-up (it holds that
    device idle meanwhile; none is kept when no device is free); ``preload``: modules that warm interpreter
    imports too (what the script imports at its start: ``["torch"]``, ``["sklearn.datasets"]``);
    ``actor_options``: Ray options for the workers' actors (``num_cpus``, ``runtime_env``...); ``quiet``: no progress lines or summary on stderr. Returns a
    :class:`RayRunResult` (``exit_code`` 0 when every worker finished)."""
    target = os.fspath(script_or_module)
    if target.endswith(".py") or Path(target).is_file():
        command = (target, *args)
    elif re.match(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$", target):
        command = ("-m", target, *args)
    else:
        raise OptionError(f"{target!r} is neither a script (a .py file) nor a module name (package.train)")
    from hetero.launcher.cli import default_run_dir

    root = Path(run_dir).resolve() if run_dir is not None else default_run_dir().resolve()
    config = LaunchConfig(
        command=command, run_dir=root,
        checkpoint_dir=Path(checkpoint_dir).resolve() if checkpoint_dir is not None else root / "checkpoints",
        events=Path(events).resolve() if events is not None else root / "events.jsonl", nproc=num_workers,
        devices=backend, max_restarts=max_restarts, inject=tuple(inject), quota=quota,
        heartbeat_timeout=heartbeat_timeout, restart=restart, restart_on=restart_on, grace=grace, standby=standby,
        preload=tuple(preload))
    return run_config(config, address, backend=backend_of(backend), actor_options=actor_options, env=env,
                      placement_timeout=placement_timeout, quiet=quiet)


def _cli_run(config: LaunchConfig, address: str | None) -> int:
    """``hetero-run --ray``: the run's exit status (workers' output echoed as each incarnation ends)."""
    return run_config(config, address, echo_output=True,
                      handle_signals=(signal.SIGINT, signal.SIGTERM)).exit_code


RAY_RUN.register(_cli_run)
