"""Two hetero-run launchers on loopback: torch elastic's c10d rendezvous joins them, hetero
assigns each node's devices, and a gloo all-reduce across the two nodes gives the sum."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

import hetero

pytest.importorskip("torch.distributed.launcher.api", reason="multi-node hetero-run needs torch")

ALLREDUCE = '''
import os, sys
import torch, torch.distributed as dist
dist.init_process_group("gloo")
t = torch.tensor([float(dist.get_rank() + 1)])
dist.all_reduce(t)
with open(f"{sys.argv[1]}.{dist.get_rank()}", "w") as out:
    out.write(" ".join([str(t.item()), str(dist.get_world_size()), os.environ["HETERO_DEVICE"],
                        os.environ["HETERO_RUN_DIR"], os.environ["HETERO_CHECKPOINT_DIR"]]))
dist.destroy_process_group()
'''


def loopback_port() -> int:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
            sock.bind(("127.0.0.1", 0))
            return int(sock.getsockname()[1])
    except OSError as exc:  # a sandbox without sockets
        pytest.skip(f"cannot open a loopback socket here: {exc}")


def test_two_nodes_rendezvous_on_loopback_and_all_reduce(tmp_path: Path) -> None:
    script = tmp_path / "allreduce.py"
    script.write_text(ALLREDUCE)
    port = loopback_port()
    env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state")}
    nodes = []
    for node in (0, 1):
        argv = [sys.executable, "-m", "hetero.launcher.cli", "--nnodes", "2", "--node-rank", str(node),
                "--rdzv-endpoint", f"127.0.0.1:{port}", "--rdzv-id", f"test-{port}", "--devices", "cpu",
                "--run-dir", str(tmp_path / f"node{node}"), str(script), str(tmp_path / "sum")]
        nodes.append(subprocess.Popen(argv, env=env, cwd=tmp_path, text=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    try:
        outputs = [proc.communicate(timeout=180)[0] for proc in nodes]
    finally:
        for proc in nodes:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    assert [proc.returncode for proc in nodes] == [0, 0], outputs
    results = {}
    for rank in (0, 1):
        total, world, device, run_dir, checkpoints = Path(f"{tmp_path / 'sum'}.{rank}").read_text().split()
        assert (float(total), int(world), device) == (3.0, 2, "cpu")
        assert Path(checkpoints).name == f"worker-{rank}"
        results[rank] = Path(run_dir).name
    assert sorted(results.values()) == ["node0", "node1"]  # one global rank per node
    for node in (0, 1):
        records = [json.loads(line) for line in (tmp_path / f"node{node}" / "events.jsonl").read_text().splitlines()]
        kinds = [r["event"] for r in records]
        assert kinds[0] == "run_started" and kinds[-1] == "finished" and "worker_started" in kinds
        assert records[-1]["returncode"] == 0


FAULTY = '''
import os, sys
import numpy as np
import hetero
dev = hetero.device()
with open(sys.argv[1], "a") as log:
    log.write(f"{os.environ['HETERO_RESTART']} {dev.name}\\n")
for _ in range(6):
    hetero.asarray(np.arange(4.0), device=dev).numpy()
'''

OPENCL = [d.name for d in hetero.devices() if d.backend in ("oneapi", "opencl")]


@pytest.mark.skipif(not OPENCL, reason="fault injection into copies needs an OpenCL device")
def test_elastic_restart_quarantines_the_faulty_device_on_that_node(tmp_path: Path) -> None:
    script = tmp_path / "faulty.py"
    script.write_text(FAULTY)
    bad, port = OPENCL[0], loopback_port()
    env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state")}
    argv = [sys.executable, "-m", "hetero.launcher.cli", "--nnodes", "1", "--rdzv-endpoint", f"127.0.0.1:{port}",
            "--rdzv-id", f"fault-{port}", "--devices", f"{bad},cpu", "--max-restarts", "2",
            "--inject", f"{bad}:copy:nth=3:lost", "--run-dir", str(tmp_path / "node0"), str(script),
            str(tmp_path / "log")]
    done = subprocess.run(argv, env=env, cwd=tmp_path, text=True, capture_output=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert (tmp_path / "log").read_text().split("\n")[:2] == [f"0 {bad}", "1 cpu"]  # not reused after the fault
    records = [json.loads(line) for line in (tmp_path / "node0" / "events.jsonl").read_text().splitlines()]
    quarantined = [r for r in records if r["event"] == "device_quarantined"]
    assert [r["device"] for r in quarantined] == [bad]
    fault = next(r for r in records if r["event"] == "fault_detected")
    assert (fault["device"], fault["fault_class"]) == (bad, "device-lost")
