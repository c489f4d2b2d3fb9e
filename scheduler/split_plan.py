"""How many rows of a split launch each device gets: the partition that minimises the
predicted finishing time of the slowest part (StarPU's "dmda": each device's predicted
time is its compute time plus the time to move its part's data).

Pure arithmetic over cost functions; :mod:`hetero.kernels.split.launch` supplies them from the cost model.
:class:`Outcomes` is the check on the model: measured whole-launch times of splitting against
each device alone, choosing the fastest.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
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
#: A way measured within this share of the chosen one (a shared VM's speed swings by a third from one
#: spell to the next) is compared with it :data:`PAIRS_BEFORE_RARE` times, :data:`PROBE_EVERY`
#: launches apart, before it is looked at as rarely as its cost allows: which of two such ways is
#: faster is for several same-moment comparisons to say, not one.
CLOSE = 0.5
PAIRS_BEFORE_RARE = 3
#: Same-moment comparisons kept per pair of ways (see :class:`Outcomes`): the choice follows their median.
PAIRS_KEPT = 5
#: How much a way's own median time counts beside one same-moment comparison (see :meth:`Outcomes._ratios`).
_PRIOR_WEIGHT = 0.25
#: Launches between the phases of two ways' probes: the chosen way's timed launches, then the probe.
_PROBE_SPAN = 2 * MEASURED_IN_A_ROW + 1

Way = str | None  # a device's name, or None: the split


class Outcomes:
    """Whole-launch times of the split and of each device alone, for one argument shape.

    The cost model adds devices' speeds as if they were independent; devices sharing cores or
    memory bandwidth (all of them on a CPU-only machine) are not, and a part's time measured
    beside the others is not what that device does alone. So the launcher also measures the
    outcome: once the split has a time, it runs each device alone :data:`MEASURED_IN_A_ROW` times
    in a row (the one the model predicts fastest first), then runs whichever way was fastest
    (:func:`_typical`), trying each other way again now and then (a *probe*).

    The chosen way's launches right before a probe are timed (:meth:`next_launch`), and each probe
    is kept as a ratio to them: a comparison of two ways at the same moment. On a shared VM whose
    speed swings by a third from one spell to the next, times from different moments compare spells,
    not ways. Another way replaces the chosen one when all the comparisons, weighed together
    (:meth:`_ratios`: each pair of ways by the median of its last :data:`PAIRS_KEPT`), say it is faster.

    How often a way is probed:
    - a way within :data:`CLOSE` of the chosen one: every :data:`PROBE_EVERY` launches until it has
      :data:`PAIRS_BEFORE_RARE` comparisons with it;
    - any other way measured only once: again :data:`PROBE_EVERY` launches on
      (:data:`ROUNDS_BEFORE_RARE`);
    - then, the slower it was, the less often (:data:`PROBE_COST`, shared by the other ways), so
      all the probes together cost at most 0.5% of the fastest way's time.

    ``home``, the arrays' own device, runs its way as a plain launch; another way is chosen over it
    only when it measured :data:`HOME_MARGIN` faster: leaving costs what a whole-launch time does
    not show (the other runtime's threads still spinning on cores the devices share), and ways
    within noise of each other would otherwise take turns."""

    def __init__(self, home: str | None = None) -> None:
        self.home = home
        self.split: list[float] = []
        self.alone: dict[str, list[float]] = {}
        self.measured: dict[Way, int] = {}  # every sample counted, kept or not: a way's rounds
        self.pairs: dict[tuple[Way, Way], list[float]] = {}  # (a, b): a's time / b's, measured together
        self.chosen: Way = None  # the way run, once every way has a time (``decided``)
        self.decided = False
        self.launches = 0
        self.version = 0  # how many times were added: what is derived from them changes with it
        self._streak: tuple[Way, int] = (None, 0)  # the way added last, and how many times in a row
        self._made: tuple[tuple[int, tuple[str, ...]], Way, list[tuple[Way, int]]] | None = None
        self._ratios_made: tuple[tuple[int, frozenset[Way], Way], dict[Way, float]] | None = None

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
        """Whether launch ``launch`` (the next by default) is to be timed whatever way it takes: one of
        a round measuring a way (each of its launches, not only the first, which pays for the switch
        from another runtime), or of the chosen way's :data:`MEASURED_IN_A_ROW` right before a probe."""
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
                return name, True  # measure each device alone, in a row: the first after a switch pays for it
        best, probes = self._schedule(tuple(devices))
        timed = False
        for position, (way, every) in enumerate(probes):
            # Now and then, re-measure another way (a device alone: in a row, as above); each way at
            # its own phase, so that ways re-measured as rarely as each other do not fall on the same
            # launches, where the first would always win and the other never be measured again.
            phase = (launch + position * _PROBE_SPAN) % every - MEASURED_IN_A_ROW
            if 0 <= phase < _round(way):
                return way, True
            timed = timed or phase < 0
        return best, timed

    def _schedule(self, devices: tuple[str, ...]) -> tuple[Way, list[tuple[Way, int]]]:
        """The way to run and how often each other way is re-measured, made once per measurement."""
        if self._made is not None and self._made[0] == (self.version, devices):
            return self._made[1], self._made[2]
        ways: list[Way] = [None, *devices]
        if not self.decided or self.chosen not in ways:  # the first choice: from the rounds measured in a row
            typical = self._weighed({way: self._time(way) for way in ways})
            self.chosen, self.decided = min(typical, key=lambda way: typical[way]), True
        ratios = self._ratios(ways)
        fastest = min(ratios, key=lambda way: ratios[way])
        if ratios[fastest] < 1.0 and any(self.pairs.get((fastest, way)) for way in ways):
            self.chosen = fastest  # measured faster, beside the others: it is run
            ratios = self._ratios(ways)
        others = len(ratios) - 1
        probes = [(way, self._every(way, max(r - 1.0, 0.0), others)) for way, r in ratios.items() if way != self.chosen]
        self._made = ((self.version, devices), self.chosen, probes)
        return self.chosen, probes

    def _every(self, way: Way, slower: float, others: int) -> int:
        """Launches between probes of ``way``, measured ``slower`` (0.1: 10%) than the chosen way."""
        if slower <= CLOSE and len(self.pairs.get((way, self.chosen), ())) < PAIRS_BEFORE_RARE:
            return PROBE_EVERY
        if self.measured.get(way, 0) < ROUNDS_BEFORE_RARE * _round(way):
            return PROBE_EVERY
        return min(PROBE_AT_MOST_EVERY, max(PROBE_EVERY, math.ceil(slower * others * _round(way) / PROBE_COST)))

    def _time(self, way: Way) -> float:
        return _typical(self.split if way is None else self.alone[way])

    def _ratios(self, ways: Sequence[Way]) -> dict[Way, float]:
        """How long each way takes, as a multiple of the chosen way's time (:data:`HOME_MARGIN` counted).

        Each pair of ways compared at the same moment says how much longer one takes than the other
        (the median of their last :data:`PAIRS_KEPT` comparisons); the ways' times are the ones that
        agree best with all of those at once (least squares on the logarithms, each pair weighted by
        its comparisons), so that noisy pairs cannot go round in a circle (a faster than b, b than c,
        c than a). Each way's own median time counts too, weakly, so that a way not yet compared with
        the others has a place among them."""
        memo = (self.version, frozenset(ways), self.chosen)
        if self._ratios_made is not None and self._ratios_made[0] == memo:
            return self._ratios_made[1]
        index = {way: i for i, way in enumerate(ways)}
        # The normal equations, one row per way: (PRIOR + its comparisons) x_way - sum(count x_other)
        # = PRIOR log(its own median) + sum(count log(median ratio)); diagonally dominant, so plain
        # elimination solves them (a handful of ways: microseconds, not an iteration's hundred)
        matrix = [[0.0] * len(ways) for _ in ways]
        rhs = [_PRIOR_WEIGHT * math.log(max(self._time(way), 1e-12)) for way in ways]
        for i in range(len(ways)):
            matrix[i][i] = _PRIOR_WEIGHT
        for (a, b), found in self.pairs.items():
            if a in index and b in index and found:
                i, j, count = index[a], index[b], len(found)
                matrix[i][i] += count
                matrix[i][j] -= count
                rhs[i] += count * math.log(max(statistics.median(found), 1e-12))
        solved = _solve(matrix, rhs)
        position = {way: solved[index[way]] for way in ways}
        if self.home in position:
            margin = math.log1p(HOME_MARGIN)
            position = {way: x if way == self.home else x + margin for way, x in position.items()}
        base = position[self.chosen]
        ratios = {way: math.exp(x - base) for way, x in position.items()}
        self._ratios_made = (memo, ratios)
        return ratios

    def best(self) -> str | None:
        """The way run now: a device's name, or None for the split (before the first choice, the
        fastest measured)."""
        if self.decided:
            return self.chosen
        ways: dict[Way, float] = {None: _typical(self.split)} if self.split else {}
        ways.update((name, _typical(times)) for name, times in self.alone.items())
        ways = self._weighed(ways)
        return min(ways, key=lambda way: ways[way]) if ways else None

    def _weighed(self, ways: dict[Way, float]) -> dict[Way, float]:
        """The measured times with every way but the home device's counted :data:`HOME_MARGIN` slower."""
        if self.home not in ways:
            return ways
        return {way: seconds if way == self.home else seconds * (1.0 + HOME_MARGIN) for way, seconds in ways.items()}

    def add(self, way: Way, seconds: float) -> None:
        """One whole launch's wall time: split (``way`` None) or alone on device ``way``. The last of
        a probe's round is compared with the chosen way's times of right before it."""
        samples = self.split if way is None else self.alone.setdefault(way, [])
        self.version += 1
        self.measured[way] = self.measured.get(way, 0) + 1
        last, count = self._streak
        count = count + 1 if last == way else 1
        self._streak = (way, count)
        samples.append(seconds)
        del samples[:-5]
        if self.decided and way != self.chosen and count == _round(way):
            chosen = self.split if self.chosen is None else self.alone.get(self.chosen, [])
            if len(chosen) >= MEASURED_IN_A_ROW:
                ratio = _typical(samples[-_round(way):]) / max(_typical(chosen), 1e-12)
                for key, value in (((way, self.chosen), ratio), ((self.chosen, way), 1.0 / max(ratio, 1e-12))):
                    kept = self.pairs.setdefault(key, [])
                    kept.append(value)
                    del kept[:-PAIRS_KEPT]

    def describe(self) -> str:
        if not self.alone or not self.split:
            return "not measured yet"
        alone = ", ".join(f"{_typical(t) * 1e3:.3g} ms alone on {name}" for name, t in self.alone.items())
        text = f"median of the last three: {alone} vs {_typical(self.split) * 1e3:.3g} ms split"
        if self.decided and self.pairs:
            ways = [None, *self.alone]
            ratios = self._ratios(ways) if self.chosen in ways else {}
            beside = [f"{'split' if way is None else way} {ratio:.2f}x" for way, ratio in ratios.items() if way != self.chosen]
            chosen = "the split" if self.chosen is None else self.chosen
            text += f"; from same-moment comparisons, as a multiple of {chosen}: {', '.join(beside)}"
        return text


def _solve(matrix: list[list[float]], rhs: list[float]) -> list[float]:
    """``x`` with ``matrix @ x == rhs``, by Gaussian elimination without pivoting (for a diagonally
    dominant ``matrix``, as :meth:`Outcomes._ratios` makes); both are overwritten."""
    size = len(rhs)
    for k in range(size):
        for i in range(k + 1, size):
            factor = matrix[i][k] / matrix[k][k]
            if factor:
                for j in range(k, size):
                    matrix[i][j] -= factor * matrix[k][j]
                rhs[i] -= factor * rhs[k]
    x = [0.0] * size
    for k in reversed(range(size)):
        x[k] = (rhs[k] - sum(matrix[k][j] * x[j] for j in range(k + 1, size))) / matrix[k][k]
    return x


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
