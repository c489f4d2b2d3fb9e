"""``hetero top``'s data and its one-frame output: the Prometheus text it reads, a hetero-run run
directory, the quarantine with time left, the devices, and ``--once`` against real endpoints of
``hetero-run`` and ``hetero serve`` on 127.0.0.1 (the live view in a terminal: test_top_tmux.py)."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hetero
from hetero.cli.main import main
from hetero.cli.prometheus_text import Scrape, metrics_url, parse, parse_tolerant, scrape
from hetero.cli.top_devices import DeviceWatch, QuarantineRow, duration, quarantine_rows
from hetero.cli.top_endpoint import EndpointView, EndpointWatch
from hetero.cli.top_gather import Frame, Gatherer, launches, merge_workers
from hetero.cli.top_run_dir import RunDirWatch, RunReading, WorkerRow
from hetero.cli.top_view import render

ROOT = Path(__file__).resolve().parent.parent
SERVE_TEXT = """# TYPE hetero_serve_requests_total counter
hetero_serve_requests_total{{model="linear",outcome="ok"}} {ok}
hetero_serve_requests_total{{model="linear",outcome="error"}} {error}
hetero_serve_requests_total{{model="linear",outcome="invalid"}} 1
hetero_serve_inflight{{model="linear"}} 2
hetero_pool_member_healthy{{member="cpu#0",device="cpu"}} 1
hetero_pool_member_healthy{{member="oneapi:0#0",device="oneapi:0"}} 0
hetero_pool_requests_total{{member="cpu#0",device="cpu"}} {ok}
"""


def _scrape(text: str) -> Scrape:
    return Scrape("http://127.0.0.1:1/metrics", samples=tuple(parse(text)))


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _top(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``hetero top ARGS`` as a user runs it (this tree's code, a wide terminal for the tables)."""
    environment = {**os.environ, "PYTHONPATH": str(ROOT), "COLUMNS": "160", **(env or {})}
    return subprocess.run([sys.executable, "-m", "hetero.cli.main", "top", *args], capture_output=True, text=True, check=False,
                          timeout=120, env=environment)


# -- the Prometheus text ------------------------------------------------------------------
def test_the_tolerant_parser_keeps_the_lines_that_read_and_skips_the_rest() -> None:
    lines = ['# HELP a_total help', 'a_total{device="cuda:0",why="say \\"hi\\"\\n"} 3', 'not a sample {', '',
             'b 1e3 1700000000000', 'c NaN', 'd{x="1"} not-a-number']
    found = list(parse_tolerant(lines))
    assert [(s.name, dict(s.labels)) for s in found] == [("a_total", {"device": "cuda:0", "why": 'say "hi"\n'}),
                                                         ("b", {}), ("c", {})]
    assert found[0].value == 3.0 and found[1].value == 1000.0 and math.isnan(found[2].value)
    assert parse("\n".join(lines))[:2] == found[:2]  # prometheus_client refuses this text: the tolerant parser reads it


def test_metrics_urls_get_a_scheme_and_a_path_when_missing() -> None:
    assert metrics_url("127.0.0.1:9400") == "http://127.0.0.1:9400/metrics"
    assert metrics_url("http://127.0.0.1:8000") == "http://127.0.0.1:8000/metrics"
    assert metrics_url("http://127.0.0.1:8000/custom") == "http://127.0.0.1:8000/custom"


def test_an_endpoint_that_does_not_answer_is_an_error_not_a_traceback() -> None:
    closed = scrape(f"http://127.0.0.1:{_free_port()}/metrics", timeout=2.0)
    assert closed.samples == () and closed.error is not None and closed.error.startswith("unreachable")
    assert scrape("file:///etc/passwd").error == "not an http(s) URL"
    assert EndpointWatch(f"http://127.0.0.1:{_free_port()}/metrics", timeout=2.0).read().error


# -- an endpoint's numbers ----------------------------------------------------------------
def test_hetero_run_metrics_become_workers_restarts_faults_and_launches() -> None:
    pytest.importorskip("prometheus_client")
    from hetero.launcher.metrics import PrometheusMetrics, WorkerView
    from hetero.launcher.state import WorkerState

    metrics = PrometheusMetrics()
    metrics.inc_restarts()
    metrics.inc_fault("device-lost", "oneapi:0")
    metrics.set_quarantined("oneapi:0", True)
    metrics.set_goodput(0.5)
    metrics.add_launches("cpu", 40)
    metrics.watch_workers(lambda: [WorkerView(1, "cpu", WorkerState.RESTARTING, None),
                                   WorkerView(0, "cpu", WorkerState.HEALTHY, 1.5)])
    view = EndpointWatch("unused").view(_scrape(metrics.exposition().decode()), now=0.0)
    assert view.error is None and view.is_run and not view.is_server
    assert view.workers == (WorkerRow(0, "cpu", "healthy", heartbeat_age=1.5), WorkerRow(1, "cpu", "restarting"))
    assert (view.restarts, view.faults, view.goodput) == (1.0, 1.0, 0.5)
    assert view.launches == {"cpu": 40} and view.quarantined == frozenset({"oneapi:0"})
    assert view.build is not None and hetero.__version__ in view.build


def test_request_rates_are_the_change_between_two_frames() -> None:
    watch = EndpointWatch("unused")
    first = watch.view(_scrape(SERVE_TEXT.format(ok=10, error=0)), now=100.0)
    assert first.is_server and not first.is_run
    (model,) = first.models
    assert (model.model, model.requests, model.rate, model.failed_rate, model.inflight) == ("linear", 11.0, None, None, 2.0)
    assert [(m.member, m.healthy, m.requests) for m in first.members] == [("cpu#0", True, 10.0), ("oneapi:0#0", False, 0.0)]
    (model,) = watch.view(_scrape(SERVE_TEXT.format(ok=30, error=4)), now=102.0).models
    assert (model.requests, model.rate, model.failed_rate) == (35.0, 12.0, 2.0)  # invalid requests are the client's
    (model,) = watch.view(_scrape(SERVE_TEXT.format(ok=1, error=0)), now=103.0).models
    assert model.rate is None  # the counters went back: the server restarted, no rate this frame


# -- a run directory ----------------------------------------------------------------------
def _events(path: Path, *records: dict[str, Any], partial: str = "") -> None:
    with path.open("a", encoding="utf-8") as file:
        file.write("".join(json.dumps(r) + "\n" for r in records) + partial)


def test_a_run_directory_gives_each_ranks_state_restarts_step_and_heartbeat(tmp_path: Path) -> None:
    events = tmp_path / "events.jsonl"
    _events(events, {"event": "run_started", "nproc": 2},
            {"event": "worker_started", "worker": 0, "device": "cpu", "restart": 0},
            {"event": "worker_started", "worker": 1, "device": "oneapi:0", "restart": 0},
            {"event": "fault_detected", "worker": 1, "device": "oneapi:0", "fault_class": "device-lost"},
            {"event": "worker_exited", "worker": 1, "device": "oneapi:0", "returncode": 75, "signal": None},
            {"event": "restart", "worker": 1, "from_device": "oneapi:0", "to_device": "cpu", "restart": 1,
             "group": False},
            {"event": "restart", "worker": 0, "from_device": "cpu", "to_device": "cpu", "restart": 1, "group": True},
            partial='{"event": "worker_started", "worker": 1, "dev')  # being written: read once complete
    now = 1_000.0
    (tmp_path / "heartbeat-1-0.json").write_text(json.dumps({"time": now - 50, "step": 3, "device": "oneapi:0",
                                                             "launches": 7}))
    (tmp_path / "heartbeat-0-1.json").write_text("{not json")
    watch = RunDirWatch(tmp_path)
    reading = watch.read(now)
    assert reading.note is None and (reading.restarts, reading.faults) == (1, 1)  # the group restart counts once
    assert reading.workers == (WorkerRow(0, "cpu", "restarting", 1), WorkerRow(1, "cpu", "restarting", 1))
    assert reading.launches == {"oneapi:0": 7}
    with events.open("a", encoding="utf-8") as file:
        file.write('ice": "cpu", "restart": 1}\n')
    (tmp_path / "heartbeat-1-1.json").write_text(json.dumps({"time": now - 0.5, "step": 4, "device": "cpu",
                                                             "launches": 2}))
    _events(events, {"event": "worker_exited", "worker": 0, "device": "cpu", "returncode": -9, "signal": "SIGKILL"},
            {"event": "finished", "returncode": 0})
    reading = watch.read(now)
    assert reading.workers == (WorkerRow(0, "cpu", "killed (SIGKILL)", 1),
                               WorkerRow(1, "cpu", "healthy", 1, step=4, heartbeat_age=0.5))
    assert reading.ended == "finished (exit 0)" and reading.launches == {"oneapi:0": 7, "cpu": 2}
    events.write_text(json.dumps({"event": "worker_started", "worker": 0, "device": "cpu", "restart": 0}) + "\n")
    assert [w.restarts for w in watch.read(now).workers] == [0]  # a shorter file: a new run, read from the start


def test_a_missing_run_directory_or_events_file_is_a_note(tmp_path: Path) -> None:
    assert "not a directory" in (RunDirWatch(tmp_path / "nowhere").read(0.0).note or "")
    assert "no events.jsonl" in (RunDirWatch(tmp_path).read(0.0).note or "")


def test_workers_merge_the_supervisors_view_with_the_run_directorys() -> None:
    run = RunReading(Path("run"), workers=(WorkerRow(0, "cpu", "healthy", 2, step=9, heartbeat_age=8.0),),
                     launches={"cpu": 5})
    live = EndpointView("u", workers=(WorkerRow(0, "oneapi:0", "healthy", heartbeat_age=0.3),),
                        launches={"oneapi:0": 11})
    assert merge_workers(run, [live]) == (WorkerRow(0, "oneapi:0", "healthy", 2, step=9, heartbeat_age=0.3),)
    assert merge_workers(run, []) == run.workers
    assert launches(run, [live]) == {"oneapi:0": 11} and launches(run, []) == {"cpu": 5}


# -- devices and the quarantine -----------------------------------------------------------
def test_time_left_reads_as_a_person_would_say_it() -> None:
    assert [duration(s) for s in (5, 245, 3 * 3600 + 420, 2 * 86400 + 4 * 3600)] == ["5s", "4m 05s", "3h 07m", "2d 04h"]
    row = QuarantineRow("cuda:0", "id", "degraded", "thermal", expires=1_000.0, drill=False)
    assert row.time_left(755.0) == "4m 05s" and row.time_left(1_000.0).startswith("expired")
    assert QuarantineRow("cuda:0", "id", "degraded", "", None, False).time_left(0.0) == "until released"


def test_quarantine_rows_include_a_runs_drill_entries(state_dir: Path, tmp_path: Path) -> None:
    from hetero.fault import quarantine

    quarantine.add("id-real", "maintenance", "degraded", ttl=600, name="cuda:0", quiet=True)
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    with quarantine.drill_scope(run_dir / quarantine.DRILL_FILE_NAME):
        quarantine.add("id-drill", "injected", "device-lost", ttl=60, name="cuda:1", injected=True, quiet=True)
    rows, note = quarantine_rows()
    assert note is None and [(r.name, r.drill) for r in rows] == [("cuda:0", False)]
    rows, note = quarantine_rows(run_dir)
    assert note is None and [(r.name, r.drill) for r in rows] == [("cuda:0", False), ("cuda:1", True)]
    assert rows[0].expires is not None and 590 < rows[0].expires - time.time() <= 600


def test_device_rows_say_health_quarantine_and_what_a_backend_cannot_count() -> None:
    watch = DeviceWatch()
    cpu = hetero.device("cpu")
    held = {cpu.stable_id: QuarantineRow("cpu", cpu.stable_id, "degraded", "", None, False)}
    rows = {row.name: row for row in watch.rows(held, {"cpu": 12})}
    assert rows["cpu"].health == str(cpu.health()) and rows["cpu"].quarantined
    assert rows["cpu"].memory_used is None and rows["cpu"].memory_total == cpu.memory  # the CPU backend reports no use
    assert rows["cpu"].launches == 12 and all(r.launches is None for name, r in rows.items() if name != "cpu")
    assert [d.name for d in watch.devices()] == [d.name for d in hetero.devices()]


def test_a_frame_renders_dashes_for_unknown_numbers_and_says_why_an_endpoint_is_missing() -> None:
    from rich.console import Console

    devices = DeviceWatch().rows({}, {})
    frame = Frame(0.0, tuple(devices), (), endpoints=(EndpointView("http://127.0.0.1:9/metrics", error="unreachable: refused"),))
    console = Console(width=160, record=True, color_system=None)
    console.print(render(frame, interval=1.0))
    text = console.export_text()
    assert "Devices" in text and "cpu" in text and "—" in text and "q quits" in text
    assert "Quarantine" in text and "no device is quarantined" in text
    assert "http://127.0.0.1:9/metrics" in text and "unreachable: refused" in text


# -- hetero top --once ----------------------------------------------------------------------
def test_interval_must_be_a_positive_number_of_seconds(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("0", "nan", "soon"):
        with pytest.raises(SystemExit) as exit_info:
            main(["top", "--interval", bad])
        assert exit_info.value.code == 2 and "seconds" in capsys.readouterr().err


@pytest.fixture
def run_endpoint() -> Iterator[tuple[str, Any]]:
    """A real hetero-run metrics endpoint (the launcher's own server) on 127.0.0.1, a free port."""
    pytest.importorskip("prometheus_client")
    from hetero.launcher.metrics import serve

    metrics = serve(0, "127.0.0.1")
    try:
        yield f"http://127.0.0.1:{metrics._server[0].server_port}/metrics", metrics
    finally:
        metrics.close()


def test_once_shows_a_live_hetero_run_endpoint_and_an_unreachable_one(run_endpoint: tuple[str, Any],
                                                                      tmp_path: Path) -> None:
    from hetero.launcher.metrics import WorkerView
    from hetero.launcher.state import WorkerState

    url, metrics = run_endpoint
    metrics.inc_restarts()
    metrics.inc_restarts()
    metrics.add_launches("cpu", 40)
    metrics.watch_workers(lambda: [WorkerView(0, "cpu", WorkerState.HEALTHY, 0.4)])
    dead = f"http://127.0.0.1:{_free_port()}/metrics"
    result = _top("--once", "--metrics", url, "--metrics", dead, env={"HETERO_STATE_DIR": str(tmp_path / "state")})
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Traceback" not in out + result.stderr
    assert "restarts 2" in out and "healthy" in out and "0.4s" in out and hetero.__version__ in out
    cpu_line = next(line for line in out.splitlines() if line.startswith("│ cpu "))
    assert "40" in cpu_line  # the launches the run's workers reported, in the devices table
    assert dead in out and "unreachable" in out


def test_once_shows_a_hetero_serve_endpoints_models_and_members(tmp_path: Path) -> None:
    pytest.importorskip("aiohttp")
    from prometheus_client import start_http_server

    from hetero.serve.metrics import ServeMetrics
    from tests.fakes.servable import NumpyServable

    served = ServeMetrics(NumpyServable())
    served.observe(200, 0.01)
    served.observe(500, 0.01)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=served.registry)
    try:
        result = _top("--once", "--metrics", f"127.0.0.1:{server.server_port}",
                      env={"HETERO_STATE_DIR": str(tmp_path / "state")})
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
    assert result.returncode == 0, result.stderr
    assert "hetero serve" in result.stdout and "linear" in result.stdout and "cpu#0" in result.stdout


def test_once_in_process_with_a_run_directory(state_dir: Path, tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    _events(tmp_path / "events.jsonl", {"event": "worker_started", "worker": 0, "device": "cpu", "restart": 0})
    assert main(["top", "--once", "--run-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "Devices" in out and "Quarantine" in out and "hetero-run" in out and "starting" in out


def test_gatherer_survives_a_broken_quarantine_store(state_dir: Path) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / "quarantine.json").write_text("{broken")
    frame = Gatherer().frame()
    assert frame.devices and frame.quarantine == ()

