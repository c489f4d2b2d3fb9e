"""docs/grafana/hetero-dashboard.json queries only metrics that hetero-run and hetero serve export,
and shows every one they export: its names are checked against real expositions of both services'
registries, so the dashboard cannot drift from the code."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from hetero.launcher.state import WorkerState

pytest.importorskip("prometheus_client")
pytest.importorskip("aiohttp")  # hetero.serve's metrics live beside its server
from prometheus_client.parser import text_string_to_metric_families

DASHBOARD = Path(__file__).resolve().parent.parent / "docs" / "grafana" / "hetero-dashboard.json"
METRIC = re.compile(r"\bhetero_[a-z0-9_]+")


def _panels(panels: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
    for panel in panels:
        yield panel
        yield from _panels(panel.get("panels", []))  # a collapsed row keeps its panels inside


def _queries(dashboard: dict[str, Any]) -> list[str]:
    exprs = [target["expr"] for panel in _panels(dashboard["panels"]) for target in panel.get("targets", [])]
    for variable in dashboard.get("templating", {}).get("list", []):
        query = variable.get("query")
        exprs.append(query.get("query", "") if isinstance(query, dict) else str(query or ""))
    return exprs


def _exported() -> tuple[set[str], set[str]]:
    """(sample names, family names) of both services, every metric given a value."""
    from hetero.launcher.metrics import PrometheusMetrics, WorkerView
    from hetero.serve.metrics import ServeMetrics
    from tests.fakes.servable import NumpyServable

    run = PrometheusMetrics()
    run.inc_restarts()
    run.inc_fault("device-lost", "cuda:0")
    run.set_quarantined("cuda:0", True)
    run.observe_recovery(1.0)
    run.set_goodput(0.5)
    run.add_launches("cpu", 1)
    run.add_host_fallbacks("cpu", 1)
    run.watch_workers(lambda: [WorkerView(0, "cpu", WorkerState.HEALTHY, 0.1)])
    serve = ServeMetrics(NumpyServable())
    serve.observe(200, 0.01)
    samples: set[str] = set()
    families: set[str] = set()
    for text in (run.exposition(), serve.exposition()):
        for family in text_string_to_metric_families(text.decode()):
            if family.name.endswith("_created"):  # a counter's start time, its own family in this format
                continue
            families.add(family.name)
            samples |= {s.name for s in family.samples if not s.name.endswith("_created")}
    return samples, families


@pytest.fixture(scope="module")
def dashboard() -> dict[str, Any]:
    return json.loads(DASHBOARD.read_text(encoding="utf-8"))


def test_every_metric_the_dashboard_queries_is_exported(dashboard: dict[str, Any]) -> None:
    samples, _ = _exported()
    used = {name for expr in _queries(dashboard) for name in METRIC.findall(expr)}
    assert used, "the dashboard queries no hetero metric"
    assert used <= samples, f"queried but never exported: {sorted(used - samples)}"


def test_every_exported_metric_has_a_panel(dashboard: dict[str, Any]) -> None:
    _, families = _exported()
    used = {name for expr in _queries(dashboard) for name in METRIC.findall(expr)}
    shown = {family for family in families if any(name == family or name.startswith(family + "_") for name in used)}
    assert shown == families, f"exported but on no panel: {sorted(families - shown)}"


def test_the_dashboard_is_importable_anywhere(dashboard: dict[str, Any]) -> None:
    panels = list(_panels(dashboard["panels"]))
    ids = [panel["id"] for panel in panels]
    assert len(ids) == len(set(ids)) and dashboard["uid"] and dashboard["title"]
    assert all({"h", "w", "x", "y"} <= set(panel["gridPos"]) for panel in panels)
    assert dashboard["templating"]["list"][0]["name"] == "datasource"  # no hard-coded data source
    targets = [target for panel in panels for target in panel.get("targets", [])]
    assert targets and all(target["datasource"]["uid"] == "${datasource}" for target in targets)
