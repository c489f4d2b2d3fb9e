"""Prometheus metrics of a ``hetero-run`` run (``--metrics-port P``).

:class:`Metrics` is the no-op the supervisor calls when no port is given;
:func:`serve` returns :class:`PrometheusMetrics`, which imports ``prometheus-client`` only
then, keeps its own registry (nothing of the process's default one leaks in), and serves
it over HTTP at ``http://127.0.0.1:P/metrics`` (``--metrics-addr`` to bind another address,
e.g. ``0.0.0.0`` for a Prometheus server on another machine):

========================================== ========= ==================================================
metric                                     type      meaning
========================================== ========= ==================================================
hetero_worker_restarts_total               counter   restarts (a group restart counts once)
hetero_faults_total{class,device}          counter   failures by fault class (taxonomy class, crash,
                                                     hang, error) and device
hetero_device_quarantined{device}          gauge     1 while the device is quarantined
hetero_recovery_seconds                    histogram failure seen -> first heartbeat after the restart
hetero_goodput_ratio                       gauge     useful step time / wall time (see events)
hetero_kernel_launches_total{device}       counter   kernel launches workers reported in heartbeats
hetero_host_fallbacks_total{device}        counter   functions workers computed on the host for want of
                                                     a library on their device (linalg, fft on OpenCL)
hetero_worker_state{rank,device,state}     gauge     1 for the state each rank is in (a
                                                     :class:`WorkerState` value: init, starting,
                                                     healthy, restarting, succeeded, failed, stopped),
                                                     0 for the others
hetero_worker_heartbeat_age_seconds{rank}  gauge     seconds since a running rank's last heartbeat
                                                     (absent before its first)
hetero_build_info{version,python,platform} gauge     always 1: hetero's version, Python and platform
========================================== ========= ==================================================

The ``hetero_worker_*`` families are read from the supervisor's workers when scraped
(:meth:`Metrics.watch_workers`), so a heartbeat's age is as old as the scrape says.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from hetero.core.build_info import BUILD_INFO_HELP, BUILD_INFO_LABELS, BUILD_INFO_METRIC, build_labels
from hetero.launcher.state import WorkerState

RECOVERY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


@dataclasses.dataclass(frozen=True)
class WorkerView:
    """One rank as a scrape sees it: where it runs, its state, and its heartbeat's age."""

    rank: int
    device: str
    state: WorkerState
    heartbeat_age: float | None  # seconds since its last heartbeat; None: not running, or none yet


WorkerSource = Callable[[], Iterable[WorkerView]]


class Metrics:
    """Metrics that go nowhere (no ``--metrics-port``); the interface the supervisor uses."""

    def inc_restarts(self) -> None:
        pass

    def inc_fault(self, fault_class: str, device: str) -> None:
        pass

    def set_quarantined(self, device: str, quarantined: bool) -> None:
        pass

    def observe_recovery(self, seconds: float) -> None:
        pass

    def set_goodput(self, ratio: float) -> None:
        pass

    def add_launches(self, device: str, count: int) -> None:
        pass

    def add_host_fallbacks(self, device: str, count: int) -> None:
        pass

    def watch_workers(self, source: WorkerSource) -> None:
        """Read the ranks from ``source`` at each scrape (called once, by the supervisor)."""

    def close(self) -> None:
        pass


class WorkersCollector:
    """``hetero_worker_state`` and ``hetero_worker_heartbeat_age_seconds``, read from the
    supervisor when scraped (in the HTTP server's thread: ``source`` only reads)."""

    def __init__(self, source: WorkerSource) -> None:
        self.source = source

    def _families(self) -> tuple[Any, Any]:
        from prometheus_client.core import GaugeMetricFamily

        return (GaugeMetricFamily("hetero_worker_state", "1 for the state each hetero-run rank is in, 0 for the others",
                                  labels=["rank", "device", "state"]),
                GaugeMetricFamily("hetero_worker_heartbeat_age_seconds",
                                  "Seconds since a running rank's last heartbeat", labels=["rank"]))

    def describe(self) -> Iterator[Any]:
        return iter(self._families())  # so registering does not call the source

    def collect(self) -> Iterator[Any]:
        states, ages = self._families()
        for view in self.source():
            rank = str(view.rank)
            for state in WorkerState:
                states.add_metric([rank, view.device, state.value], 1.0 if state is view.state else 0.0)
            if view.heartbeat_age is not None:
                ages.add_metric([rank], view.heartbeat_age)
        yield from (states, ages)


class PrometheusMetrics(Metrics):
    """The metrics above in a private ``prometheus_client`` registry."""

    def __init__(self) -> None:
        from hetero.core.optional import require

        require("prometheus_client", extra="metrics", feature="hetero-run --metrics-port")
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        self.restarts = Counter("hetero_worker_restarts", "Worker restarts by hetero-run",
                                registry=self.registry)
        self.faults = Counter("hetero_faults", "Worker failures by fault class and device",
                              ["class", "device"], registry=self.registry)
        self.quarantined = Gauge("hetero_device_quarantined", "1 while the device is quarantined",
                                 ["device"], registry=self.registry)
        self.recovery = Histogram("hetero_recovery_seconds",
                                  "Seconds from a worker failure to its first heartbeat after restart",
                                  buckets=RECOVERY_BUCKETS, registry=self.registry)
        self.goodput = Gauge("hetero_goodput_ratio", "Useful step time / wall time", registry=self.registry)
        self.launches = Counter("hetero_kernel_launches", "Kernel launches reported by workers",
                                ["device"], registry=self.registry)
        self.host_fallbacks = Counter("hetero_host_fallbacks",
                                      "Functions workers computed on the host for want of a device library",
                                      ["device"], registry=self.registry)
        self.build_info = Gauge(BUILD_INFO_METRIC, BUILD_INFO_HELP, BUILD_INFO_LABELS, registry=self.registry)
        self.build_info.labels(**build_labels()).set(1)
        self._server: Any = None

    def inc_restarts(self) -> None:
        self.restarts.inc()

    def inc_fault(self, fault_class: str, device: str) -> None:
        self.faults.labels(fault_class, device).inc()

    def set_quarantined(self, device: str, quarantined: bool) -> None:
        self.quarantined.labels(device).set(1 if quarantined else 0)

    def observe_recovery(self, seconds: float) -> None:
        self.recovery.observe(seconds)

    def set_goodput(self, ratio: float) -> None:
        self.goodput.set(ratio)

    def add_launches(self, device: str, count: int) -> None:
        self.launches.labels(device).inc(count)

    def add_host_fallbacks(self, device: str, count: int) -> None:
        self.host_fallbacks.labels(device).inc(count)

    def watch_workers(self, source: WorkerSource) -> None:
        self.registry.register(WorkersCollector(source))

    def exposition(self) -> bytes:
        """The text format a scrape returns (for tests and ``--metrics-port`` users alike)."""
        from prometheus_client import generate_latest

        return bytes(generate_latest(self.registry))

    def close(self) -> None:
        if self._server is not None:
            server, thread = self._server
            server.shutdown()
            server.server_close()
            thread.join(timeout=2)
            self._server = None


def serve(port: int, addr: str = "127.0.0.1") -> PrometheusMetrics:
    """Start serving metrics on ``addr:port`` (a daemon thread); raises ``OSError`` naming the
    port when it is taken."""
    metrics = PrometheusMetrics()
    from prometheus_client import start_http_server

    try:
        metrics._server = start_http_server(port, addr=addr, registry=metrics.registry)
    except OSError as exc:
        raise OSError(exc.errno, f"cannot serve metrics on {addr}:{port}: {exc.strerror}; "
                                 "pick another --metrics-port (or --metrics-addr)") from exc
    return metrics
