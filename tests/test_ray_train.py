"""hetero.ray.run (hetero-run --ray): training workers as Ray actors across nodes, only a failed worker
restarted, on a healthy device of another node, from its newest checkpoint.

The cluster tests start a real two-node Ray cluster on 127.0.0.1 (:class:`hetero.ray.LocalCluster`:
``cpu,oneapi`` on the head node, ``opencl`` on the other), run examples/train_digits.py with two workers
(one per node), and take the second node away mid-run as a lost machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import Any

import pytest

from hetero.launcher.assign import OptionError
from hetero.ray.train import backend_of
from hetero.ray.train_worker import WorkerSpec, dist_env, read_tail, worker_env

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = str(ROOT / "examples" / "train_digits.py")
STEPS = 2000
EVERY = 50


# -- pure logic ----------------------------------------------------------------------------
def test_backend_of_takes_one_backend_or_auto() -> None:
    assert backend_of(None) is None and backend_of("auto") is None and backend_of("all") is None
    assert backend_of("oneapi") == "oneapi"
    for bad in ("cuda:1", "cpu,oneapi"):
        with pytest.raises(OptionError, match="with --ray, name one backend"):
            backend_of(bad)


def _spec(**changes: Any) -> WorkerSpec:
    fields: dict[str, Any] = {"rank": 1, "world_size": 2, "restart": 3, "command": ("/x/train.py",),
                              "checkpoint_root": "/shared/ckpt", "run_id": "run7"}
    return WorkerSpec(**{**fields, **changes})


def test_each_incarnation_has_its_own_run_marker() -> None:
    # sweeping what one worker left (or its watchdog, when its actor dies) must not touch another's
    assert _spec().incarnation_id == "run7.1.3"
    assert _spec(rank=0).incarnation_id != _spec().incarnation_id != _spec(restart=4).incarnation_id


def test_worker_env_adds_the_runs_rules_to_the_nodes_and_drops_the_actors_device(tmp_path: Path) -> None:
    spec = _spec(env={"HETERO_FAULTS": "cpu:launch:nth=5:crash", "MY_FLAG": "1"})
    env = worker_env(spec, {"HETERO_DEVICE": "cpu", "HETERO_FAULTS": "opencl:0:alloc:nth=1:oom", "PATH": "/bin"},
                     tmp_path, launcher_pid=4242)
    assert "HETERO_DEVICE" not in env  # Worker.start sets the worker's own (and the visibility variable)
    assert env["HETERO_FAULTS"] == "opencl:0:alloc:nth=1:oom;cpu:launch:nth=5:crash"
    assert env["MY_FLAG"] == "1" and env["PATH"] == "/bin"
    assert env["HETERO_RUN_ID"] == "run7.1.3" and env["HETERO_LAUNCHER_PID"] == "4242"
    assert env["HETERO_DRILL_QUARANTINE"].startswith(str(tmp_path))


def test_dist_env_gives_rank_and_world_and_local_rank_zero() -> None:
    env = dist_env(_spec())
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == ("1", "2", "0", "1")
    assert "MASTER_ADDR" not in env  # workers restarted one by one train apart


def test_read_tail_keeps_the_end(tmp_path: Path) -> None:
    log = tmp_path / "worker.log"
    log.write_bytes(b"a" * 100 + b"\nlast line\n")
    assert read_tail(log, 10) == "last line\n"
    assert read_tail(tmp_path / "missing.log") == ""


def test_run_checks_its_arguments_before_touching_ray(tmp_path: Path) -> None:
    import hetero.ray

    with pytest.raises(OptionError, match="neither a script"):
        hetero.ray.run("not a/module name", run_dir=tmp_path)
    with pytest.raises(OptionError, match="--nproc must be at least 1"):
        hetero.ray.run(EXAMPLE, num_workers=0, run_dir=tmp_path)
    with pytest.raises(OptionError, match="--max-restarts"):
        hetero.ray.run(EXAMPLE, max_restarts=-1, run_dir=tmp_path)


@pytest.mark.parametrize("argv, message", [
    (["--ray-address", "127.0.0.1:6379", EXAMPLE], "--ray-address needs --ray"),
    (["--ray", "--nnodes", "2", "--rdzv-endpoint", "h:1", EXAMPLE], "--nnodes, --rdzv-endpoint do not apply with --ray"),
])
def test_hetero_run_ray_refuses_options_of_one_machine(argv: list[str], message: str,
                                                        capsys: pytest.CaptureFixture[str]) -> None:
    from hetero.launcher.cli import main

    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


def test_hetero_run_ray_refuses_a_device_of_one_machine(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hetero.launcher.cli import main

    # checked before Ray is touched: exit status 2, one line naming the option and the remedy
    assert main(["--ray", "--run-dir", str(tmp_path), "--devices", "cuda:1", EXAMPLE]) == 2
    assert "with --ray, name one backend" in capsys.readouterr().err


# -- a real two-node cluster ---------------------------------------------------------------
try:
    import ray
except ImportError:
    ray = None
needs_ray = pytest.mark.skipif(ray is None, reason="hetero.ray's training needs Ray: pip install 'hetero[ray]'")


@pytest.fixture(scope="module")
def cluster() -> Any:
    from hetero.ray import LocalCluster

    with LocalCluster(["cpu,oneapi", "opencl"]) as running:
        yield running


def _events(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def _summary(output: str) -> dict[str, Any]:
    return json.loads(output.strip().splitlines()[-1])


def _wait_until_idle(seconds: float = 30.0) -> None:
    """Until every hetero device of the cluster is free: actors a previous run killed (ray.kill returns at
    once) may hold theirs a moment longer, and Ray would then place both workers on one node."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ray.available_resources().get("hetero_device") == ray.cluster_resources().get("hetero_device"):
            return
        time.sleep(0.1)


def _fault_free(device: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, EXAMPLE, "--device", device, "--steps", str(STEPS), "--json"],
                          capture_output=True, text=True, timeout=120, check=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)})
    return _summary(done.stdout)


@needs_ray
def test_an_error_of_the_program_ends_the_run_without_a_restart(cluster: Any, tmp_path: Path) -> None:
    import hetero.ray

    script = tmp_path / "broken.py"
    script.write_text("import os\nif os.environ['RANK'] == '1':\n    raise ValueError('bad input file')\n")
    result = hetero.ray.run(script, num_workers=2, run_dir=tmp_path, quiet=True)
    assert result.exit_code == 1
    assert "raised ValueError: bad input file" in (result.reason or "")
    assert "not restarted" in (result.reason or "")
    assert [e["event"] for e in _events(tmp_path / "events.jsonl")].count("restart") == 0
    assert "ValueError: bad input file" in result.outputs[1]


@needs_ray
def test_a_lost_node_restarts_only_its_worker_elsewhere_from_its_checkpoint(cluster: Any, tmp_path: Path) -> None:
    import hetero.ray
    from hetero.checkpoint.store import CheckpointWarning, latest_step

    events_file = tmp_path / "events.jsonl"
    head = cluster.nodes[0].node_id
    removed: dict[str, Any] = {}

    def lose_the_other_node() -> None:  # once its worker has checkpointed: a machine lost mid-run
        warnings.filterwarnings("ignore", category=CheckpointWarning)  # one pruned while read here: harmless
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not removed:
            started = {e["worker"]: e for e in _events(events_file) if e["event"] == "worker_started"}
            away = [rank for rank, e in started.items() if e["node"] != head]
            if len(started) == 2 and away:
                step = latest_step(tmp_path / "ckpt" / f"worker-{away[0]}")
                if step is not None and step >= 2 * EVERY:
                    removed.update(rank=away[0], step=step, nodes={r: e["node"] for r, e in started.items()})
                    cluster.remove_node(cluster.nodes[1])
                    return
            time.sleep(0.05)

    _wait_until_idle()
    killer = threading.Thread(target=lose_the_other_node, daemon=True)
    killer.start()
    result = hetero.ray.run(EXAMPLE, ["--steps", str(STEPS), "--checkpoint-every", str(EVERY), "--json"],
                            num_workers=2, checkpoint_dir=tmp_path / "ckpt", run_dir=tmp_path, quiet=True)
    killer.join(5)
    placed = [(e["worker"], e["device"], e["node"][:8]) for e in _events(events_file) if e["event"] == "worker_started"]
    assert removed, f"the second node was never taken away: workers {placed}, head node {head[:8]}"
    lost, kept = removed["rank"], 1 - removed["rank"]
    assert removed["nodes"][kept] == head, "the two workers should start on two nodes (one per node first)"

    assert result.exit_code == 0, result.reason
    assert (result.workers[lost].restarts, result.workers[kept].restarts) == (1, 0)
    events = _events(events_file)
    restarts = [e for e in events if e["event"] == "restart"]
    assert [(e["worker"], e["reason"], e["group"]) for e in restarts] == [(lost, "node-lost", False)]
    assert restarts[0]["from_device"].startswith("opencl:0") and not restarts[0]["to_device"].startswith("opencl")
    assert [e["worker"] for e in events if e["event"] == "fault_detected"] == [lost]
    assert [e["reason"] for e in events if e["event"] == "worker_exited" and e["worker"] == kept] == ["ok"]
    resumed = [e["step"] for e in events if e["event"] == "resumed_from_step"]
    assert len(resumed) == 1 and resumed[0] >= removed["step"]
    assert [e["worker"] for e in events if e["event"] == "recovered"] == [lost]
    finished = events[-1]
    assert finished["event"] == "finished" and finished["restarts"] == 1 and finished["faults"] == {"node-lost": 1}

    lost_run, kept_run = _summary(result.outputs[lost]), _summary(result.outputs[kept])
    assert lost_run["first_step"] == resumed[0] > 0  # resumed from its checkpoint, not from step 0
    assert lost_run["start_device"] == result.workers[lost].device != "opencl:0"
    # The worker that kept going trained exactly as a fault-free run on its device (bit for bit); the one
    # restarted on another node reaches the fault-free accuracy, its weights equal to float32 rounding:
    # its steps before the loss ran on opencl:0 (PoCL) and after on another device, whose kernels round a
    # sum's last bit differently (3e-8 relative, measured); on one device kind they would be bit-identical.
    reference = _fault_free(result.workers[kept].device)
    assert kept_run["weights"] == reference["weights"] and kept_run["accuracy"] == reference["accuracy"]
    fault_free = _fault_free("opencl:0")
    assert lost_run["accuracy"] == fault_free["accuracy"]
    assert lost_run["weights"] == pytest.approx(fault_free["weights"], rel=1e-5)


@needs_ray
def test_a_node_seen_lost_gets_no_new_worker_before_ray_notices() -> None:
    # Ray offers a lost node's resources until its health checks give up; the run excludes it at once
    from hetero.ray.node_share import LabelledDevice
    from hetero.ray.placement import NodeDevices, Request, ray_options

    def node(node_id: str) -> NodeDevices:
        return NodeDevices(node_id, "host", ((LabelledDevice(name="cpu", backend="cpu", stable_id="s",
                                                             vendor="x", kind="cpu", model="m", memory_mib=1), False),))

    nodes = [node("a" * 56), node("b" * 56)]
    assert "scheduling_strategy" not in ray_options(Request(), nodes=nodes)
    pinned = ray_options(Request(), nodes=nodes, exclude={"b" * 56})["scheduling_strategy"]
    assert (pinned.node_id, pinned.soft) == ("a" * 56, False)
