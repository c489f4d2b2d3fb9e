"""hetero-run against bad input and runaway processes: options checked before anything starts,
fault reports that lie, metrics kept on the loopback, device errors raised in a worker's thread,
and no process the run started outliving it (each run bounded in time)."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

import hetero
from hetero.launcher import cli as run_cli
from hetero.launcher.events import EventLog, append_event
from hetero.launcher.faults import classify_report
from hetero.fault.protocol import FAULT_EXIT_CODE

DEVICES = [d.name for d in hetero.devices()]
TIMEOUT = 90


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in ("Z", "X")


def _kill_if_alive(pids: list[int]) -> None:
    for pid in pids:  # only what this test started (read from its own files)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)


def _wait_dead(pids: list[int], timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        left = [pid for pid in pids if _alive(pid)]
        if not left:
            return []
        time.sleep(0.05)
    return [pid for pid in pids if _alive(pid)]


def _argv(tmp_path: Path, body: str, *options: str) -> tuple[list[str], dict[str, str]]:
    script = tmp_path / "train.py"
    script.write_text(textwrap.dedent(body))
    env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state")}
    env.pop("HETERO_FAULTS", None)
    return [sys.executable, "-m", "hetero.launcher.cli", "--run-dir", str(tmp_path / "run"), *options, str(script)], env


def _launch(tmp_path: Path, body: str, *options: str) -> subprocess.CompletedProcess[str]:
    argv, env = _argv(tmp_path, body, *options)
    return subprocess.run(argv, check=False, env=env, cwd=tmp_path, text=True, capture_output=True, timeout=TIMEOUT)


def _events(tmp_path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]


# -- 5b: every option checked before anything starts -------------------------------------------
@pytest.mark.parametrize(("options", "message"), [
    (["--inject", "cpu:launch:nth=0:crash"], "--inject"),
    (["--inject", "nonsense"], "--inject"),
    (["--heartbeat-timeout", "nan"], "--heartbeat-timeout"),
    (["--heartbeat-timeout", "inf"], "--heartbeat-timeout"),
    (["--grace", "-1"], "--grace"),
    (["--grace", "nan"], "--grace"),
    (["--metrics-port", "70000"], "--metrics-port"),
    (["--metrics-port", "0"], "--metrics-port"),
    (["--master-port", "-5"], "--master-port"),
    (["--nproc", "100000"], "--nproc"),
    (["--max-restarts", "-1"], "--max-restarts"),
    (["--metrics-addr", "not an address", "--metrics-port", "9100"], "--metrics-addr"),
    (["--nnodes", "2", "--rdzv-endpoint", "host0"], "--rdzv-endpoint"),
    (["--nnodes", "2", "--rdzv-endpoint", "host0:99999"], "--rdzv-endpoint"),
    (["--preload", "torch,no such module"], "--preload"),
    (["--events", "."], "--events"),
    (["--checkpoint-dir", "train.py"], "--checkpoint-dir"),
])
def test_bad_options_exit_2_naming_the_option_before_anything_starts(tmp_path: Path, options: list[str],
                                                                      message: str) -> None:
    script = tmp_path / "train.py"
    script.write_text("open('ran', 'w')\n")
    env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state")}
    result = subprocess.run([sys.executable, "-m", "hetero.launcher.cli", "--run-dir", str(tmp_path / "run"), *options,
                             str(script)], check=False, env=env, cwd=tmp_path, text=True, capture_output=True,
                            timeout=60)
    assert result.returncode == 2, result.stderr
    assert message in result.stderr, result.stderr
    assert not (tmp_path / "run").exists() and not (tmp_path / "ran").exists()


def test_nproc_is_capped_by_the_devices(tmp_path: Path, state_dir: Path) -> None:
    from hetero.launcher.assign import MAX_WORKERS_PER_DEVICE

    result = _launch(tmp_path, "print('ran')\n", "--devices", "cpu", "--nproc", str(MAX_WORKERS_PER_DEVICE + 1))
    assert result.returncode == 2, result.stderr
    assert "--nproc" in result.stderr and "cpu" in result.stderr
    assert "ran" not in result.stdout


# -- 11: a fault report that lies is re-classified, never a crash ------------------------------
@pytest.mark.parametrize("report", [
    {"fault_class": "degraded", "quarantine": True, "ttl": "soon", "error_type": "DeviceLostError"},
    {"fault_class": {"deep": [[[[1]]]]}, "quarantine": "yes", "ttl": float("nan"), "error_type": "DeviceLostError"},
    {"fault_class": "made-up", "quarantine": True, "ttl": 5, "error_type": "DeviceLostError"},
    {"fault_class": "degraded", "quarantine": True, "ttl": -3, "error_type": "DeviceLostError"},
])
def test_a_report_with_bad_fields_is_classified_again(report: dict[str, Any]) -> None:
    verdict = classify_report(report)
    assert verdict.fault_class == "device-lost" and verdict.quarantine
    assert verdict.ttl is None or (isinstance(verdict.ttl, float) and verdict.ttl >= 0)


def test_a_deeply_nested_report_is_classified_without_crashing() -> None:
    message: Any = "gone"
    for _ in range(100_000):
        message = [message]
    verdict = classify_report({"error_type": "DeviceLostError", "message": message, "code": {"x": message}})
    assert verdict.fault_class == "device-lost"


BAD_REPORT = """
    import json, os, sys, time
    rank, restart = os.environ["RANK"], os.environ["HETERO_RESTART"]
    if rank == "0" and restart == "0":
        text = '{"fault_class": "degraded", "quarantine": true, "ttl": "soon", "message": ' + "[" * 50000 + "]" * 50000 + '}'
        open(os.environ["HETERO_FAULT_REPORT"], "w").write(text)
        sys.exit(86)
    time.sleep(1.5)
    print("done", rank, restart)
"""


@pytest.mark.skipif(len(DEVICES) < 2, reason="needs two devices")
def test_a_malformed_fault_report_does_not_stop_the_healthy_worker(tmp_path: Path) -> None:
    result = _launch(tmp_path, BAD_REPORT, "--nproc", "2", "--devices", ",".join(DEVICES[:2]), "--no-standby")
    assert result.returncode == 0, result.stderr
    assert "done 1 0" in result.stdout and "done 0 1" in result.stdout
    faults = [e for e in _events(tmp_path) if e["event"] == "fault_detected"]
    assert len(faults) == 1 and faults[0]["worker"] == 0


# -- 11: messages said once, naming the worker ------------------------------------------------
def test_giving_up_is_said_once_and_names_no_worker_none(tmp_path: Path) -> None:
    result = _launch(tmp_path, "import sys; sys.exit(3)\n", "--max-restarts", "0", "--no-standby", "--devices", "cpu")
    assert result.returncode == 1
    lines = [line for line in result.stderr.splitlines() if "giving up" in line]
    assert len(lines) == 1, result.stderr
    assert "worker 0" in lines[0]
    nothing = _launch(tmp_path, "print('ran')\n", "--devices", "cuda:7", "--no-standby")
    assert nothing.returncode == 1
    said = [line for line in nothing.stderr.splitlines() if line.startswith("hetero-run:")]
    assert len(said) == 1 and "None" not in said[0], nothing.stderr


@pytest.mark.skipif(len(DEVICES) < 2, reason="needs a second device to restart on")
def test_a_quarantine_is_said_once_with_its_scope(tmp_path: Path) -> None:
    # The store's own warning and the launcher's announcement said the same thing twice.
    body = "import hetero\nfor _ in range(3):\n    hetero.zeros(4)\n"
    result = _launch(tmp_path, body, "--no-standby", "--devices", f"cpu,{DEVICES[1]}",
                     "--inject", "cpu:alloc:nth=2:lost")
    assert result.returncode == 0, result.stderr
    said = [line for line in result.stderr.splitlines()  # log and announcement lines (not the summary's table)
            if line.startswith(("hetero ", "hetero-run:")) and "quarantined" in line and "cpu" in line]
    assert len(said) == 1, result.stderr
    assert said[0].startswith("hetero-run: quarantined cpu") and "for this drill" in said[0], said[0]


# -- 11: a device error in a worker's thread is a device fault ---------------------------------
THREAD_FAULT = """
    import os, sys, threading, time
    import hetero

    def work():
        raise hetero.ContextCorruptedError("illegal address", backend="cpu", device="cpu", code=700)

    done = []
    thread = threading.Thread(target=work)
    thread.start()
    thread.join()
    for update in range(5):
        time.sleep(0.2)
        done.append(update)
    print("updates", len(done))
"""


def test_a_device_error_in_a_thread_is_reported_and_stops_the_worker(tmp_path: Path) -> None:
    report = tmp_path / "fault.json"
    (tmp_path / "script.py").write_text(textwrap.dedent(THREAD_FAULT))
    env = {**os.environ, "HETERO_FAULT_REPORT": str(report), "HETERO_WORKER": "0"}
    result = subprocess.run([sys.executable, "-m", "hetero.launcher.worker_main", str(tmp_path / "script.py")], check=False,
                            capture_output=True, text=True, env=env, cwd=tmp_path, timeout=60)
    assert result.returncode == FAULT_EXIT_CODE, result.stderr
    assert "updates" not in result.stdout
    assert "ContextCorruptedError" in result.stderr and "thread" in result.stderr
    data = json.loads(report.read_text())
    assert data["error_type"] == "ContextCorruptedError" and data["fault_class"] == "context-corrupting"


# -- 11: no process the run started outlives it -----------------------------------------------
LEAVES_DESCENDANTS = """
    import os, subprocess, sys, time
    here = os.path.dirname(os.path.abspath(__file__))
    restart = os.environ["HETERO_RESTART"]
    sleeper = [sys.executable, "-c", "import time; time.sleep(60)"]
    quiet = {"stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}  # holding no pipe of the launcher's
    child = subprocess.Popen(sleeper, start_new_session=True, **quiet)
    daemon = subprocess.Popen([sys.executable, "-c",
        "import os, subprocess, sys, time\\n"
        "if os.fork(): os._exit(0)\\n"
        "os.setsid()\\n"
        "if os.fork(): os._exit(0)\\n"
        "open(sys.argv[1], 'w').write(str(os.getpid()))\\n"
        "time.sleep(60)\\n", os.path.join(here, f"daemon-{restart}")], **quiet)
    daemon.wait()
    while not os.path.exists(os.path.join(here, f"daemon-{restart}")):
        time.sleep(0.01)
    open(os.path.join(here, f"pids-{restart}"), "w").write(f"{os.getpid()} {child.pid}")
    if sys.argv[1:] == ["forever"]:
        time.sleep(60)
"""


def _pids(tmp_path: Path, restart: int = 0) -> list[int]:
    worker_and_child = [int(p) for p in (tmp_path / f"pids-{restart}").read_text().split()]
    return [*worker_and_child, int((tmp_path / f"daemon-{restart}").read_text())]


def test_setsid_children_and_daemons_die_with_their_worker(tmp_path: Path) -> None:
    argv, env = _argv(tmp_path, LEAVES_DESCENDANTS, "--devices", "cpu", "--no-standby")
    result = subprocess.run(argv, check=False, env=env, cwd=tmp_path, text=True, capture_output=True, timeout=TIMEOUT)
    pids = _pids(tmp_path)
    try:
        assert result.returncode == 0, result.stderr
        assert _wait_dead(pids, 5) == []
    finally:
        _kill_if_alive(pids)


def test_a_sigkilled_launcher_leaves_no_worker_nor_descendant_running(tmp_path: Path) -> None:
    argv, env = _argv(tmp_path, LEAVES_DESCENDANTS, "--devices", "cpu")
    launcher = subprocess.Popen([*argv, "forever"], env=env, cwd=tmp_path, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    pids: list[int] = []
    try:
        deadline = time.monotonic() + TIMEOUT
        while not (tmp_path / "pids-0").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        pids = _pids(tmp_path)
        assert all(_alive(pid) for pid in pids)
        launcher.kill()
        launcher.wait(timeout=10)
        assert _wait_dead(pids, 10) == [], "outlived the launcher"
    finally:
        if launcher.poll() is None:
            launcher.kill()
            launcher.wait()
        _kill_if_alive(pids)


# -- 12: metrics on the loopback unless asked ---------------------------------------------------
def test_metrics_bind_the_loopback_by_default() -> None:
    pytest.importorskip("prometheus_client")
    from hetero.launcher.metrics import serve

    metrics = serve(0)
    try:
        assert metrics._server[0].server_address[0] == "127.0.0.1"
    finally:
        metrics.close()
    assert run_cli.build_parser().parse_args(["x.py"]).metrics_addr == "127.0.0.1"
    assert run_cli.build_parser().parse_args(["--metrics-addr", "0.0.0.0", "x.py"]).metrics_addr == "0.0.0.0"


# -- 10: event logs are private --------------------------------------------------------------
def test_event_logs_are_private(tmp_path: Path) -> None:
    log = EventLog(tmp_path / "events.jsonl", quiet=True)
    log.emit("run_started")
    log.close()
    append_event(tmp_path / "shim.jsonl", "worker_started")
    for name in ("events.jsonl", "shim.jsonl"):
        assert stat.S_IMODE((tmp_path / name).stat().st_mode) == 0o600


THREAD_FAULT_UNDER_RUN = """
    import os, threading, time
    import hetero

    def work():
        raise hetero.ContextCorruptedError("illegal address", backend="cpu", device=os.environ["HETERO_DEVICE"], code=700)

    if os.environ["HETERO_RESTART"] == "0":
        threading.Thread(target=work).start()
        time.sleep(30)  # interrupted: the fault report is out, the worker exits 86
    print("done on", os.environ["HETERO_DEVICE"])
"""


@pytest.mark.skipif(len(DEVICES) < 2, reason="needs two devices")
def test_under_hetero_run_a_thread_device_error_quarantines_and_restarts(tmp_path: Path) -> None:
    result = _launch(tmp_path, THREAD_FAULT_UNDER_RUN, "--devices", ",".join(DEVICES[:2]), "--no-standby")
    assert result.returncode == 0, result.stderr
    records = _events(tmp_path)
    faults = [e for e in records if e["event"] == "fault_detected"]
    assert [f["error_type"] for f in faults] == ["ContextCorruptedError"]
    assert [e["device"] for e in records if e["event"] == "device_quarantined"] == [DEVICES[0]]
    assert f"done on {DEVICES[1]}" in result.stdout
