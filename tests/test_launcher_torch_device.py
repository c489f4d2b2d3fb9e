"""hetero-run says where torch really runs: the worker's heartbeat and fault report carry its
torch device (hetero.torch_device of its HETERO_DEVICE), the supervisor turns it into a
``torch_device`` event and console line ("hetero device oneapi:0, torch device cpu"), and the
summary names it beside each rank's device; the existing fields and wording stay."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import hetero
from hetero.core.device import DeviceInfo, Kind
from hetero.fault import heartbeat as hb
from hetero.launcher.events import Summary, announce
from hetero.launcher.faults import diagnose
from hetero.launcher.starter import starting_torch_device
from hetero.fault.protocol import FAULT_EXIT_CODE

CPU_KIND = [d.name for d in hetero.devices() if str(d.kind) == "cpu"]


def info(name: str, kind: Kind) -> DeviceInfo:
    backend, _, index = name.partition(":")
    return DeviceInfo(name=name, backend=backend, index=int(index or 0), vendor="Test", kind=kind, model="test",
                      memory=1 << 30, compute_units=1, max_work_group_size=1, fp64=True, driver_version="0",
                      stable_id=f"{backend}-{index or 0}")


def line_of(record: dict[str, object]) -> str:
    out = io.StringIO()
    announce(record, out)
    return out.getvalue().strip()


def test_the_console_names_both_devices() -> None:
    assert line_of({"event": "torch_device", "worker": 0, "device": "oneapi:0", "torch_device": "cpu"}) == (
        "hetero-run: worker 0: hetero device oneapi:0, torch device cpu")
    fault = {"event": "fault_detected", "worker": 1, "device": "oneapi:0", "fault_class": "device-lost",
             "error_type": "DeviceLostError", "message": "gone"}
    assert line_of(fault) == "hetero-run: worker 1 on oneapi:0: device-lost (DeviceLostError gone)"  # as before
    assert line_of({**fault, "torch_device": "cpu"}) == (
        "hetero-run: worker 1 on oneapi:0: device-lost (DeviceLostError gone) [hetero device oneapi:0, torch device cpu]")


def test_the_summary_names_each_ranks_torch_device() -> None:
    summary = Summary(nproc=2)
    summary.worker_results = {0: "ok on oneapi:0", 1: "ok on cuda:3"}
    summary.torch_devices = {0: "cpu"}
    data = summary.as_dict()
    assert data["workers"] == {"0": "ok on oneapi:0", "1": "ok on cuda:3"}  # unchanged
    assert data["torch_devices"] == {"0": "cpu"}
    assert "0: ok on oneapi:0 (torch device cpu), 1: ok on cuda:3" in summary.table(0, None)


def test_the_launcher_knows_a_cpu_devices_torch_device_and_leaves_a_gpus_to_the_worker() -> None:
    assert starting_torch_device(info("oneapi:0", Kind.CPU)) == "cpu"
    assert starting_torch_device(info("opencl:0", Kind.GPU)) == "cpu"  # torch has no OpenCL backend
    assert starting_torch_device(info("cuda:3", Kind.GPU)) is None  # the worker's cuda:0, by its torch


def test_the_fault_report_torch_device_reaches_the_fault_event() -> None:
    report = {"fault_class": "device-lost", "quarantine": True, "ttl": None, "error_type": "DeviceLostError",
              "message": "gone", "torch_device": "cpu"}
    assert diagnose(FAULT_EXIT_CODE, "fault", report).fields["torch_device"] == "cpu"


def test_the_heartbeat_carries_the_torch_device(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    beat = tmp_path / "beat.json"
    monkeypatch.setenv("HETERO_HEARTBEAT_FILE", str(beat))
    monkeypatch.delenv("HETERO_DEVICE", raising=False)
    hb.reset()
    try:
        hb.flush()
        assert json.loads(beat.read_text())["torch_device"] is None  # no device known: nothing claimed
        with hetero.use_device("cpu"):
            hb.flush()
        assert json.loads(beat.read_text())["torch_device"] == "cpu"
        hetero.device("cpu")
        monkeypatch.setenv("HETERO_DEVICE", "cpu")  # the worker's device, opened
        hb.flush()
        assert json.loads(beat.read_text())["torch_device"] == "cpu"
    finally:
        hb.reset()


SCRIPT = """
import time
import hetero
x = hetero.zeros(4, device=hetero.device())  # the worker's device, opened
for step in range(6):
    hetero.heartbeat(step)
    time.sleep(0.25)
"""


@pytest.mark.skipif(not CPU_KIND, reason="needs a CPU-kind device")
def test_hetero_run_reports_the_workers_torch_device(tmp_path: Path) -> None:
    device = next((name for name in CPU_KIND if name != "cpu"), CPU_KIND[0])  # oneapi:0 where there is one
    (tmp_path / "train.py").write_text(SCRIPT)
    env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state")}
    env.pop("HETERO_FAULTS", None)
    done = subprocess.run([sys.executable, "-m", "hetero.launcher.cli", "--run-dir", str(tmp_path / "run"),
                           "--devices", device, str(tmp_path / "train.py")], check=False, env=env, cwd=tmp_path,
                          text=True, capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in (tmp_path / "run" / "events.jsonl").read_text().splitlines()]
    (started,) = [r for r in records if r["event"] == "worker_started"]
    assert (started["device"], started["torch_device"]) == (device, "cpu")
    (seen,) = [r for r in records if r["event"] == "torch_device"]  # once: it never changed
    assert (seen["worker"], seen["device"], seen["torch_device"]) == (0, device, "cpu")
    (finished,) = [r for r in records if r["event"] == "finished"]
    assert finished["workers"] == {"0": f"ok on {device}"} and finished["torch_devices"] == {"0": "cpu"}
    assert f"hetero-run: worker 0: hetero device {device}, torch device cpu" in done.stderr
    assert f"0: ok on {device} (torch device cpu)" in done.stderr
