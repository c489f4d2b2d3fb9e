"""``hetero calibrate``: measures, shows progress on stderr, saves the model, prints it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hetero.cli.main import main
from hetero.scheduler.cost_model import CostModel


def test_calibrate_quick_json_saves_the_model(tmp_path: Path) -> None:
    env_state = tmp_path / "state"
    env = {**os.environ, "HETERO_STATE_DIR": str(env_state)}
    result = subprocess.run([sys.executable, "-m", "hetero.cli.main", "calibrate", "--quick", "--json", "--devices", "cpu"],
                            capture_output=True, text=True, env=env, timeout=300, check=False)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["path"] == str(env_state / "costs.json")
    kernels = report["kernels"]
    assert {key.split("@")[0] for key in kernels} == {"saxpy", "triad", "copy", "matmul"}
    for per_device in kernels.values():
        assert set(per_device) == {"cpu"}
        assert per_device["cpu"]["a"] > 0 and per_device["cpu"]["points"] >= 2
    assert report["transfers"]["cpu"]["h2d"]["bandwidth_gbs"] > 0
    assert "15/15" in result.stderr and "calibrating cpu (quick)" in result.stderr  # the progress bar
    saved = CostModel(env_state / "costs.json")
    key = next(k for k in kernels if k.startswith("saxpy@"))
    stable_id = kernels[key]["cpu"]["stable_id"]
    assert saved.predict(key, stable_id, 1 << 20) is not None


def test_calibrate_unknown_device_fails_with_the_reason(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["calibrate", "--devices", "nosuch:7"]) == 2  # a bad argument (was 1 before the exit-status table)
    assert "nosuch" in capsys.readouterr().err


def test_calibrate_takes_the_comma_separated_list_and_the_old_spaces(monkeypatch: pytest.MonkeyPatch) -> None:
    # `--devices cpu,oneapi:0` was one name to calibrate, refused with a misleading "did you mean"
    import hetero.kernels.calibration as calibration

    asked: list[list[str]] = []
    monkeypatch.setattr(calibration, "calibration_devices", lambda specs: asked.append(list(specs)) or [])
    for argv in (["cpu,oneapi:0"], ["cpu", "oneapi:0"], ["cpu, oneapi:0"]):
        assert main(["calibrate", "--devices", *argv]) == 1  # no device (the stand-in finds none): a failure
    assert asked == [["cpu", "oneapi:0"]] * 3
