"""What ``hetero-run`` restarts: a device fault (a fault report, a crash by a signal, a hang) by
default; an exception of the user's program ends the run with one line naming it, as torchrun
does, unless ``--restart-on any``. And the end-of-run summary as JSON (``--json``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from hetero._version import __version__
from hetero.fault.protocol import FAULT_EXIT_CODE
from hetero.launcher.faults import diagnose, restartable

TIMEOUT = 90
FAILS = "raise ValueError('bad learning rate')\n"
#: Killed by a signal on its first start (a crash: a device fault as far as anyone can tell), fine after.
CRASHES_ONCE = "import os, signal\nif os.environ['HETERO_RESTART'] == '0':\n    os.kill(os.getpid(), signal.SIGKILL)\n"


def _launch(tmp_path: Path, body: str, *options: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "train.py"
    script.write_text(body)
    env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state")}
    env.pop("HETERO_FAULTS", None)
    argv = [sys.executable, "-m", "hetero.launcher.cli", "--run-dir", str(tmp_path / "run"), "--devices", "cpu",
            "--no-standby", *options, str(script)]
    return subprocess.run(argv, check=False, env=env, cwd=tmp_path, text=True, capture_output=True, timeout=TIMEOUT)


def _events(tmp_path: Path, kind: str) -> list[dict[str, Any]]:
    records = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    return [r for r in records if r["event"] == kind]


def test_an_exception_of_the_program_ends_the_run_with_one_line_naming_it(tmp_path: Path) -> None:
    done = _launch(tmp_path, FAILS)
    assert done.returncode == 1, done.stderr
    assert len(_events(tmp_path, "worker_started")) == 1 and not _events(tmp_path, "restart")
    said = [line for line in done.stderr.splitlines() if line.startswith("hetero-run: giving up")]
    assert len(said) == 1 and "ValueError: bad learning rate" in said[0] and "--restart-on any" in said[0], done.stderr
    assert _events(tmp_path, "finished")[0]["faults"] == {"error": 1}


def test_restart_on_any_restarts_it_as_before(tmp_path: Path) -> None:
    done = _launch(tmp_path, FAILS, "--restart-on", "any", "--max-restarts", "1")
    assert done.returncode == 1, done.stderr
    assert len(_events(tmp_path, "restart")) == 1 and "--max-restarts 1 is used up" in done.stderr


def test_a_crash_by_a_signal_still_restarts_and_json_summarises_the_run(tmp_path: Path) -> None:
    done = _launch(tmp_path, CRASHES_ONCE + "print('trained')\n", "--json")
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["exit_status"] == 0 and summary["restarts"] == 1 and summary["faults"] == {"crash": 1}
    assert summary["workers"] == {"0": "ok on cpu"} and summary["reason"] is None
    assert "trained" in done.stdout and "hetero-run summary" not in done.stderr


def test_version() -> None:
    done = subprocess.run([sys.executable, "-m", "hetero.launcher.cli", "--version"], capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert done.returncode == 0 and done.stdout.strip() == f"hetero-run (hetero {__version__})"


@pytest.mark.parametrize(("code", "reason", "report", "fault_class"), [
    (1, "error", {"exception": True, "error_type": "ValueError", "message": "bad"}, "error"),
    (3, "error", None, "error"),
    (-9, "crash", None, "crash"),
    (-9, "hang", None, "hang"),
    (FAULT_EXIT_CODE, "fault", {"fault_class": "device-lost", "quarantine": True, "ttl": None}, "device-lost"),
    (FAULT_EXIT_CODE, "fault", None, "fault"),
])
def test_only_the_programs_own_errors_wait_for_restart_on_any(code: int, reason: str, report: dict[str, Any] | None,
                                                              fault_class: str) -> None:
    diagnosis = diagnose(code, reason, report)
    assert diagnosis.fault_class == fault_class
    assert restartable(fault_class, "any")
    assert restartable(fault_class, "fault") is (fault_class != "error")
    if report and report.get("exception"):
        assert diagnosis.fields == {"error_type": "ValueError", "message": "bad"}
