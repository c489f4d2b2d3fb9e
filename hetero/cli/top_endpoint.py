"""What ``hetero top --metrics URL`` reads of a running ``hetero-run`` (``--metrics-port``) or
``hetero serve`` (``/metrics``): its Prometheus metrics, scraped each frame, turned into the
workers, restarts, faults and launches of a run, and the request rates and pool members of a
server. Rates are the change of a counter between two frames (none on the first)."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Mapping

from hetero.cli.prometheus_text import Scrape, scrape
from hetero.cli.top_run_dir import WorkerRow

#: Outcomes of ``hetero_serve_requests_total`` that are the server's failure, not the client's.
FAILED_OUTCOMES = ("error", "unavailable")


@dataclasses.dataclass(frozen=True)
class ModelRow:
    """A served model: requests so far, and per second since the last frame (None on the first)."""

    model: str
    requests: float
    rate: float | None
    failed_rate: float | None
    inflight: float | None


@dataclasses.dataclass(frozen=True)
class MemberRow:
    """A pool member of ``hetero serve``."""

    member: str
    device: str
    healthy: bool
    requests: float


@dataclasses.dataclass(frozen=True)
class EndpointView:
    """One scrape of one endpoint, read; ``error`` set (and nothing else) when it did not answer."""

    url: str
    error: str | None = None
    build: str | None = None  # "hetero 0.2.0, Python 3.11.7 on Linux-..."
    workers: tuple[WorkerRow, ...] = ()
    restarts: float | None = None
    faults: float | None = None
    goodput: float | None = None
    launches: Mapping[str, int] = dataclasses.field(default_factory=dict)
    quarantined: frozenset[str] = frozenset()
    models: tuple[ModelRow, ...] = ()
    members: tuple[MemberRow, ...] = ()

    @property
    def is_run(self) -> bool:
        return self.restarts is not None or bool(self.workers)

    @property
    def is_server(self) -> bool:
        return bool(self.models or self.members)


class EndpointWatch:
    """One endpoint, scraped frame after frame (keeping the last counts for rates)."""

    def __init__(self, url: str, timeout: float = 2.0) -> None:
        self.url = url
        self.timeout = timeout
        self._last: tuple[float, dict[str, tuple[float, float]]] | None = None  # (when, model -> (all, failed))

    def read(self) -> EndpointView:
        return self.view(scrape(self.url, self.timeout), time.monotonic())

    def view(self, found: Scrape, now: float) -> EndpointView:
        """``found`` (scraped at monotonic time ``now``) as the view shows it."""
        if found.error is not None:
            return EndpointView(found.url, error=found.error)
        return EndpointView(
            found.url, build=_build(found), workers=_workers(found), restarts=_total(found, "hetero_worker_restarts_total"),
            faults=_total(found, "hetero_faults_total"), goodput=_total(found, "hetero_goodput_ratio"),
            launches={s.labels.get("device", "?"): int(s.value) for s in found.values("hetero_kernel_launches_total")},
            quarantined=frozenset(s.labels.get("device", "?") for s in found.values("hetero_device_quarantined")
                                  if s.value == 1),
            models=self._models(found, now), members=_members(found))

    def _models(self, found: Scrape, now: float) -> tuple[ModelRow, ...]:
        counts: dict[str, tuple[float, float]] = {}
        for sample in found.values("hetero_serve_requests_total"):
            model = sample.labels.get("model", "?")
            every, failed = counts.get(model, (0.0, 0.0))
            counts[model] = (every + sample.value,
                             failed + (sample.value if sample.labels.get("outcome") in FAILED_OUTCOMES else 0.0))
        inflight = {s.labels.get("model", "?"): s.value for s in found.values("hetero_serve_inflight")}
        last, self._last = self._last, (now, counts)
        rows = []
        for model in sorted(set(counts) | set(inflight)):
            every, failed = counts.get(model, (0.0, 0.0))
            rate = failed_rate = None
            if last is not None and now > last[0] and model in last[1]:
                elapsed, (every_then, failed_then) = now - last[0], last[1][model]
                if every >= every_then and failed >= failed_then:  # else the server restarted: no rate this frame
                    rate, failed_rate = (every - every_then) / elapsed, (failed - failed_then) / elapsed
            rows.append(ModelRow(model, every, rate, failed_rate, inflight.get(model)))
        return tuple(rows)


def _total(found: Scrape, name: str) -> float | None:
    samples = found.values(name)
    return sum(s.value for s in samples) if samples else None


def _build(found: Scrape) -> str | None:
    info = found.values("hetero_build_info")
    if not info:
        return None
    labels = info[0].labels
    return f"hetero {labels.get('version', '?')}, Python {labels.get('python', '?')} on {labels.get('platform', '?')}"


def _workers(found: Scrape) -> tuple[WorkerRow, ...]:
    ages = {s.labels.get("rank"): s.value for s in found.values("hetero_worker_heartbeat_age_seconds")}
    rows = []
    for sample in found.values("hetero_worker_state"):
        rank = sample.labels.get("rank", "")
        if sample.value == 1 and rank.isdigit():
            rows.append(WorkerRow(int(rank), sample.labels.get("device", "?"), sample.labels.get("state", "?"),
                                  heartbeat_age=ages.get(rank)))
    return tuple(sorted(rows, key=lambda row: row.rank))


def _members(found: Scrape) -> tuple[MemberRow, ...]:
    requests = {(s.labels.get("member", ""), s.labels.get("device", "")): s.value
                for s in found.values("hetero_pool_requests_total")}
    return tuple(MemberRow(s.labels.get("member", ""), s.labels.get("device", ""), s.value == 1,
                           requests.get((s.labels.get("member", ""), s.labels.get("device", "")), 0.0))
                 for s in found.values("hetero_pool_member_healthy"))
