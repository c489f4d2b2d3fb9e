"""What the services' Prometheus endpoints say beyond counts: ``hetero_build_info`` (which hetero,
on which Python and platform) from ``hetero-run`` and ``hetero serve``, and ``hetero-run``'s
``hetero_worker_state`` and ``hetero_worker_heartbeat_age_seconds``, read from the supervisor's
ranks when scraped."""

from __future__ import annotations

import platform
import time
import types
from pathlib import Path

import pytest

import hetero
from hetero.core.build_info import build_labels
from hetero.core.device import DeviceInfo, Kind
from hetero.launcher.state import WorkerState

pytest.importorskip("prometheus_client")
from prometheus_client.parser import text_string_to_metric_families


def _info(name: str) -> DeviceInfo:
    return DeviceInfo(name=name, backend=name.partition(":")[0], index=0, vendor="v", kind=Kind.CPU, model="m",
                      memory=1 << 30, compute_units=1, max_work_group_size=64, fp64=True, driver_version="1",
                      stable_id=f"id-{name}")


def _samples(text: bytes, name: str) -> list[tuple[dict[str, str], float]]:
    return [(dict(s.labels), s.value) for family in text_string_to_metric_families(text.decode())
            for s in family.samples if s.name == name]


def test_build_labels_name_this_hetero_python_and_platform() -> None:
    labels = build_labels()
    assert labels["version"] == hetero.__version__
    assert platform.python_version().startswith(labels["python"]) and labels["python"].count(".") == 2
    assert platform.system() in labels["platform"] and platform.machine() in labels["platform"]


def test_hetero_run_exports_build_info() -> None:
    from hetero.launcher.metrics import PrometheusMetrics

    assert _samples(PrometheusMetrics().exposition(), "hetero_build_info") == [(build_labels(), 1.0)]


def test_hetero_serve_exports_build_info() -> None:
    pytest.importorskip("aiohttp")
    from hetero.serve.metrics import ServeMetrics
    from tests.fakes.servable import NumpyServable

    assert _samples(ServeMetrics(NumpyServable()).exposition(), "hetero_build_info") == [(build_labels(), 1.0)]


def test_worker_state_is_one_per_rank_and_heartbeat_age_only_where_known() -> None:
    from hetero.launcher.metrics import PrometheusMetrics, WorkerView

    metrics = PrometheusMetrics()
    views = [WorkerView(0, "cpu", WorkerState.HEALTHY, 0.25), WorkerView(1, "oneapi:0", WorkerState.STARTING, None)]
    metrics.watch_workers(lambda: views)
    text = metrics.exposition()
    states = _samples(text, "hetero_worker_state")
    assert len(states) == 2 * len(WorkerState)  # every state of every rank: 1 for its own, 0 for the rest
    on = sorted((labels["rank"], labels["device"], labels["state"]) for labels, value in states if value == 1.0)
    assert on == [("0", "cpu", "healthy"), ("1", "oneapi:0", "starting")]
    assert _samples(text, "hetero_worker_heartbeat_age_seconds") == [({"rank": "0"}, 0.25)]
    views[0] = WorkerView(0, "cpu", WorkerState.RESTARTING, None)  # read at each scrape, not at registration
    restarted = _samples(metrics.exposition(), "hetero_worker_state")
    assert ({"rank": "0", "device": "cpu", "state": "restarting"}, 1.0) in restarted
    assert _samples(metrics.exposition(), "hetero_worker_heartbeat_age_seconds") == []


def test_the_supervisor_shows_its_ranks_to_a_scrape(tmp_path: Path) -> None:
    from hetero.launcher.config import LaunchConfig
    from hetero.launcher.metrics import PrometheusMetrics
    from hetero.launcher.supervisor import Supervisor
    from hetero.launcher.worker_handle import Worker

    script = tmp_path / "x.py"
    script.write_text("")
    metrics = PrometheusMetrics()
    supervisor = Supervisor(LaunchConfig((str(script),), tmp_path / "run", tmp_path / "ckpt", None), metrics)
    running = Worker(0, _info("cpu"), tmp_path / "ckpt")
    running.enter(WorkerState.STARTING)
    running.enter(WorkerState.HEALTHY)
    running.proc = types.SimpleNamespace(pid=0)  # type: ignore[assignment]  # alive, as far as the view asks
    running.progress.beats.append((time.monotonic() - 3.0, 7))
    done = Worker(1, _info("oneapi:0"), tmp_path / "ckpt")
    done.state = WorkerState.SUCCEEDED
    done.progress.beats.append((time.monotonic() - 100.0, 9))  # ended: its last heartbeat's age is not a hang
    supervisor.workers = [running, done]
    text = metrics.exposition()
    on = sorted((labels["rank"], labels["device"], labels["state"])
                for labels, value in _samples(text, "hetero_worker_state") if value == 1.0)
    assert on == [("0", "cpu", "healthy"), ("1", "oneapi:0", "succeeded")]
    ages = _samples(text, "hetero_worker_heartbeat_age_seconds")
    assert [labels for labels, _ in ages] == [{"rank": "0"}]
    assert 3.0 <= ages[0][1] < 60.0
