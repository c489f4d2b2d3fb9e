"""hetero-run end to end: real launcher and worker processes running a small checkpointed
training script, with crashes, device faults, hangs and signals (each run bounded in time)."""

from __future__ import annotations

import itertools
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hetero

DEVICES = [d.name for d in hetero.devices()]
OPENCL = [d.name for d in hetero.devices() if d.backend in ("oneapi", "opencl")]
STEPS = 12
TIMEOUT = 60

TRAIN = '''
import json, os, signal, sys, time
import numpy as np
import hetero
from hetero import checkpoint

steps, out, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3]
restart = int(os.environ["HETERO_RESTART"])
dev = hetero.device()
loaded = checkpoint.load(device="cpu")
x, start = (np.asarray(loaded[0]["x"]), loaded[1]) if loaded else (np.arange(8, dtype=np.float64), 0)
with open(out + ".log", "a") as log:
    log.write(json.dumps({"restart": restart, "device": dev.name, "start": start, "pid": os.getpid(),
                          "resume": os.environ.get("HETERO_RESUME_STEP"), "rank": os.environ["RANK"],
                          "world": os.environ["WORLD_SIZE"], "master_port": os.environ["MASTER_PORT"]}) + "\\n")
if mode.startswith("metrics:") and restart >= 1:
    import urllib.request
    text = urllib.request.urlopen(f"http://127.0.0.1:{mode[8:]}/metrics", timeout=10).read().decode()
    open(out + ".metrics", "w").write(text)
if mode == "child":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)  # the launcher must fall back to SIGKILL
    child = __import__("subprocess").Popen([sys.executable, "-c", "import time; time.sleep(120)"])
    open(out + f".child{os.environ['RANK']}", "w").write(str(child.pid))
    while True:
        time.sleep(0.1)
for step in range(start, steps):
    a = hetero.asarray(x, device=dev)
    x = a.numpy() * 0.5 + step
    checkpoint.save({"x": x}, step + 1)
    hetero.heartbeat(step + 1)
    time.sleep(0.3 if mode == "slow" else 0.05)  # steps that take time: the launcher sees several heartbeats
    if restart == 0 and step + 1 == 5:
        if mode in ("crash", "fail-again") or mode.startswith("metrics:") or (mode == "crash0" and os.environ["RANK"] == "0"):
            os.kill(os.getpid(), signal.SIGKILL)
        if mode == "hang":
            time.sleep(120)
        if mode == "corrupt":
            newest = os.path.join(os.environ["HETERO_CHECKPOINT_DIR"], "step-00000005.hckpt", "000000.bin")
            with open(newest, "r+b") as f:
                f.write(b"garbage!")
            os.kill(os.getpid(), signal.SIGKILL)
    if mode == "fail-again" and restart == 1 and step + 1 == 7:
        os.kill(os.getpid(), signal.SIGKILL)
    if mode == "exit3":
        sys.exit(3)
np.save(out, x)
'''


def reference(steps: int = STEPS) -> np.ndarray:
    x = np.arange(8, dtype=np.float64)
    for step in range(steps):
        x = x * 0.5 + step
    return x


def command(tmp_path: Path, options: tuple[str, ...], mode: str) -> tuple[list[str], dict[str, str], Path]:
    """hetero-run's argv for the training script in ``mode``, its environment, and the output path."""
    script = tmp_path / "train.py"
    script.write_text(TRAIN)
    out = tmp_path / "out.npy"
    argv = [sys.executable, "-m", "hetero.launcher.cli", "--run-dir", str(tmp_path / "run"), *options,
            str(script), str(STEPS), str(out), mode]
    env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state")}
    env.pop("HETERO_FAULTS", None)
    return argv, env, out


def launch(tmp_path: Path, *options: str, mode: str = "ok") -> tuple[subprocess.CompletedProcess[str], Path]:
    """Run hetero-run to the end (bounded by TIMEOUT)."""
    argv, env, out = command(tmp_path, options, mode)
    return subprocess.run(argv, check=False, env=env, cwd=tmp_path, text=True, capture_output=True,
                          timeout=TIMEOUT), out


def start(tmp_path: Path, *options: str, mode: str) -> tuple[subprocess.Popen[str], Path]:
    """Start hetero-run and return at once (stderr piped)."""
    argv, env, out = command(tmp_path, options, mode)
    return subprocess.Popen(argv, env=env, cwd=tmp_path, text=True, stderr=subprocess.PIPE), out


def events(tmp_path: Path) -> list[dict[str, Any]]:
    lines = (tmp_path / "run" / "events.jsonl").read_text().splitlines()
    records = [json.loads(line) for line in lines]
    for earlier, later in itertools.pairwise(records):
        assert later["monotonic"] >= earlier["monotonic"], (earlier, later)
        assert later["time"] >= earlier["time"] - 1.0, (earlier, later)  # wall clock: allow an NTP step
    return records


def of(records: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == kind]


def starts(out: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in Path(str(out) + ".log").read_text().splitlines()]


needs_two = pytest.mark.skipif(len(DEVICES) < 2, reason="needs two devices to restart elsewhere")


@needs_two
def test_crash_restarts_on_another_device_from_checkpoint(tmp_path: Path) -> None:
    result, out = launch(tmp_path, "--devices", ",".join(DEVICES[:2]), mode="crash")
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(out), reference())  # same as a run without the crash
    records = events(tmp_path)
    exited = of(records, "worker_exited")
    assert exited[0]["signal"] == "SIGKILL" and exited[0]["device"] == DEVICES[0]
    assert of(records, "fault_detected")[0]["fault_class"] == "crash"
    (restart,) = of(records, "restart")
    assert (restart["from_device"], restart["to_device"]) == (DEVICES[0], DEVICES[1])
    assert of(records, "resumed_from_step")[0]["step"] == 5
    first, second = starts(out)
    assert (first["restart"], first["start"], first["resume"]) == (0, 0, None)
    assert (second["restart"], second["device"], second["start"], second["resume"]) == (1, DEVICES[1], 5, "5")
    finished = of(records, "finished")[0]
    assert finished["restarts"] == 1 and finished["faults"] == {"crash": 1} and finished["returncode"] == 0
    assert 0 < finished["goodput"] <= 1 and finished["time_lost_s"] > 0
    assert "hetero-run summary" in result.stderr and "crash: 1" in result.stderr


@pytest.mark.skipif(not OPENCL, reason="fault injection into copies needs an OpenCL device")
def test_fault_report_quarantines_the_device_and_it_is_not_reused(tmp_path: Path) -> None:
    bad = OPENCL[0]
    result, out = launch(tmp_path, "--devices", f"{bad},cpu", "--inject", f"{bad}:copy:nth=4:lost",
                         mode="fail-again")
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(out), reference())
    records = events(tmp_path)
    fault = of(records, "fault_detected")[0]
    assert (fault["device"], fault["fault_class"], fault["error_type"]) == (bad, "device-lost", "DeviceLostError")
    assert fault["injected"] is True
    assert of(records, "worker_exited")[0]["returncode"] == 86
    assert of(records, "device_quarantined")[0]["device"] == bad
    # the second failure (a crash on cpu) restarts on cpu again: the quarantined device is never reused
    assert [(r["from_device"], r["to_device"]) for r in of(records, "restart")] == [(bad, "cpu"), ("cpu", "cpu")]
    assert [r["device"] for r in of(records, "worker_started")] == [bad, "cpu", "cpu"]
    # an injected fault: quarantined in the run's drill store, never in the user's persistent one
    drill = json.loads((tmp_path / "run" / "drill-quarantine.json").read_text())
    assert [e["name"] for e in drill["entries"].values()] == [bad]
    state = {"HETERO_STATE_DIR": str(tmp_path / "state")}
    code = "from hetero.fault import quarantine as q; print([e.name for e in q.entries()])"
    listed = subprocess.run([sys.executable, "-c", code], check=False, env={**os.environ, **state},
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert listed.stdout.strip() == "[]", listed.stderr


@needs_two
def test_hang_is_killed_and_restarted(tmp_path: Path) -> None:
    result, out = launch(tmp_path, "--devices", ",".join(DEVICES[:2]), "--heartbeat-timeout", "1.5", mode="hang")
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(out), reference())
    records = events(tmp_path)
    (lost,) = of(records, "heartbeat_lost")
    assert lost["silent_s"] > 1.5 and lost["device"] == DEVICES[0]
    assert of(records, "fault_detected")[0]["fault_class"] == "hang"
    assert of(records, "worker_exited")[0]["reason"] == "hang"
    assert of(records, "restart")[0]["to_device"] == DEVICES[1]


def test_max_restarts_exceeded_fails_with_summary(tmp_path: Path) -> None:
    # --restart-on any: the program's own exit 3 is restarted (by default it ends the run at once)
    result, _ = launch(tmp_path, "--max-restarts", "1", "--restart-on", "any", "--devices", DEVICES[0], mode="exit3")
    assert result.returncode == 1
    assert "hetero-run summary" in result.stderr and "--max-restarts 1 is used up" in result.stderr
    records = events(tmp_path)
    assert [r["returncode"] for r in of(records, "worker_exited")] == [3, 3]
    assert len(of(records, "restart")) == 1 and len(of(records, "gave_up")) == 1
    assert of(records, "finished")[0]["returncode"] == 1


def test_sigint_stops_every_worker_group_no_orphans(tmp_path: Path) -> None:
    proc, out = start(tmp_path, "--nproc", "2", "--grace", "1", mode="child")
    children = [Path(f"{out}.child{rank}") for rank in (0, 1)]
    deadline = time.monotonic() + TIMEOUT
    while not all(c.exists() and c.read_text() for c in children):
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "workers did not start"
        time.sleep(0.1)
    proc.send_signal(signal.SIGINT)
    _, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 130, stderr
    assert "hetero-run summary" in stderr
    records = events(tmp_path)
    pgids = [r["pgid"] for r in of(records, "worker_started")]
    assert len(pgids) == 2
    for pgid in pgids:  # the workers and the children they started are gone
        with pytest.raises(ProcessLookupError):
            os.killpg(pgid, 0)
    for child in children:
        with pytest.raises(ProcessLookupError):
            os.kill(int(child.read_text()), 0)
    assert of(records, "shutdown")[0]["signal"] == "SIGINT"
    assert {r["reason"] for r in of(records, "worker_exited")} == {"stopped"}


def test_workers_get_ranks_devices_and_a_shared_master(tmp_path: Path) -> None:
    nproc = 2
    result, out = launch(tmp_path, "--nproc", str(nproc), "--policy", "spread")
    assert result.returncode == 0, result.stderr
    found = sorted(starts(out), key=lambda s: s["rank"])
    assert [s["rank"] for s in found] == ["0", "1"] and {s["world"] for s in found} == {"2"}
    assert len({s["master_port"] for s in found}) == 1
    expected = [DEVICES[i % len(DEVICES)] for i in range(nproc)]
    assert [s["device"] for s in found] == expected
    assert of(events(tmp_path), "finished")[0]["workers"] == {str(i): f"ok on {d}" for i, d in enumerate(expected)}


@needs_two
def test_corrupt_newest_checkpoint_resumes_from_the_previous_one(tmp_path: Path) -> None:
    result, out = launch(tmp_path, "--devices", ",".join(DEVICES[:2]), mode="corrupt")
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(out), reference())
    assert of(events(tmp_path), "resumed_from_step")[0]["step"] == 4
    assert starts(out)[1]["start"] == 4
    assert "step-00000005" in result.stderr  # the worker's warning names the checkpoint it skipped


@needs_two
def test_metrics_served_during_the_run(tmp_path: Path) -> None:
    from hetero.launcher.assign import free_port

    port = free_port()
    result, out = launch(tmp_path, "--devices", ",".join(DEVICES[:2]), "--metrics-port", str(port),
                         mode=f"metrics:{port}")
    assert result.returncode == 0, result.stderr
    text = Path(f"{out}.metrics").read_text()  # scraped by the restarted worker, mid-run
    assert "hetero_worker_restarts_total 1.0" in text
    assert f'hetero_faults_total{{class="crash",device="{DEVICES[0]}"}} 1.0' in text
    assert "hetero_recovery_seconds_bucket" in text and "hetero_goodput_ratio" in text
    assert "hetero_build_info{" in text
    rank0 = [line for line in text.splitlines() if line.startswith("hetero_worker_state{") and 'rank="0"' in line
             and line.endswith(" 1.0")]  # the supervisor's view of the rank that is scraping, restarted
    assert len(rank0) == 1 and ('state="starting"' in rank0[0] or 'state="healthy"' in rank0[0]), rank0


@needs_two
def test_group_restart_restarts_every_worker(tmp_path: Path) -> None:
    result, out = launch(tmp_path, "--nproc", "2", "--restart", "group", "--devices", ",".join(DEVICES[:2]),
                         mode="crash0")
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(out), reference())
    records = events(tmp_path)
    assert [r["worker"] for r in of(records, "worker_started")].count(1) == 2  # rank 1 went again too
    restarts = {r["worker"]: r for r in of(records, "restart")}
    assert restarts[0]["group"] is False and restarts[1]["group"] is True
    assert restarts[0]["to_device"] != restarts[0]["from_device"]
    assert of(records, "finished")[0]["restarts"] == 1  # a group restart counts once


@pytest.mark.skipif(not OPENCL, reason="fault injection into copies needs an OpenCL device")
def test_injected_crash_restarts_elsewhere_from_checkpoint(tmp_path: Path) -> None:
    bad = OPENCL[0]
    result, out = launch(tmp_path, "--devices", f"{bad},cpu", "--inject", f"{bad}:copy:nth=6:crash")
    assert result.returncode == 0, result.stderr
    np.testing.assert_array_equal(np.load(out), reference())
    records = events(tmp_path)
    assert of(records, "worker_exited")[0]["signal"] == "SIGKILL"
    assert [(r["from_device"], r["to_device"]) for r in of(records, "restart")] == [(bad, "cpu")]
    assert of(records, "device_quarantined") == []  # a crash says nothing certain about the device
    resumed = of(records, "resumed_from_step")[0]["step"]
    assert 0 < resumed < STEPS and starts(out)[1]["start"] == resumed


def test_devices_naming_nothing_present_fails_with_the_valid_names(tmp_path: Path) -> None:
    result, _ = launch(tmp_path, "--devices", "cpu:7")
    assert result.returncode == 2  # a bad argument, said in one line (it was exit 1 and the summary table)
    assert result.stderr.strip().splitlines() == [result.stderr.strip()]
    assert "no device 'cpu:7'" in result.stderr and "valid devices" in result.stderr
    assert of(events(tmp_path), "gave_up")[0]["worker"] is None


def quarantine_cli(tmp_path: Path, code: str) -> None:
    env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state")}
    done = subprocess.run([sys.executable, "-c", "import hetero; from hetero.fault import quarantine as q; " + code],
                          env=env, capture_output=True, text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr


@needs_two
def test_quarantined_device_is_skipped_and_its_release_is_logged(tmp_path: Path) -> None:
    first, second = DEVICES[:2]
    quarantine_cli(tmp_path, f"q.add(hetero.device({first!r}), 'test', 'device-lost')")
    proc, out = start(tmp_path, "--devices", f"{first},{second}", mode="slow")
    deadline = time.monotonic() + TIMEOUT
    while not Path(f"{out}.log").exists():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1]
        time.sleep(0.1)
    quarantine_cli(tmp_path, f"assert q.release({first!r})")
    _, stderr = proc.communicate(timeout=TIMEOUT)
    assert proc.returncode == 0, stderr
    records = events(tmp_path)
    assert of(records, "worker_started")[0]["device"] == second  # never the quarantined one
    assert [r["device"] for r in of(records, "device_released")] == [first]
