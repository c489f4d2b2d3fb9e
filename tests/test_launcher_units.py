"""hetero-run's parts in-process: device environment, replacement choice, goodput and
time-lost accounting, metrics exposition, command-line errors."""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from hetero.core.device import DeviceInfo, Kind
from hetero.launcher import assign as launch_assign
from hetero.launcher import cli as run_cli
from hetero.launcher.assign import LaunchError, assign, device_env
from hetero.launcher.assign import restart_device as replacement
from hetero.launcher.events import EventLog, Progress, Summary, append_event
from hetero.launcher.faults import classify_report


@pytest.fixture(autouse=True)
def private_state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """No quarantine from the user's own state dir may change the choices tested here."""
    from hetero.core.config import reload_config

    monkeypatch.setenv("HETERO_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setattr(launch_assign, "healthy", lambda device: True)  # fake devices have no backend
    reload_config()
    yield
    monkeypatch.undo()
    reload_config()


def info(name: str) -> DeviceInfo:
    backend, _, index = name.partition(":")
    return DeviceInfo(name=name, backend=backend, index=int(index or 0), vendor="v", kind=Kind.GPU, model="m",
                      memory=1 << 30, compute_units=1, max_work_group_size=64, fp64=True, driver_version="1",
                      stable_id=f"id-{name}")


@pytest.mark.parametrize(("name", "expected"), [
    ("cuda:3", {"HETERO_DEVICE": "cuda:0", "CUDA_VISIBLE_DEVICES": "3"}),
    ("rocm:1", {"HETERO_DEVICE": "rocm:0", "HIP_VISIBLE_DEVICES": "1"}),
    ("oneapi:2", {"HETERO_DEVICE": "oneapi:2", "ONEAPI_DEVICE_SELECTOR": "opencl:2"}),
    ("opencl:1", {"HETERO_DEVICE": "opencl:1"}),
    ("cpu", {"HETERO_DEVICE": "cpu"}),
])
def test_device_env_sets_the_vendor_visibility_variable(name: str, expected: dict[str, str]) -> None:
    assert device_env(info(name)) == expected


def test_replacement_prefers_another_device_then_the_least_loaded() -> None:
    a, b, c = info("cuda:0"), info("cuda:1"), info("cuda:2")
    assert replacement(a, "spread", [a, b, c], Counter({"cuda:1": 2})) == c
    assert replacement(a, "spread", [a, b, c], Counter()) == b
    assert replacement(a, "binpack", [a, b, c], Counter({"cuda:2": 1})) == c
    assert replacement(a, "spread", [a], Counter()) == a  # the only device left: same one
    with pytest.raises(LaunchError, match="no usable device to restart the worker of cuda:0"):
        replacement(a, "spread", [], Counter())


def test_assign_spreads_over_candidates_and_names_the_remedy_when_none() -> None:
    a, b = info("cpu"), info("opencl:0")
    assert [d.name for d in assign(3, "spread", [a, b])] == ["cpu", "opencl:0", "cpu"]
    with pytest.raises(LaunchError, match="hetero quarantine"):
        assign(1, "spread", [])


def test_what_the_launcher_itself_holds_is_not_its_workers_load() -> None:
    """The workers run in processes of their own: memory the launcher's process keeps on a
    device (a probe buffer, a cached constant; in the test session, arrays earlier tests left)
    must not send every worker elsewhere."""
    from hetero.scheduler.usage import LEDGER

    a, b = info("cpu"), info("opencl:0")
    LEDGER.note_outside("opencl:0", 4096)
    try:
        assert [d.name for d in assign(3, "spread", [a, b])] == ["cpu", "opencl:0", "cpu"]
        assert [d.name for d in assign(2, "binpack", [b, a])] == ["opencl:0", "opencl:0"]
    finally:
        LEDGER.forget_outside("opencl:0", 4096)


def test_unhealthy_devices_are_passed_over(monkeypatch: pytest.MonkeyPatch) -> None:
    a, b, c = info("opencl:0"), info("opencl:1"), info("cpu")
    monkeypatch.setattr(launch_assign, "healthy", lambda device: device.name != "opencl:1")
    assert [d.name for d in assign(2, "spread", [a, b, c])] == ["opencl:0", "cpu"]
    assert replacement(a, "spread", [a, b, c], Counter()) == c


def test_useful_time_counts_only_steps_that_were_kept() -> None:
    progress = Progress([(0.0, 1), (1.0, 2), (2.0, 3), (3.0, 4)])
    assert progress.useful_seconds(None) == 3.0
    assert progress.useful_seconds(2) == 1.0  # steps 3 and 4 are redone after the restart
    assert progress.last_kept_time(2) == 1.0 and progress.last_kept_time(0) is None


def test_goodput_is_useful_time_over_wall_time_of_all_workers() -> None:
    summary = Summary(nproc=2)
    assert summary.goodput() is None  # no heartbeats: unknown, not zero
    summary.ended = summary.started + 10.0
    summary.close_incarnation(Progress([(0.0, 1), (4.0, 5)]), None)
    summary.close_incarnation(Progress([(0.0, 1), (6.0, 7)]), None)
    assert summary.goodput() == pytest.approx(10.0 / 20.0, rel=0.01)
    summary.faults["crash"] += 1
    table = summary.table(0, None)
    assert "50.0%" in table
    assert "crash: 1" in table


def test_event_log_lines_have_wall_and_monotonic_time(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    log = EventLog(path)
    log.emit("worker_started", worker=0, device="cpu")
    log.close()
    append_event(path, "worker_exited", worker=0, returncode=0)
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert [r["event"] for r in records] == ["worker_started", "worker_exited"]
    assert all(isinstance(r["time"], float) and isinstance(r["monotonic"], float) for r in records)
    assert records[1]["monotonic"] >= records[0]["monotonic"]


def test_prometheus_metrics_have_the_documented_names() -> None:
    pytest.importorskip("prometheus_client")
    from hetero.launcher.metrics import PrometheusMetrics

    metrics = PrometheusMetrics()
    metrics.inc_restarts()
    metrics.inc_fault("device-lost", "oneapi:0")
    metrics.set_quarantined("oneapi:0", True)
    metrics.observe_recovery(1.5)
    metrics.set_goodput(0.75)
    metrics.add_launches("cpu", 40)
    metrics.add_host_fallbacks("oneapi:0", 3)
    text = metrics.exposition().decode()
    for line in ("hetero_worker_restarts_total 1.0", 'hetero_faults_total{class="device-lost",device="oneapi:0"} 1.0',
                 'hetero_device_quarantined{device="oneapi:0"} 1.0', "hetero_recovery_seconds_count 1.0",
                 "hetero_goodput_ratio 0.75", 'hetero_kernel_launches_total{device="cpu"} 40.0',
                 'hetero_host_fallbacks_total{device="oneapi:0"} 3.0'):
        assert line in text


def test_heartbeats_carry_launches_and_host_fallbacks_into_the_metrics(tmp_path: Path) -> None:
    from hetero.launcher.config import LaunchConfig
    from hetero.launcher.metrics import Metrics
    from hetero.launcher.supervisor import Supervisor
    from hetero.launcher.worker_handle import Worker

    class Recording(Metrics):
        def __init__(self) -> None:
            self.seen: list[tuple[str, str, int]] = []

        def add_launches(self, device: str, count: int) -> None:
            self.seen.append(("launches", device, count))

        def add_host_fallbacks(self, device: str, count: int) -> None:
            self.seen.append(("host_fallbacks", device, count))

    metrics = Recording()
    script = tmp_path / "x.py"
    script.write_text("")
    supervisor = Supervisor(LaunchConfig((str(script),), tmp_path / "run", tmp_path / "ckpt", None), metrics)
    worker = Worker(0, info("oneapi:0"), tmp_path / "ckpt", heartbeat_file=tmp_path / "beat.json")
    for mtime, (launches, fallbacks) in enumerate(((10, 2), (15, 2), (15, 5))):
        worker.heartbeat_file.write_text(json.dumps({"step": mtime, "launches": launches, "host_fallbacks": fallbacks}))
        os.utime(worker.heartbeat_file, ns=(mtime * 10**9, mtime * 10**9))
        supervisor._read_heartbeat(worker, float(mtime))
    assert metrics.seen == [("launches", "oneapi:0", 10), ("host_fallbacks", "oneapi:0", 2),
                            ("launches", "oneapi:0", 5), ("host_fallbacks", "oneapi:0", 3)]


@pytest.mark.parametrize(("argv", "message"), [
    ([], "name a script"),
    (["missing.py"], "script 'missing.py' not found"),
    (["--nproc", "0", "x.py"], "--nproc must be at least 1"),
    (["--nnodes", "2", "x.py"], "--nnodes > 1 needs --rdzv-endpoint"),
    (["--policy", "fastest", "x.py"], "invalid choice"),
])
def test_bad_arguments_exit_2_and_say_why(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        run_cli.main(argv)
    assert exit_info.value.code == 2
    assert message in capsys.readouterr().err


def test_fault_reports_are_classified_when_the_worker_did_not_say() -> None:
    told = classify_report({"fault_class": "degraded", "quarantine": True, "ttl": 60})
    assert told == ("degraded", True, 60)
    lost = classify_report({"error_type": "DeviceLostError", "message": "gone", "backend": "opencl",
                            "device": "opencl:0", "code": -2})
    assert lost.fault_class == "device-lost" and lost.quarantine
    oom = classify_report({"error_type": "DeviceOutOfMemoryError", "message": "full", "backend": "cuda",
                           "device": "cuda:0", "code": 2})
    assert oom.fault_class == "recoverable" and not oom.quarantine
    unknown = classify_report({"error_type": "NotAnError"})
    assert unknown == ("context-corrupting", True, None)


@pytest.mark.parametrize("argv, command", [
    (["-m", "pkg.train", "--steps", "60", "--lr", "0.1"], ("-m", "pkg.train", "--steps", "60", "--lr", "0.1")),
    (["--devices", "cpu", "-m", "pkg.train", "--devices", "x"], ("-m", "pkg.train", "--devices", "x")),
    (["--nproc", "2", "SCRIPT", "-m", "y", "--steps", "3"], ("SCRIPT", "-m", "y", "--steps", "3")),
    (["-m", "pkg.train"], ("-m", "pkg.train")),
])
def test_a_modules_arguments_are_its_own_as_after_python_m(argv: list[str], command: tuple[str, ...],
                                                          tmp_path: Path) -> None:
    # `hetero-run -m pkg.train --steps 60` said "unrecognized arguments: --steps": everything after the
    # module's name is the module's, as with python -m (and after a script's name, the script's).
    script = tmp_path / "train.py"
    script.write_text("")
    argv = [str(script) if a == "SCRIPT" else a for a in argv]
    parser = run_cli.build_parser()
    config = run_cli.build_config(parser, run_cli.parse_args(parser, ["--run-dir", str(tmp_path), *argv]))
    assert config.command == tuple(str(script) if a == "SCRIPT" else a for a in command)
