"""Prometheus metrics of a ``hetero-run`` run (``--metrics-port P``).

:class:`Metrics` is the no-op the supervisor calls when no port is given;
:func:`serve` returns :class:`PrometheusMetrics`, which imports ``prometheus-client`` only
then, keeps its own registry (nothing of the process's default one leaks in), and serves
it over HTTP at ``http://127.0.0.1:P/metrics`` (``--metrics-addr`` to bind another address,
e.g. ``0.0.0.0`` for a Prometheus server on another machine):

================================== ========= =================================================
metric                             type      meaning
================================== ========= =================================================
hetero_worker_restarts_total       counter   restarts (a group restart counts once)
hetero_faults_total{class,device}  counter   failures by fault class (taxonomy class, crash,
                                             hang, error) and device
hetero_device_quarantined{device}  gauge     1 while the device is quarantined
hetero_recovery_seconds            histogram failure seen -> first heartbeat after the restart
hetero_goodput_ratio               gauge     useful step time / wall time (see events)
hetero_kernel_launches_total{device} counter kernel launches workers reported in heartbeats
hetero_host_fallbacks_total{device} counter functions workers computed on the host for want of
                                             a library on their device (linalg, fft on OpenCL)
================================== ========= =================================================
"""

from __future__ import annotations

from typing import Any

RECOVERY_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0)


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

    def close(self) -> None:
        pass


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
