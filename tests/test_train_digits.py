"""examples/train_digits.py: with an injected device-lost fault it moves to another vendor stack's
device and ends within 0.5 percentage points of the fault-free run; it resumes from checkpoints."""

from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT

import hetero

EXAMPLES = ROOT / "examples"
NAMES = [d.name for d in hetero.devices()]


@pytest.fixture(autouse=True)
def private_dirs(state_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETERO_CHECKPOINT_DIR", str(tmp_path / "checkpoints"))
    monkeypatch.delenv("HETERO_RESUME_STEP", raising=False)


@pytest.fixture(scope="module")
def example() -> Any:
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield importlib.import_module("train_digits")
    finally:
        sys.path.remove(str(EXAMPLES))


def train(example: Any, *argv: str) -> dict[str, Any]:
    return example.train(example.parse_args(list(argv)))


def test_injected_fault_moves_to_another_vendor_stack_and_matches_accuracy(example: Any) -> None:
    if "oneapi:0" not in NAMES or len(NAMES) < 2:
        pytest.skip("needs oneapi:0 and another device")
    clean = train(example, "--device", "oneapi:0", "--steps", "400", "--seed", "3")
    faulty = train(example, "--inject", "oneapi:0:launch:nth=300:lost", "--steps", "400", "--seed", "3")
    assert clean["recoveries"] == [] and clean["final_device"] == "oneapi:0"
    assert faulty["start_device"] == "oneapi:0"
    final = hetero.device(faulty["final_device"])
    assert final.backend != "oneapi"
    (event,) = faulty["recoveries"]
    assert event["injected"] and event["failed_device"] == "oneapi:0" and event["fault_class"] == "device-lost"
    assert event["step"] == 19  # 15 launches a step: launch #300 is in step 19
    assert abs(faulty["accuracy"] - clean["accuracy"]) <= 0.005
    assert clean["accuracy"] > 0.9


def test_resume_from_checkpoint_continues_the_same_run(example: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    device = next((n for n in NAMES if n != "cpu"), NAMES[0])  # OpenCL builds faster than Numba
    whole = train(example, "--device", device, "--steps", "90", "--no-guard")
    first = train(example, "--device", device, "--steps", "60", "--checkpoint-every", "30")
    monkeypatch.setenv("HETERO_RESUME_STEP", "60")
    resumed = train(example, "--device", device, "--steps", "90")
    assert first["first_step"] == 0 and resumed["first_step"] == 60
    assert resumed["weights"] == pytest.approx(whole["weights"], rel=1e-6)
    assert resumed["accuracy"] == whole["accuracy"]


def test_json_summary_from_the_command_line(tmp_path: Any) -> None:
    result = subprocess.run([sys.executable, str(EXAMPLES / "train_digits.py"), "--steps", "40", "--json",
                             "--device", NAMES[-1]], check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["steps"] == 40 and summary["start_device"] == NAMES[-1] and summary["recoveries"] == []
    assert summary["snapshots"] == 4 and 0.0 < summary["accuracy"] <= 1.0
    assert "test accuracy" in result.stdout
