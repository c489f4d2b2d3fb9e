"""How many rows of a split launch each device gets: the partition that minimises the
predicted finishing time of the slowest part (StarPU's "dmda": each device's predicted
time is its compute time plus the time to move its part's data).

Pure arithmetic over cost functions; :mod:`hetero.split` supplies them from the cost model.
:class:`Outcomes` is the check on the model: measured whole-launch times of splitting against
the arrays' own device alone, choosing the faster.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence

PartTime = Callable[[int], float]  # rows -> predicted seconds (0 rows: 0 seconds)


@dataclasses.dataclass(frozen=True)
class Partition:
    """``rows[i]`` rows for device ``i`` (summing to the total), as ``[lo, hi)`` ranges in
    device order, and each part's predicted seconds."""

    rows: tuple[int, ...]
    predicted_s: tuple[float, ...]

    def bounds(self) -> list[tuple[int, int]]:
        out, lo = [], 0
        for count in self.rows:
            out.append((lo, lo + count))
            lo += count
        return out

    @property
    def makespan_s(self) -> float:
        return max(self.predicted_s, default=0.0)


def _capacity(time: PartTime, limit: float, chunks: int, chunk_rows: int, total: int) -> int:
    """The most chunks (0..chunks) this device finishes within ``limit`` seconds."""
    if time(min(chunk_rows, total)) > limit:
        return 0
    lo, hi = 1, chunks  # time(lo chunks) <= limit holds; find the largest such count
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if time(min(mid * chunk_rows, total)) <= limit:
            lo = mid
        else:
            hi = mid - 1
    return lo


def partition(total: int, times: Sequence[PartTime], granularity: int = 1) -> Partition:
    """Divide ``total`` rows among devices with predicted ``times`` so that the slowest part
    finishes as early as predicted possible. Parts are multiples of ``granularity`` rows
    (a work-group's height) except the last; ties go to the earlier device. Each ``times[i]``
    must not decrease as rows grow."""
    if total < 0 or granularity < 1:
        raise ValueError(f"total must be >= 0 and granularity >= 1, got {total} and {granularity}")
    if not times:
        raise ValueError("partition needs at least one device")
    if total == 0:
        return Partition(tuple(0 for _ in times), tuple(0.0 for _ in times))
    chunks = -(-total // granularity)
    whole = [t(total) for t in times]
    low, high = 0.0, min(whole)  # high: one device alone does everything
    for _ in range(64):  # bisect the makespan
        mid = (low + high) / 2
        if sum(_capacity(t, mid, chunks, granularity, total) for t in times) >= chunks:
            high = mid
        else:
            low = mid
        if high - low <= 1e-12 + 1e-4 * high:  # 0.01% of the makespan: finer is noise
            break
    counts = [_capacity(t, high, chunks, granularity, total) for t in times]
    if sum(counts) < chunks:  # numerical corner: give everything to the device fastest alone
        best = whole.index(min(whole))
        counts = [chunks if i == best else 0 for i in range(len(times))]
    excess = sum(counts) - chunks
    while excess > 0:  # trim the parts predicted to finish last
        finishing = [(times[i](min(counts[i] * granularity, total)) if counts[i] else -1.0, -i)
                     for i in range(len(times))]
        i = -max(finishing)[1]
        counts[i] -= 1
        excess -= 1
    rows: list[int] = []
    assigned = 0
    for count in counts:
        part = min(count * granularity, total - assigned)
        rows.append(part)
        assigned += part
    return Partition(tuple(rows), tuple(times[i](r) if r else 0.0 for i, r in enumerate(rows)))


def even(total: int, devices: int, granularity: int = 1) -> tuple[int, ...]:
    """``total`` rows in ``devices`` near-equal parts of whole ``granularity`` chunks."""
    chunks = -(-total // granularity)
    base, extra = divmod(chunks, devices)
    counts = [base + (1 if i < extra else 0) for i in range(devices)]
    rows, assigned = [], 0
    for count in counts:
        part = min(count * granularity, total - assigned)
        rows.append(part)
        assigned += part
    return tuple(rows)


#: The most often a split launcher re-measures the strategy (split, or one device alone) it is not
#: using (see :class:`Outcomes`): once in this many launches.
PROBE_EVERY = 16
#: What re-measuring the slower strategy may cost on average, as a share of the faster one's time:
#: one that took (1 + x) times as long is measured again once in x / PROBE_COST launches.
PROBE_COST = 0.02
#: The least often: conditions change (another job, a device's clocks), so the slower one is still
#: looked at now and then.
PROBE_AT_MOST_EVERY = 4096


class Outcomes:
    """Whole-launch times of the split and of the source device alone, for one argument shape.

    The cost model adds devices' speeds as if they were independent; devices sharing cores or
    memory bandwidth (all of them on a CPU-only machine) are not. So the launcher also measures
    the outcome: it tries one device alone once, then runs whichever was faster, trying the other
    again now and then: the slower the other, the less often (:data:`PROBE_COST`), so the probes
    cost at most 2% of the faster one's time."""

    def __init__(self) -> None:
        self.split: list[float] = []
        self.alone: list[float] = []
        self.launches = 0

    def prefer_alone(self) -> bool:
        self.launches += 1
        if not self.split:
            return False
        if not self.alone:
            return True  # measure the alternative once
        alone, split = _median(self.alone), _median(self.split)
        faster_alone = alone < split
        fast, slow = (alone, split) if faster_alone else (split, alone)
        every = min(PROBE_AT_MOST_EVERY, max(PROBE_EVERY, math.ceil((slow - fast) / max(fast, 1e-12) / PROBE_COST)))
        return faster_alone != (self.launches % every == 0)  # now and then, re-measure the other

    def add(self, alone: bool, seconds: float) -> None:
        samples = self.alone if alone else self.split
        samples.append(seconds)
        del samples[:-5]

    def describe(self) -> str:
        return (f"median {_median(self.alone) * 1e3:.3g} ms alone vs {_median(self.split) * 1e3:.3g} ms split"
                if self.alone and self.split else "not measured yet")


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[len(ordered) // 2]
