"""``hetero-run`` beyond one machine: rendezvous, rank assignment, worker restarts and
shutdown are torch elastic's (``torch.distributed.launcher.api.elastic_launch`` with the
``c10d`` rendezvous backend: what ``torchrun`` runs), and hetero adds what torchrun does
not know about: devices and quarantine, per node.

Each node runs ``hetero-run --nnodes N --node-rank K --rdzv-endpoint HOST:PORT ...``;
node 0 hosts the rendezvous store at ``HOST:PORT`` (``is_host``). The agent starts one
*shim* per local rank (``python -m hetero.launcher.elastic script.py ...``) which, before it
``exec``\\ s the worker bootstrap (:mod:`hetero.launcher.worker_main`):

1. quarantines the devices named by this node's fault reports of the previous attempt
   (a worker that exited 86), so every local rank sees the same quarantine;
2. assigns devices to the node's local ranks by ``--policy`` among ``--devices`` minus
   quarantined ones, and takes the one for its ``LOCAL_RANK``;
3. sets ``HETERO_DEVICE``, the vendor visibility variable and the protocol variables
   (``HETERO_RESUME_STEP`` from the rank's newest checkpoint), and logs events.

Differences from single-node ``hetero-run`` (torch elastic's semantics): a failure restarts
the node's whole worker group (collective training needs that anyway), ``--max-restarts``
is per node agent, and hangs are left to the collective library's timeouts.
"""

from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

from hetero.fault import protocol
from hetero.launcher.config import LaunchConfig
from hetero.launcher.state import Failure, RunResult, WorkerState

ENV_CONFIG = "HETERO_ELASTIC_CONFIG"  # the launcher's settings, JSON, for the shims


def run_elastic(config: LaunchConfig) -> RunResult:
    """Run this node's workers under torch elastic's agent (``config.nodes`` says where this node
    stands in the job); how the node's run ended (``exit_code``: the node's exit status)."""
    from hetero.core.optional import require

    require("torch.distributed.launcher.api", extra="torch", feature="hetero-run --nnodes/--rdzv-endpoint (torch elastic)",
            package="torch")
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.launcher.api import LaunchConfig as TorchLaunchConfig
    from torch.distributed.launcher.api import elastic_launch

    from hetero.launcher.events import EventLog
    from hetero.launcher.faults import exit_reason

    config.run_dir.mkdir(parents=True, exist_ok=True)
    log = EventLog(config.events)
    os.environ[ENV_CONFIG] = json.dumps({
        "devices": config.devices, "policy": config.policy, "run_dir": str(config.run_dir),
        "checkpoint_dir": str(config.checkpoint_dir), "events": str(config.events)})
    if config.inject:
        rules = [r for r in os.environ.get("HETERO_FAULTS", "").split(";") if r.strip()]
        os.environ["HETERO_FAULTS"] = ";".join([*rules, *config.inject])
    nodes = config.nodes
    launch = TorchLaunchConfig(
        min_nodes=nodes.count, max_nodes=nodes.count, nproc_per_node=config.nproc,
        run_id=nodes.rdzv_id, rdzv_backend="c10d", rdzv_endpoint=nodes.rdzv_endpoint or "",
        rdzv_configs={"is_host": nodes.rank == 0, "timeout": nodes.rdzv_timeout},
        max_restarts=config.max_restarts, monitor_interval=0.1, start_method="spawn")
    log.emit("run_started", run_dir=str(config.run_dir), nproc=config.nproc, nnodes=nodes.count,
             node_rank=nodes.rank, rdzv_endpoint=nodes.rdzv_endpoint, devices=config.devices,
             policy=config.policy, max_restarts=config.max_restarts, command=config.command)
    result = RunResult(WorkerState.FAILED)
    try:
        elastic_launch(launch, sys.executable)(*["-m", "hetero.launcher.elastic", *config.command])
        result = RunResult(WorkerState.SUCCEEDED)
    except ChildFailedError as exc:
        failures = []
        for rank, failure in sorted(exc.failures.items()):
            message = str(failure.message)[:500]
            log.emit("worker_exited", worker=rank, returncode=failure.exitcode, reason="failed", message=message)
            failures.append(Failure(rank, None, exit_reason(failure.exitcode), failure.exitcode, message))
        why = f"torch elastic: --max-restarts {config.max_restarts} used up"
        log.emit("gave_up", worker=None, reason=why)
        print(f"hetero-run: node {nodes.rank}: workers failed after {config.max_restarts} restarts:\n"
              f"{exc.format_msg()}", file=sys.stderr)
        result = RunResult(WorkerState.FAILED, failures=tuple(failures), reason=why)
    except SignalException as exc:
        name = signal.Signals(exc.sigval).name
        log.emit("shutdown", signal=name)
        result = RunResult(WorkerState.STOPPED, reason=name, stop_signal=int(exc.sigval))
    finally:
        log.emit("finished", returncode=result.exit_code, node_rank=nodes.rank)
        log.close()
        print(f"hetero-run: node {nodes.rank} finished with exit status {result.exit_code}; events: {config.events}",
              file=sys.stderr)
    return result


# -- the per-rank shim (python -m hetero.launcher.elastic script.py args...) ---------------------
def _quarantine_previous_faults(run_dir: Path, attempt: int, local_rank: int, events: str) -> set[str]:
    """Quarantine the devices of this node's fault reports from attempt ``attempt - 1``;
    their stable ids (read by every local rank alike, so assignments agree)."""
    from hetero.fault import quarantine
    from hetero.launcher.events import append_event

    bad: set[str] = set()
    if attempt == 0:
        return bad
    for path in sorted(run_dir.glob(f"fault-*-{attempt - 1}.json")):
        try:
            report = json.loads(path.read_text(encoding="utf-8"))
            assigned = json.loads(path.with_name(path.name.replace("fault-", "assignment-", 1)).read_text())
        except (OSError, ValueError):
            continue
        # the launcher's view of the device (inside the worker a CUDA device is always cuda:0)
        stable_id, name = assigned.get("stable_id") or report.get("stable_id"), assigned.get("device")
        if not stable_id or report.get("quarantine") is False:
            continue
        bad.add(stable_id)
        if local_rank == 0:  # one record per fault, not one per local rank
            quarantine.add(stable_id, f"{report.get('error_type')}: {report.get('message')}"[:500],
                           report.get("fault_class") or "context-corrupting", ttl=report.get("ttl"),
                           name=name, injected=bool(report.get("injected")))
            append_event(events, "fault_detected", worker=report.get("worker"), device=name,
                         fault_class=report.get("fault_class"), error_type=report.get("error_type"),
                         code=report.get("code"), message=report.get("message"),
                         torch_device=report.get("torch_device"))
            append_event(events, "device_quarantined", device=name, stable_id=stable_id,
                         fault_class=report.get("fault_class"))
    return bad


def shim(argv: list[str]) -> None:
    """Set up this rank's device and protocol environment, then become the worker bootstrap."""
    from hetero.checkpoint.store import latest_step
    from hetero.launcher.assign import assign, candidate_devices, device_env, usable
    from hetero.launcher.events import append_event
    from hetero.launcher.starter import starting_torch_device

    settings = json.loads(os.environ[ENV_CONFIG])
    run_dir, events = Path(settings["run_dir"]), settings["events"]
    local_rank, rank = int(os.environ["LOCAL_RANK"]), int(os.environ["RANK"])
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", "1"))
    attempt = int(os.environ.get("TORCHELASTIC_RESTART_COUNT", "0"))
    bad = _quarantine_previous_faults(run_dir, attempt, local_rank, events)
    device = assign(local_world, settings["policy"], usable(candidate_devices(settings["devices"]), bad))[local_rank]
    checkpoint_dir = Path(settings["checkpoint_dir"]) / f"worker-{rank}"
    checkpoint_dir.mkdir(parents=True, exist_ok=True)
    env = os.environ
    for variable in ("CUDA_VISIBLE_DEVICES", "HIP_VISIBLE_DEVICES", "ONEAPI_DEVICE_SELECTOR"):
        env.pop(variable, None)
    env.update(device_env(device))
    env.update({
        protocol.ENV_RUN_DIR: str(run_dir),
        protocol.ENV_WORKER: str(rank),
        protocol.ENV_HEARTBEAT_FILE: str(run_dir / f"heartbeat-{local_rank}-{attempt}.json"),
        protocol.ENV_FAULT_REPORT: str(run_dir / f"fault-{local_rank}-{attempt}.json"),
        protocol.ENV_CHECKPOINT_DIR: str(checkpoint_dir),
        protocol.ENV_RESTART: str(attempt),
    })
    # the device as this node names it, for whoever reads this rank's fault report next attempt
    (run_dir / f"assignment-{local_rank}-{attempt}.json").write_text(
        json.dumps({"device": device.name, "stable_id": device.stable_id, "rank": rank}))
    env.pop(protocol.ENV_RESUME_STEP, None)
    resume = latest_step(checkpoint_dir)
    if resume is not None:
        env[protocol.ENV_RESUME_STEP] = str(resume)
    append_event(events, "worker_started", worker=rank, local_rank=local_rank, device=device.name, pid=os.getpid(),
                 restart=attempt, resume_step=resume, torch_device=starting_torch_device(device))
    if attempt and resume is not None:
        append_event(events, "resumed_from_step", worker=rank, device=device.name, step=resume)
    os.execv(sys.executable, [sys.executable, "-m", "hetero.launcher.worker_main", *argv])


if __name__ == "__main__":
    shim(sys.argv[1:])
