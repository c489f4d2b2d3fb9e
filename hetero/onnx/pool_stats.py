"""What a pool counts beyond the router's per-member counts: its recent latencies per member, and
the rare events (requests that failed for good, retries, rejoins, failed probes)."""

from __future__ import annotations

import collections
import threading
from typing import Any

import numpy as np

#: Latencies kept per member for the percentiles (the most recent ones).
WINDOW = 10_000


class Latencies:
    """One member's recent latencies (seconds); ``add`` takes no lock (a deque's append is atomic)."""

    def __init__(self) -> None:
        self._seconds: collections.deque[float] = collections.deque(maxlen=WINDOW)
        self.add = self._seconds.append

    def percentiles_ms(self) -> dict[str, float]:
        values = np.array(list(self._seconds)) * 1e3
        p50, p90, p99 = (np.percentile(values, [50, 90, 99]).tolist() if values.size else [float("nan")] * 3)
        return {"p50_ms": p50, "p90_ms": p90, "p99_ms": p99}


class PoolEvents:
    """Counts of what happens off the fast path: requests failed for good, retried attempts,
    devices rejoined, rejoin probes failed."""

    FIELDS = ("failures", "retries", "rejoins", "probe_failures")

    def __init__(self) -> None:
        self._counts = dict.fromkeys(self.FIELDS, 0)
        self._lock = threading.Lock()

    def add(self, field: str) -> None:
        with self._lock:
            self._counts[field] += 1

    def as_dict(self) -> dict[str, Any]:
        with self._lock:
            return dict(self._counts)


__all__ = ["WINDOW", "Latencies", "PoolEvents"]
