"""Prometheus metrics of ``hetero serve`` (``GET /metrics``), on a private registry (nothing of the
process's default one leaks in):

==================================================== ========= ==========================================
metric                                               type      meaning
==================================================== ========= ==========================================
hetero_serve_requests_total{model,outcome}           counter   inference requests by outcome: ok,
                                                               invalid (400/404/413), unavailable
                                                               (503: no device answered), error (500)
hetero_serve_request_seconds{model}                  histogram inference request time, body read to answer
hetero_serve_inflight{model}                         gauge     inference requests being handled
hetero_pool_requests_total{member,device}            counter   requests each pool member ran
hetero_pool_failures_total{member,device}            counter   requests each pool member failed
hetero_pool_retries_total                            counter   requests the pool sent to another member
hetero_pool_member_healthy{member,device}            gauge     1 while the member takes requests
hetero_build_info{version,python,platform}          gauge     always 1: hetero's version, Python and platform
==================================================== ========= ==========================================

The ``hetero_pool_*`` families are read from the model's ``stats()`` and ``health()`` at scrape time.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from hetero.core.build_info import BUILD_INFO_HELP, BUILD_INFO_LABELS, BUILD_INFO_METRIC, build_labels
from hetero.serve.servable import Servable

log = logging.getLogger(__name__)

REQUEST_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
#: The ``outcome`` label of each answer status.
OUTCOMES = {200: "ok", 400: "invalid", 404: "invalid", 413: "invalid", 503: "unavailable", 500: "error"}


def outcome_of(status: int) -> str:
    """The ``outcome`` label of an HTTP status."""
    return OUTCOMES.get(status, "ok" if status < 400 else "invalid" if status < 500 else "error")


class PoolCollector(Collector):
    """The ``hetero_pool_*`` families, read from the model when scraped. A model whose ``stats()`` or
    ``health()`` raises yields none of them (logged), so a scrape still answers."""

    def __init__(self, model: Servable) -> None:
        self.model = model

    def _families(self) -> tuple[CounterMetricFamily, CounterMetricFamily, CounterMetricFamily, GaugeMetricFamily]:
        return (CounterMetricFamily("hetero_pool_requests", "Requests each pool member ran", labels=["member", "device"]),
                CounterMetricFamily("hetero_pool_failures", "Requests each pool member failed", labels=["member", "device"]),
                CounterMetricFamily("hetero_pool_retries", "Requests the pool sent on to another member"),
                GaugeMetricFamily("hetero_pool_member_healthy", "1 while the pool member takes requests",
                                  labels=["member", "device"]))

    def describe(self) -> Iterator[Metric]:
        # Without describe() the registry would call collect(), and so the model, at registration.
        return iter(self._families())

    def collect(self) -> Iterator[Metric]:
        try:
            stats: dict[str, Any] = self.model.stats()
            health = self.model.health()
        except Exception:
            log.exception("model %r: stats() or health() failed; /metrics leaves out the hetero_pool_* metrics",
                          getattr(self.model, "name", "?"))
            return
        requests, failures, retries, healthy = self._families()
        for member, member_stats in (stats.get("members") or {}).items():
            device = str(member_stats.get("device", ""))
            requests.add_metric([str(member), device], float(member_stats.get("requests", 0)))
            failures.add_metric([str(member), device], float(member_stats.get("failures", 0)))
        retries.add_metric([], float(stats.get("retries", 0)))
        for entry in health:
            healthy.add_metric([str(entry.get("member", "")), str(entry.get("device", ""))],
                               1.0 if entry.get("healthy") else 0.0)
        yield from (requests, failures, retries, healthy)


class ServeMetrics:
    """The server's metrics in a private registry; ``exposition()`` is what a scrape returns."""

    def __init__(self, model: Servable) -> None:
        self.model_name = model.name
        self.registry = CollectorRegistry()
        self.requests = Counter("hetero_serve_requests", "Inference requests by outcome (ok, invalid, unavailable, error)",
                                ["model", "outcome"], registry=self.registry)
        self.seconds = Histogram("hetero_serve_request_seconds", "Seconds from an inference request to its answer",
                                 ["model"], buckets=REQUEST_BUCKETS, registry=self.registry)
        self.inflight = Gauge("hetero_serve_inflight", "Inference requests being handled", ["model"],
                              registry=self.registry)
        self.inflight.labels(model.name).set(0)
        self.build_info = Gauge(BUILD_INFO_METRIC, BUILD_INFO_HELP, BUILD_INFO_LABELS, registry=self.registry)
        self.build_info.labels(**build_labels()).set(1)
        self.registry.register(PoolCollector(model))

    def observe(self, status: int, seconds: float) -> None:
        """Count one inference request answered with ``status`` after ``seconds``."""
        self.requests.labels(self.model_name, outcome_of(status)).inc()
        self.seconds.labels(self.model_name).observe(seconds)

    def set_inflight(self, count: int) -> None:
        self.inflight.labels(self.model_name).set(count)

    def exposition(self) -> bytes:
        """The Prometheus text format of every metric."""
        return bytes(generate_latest(self.registry))


__all__ = ["PoolCollector", "ServeMetrics", "outcome_of"]
