"""``hetero-run --quota``: two workers sharing one device (``--policy binpack``), each capped by
its own quota. The one allocating past it gets ``hetero.QuotaExceeded`` (exit status 1, the
message naming the quota); the one within it finishes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

TIMEOUT = 120

SCRIPT = '''
import json, os, sys, time
import hetero

rank, out = int(os.environ["RANK"]), sys.argv[1]
task = hetero.scheduler.current_task()
held = hetero.empty(48 << 20, hetero.uint8, device="cpu")  # within 64 MiB, for each worker
record = {"rank": rank, "device": hetero.device().name, "task": task and task.name,
          "quota": task and task.limit("cpu"), "used": task and task.usage("cpu")}
if rank == 0:
    open(out + ".0", "w").write(json.dumps(record))
    sys.exit(0)
deadline = time.monotonic() + 60  # rank 1 fails only after rank 0 has finished its work
while not os.path.exists(out + ".0") and time.monotonic() < deadline:
    time.sleep(0.05)
open(out + ".1", "w").write(json.dumps(record))  # 48 MiB here too: 96 MiB on cpu in all, each within its quota
more = hetero.empty(32 << 20, hetero.uint8, device="cpu")  # 80 MiB > 64 MiB: this worker's quota
'''


def test_each_worker_has_its_own_quota_and_the_one_past_it_fails(tmp_path: Path) -> None:
    script = tmp_path / "alloc.py"
    script.write_text(SCRIPT)
    out = tmp_path / "out"
    env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state")}
    for name in ("HETERO_FAULTS", "HETERO_QUOTA"):
        env.pop(name, None)
    argv = [sys.executable, "-m", "hetero.launcher.cli", "--run-dir", str(tmp_path / "run"), "--nproc", "2",
            "--devices", "cpu", "--policy", "binpack", "--max-restarts", "0", "--quota", "64MiB",
            str(script), str(out)]
    result = subprocess.run(argv, env=env, cwd=tmp_path, text=True, capture_output=True, timeout=TIMEOUT, check=False)

    assert result.returncode == 1, result.stderr  # gave up: worker 1 failed, no restarts allowed
    assert "QuotaExceeded" in result.stderr
    assert "task 'worker 1'" in result.stderr and f"memory quota of {64 << 20} bytes" in result.stderr, result.stderr
    records = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    exits = {r["worker"]: r["returncode"] for r in records if r["event"] == "worker_exited"}
    assert exits == {0: 0, 1: 1}, records
    for rank in (0, 1):
        seen = json.loads(Path(f"{out}.{rank}").read_text())
        assert seen["device"] == "cpu"  # both workers share the one device
        assert seen["task"] == f"worker {rank}" and seen["quota"] == 64 << 20 and seen["used"] == 48 << 20, seen


def test_a_bad_quota_is_refused_before_any_worker_starts(tmp_path: Path) -> None:
    script = tmp_path / "noop.py"
    script.write_text("")
    argv = [sys.executable, "-m", "hetero.launcher.cli", "--run-dir", str(tmp_path / "run"), "--quota", "64XB",
            str(script)]
    result = subprocess.run(argv, env={**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state")}, cwd=tmp_path,
                            text=True, capture_output=True, timeout=TIMEOUT, check=False)
    assert result.returncode == 2
    assert "--quota" in result.stderr and "'64XB'" in result.stderr, result.stderr
    assert not (tmp_path / "run" / "events.jsonl").exists()
