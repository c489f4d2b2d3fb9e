"""The arithmetic of hetero's cost model: size buckets, robust bucket medians, and the
least-squares fits ``t = a·n^b`` (kernels) and ``t = latency + bytes / bandwidth`` (copies).

Pure functions over numbers (NumPy only), so they are tested without any device.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from collections.abc import Sequence

import numpy as np

#: Samples kept per bucket: the median of the most recent ones is the bucket's time, so
#: one spike (a page fault, another process, a frequency change) cannot move it.
RECENT_SAMPLES = 15


def size_bucket(n: int) -> int:
    """The power-of-two bucket of ``n`` work-items: ``k`` such that ``2**k <= n < 2**(k+1)``
    (0 for ``n <= 1``)."""
    return max(int(n), 1).bit_length() - 1


def bucket_point(samples: Sequence[tuple[int, float]]) -> tuple[float, float]:
    """One bucket's representative ``(n, seconds)``: medians of the recent samples' sizes and
    of their times. A single outlier among three or more samples does not move it."""
    if not samples:
        raise ValueError("a bucket needs at least one sample")
    recent = samples[-RECENT_SAMPLES:]
    return float(statistics.median(n for n, _ in recent)), float(statistics.median(t for _, t in recent))


@dataclasses.dataclass(frozen=True)
class PowerLaw:
    """``seconds = a * n ** b``, fitted from ``points`` bucket medians."""

    a: float
    b: float
    points: int

    def __call__(self, n: float) -> float:
        return self.a * max(float(n), 1.0) ** self.b

    def as_dict(self) -> dict[str, float | int]:
        return {"a": self.a, "b": self.b, "points": self.points}


def fit_power_law(points: Sequence[tuple[float, float]]) -> PowerLaw | None:
    """Least squares on ``log t = log a + b log n`` over ``(n, seconds)`` points.

    One point gives a linear law through it (``b = 1``); none, or only non-positive times,
    gives None. The exponent is clamped to ``[0, 3]``: timing noise at small sizes must
    not make a prediction fall as ``n`` grows, and no kernel here grows faster than n³."""
    usable = [(n, t) for n, t in points if n > 0 and t > 0 and math.isfinite(t)]
    if not usable:
        return None
    if len({n for n, _ in usable}) == 1:
        n, t = usable[0][0], statistics.median(t for _, t in usable)
        return PowerLaw(a=t / n, b=1.0, points=len(usable))
    x = np.log(np.array([n for n, _ in usable], dtype=np.float64))
    y = np.log(np.array([t for _, t in usable], dtype=np.float64))
    slope, intercept = np.polyfit(x, y, 1)
    b = float(min(max(slope, 0.0), 3.0))
    if b != slope:  # refit the intercept for the clamped exponent
        intercept = float(np.mean(y - b * x))
    return PowerLaw(a=float(math.exp(intercept)), b=b, points=len(usable))


@dataclasses.dataclass(frozen=True)
class TransferLaw:
    """``seconds = latency_s + bytes / bandwidth`` for copies one way (bandwidth in bytes/s)."""

    latency_s: float
    bandwidth: float

    def __call__(self, nbytes: float) -> float:
        if nbytes <= 0:
            return 0.0
        return self.latency_s + nbytes / self.bandwidth

    def as_dict(self) -> dict[str, float]:
        return {"latency_s": self.latency_s, "bandwidth_gbs": self.bandwidth / 1e9}


def fit_transfer(points: Sequence[tuple[float, float]]) -> TransferLaw | None:
    """Least squares ``t = L + bytes / B`` over the median time of each size of ``(bytes,
    seconds)`` samples (at least two sizes), so one slow copy does not tilt the line. Latency
    is clamped at zero and the bandwidth to a positive value."""
    by_size: dict[float, list[float]] = {}
    for n, t in points:
        if n > 0 and t > 0 and math.isfinite(t):
            by_size.setdefault(n, []).append(t)
    if len(by_size) < 2:
        return None
    x = np.array(sorted(by_size), dtype=np.float64)
    y = np.array([statistics.median(by_size[n]) for n in sorted(by_size)], dtype=np.float64)
    slope, intercept = np.polyfit(x, y, 1)
    if slope <= 0:  # all sizes took the same time: latency-bound; take the largest copy's rate
        largest = int(np.argmax(x))
        return TransferLaw(latency_s=float(np.median(y)), bandwidth=float(x[largest] / y[largest]))
    return TransferLaw(latency_s=float(max(intercept, 0.0)), bandwidth=float(1.0 / slope))
