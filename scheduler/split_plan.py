"""How many rows of a split launch each device gets: the partition that minimises the
predicted finishing time of the slowest part (StarPU's "dmda": each device's predicted
time is its compute time plus the time to move its part's data).

Pure arithmetic over cost functions; :mod:`hetero.split` supplies them from the cost model.
:class:`Outcomes` is the check on the model: measured whole-launch times of splitting against
each device alone, choosing the fastest.
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


# -- when a split launcher plans again, and which of its launches it times --------------
#: Launches a split plan serves at least before it is made again from the (meanwhile taught) cost
#: model; more when planning would otherwise cost over PLAN_SHARE of the launches' predicted time
#: (a plan takes about a millisecond of Python: on a GPU, ten launches' worth), at most REPLAN_MOST.
REPLAN_EVERY = 8
PLAN_SHARE = 0.01
REPLAN_MOST = 4096
#: A launch that runs whole on one device (the plan, or the measured choice to run alone) is a
#: plain, asynchronous launch, except the ones :func:`sampled` names, which are timed (waited for)
#: so that the cost model and the split-vs-alone choice keep learning: a wait per call would cost
#: a GPU more than any split saves. The first SAMPLED_FIRST, then the 4th, 8th, 16th ... (the model
#: learns most early), and from SAMPLE_AT_MOST_EVERY on, one in that many.
SAMPLED_FIRST = 3
SAMPLE_AT_MOST_EVERY = 1024


def sampled(count: int) -> bool:
    """Whether the launch after ``count`` whole launches of one plan key is timed."""
    if count < SAMPLED_FIRST:
        return True
    return count % SAMPLE_AT_MOST_EVERY == 0 if count >= SAMPLE_AT_MOST_EVERY else count & (count - 1) == 0


def replan_after(makespan: float, planning_s: float, served: int = 0) -> int:
    """How many launches a plan predicted to take ``makespan`` seconds serves, its making having
    taken ``planning_s``: twice what the plan before it ``served`` (the model learns most in the
    first launches), from :data:`REPLAN_EVERY`, up to as many as keep planning within
    :data:`PLAN_SHARE` of their time (a 1 ms plan for 100 us GPU launches: 1000), and at most
    :data:`REPLAN_MOST`."""
    wanted = max(REPLAN_EVERY, 2 * served)
    if makespan <= 0.0:
        return REPLAN_EVERY
    affordable = math.ceil(planning_s / (PLAN_SHARE * makespan))
    return max(REPLAN_EVERY, min(wanted, affordable, REPLAN_MOST))


#: The most often a split launcher re-measures the strategy (split, or one device alone) it is not
#: using (see :class:`Outcomes`): once in this many launches.
PROBE_EVERY = 128
#: What re-measuring the slower strategy may cost on average, as a share of the faster one's time
#: (0.5%: a probe also costs the switches to another runtime and back, which no launch's time shows,
#: and a split's goal is no loss at all; 2% made the probes most of a 5% loss on this 2-core host):
#: one that took (1 + x) times as long is measured again once in x / PROBE_COST launches (times
#: :data:`MEASURED_IN_A_ROW` for a device alone, measured that many times in a row).
PROBE_COST = 0.005
#: Launches in a row a way is measured when it is (first, or again): the first after a switch from
#: another device pays for the switch (the other runtime's threads still spinning), the least time
#: kept counts (see :func:`_typical`).
MEASURED_IN_A_ROW = 3
#: How much faster than the arrays' own device another way must measure to be chosen over it
#: (see :class:`Outcomes`): ways closer than this are noise apart, and staying costs nothing.
HOME_MARGIN = 0.02
#: The least often: conditions change (another job, a device's clocks), so the slower one is still
#: looked at now and then.
PROBE_AT_MOST_EVERY = 4096
#: Rounds a way is measured in (one launch for the split, :data:`MEASURED_IN_A_ROW` for a device
#: alone) before it is re-measured as rarely as its cost allows: a first choice comes from one window
#: of a few launches, and a way that measured 80% slower in it (a noisy moment on a shared VM) would
#: otherwise wait ~1500 launches for a second look (issue 19: ``run_all`` of 2026-12-06 20:19 UTC ran
#: the split at 0.94x of the best single device so). The second round, at :data:`PROBE_EVERY`, costs
#: each way one round more per argument shape, once.
ROUNDS_BEFORE_RARE = 2
#: Launches between the phases of two ways' probes: the chosen way's timed launches, then the probe.
_PROBE_SPAN = 2 * MEASURED_IN_A_ROW + 1


class Outcomes:
    """Whole-launch times of the split and of each device alone, for one argument shape.

    The cost model adds devices' speeds as if they were independent; devices sharing cores or
    memory bandwidth (all of them on a CPU-only machine) are not, and a part's time measured
    beside the others is not what that device does alone. So the launcher also measures the
    outcome: once the split has a time, it runs each device alone :data:`MEASURED_IN_A_ROW` times
    in a row (the one the model predicts fastest first), then runs whichever way was fastest
    (:func:`_typical`), trying each other way again now and then: a way measured only once is
    measured again :data:`PROBE_EVERY` launches on (:data:`ROUNDS_BEFORE_RARE`), then the slower it
    was, the less often (:data:`PROBE_COST`, shared by the other ways), so all the
    probes together cost at most 0.5% of the fastest way's time. The chosen way's launches right
    before a probe are timed (:meth:`next_launch`), so a probe is weighed against times of the same moment.

    ``home``, the arrays' own device, runs its way as a plain launch; another way is chosen over it
    only when it measured :data:`HOME_MARGIN` faster: leaving costs what a whole-launch time does
    not show (the other runtime's threads still spinning on cores the devices share), and ways
    within noise of each other would otherwise take turns."""

    def __init__(self, home: str | None = None) -> None:
        self.home = home
        self.split: list[float] = []
        self.alone: dict[str, list[float]] = {}
        self.measured: dict[str | None, int] = {}  # every sample counted, kept or not: a way's rounds
        self.launches = 0
        self.version = 0  # how many times were added: what is derived from them changes with it
        self._made: tuple[tuple[int, tuple[str, ...]], str | None, list[tuple[str | None, int]]] | None = None

    def choose(self, devices: Sequence[str]) -> str | None:
        """The device to run this launch on alone, or None to split it. ``devices``: the ones that
        may run it alone, the model's choice first."""
        self.launches += 1
        return self.peek(devices, self.launches)

    def peek(self, devices: Sequence[str], launch: int | None = None) -> str | None:
        """What :meth:`choose` answers for launch number ``launch`` (the next one by default), without
        counting it: a caller that runs that way then counts it with ``launches += 1``."""
        return self.next_launch(devices, launch)[0]

    def timed(self, devices: Sequence[str], launch: int | None = None) -> bool:
        """Whether launch ``launch`` (the next by default) is to be timed whatever it runs: it is one
        of the chosen way's :data:`MEASURED_IN_A_ROW` right before a probe of another way."""
        return self.next_launch(devices, launch)[1]

    def next_launch(self, devices: Sequence[str], launch: int | None = None) -> tuple[str | None, bool]:
        """:meth:`peek` and :meth:`timed` of launch ``launch`` (the next by default), in one look.

        The chosen way otherwise runs untimed but for rare samples, and a probe compared with times
        from long before is a comparison of two moments of a machine whose speed drifts (by a third
        within seconds on a shared VM), not of two ways: so each probe comes right after the chosen
        way's launches timed for it."""
        launch = self.launches + 1 if launch is None else launch
        if not self.split:
            return None, False
        for name in devices:
            if len(self.alone.get(name, ())) < MEASURED_IN_A_ROW:
                return name, False  # measure each device alone, in a row: the first after a switch pays for it
        best, probes = self._schedule(tuple(devices))
        timed = False
        for position, (way, every) in enumerate(probes):
            # Now and then, re-measure another way (a device alone: in a row, as above); each way at
            # its own phase, so that ways re-measured as rarely as each other do not fall on the same
            # launches, where the first would always win and the other never be measured again.
            phase = (launch + position * _PROBE_SPAN) % every - MEASURED_IN_A_ROW
            if 0 <= phase < _round(way):
                return way, False
            timed = timed or phase < 0
        return best, timed

    def _schedule(self, devices: tuple[str, ...]) -> tuple[str | None, list[tuple[str | None, int]]]:
        """The fastest way and how often each other way is re-measured, made once per measurement."""
        if self._made is not None and self._made[0] == (self.version, devices):
            return self._made[1], self._made[2]
        ways: dict[str | None, float] = {None: _typical(self.split)}
        ways.update((name, _typical(self.alone[name])) for name in devices)
        ways = self._weighed(ways)
        best = min(ways, key=lambda way: ways[way])
        fast, others = ways[best], len(ways) - 1
        probes = [(way, PROBE_EVERY if self.measured.get(way, 0) < ROUNDS_BEFORE_RARE * _round(way)
                   else min(PROBE_AT_MOST_EVERY, max(PROBE_EVERY, math.ceil(
                       (seconds - fast) / max(fast, 1e-12) * others * _round(way) / PROBE_COST))))
                  for way, seconds in ways.items() if way != best]
        self._made = ((self.version, devices), best, probes)
        return best, probes

    def best(self) -> str | None:
        """The fastest way measured so far: a device's name, or None for the split."""
        ways: dict[str | None, float] = {None: _typical(self.split)} if self.split else {}
        ways.update((name, _typical(times)) for name, times in self.alone.items())
        ways = self._weighed(ways)
        return min(ways, key=lambda way: ways[way]) if ways else None

    def _weighed(self, ways: dict[str | None, float]) -> dict[str | None, float]:
        """The measured times with every way but the home device's counted :data:`HOME_MARGIN` slower."""
        if self.home not in ways:
            return ways
        return {way: seconds if way == self.home else seconds * (1.0 + HOME_MARGIN) for way, seconds in ways.items()}

    def add(self, way: str | None, seconds: float) -> None:
        """One whole launch's wall time: split (``way`` None) or alone on device ``way``."""
        samples = self.split if way is None else self.alone.setdefault(way, [])
        self.version += 1
        self.measured[way] = self.measured.get(way, 0) + 1
        samples.append(seconds)
        del samples[:-5]

    def describe(self) -> str:
        if not self.alone or not self.split:
            return "not measured yet"
        alone = ", ".join(f"{_typical(t) * 1e3:.3g} ms alone on {name}" for name, t in self.alone.items())
        return f"median of the last three: {alone} vs {_typical(self.split) * 1e3:.3g} ms split"


def _round(way: str | None) -> int:
    """Launches a way is measured in at a time: the split once, a device alone in a row."""
    return 1 if way is None else MEASURED_IN_A_ROW


def _typical(values: list[float]) -> float:
    """What a way costs: the median of its last :data:`MEASURED_IN_A_ROW` times (the lesser of
    two). One launch of a round far off either way does not decide: the first after a switch pays
    for the other runtime's threads still spinning, and on a shared VM one launch in a few hundred
    runs far faster than the rest (a 192 MiB triad in ~3.3 ms against ~6 ms typical, issue 19), which
    as the least of its round made its way look 80% ahead and the others be re-measured only
    ~1300 launches on. As many samples for every way, so that the way measured most (the one it
    runs) does not look faster for having had more chances."""
    recent = sorted(values[-MEASURED_IN_A_ROW:])
    return recent[(len(recent) - 1) // 2]
