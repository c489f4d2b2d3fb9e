"""The worker bootstrap (python -m hetero.launcher.worker_main): runs a script or module as python
would, reports escaping device faults with exit status 86, and lets everything else through."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import hetero
from hetero.launcher import worker_main as worker
from hetero.fault.protocol import FAULT_EXIT_CODE, FAULT_REPORT_FIELDS

RAISE_CORRUPTED = """
    import hetero
    raise hetero.ContextCorruptedError("an illegal memory access was encountered", backend="cuda",
                                       device="cuda:1", code=700, code_name="cudaErrorIllegalAddress", xid=13)
"""


def _run(tmp_path: Path, body: str, *args: str, module: bool = False) -> tuple[subprocess.CompletedProcess[str], Path]:
    report = tmp_path / "run" / "fault-0.json"
    env = {**os.environ, "HETERO_FAULT_REPORT": str(report), "HETERO_HEARTBEAT_FILE": str(tmp_path / "run" / "beat"),
           "HETERO_WORKER": "3", "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path), os.environ.get("PYTHONPATH")]))}
    if module:
        package = tmp_path / "mypkg"
        package.mkdir(exist_ok=True)
        (package / "__init__.py").write_text("")
        (package / "train.py").write_text(textwrap.dedent(body))
        target = ["-m", "mypkg.train"]
    else:
        (tmp_path / "helper_mod.py").write_text("VALUE = 42\n")
        (tmp_path / "script.py").write_text(textwrap.dedent(body))
        target = [str(tmp_path / "script.py")]
    result = subprocess.run([sys.executable, "-m", "hetero.launcher.worker_main", *target, *args], check=False,
                            capture_output=True,
                            text=True, env=env, cwd=tmp_path, timeout=120)
    return result, report


def test_context_corrupting_error_writes_the_report_and_exits_86(tmp_path: Path) -> None:
    result, report = _run(tmp_path, RAISE_CORRUPTED)
    assert result.returncode == FAULT_EXIT_CODE, result.stderr
    assert "ContextCorruptedError" in result.stderr and "Traceback" in result.stderr
    data = json.loads(report.read_text())
    assert set(FAULT_REPORT_FIELDS) <= set(data)
    assert data["device"] == "cuda:1" and data["backend"] == "cuda"
    assert data["error_type"] == "ContextCorruptedError" and data["fault_class"] == "context-corrupting"
    assert (data["code"], data["code_name"], data["xid"], data["injected"]) == (700, "cudaErrorIllegalAddress", 13, False)
    assert "illegal memory access" in data["message"] and data["worker"] == "3"
    assert [p.name for p in report.parent.iterdir() if p.name.startswith(".")] == []  # no temp file left


def test_device_error_wrapped_by_recovery_failure_is_found(tmp_path: Path) -> None:
    result, report = _run(tmp_path, """
        import hetero
        try:
            raise hetero.DeviceLostError("fell off the bus", backend="oneapi", device="oneapi:0", injected=True)
        except hetero.DeviceError as exc:
            history = [{"device": "oneapi:0"}]
            raise hetero.RecoveryFailedError("no healthy device left", history) from exc
    """)
    assert result.returncode == FAULT_EXIT_CODE, result.stderr
    data = json.loads(report.read_text())
    assert (data["error_type"], data["fault_class"], data["injected"]) == ("DeviceLostError", "device-lost", True)
    assert "RecoveryFailedError" in result.stderr


def test_an_injected_fault_on_the_real_path_is_reported_with_the_device_stable_id(tmp_path: Path,
                                                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETERO_FAULTS", "cpu:alloc:nth=2:lost")
    monkeypatch.setenv("HETERO_STATE_DIR", str(tmp_path / "state"))
    result, report = _run(tmp_path, """
        import hetero
        a = hetero.zeros(4, device="cpu")
        b = hetero.zeros(4, device="cpu")   # the 2nd allocation: the device is lost
    """)
    assert result.returncode == FAULT_EXIT_CODE, result.stderr
    data = json.loads(report.read_text())
    assert (data["device"], data["error_type"], data["fault_class"], data["injected"]) == (
        "cpu", "DeviceLostError", "device-lost", True)
    assert data["stable_id"] == hetero.device("cpu").stable_id


def test_plain_exception_exits_1_with_an_exception_report(tmp_path: Path) -> None:
    # the report names the exception for hetero-run's one-line summary (it does not restart it); never a quarantine
    result, report = _run(tmp_path, "raise ValueError('bad batch size')\n")
    assert result.returncode == 1
    assert "ValueError: bad batch size" in result.stderr
    data = json.loads(report.read_text())
    assert (data["exception"], data["error_type"], data["message"], data["quarantine"]) == (
        True, "ValueError", "bad batch size", False)


def test_system_exit_passes_through(tmp_path: Path) -> None:
    result, report = _run(tmp_path, "import sys\nsys.exit(3)\n")
    assert result.returncode == 3 and not report.exists()


def test_script_runs_as_main_with_its_argv_path_and_a_final_heartbeat(tmp_path: Path) -> None:
    result, _ = _run(tmp_path, """
        import json, sys
        import hetero, helper_mod   # helper_mod sits next to the script: sys.path[0] is its folder
        for step in range(5):
            hetero.heartbeat(step)
        print(json.dumps({"name": __name__, "argv": sys.argv, "value": helper_mod.VALUE}))
    """, "--lr", "0.1")
    assert result.returncode == 0, result.stderr
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen == {"name": "__main__", "argv": [str(tmp_path / "script.py"), "--lr", "0.1"], "value": 42}
    assert json.loads((tmp_path / "run" / "beat").read_text())["step"] == 4


def test_module_form(tmp_path: Path) -> None:
    body = "import sys\nprint(__name__, sys.argv[0].endswith('train.py'), sys.argv[1:])\n"
    result, report = _run(tmp_path, body + textwrap.dedent(RAISE_CORRUPTED), "a", "b", module=True)
    assert result.stdout.split("\n")[0] == "__main__ True ['a', 'b']"
    assert result.returncode == FAULT_EXIT_CODE and json.loads(report.read_text())["device"] == "cuda:1"


def _start(tmp_path: Path, body: str) -> subprocess.Popen[str]:
    (tmp_path / "script.py").write_text(textwrap.dedent(body))
    proc = subprocess.Popen([sys.executable, "-m", "hetero.launcher.worker_main", str(tmp_path / "script.py")],
                            stdout=subprocess.PIPE, text=True, cwd=tmp_path)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_sigterm_runs_finally_blocks_and_pending_saves_then_ends_by_sigterm(tmp_path: Path) -> None:
    proc = _start(tmp_path, f"""
        import time, numpy as np, hetero
        try:
            for step in range(4):  # queued; written in the background while the supervisor stops us
                hetero.checkpoint.store.save_async({{"w": np.full(2_000_000, step)}}, step, {str(tmp_path / "ck")!r}, keep=None)
            print("ready", flush=True)
            time.sleep(60)
        finally:
            open({str(tmp_path / "finally")!r}, "w").write("ran")
    """)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == -signal.SIGTERM
    assert (tmp_path / "finally").read_text() == "ran"
    from hetero.checkpoint import store as checkpoint

    assert [step for step, _ in checkpoint.checkpoints(tmp_path / "ck")] == [3, 2, 1, 0]
    assert checkpoint.latest_step(tmp_path / "ck") == 3


def test_forked_children_keep_the_default_sigterm(tmp_path: Path) -> None:
    marker = tmp_path / "finally-ran-in"
    proc = _start(tmp_path, f"""
        import os, signal, time
        try:
            pid = os.fork()
            if pid == 0:  # a pool worker, say: SIGTERM must end it at once, not unwind the parent's code
                time.sleep(60)
                os._exit(0)
            time.sleep(0.2)
            os.kill(pid, signal.SIGTERM)
            _, status = os.waitpid(pid, 0)
            print("ready", flush=True)
            print(os.waitstatus_to_exitcode(status), flush=True)
        finally:
            open({str(marker)!r}, "a").write(f"{{os.getpid()}}\\n")
    """)
    assert proc.stdout is not None and proc.stdout.readline().strip() == str(-signal.SIGTERM)
    assert proc.wait(timeout=60) == 0
    assert marker.read_text().split() == [str(proc.pid)]


def test_a_program_with_its_own_sigterm_handler_keeps_it(tmp_path: Path) -> None:
    proc = _start(tmp_path, """
        import signal, sys, time
        signal.signal(signal.SIGTERM, lambda *_: sys.exit(7))
        print("ready", flush=True)
        time.sleep(60)
    """)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 7


def test_usage_and_missing_script(tmp_path: Path) -> None:
    assert worker.main([]) == 2
    assert worker.main(["-m"]) == 2
    assert worker.main([str(tmp_path / "absent.py")]) == 2


def test_find_device_error_walks_causes_contexts_and_groups() -> None:
    device_error = hetero.DeviceOutOfMemoryError("out of memory", backend="cpu", device="cpu")
    try:
        try:
            raise device_error
        except hetero.DeviceError:
            raise KeyError("while handling") from None  # suppressed context is still walked
    except KeyError as exc:
        chained = exc
    assert worker.find_device_error(chained) is device_error
    group = Exception("many")  # an ExceptionGroup (3.11+) is walked through its .exceptions
    group.exceptions = (ValueError(), device_error)  # type: ignore[attr-defined]
    assert worker.find_device_error(group) is device_error
    assert worker.find_device_error(RuntimeError("plain")) is None


def test_find_device_error_reads_a_torch_device_error_as_the_hetero_one() -> None:
    raised = RuntimeError("CUDA error: an illegal memory access was encountered\nCompile with TORCH_USE_CUDA_DSA")
    try:
        try:
            raise raised
        except RuntimeError as exc:
            raise ValueError("the loss is not a number") from exc
    except ValueError as exc:
        chained = exc
    found = worker.find_device_error(chained)
    assert isinstance(found, hetero.ContextCorruptedError) and found.__cause__ is raised
    assert found.code_name == "cudaErrorIllegalAddress"
    own = hetero.DeviceLostError("fell off the bus", backend="cuda", device="cuda:0")
    both = Exception("many")  # hetero's own error wins over a foreign one beside it
    both.exceptions = (raised, own)  # type: ignore[attr-defined]
    assert worker.find_device_error(both) is own
    assert worker.find_device_error(RuntimeError("shape mismatch")) is None  # no device error spelling


def test_a_torch_device_error_escaping_the_program_is_a_device_fault(tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETERO_DEVICE", "cpu")  # as hetero-run sets it: the worker's device
    result, report = _run(tmp_path, """
        import hetero
        x = hetero.zeros(4)  # on the worker's device, now open
        raise RuntimeError("CUDA error: an illegal memory access was encountered")
    """)
    assert result.returncode == FAULT_EXIT_CODE, result.stderr
    data = json.loads(report.read_text())
    assert (data["error_type"], data["fault_class"], data["code_name"]) == (
        "ContextCorruptedError", "context-corrupting", "cudaErrorIllegalAddress")
    assert data["device"] == "cpu" and data["stable_id"] == hetero.device("cpu").stable_id
    assert "RuntimeError: CUDA error" in result.stderr  # the program's own traceback is still printed


def test_report_without_a_destination_is_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("HETERO_FAULT_REPORT", raising=False)
    report = worker.fault_report(hetero.DeviceDegradedError("ECC pending", backend="cpu", device="cpu"))
    assert report["fault_class"] == "degraded" and worker.write_report(report) is None
