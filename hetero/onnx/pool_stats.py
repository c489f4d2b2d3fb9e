"""What a pool counts: requests, failures and retries, and latency percentiles per member."""

from __future__ import annotations

import collections
import threading
from typing import Any

import numpy as np

#: Latencies kept per member for the percentiles (the most recent ones).
WINDOW = 10_000


class MemberStats:
    """One member's counts and its recent latencies (seconds). Thread-safe."""

    def __init__(self, member: str, device: str) -> None:
        self.member = member
        self.device = device
        self.requests = 0  # attempts that answered
        self.failures = 0  # attempts that failed
        self._latencies: collections.deque[float] = collections.deque(maxlen=WINDOW)
        self._lock = threading.Lock()

    def answered(self, seconds: float) -> None:
        with self._lock:
            self.requests += 1
            self._latencies.append(seconds)

    def failed(self) -> None:
        with self._lock:
            self.failures += 1

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            latencies = np.array(self._latencies) * 1e3
            requests, failures = self.requests, self.failures
        p50, p90, p99 = (np.percentile(latencies, [50, 90, 99]).tolist() if latencies.size else [float("nan")] * 3)
        return {"device": self.device, "requests": requests, "failures": failures,
                "p50_ms": p50, "p90_ms": p90, "p99_ms": p99}


class PoolStats:
    """The pool's totals: requests asked, answered, failed for good; attempts retried."""

    def __init__(self) -> None:
        self.requests = 0
        self.answered = 0
        self.failures = 0
        self.retries = 0
        self.rejoins = 0
        self.probe_failures = 0  # rejoin probes that failed (the device stayed out)
        self._lock = threading.Lock()

    def add(self, field: str, count: int = 1) -> None:
        with self._lock:
            setattr(self, field, getattr(self, field) + count)

    def as_dict(self) -> dict[str, int]:
        with self._lock:
            return {"requests": self.requests, "answered": self.answered, "failures": self.failures,
                    "retries": self.retries, "rejoins": self.rejoins, "probe_failures": self.probe_failures}


__all__ = ["WINDOW", "MemberStats", "PoolStats"]
