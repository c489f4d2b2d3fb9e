"""Placement policies: which eligible device a request gets, and why.

Every policy first rejects the devices no request may have (excluded, quarantined,
unhealthy, of an unwanted kind/vendor/backend, too little free memory), then orders the
rest by one sort key: the request's preference among kinds/vendors/backends, then health
(``degraded`` devices only as a last resort), then the policy's own score, then the
device's position in the configured order (``hetero.devices()``: GPUs first, backend
priority, index). That position is unique, so ties never depend on timing or hashing.

=========== =========================================================================
policy      score (lower wins)
=========== =========================================================================
first-fit   none: the first eligible device in the configured order
binpack     the most-used device first (memory load, then tasks): fills one before the next
spread      the least-used device first (memory load, then tasks)
fastest     expected finish = predicted seconds (cost model) x (tasks + 1); without a
            prediction for every eligible device, the calibrated device speed (the
            geometric mean of hetero calibrate's kernels there), else 1 / static speed
            (compute units x kind weight), x (tasks + 1), for all of them alike
priority    free devices, then those held only by lower classes (the request takes them),
            then shared with its own class, then least used; low requests never share
            and queue when every fitting device is held
=========== =========================================================================
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Sequence
from typing import Any

from hetero.core.config import POLICIES
from hetero.core.device import HealthState
from hetero.core.errors import did_you_mean
from hetero.scheduler.request import PRIORITY_RANK, Candidate, CostModel, Request, format_size

#: Relative throughput of one compute unit by device kind, for the static speed estimate
#: (a GPU SM/CU runs many more lanes than a CPU core).
KIND_WEIGHT = {"gpu": 8.0, "accelerator": 4.0, "cpu": 1.0}
_UNHEALTHY, _DEGRADED = HealthState.UNHEALTHY, HealthState.DEGRADED

Key = tuple[Any, ...]


class Policy:
    """A way of ordering eligible devices. Subclasses give ``score`` (lower wins) and ``describe``."""

    name = ""
    summary = ""
    #: Whether decisions depend on accounted usage (memory, tasks, holds): cached decisions
    #: of such policies are re-made when usage changes.
    uses_load = True
    #: Whether :meth:`reject` can refuse anything (skipped otherwise: decisions are on a hot path).
    #: Policies refuse by holds: :meth:`reject` is asked only about devices somebody holds.
    rejects = False
    #: Whether a device's score is its lead's first part alone (see :meth:`leads`): a placement
    #: then needs no :meth:`score` call for its winner.
    score_is_lead = False

    def prepare(self, eligible: Sequence[Candidate], request: Request, cost_model: CostModel | None) -> Any:
        """Per-decision context shared by ``score`` and ``describe`` (the cost model's predictions)."""
        return None

    def reject(self, candidate: Candidate, request: Request) -> str | None:
        """A policy-specific reason to refuse this device, which somebody holds (None: eligible)."""
        return None

    def score(self, candidate: Candidate, request: Request, context: Any) -> Key:
        return ()

    def scores(self, eligible: Sequence[Candidate], request: Request, context: Any) -> list[Key]:
        """``score`` of each eligible device (policies inline it here: decisions are a hot path)."""
        score = self.score
        return [score(c, request, context) for c in eligible]

    def describe(self, candidate: Candidate, score: Key, context: Any) -> str:
        return ""

    def admit(self, held: Sequence[Candidate], request: Request) -> list[Candidate]:
        """The devices :meth:`reject` does not refuse (asked only when ``rejects``; policies
        inline it: decisions are a hot path)."""
        reject = self.reject
        return [c for c in held if c.held_by is None or reject(c, request) is None]

    def leads(self, eligible: Sequence[Candidate], request: Request, context: Any) -> list[Any]:
        """One comparable value per eligible device that orders devices as their sort keys do,
        health aside: ``(score, order)``, or anything cheaper that never contradicts it (the
        builtins give ``(*score, order)`` flat, first-fit the order alone). A placement
        (:func:`rank`) takes the device with the one smallest lead when it is healthy, else
        compares whole keys: orders are unique, so that happens only for a degraded leader."""
        return [(score, c.order) for c, score in zip(eligible, self.scores(eligible, request, context))]

    def context_and_leads(self, eligible: Sequence[Candidate], request: Request,
                          cost_model: CostModel | None) -> tuple[Any, list[Any]]:
        """:meth:`prepare`, then :meth:`leads` with its context: what a placement asks. A policy
        whose context is per-device figures gives both in one pass over the devices."""
        context = self.prepare(eligible, request, cost_model)
        return context, self.leads(eligible, request, context)


class FirstFit(Policy):
    name = "first-fit"
    summary = "takes the first eligible device in the configured order"
    uses_load = False

    def scores(self, eligible: Sequence[Candidate], request: Request, context: Any) -> list[Key]:
        return [()] * len(eligible)

    def leads(self, eligible: Sequence[Candidate], request: Request, context: Any) -> list[Any]:
        return [c.order for c in eligible]

    def describe(self, candidate: Candidate, score: Key, context: Any) -> str:
        return f"order {candidate.order}"


def _usage(candidate: Candidate) -> str:
    return f"load {candidate.load:.1%}, {candidate.tasks} task{'s' if candidate.tasks != 1 else ''}"


class Binpack(Policy):
    name = "binpack"
    summary = "fills the most-used device that fits"

    def score(self, candidate: Candidate, request: Request, context: Any) -> Key:
        memory = candidate.info.memory
        return (-candidate.used / memory if memory > 0 else 0.0, -candidate.tasks)

    def scores(self, eligible: Sequence[Candidate], request: Request, context: Any) -> list[Key]:
        return [(-c.used / c.info.memory if c.info.memory > 0 else 0.0, -c.tasks) for c in eligible]

    def leads(self, eligible: Sequence[Candidate], request: Request, context: Any) -> list[Any]:
        return [(-c.used / c.info.memory if c.info.memory > 0 else 0.0, -c.tasks, c.order) for c in eligible]

    def describe(self, candidate: Candidate, score: Key, context: Any) -> str:
        return _usage(candidate)


class Spread(Policy):
    name = "spread"
    summary = "takes the least-used device"

    def score(self, candidate: Candidate, request: Request, context: Any) -> Key:
        memory = candidate.info.memory
        return (candidate.used / memory if memory > 0 else 0.0, candidate.tasks)

    def scores(self, eligible: Sequence[Candidate], request: Request, context: Any) -> list[Key]:
        return [(c.used / c.info.memory if c.info.memory > 0 else 0.0, c.tasks) for c in eligible]

    def leads(self, eligible: Sequence[Candidate], request: Request, context: Any) -> list[Any]:
        return [(c.used / c.info.memory if c.info.memory > 0 else 0.0, c.tasks, c.order) for c in eligible]

    def describe(self, candidate: Candidate, score: Key, context: Any) -> str:
        return _usage(candidate)


def static_speed(candidate: Candidate) -> float:
    """Compute units x kind weight: the speed estimate when the cost model has no prediction."""
    return max(candidate.info.compute_units, 1) * KIND_WEIGHT.get(str(candidate.info.kind), 1.0)


@dataclasses.dataclass(frozen=True)
class StaticEstimate:
    """The ``fastest`` policy's context when it ranks by static speed, and why it does."""

    reason: str


class Predictions:
    """The ``fastest`` policy's context when the cost model predicts every eligible device:
    ``seconds`` by stable id, and ``model``, which model and figures they came from (said only
    when asked: an explanation reads it, a placement does not). A placement made with the
    predictions (:meth:`asked`) leaves the table to be asked of the model when first read."""

    __slots__ = ("_seconds", "_asked", "_source", "label")

    def __init__(self, seconds: dict[str, float], source: Callable[[], str], label: str = "predicted") -> None:
        self._seconds: dict[str, float] | None = seconds
        self._source: Callable[[], str] | None = source
        self._asked: tuple[CostModel, str, int, Sequence[Candidate]] | None = None
        self.label = label  # how a score reads: "predicted" (this kernel) or "calibrated" (device speed)

    @classmethod
    def asked(cls, cost_model: CostModel, kernel: str, n: int, eligible: Sequence[Candidate]) -> Predictions:
        """What ``cost_model`` predicts for ``kernel`` at ``n`` on ``eligible``, asked when read."""
        self = cls.__new__(cls)
        self._seconds = self._source = None
        self._asked, self.label = (cost_model, kernel, n, eligible), "predicted"
        return self

    @property
    def seconds(self) -> dict[str, float]:
        if self._seconds is None:
            cost_model, kernel, n, eligible = self._asked  # type: ignore[misc]
            self._seconds = {c.info.stable_id: float(cost_model.predict(kernel, c.info.stable_id, n))  # type: ignore[arg-type]
                             for c in eligible}
        return self._seconds

    @property
    def source(self) -> Callable[[], str]:
        if self._source is None:
            cost_model, kernel, _, _ = self._asked  # type: ignore[misc]
            self._source = functools.partial(_model_source, cost_model, kernel)
        return self._source

    @property
    def model(self) -> str:
        return self.source()

    def __repr__(self) -> str:
        return f"Predictions({self.label}, {len(self.seconds)} devices)"


def _model_source(cost_model: CostModel, kernel: str) -> str:
    resolve = getattr(cost_model, "resolve", None)
    key = resolve(kernel) if callable(resolve) else kernel
    path = getattr(cost_model, "path", None)
    where = f" in {path}" if path else ""
    return f"cost model{where}: times measured for {key} (hetero calibrate, sampling or splits)"


#: The size the calibrated device speed is compared at when the request gives none.
CALIBRATED_N = 1 << 20


def _calibrated_speed(eligible: Sequence[Candidate], request: Request, cost_model: CostModel,
                      reason: str) -> Predictions | None:
    """Every eligible device's predicted time for ``hetero calibrate``'s kernels (the geometric
    mean over those measured on all of them): a device speed measured on this machine, which
    ranks a kernel never timed better than compute-unit counts. None when not calibrated."""
    keys_of = getattr(cost_model, "calibration_keys", None)
    if not callable(keys_of) or not eligible:
        return None
    n = request.n or CALIBRATED_N
    table: dict[str, list[float]] = {c.info.stable_id: [] for c in eligible}
    used: list[str] = []
    for key in keys_of():
        times = [cost_model.predict(key, c.info.stable_id, n) for c in eligible]
        if all(t is not None and t > 0 for t in times):
            used.append(key.partition("@")[0])
            for candidate, seconds in zip(eligible, times):
                table[candidate.info.stable_id].append(math.log(float(seconds)))  # type: ignore[arg-type]
    if not used:
        return None
    per_device = {device: math.exp(sum(logs) / len(logs)) for device, logs in table.items()}
    path = getattr(cost_model, "path", None)
    where = f" in {path}" if path else ""
    said = (f"calibrated device speed{where}: geometric mean of hetero calibrate's "
            f"{', '.join(used)} at n={n}, because {reason}")
    return Predictions(per_device, lambda: said, "calibrated")


class Fastest(Policy):
    name = "fastest"
    score_is_lead = True
    summary = "takes the device expected to finish first"

    def prepare(self, eligible: Sequence[Candidate], request: Request, cost_model: CostModel | None) -> Any:
        # Predicted seconds are used only when every eligible device has one: seconds and
        # static speeds do not compare, and a device the model has not seen is not slow.
        if request.kernel is None or request.n is None:
            reason = "the request names no kernel and size (kernel=, n=)"
        elif cost_model is None:
            return StaticEstimate("no cost model")
        else:
            predictions: dict[str, float] = {}
            predict, kernel, n = cost_model.predict, request.kernel, request.n
            for candidate in eligible:
                stable_id = candidate.info.stable_id
                seconds = predict(kernel, stable_id, n)
                if seconds is None:
                    break
                predictions[stable_id] = float(seconds)
            else:
                return Predictions(predictions, functools.partial(_model_source, cost_model, kernel))
            reason = f"the cost model has no prediction for {candidate.name} (hetero calibrate)"
        if cost_model is not None:
            calibrated = _calibrated_speed(eligible, request, cost_model, reason)
            if calibrated is not None:
                return calibrated
        return StaticEstimate(reason)

    def context_and_leads(self, eligible: Sequence[Candidate], request: Request,
                          cost_model: CostModel | None) -> tuple[Any, list[Any]]:
        # prepare's predictions and leads in one pass (a placement's hot path): the same figures
        # as the two calls make, which a test compares.
        if request.kernel is not None and request.n is not None and cost_model is not None:
            predict, kernel, n = cost_model.predict, request.kernel, request.n
            try:
                leads = [(predict(kernel, c.info.stable_id, n) * (c.tasks + 1), c.order) for c in eligible]
            except TypeError:  # a device without a prediction (None): prepare says what instead
                pass
            else:
                return Predictions.asked(cost_model, kernel, n, eligible), leads
        return super().context_and_leads(eligible, request, cost_model)

    def leads(self, eligible: Sequence[Candidate], request: Request, context: Any) -> list[Any]:
        return [(score, c.order) for c, (score,) in zip(eligible, self.scores(eligible, request, context))]

    def score(self, candidate: Candidate, request: Request, context: Any) -> Key:
        if type(context) is Predictions:
            return (context.seconds[candidate.info.stable_id] * (candidate.tasks + 1),)
        return ((candidate.tasks + 1) / static_speed(candidate),)

    def scores(self, eligible: Sequence[Candidate], request: Request, context: Any) -> list[Key]:
        if type(context) is Predictions:
            seconds = context.seconds
            return [(seconds[c.info.stable_id] * (c.tasks + 1),) for c in eligible]
        return [((c.tasks + 1) / static_speed(c),) for c in eligible]

    def describe(self, candidate: Candidate, score: Key, context: Any) -> str:
        queue = f" x {candidate.tasks + 1} (tasks + 1)" if candidate.tasks else ""
        if type(context) is Predictions:
            return f"{context.label} {_seconds(context.seconds[candidate.info.stable_id])}{queue}"
        kind = str(candidate.info.kind)
        speed = static_speed(candidate)
        return f"static {speed:g} ({max(candidate.info.compute_units, 1)} CU x {kind} {KIND_WEIGHT.get(kind, 1.0):g}){queue}"


def _seconds(value: float) -> str:
    if value >= 1:
        return f"{value:.3g} s"
    if value >= 1e-3:
        return f"{value * 1e3:.3g} ms"
    return f"{value * 1e6:.3g} us"


class Priority(Policy):
    name = "priority"
    rejects = True
    summary = "takes a free device, else one held by lower priority classes, else shares its own class"

    def reject(self, candidate: Candidate, request: Request) -> str | None:
        held = candidate.held_by
        if held is None:
            return None
        mine, theirs = PRIORITY_RANK[request.priority], PRIORITY_RANK[held]
        if mine > theirs or (mine == theirs and request.priority != "low"):
            return None
        holders = ", ".join(candidate.holders) or "a task"
        if mine == theirs:
            return f"held by low-priority {holders}; low requests queue for a free device"
        return f"held by {held}-priority {holders}"

    def admit(self, held: Sequence[Candidate], request: Request) -> list[Candidate]:
        takes = _TAKES[request.priority]  # reject's rule as a table (a test compares the two)
        return [c for c in held if c.held_by in takes]

    def score(self, candidate: Candidate, request: Request, context: Any) -> Key:
        held = candidate.held_by
        rank = 0 if held is None else (1 if PRIORITY_RANK[held] < PRIORITY_RANK[request.priority] else 2)
        return (rank, candidate.load, candidate.tasks)

    def scores(self, eligible: Sequence[Candidate], request: Request, context: Any) -> list[Key]:
        mine = PRIORITY_RANK[request.priority]
        return [(0 if c.held_by is None else 1 if PRIORITY_RANK[c.held_by] < mine else 2,
                 c.used / c.info.memory if c.info.memory > 0 else 0.0, c.tasks) for c in eligible]

    def leads(self, eligible: Sequence[Candidate], request: Request, context: Any) -> list[Any]:
        state = _HOLD_STATE[request.priority]
        return [(state[c.held_by], c.used / c.info.memory if c.info.memory > 0 else 0.0, c.tasks, c.order)
                for c in eligible]

    def describe(self, candidate: Candidate, score: Key, context: Any) -> str:
        state = ("free", f"takes from {candidate.held_by}", f"shares with {candidate.held_by}")[score[0]]
        return f"{state}, {_usage(candidate)}"


#: By the request's class: the holders' classes (None: free) whose devices it may have.
_TAKES = {mine: frozenset([None, *(theirs for theirs, rank in PRIORITY_RANK.items()
                                   if rank < PRIORITY_RANK[mine] or (theirs == mine and mine != "low"))])
          for mine in PRIORITY_RANK}
#: By the request's class: the priority score's first part by holders' class (0 free, 1 taken
#: from a lower class, 2 shared).
_HOLD_STATE = {mine: {None: 0, **{theirs: 1 if rank < PRIORITY_RANK[mine] else 2 for theirs, rank in PRIORITY_RANK.items()}}
               for mine in PRIORITY_RANK}


# The names are hetero.core.config.POLICIES (a test keeps the two in step).
_POLICIES: dict[str, Policy] = {p.name: p for p in (FirstFit(), Binpack(), Spread(), Fastest(), Priority())}


def get_policy(name: str | Policy) -> Policy:
    """The policy called ``name`` (one of ``hetero.core.config.POLICIES``), or ``name`` itself when a Policy."""
    if isinstance(name, Policy):
        return name
    key = str(name).strip().lower().replace("_", "-")
    policy = _POLICIES.get(key) or _POLICIES.get({"firstfit": "first-fit", "first": "first-fit"}.get(key, ""))
    if policy is None:
        raise ValueError(f"unknown placement policy {name!r}; valid policies: {', '.join(POLICIES)}"
                         + did_you_mean(key, POLICIES))
    return policy


# -- the decision ----------------------------------------------------------------------
class Ranking:
    """A policy's verdict over candidates: eligible ones best first with their sort keys
    (``ranked``), rejected ones with the reason (``rejected``), and whether the request should
    queue (``queued``: nothing eligible and some device refused only because it is held).
    The reasons are worked out when first asked (a placement with a winner never asks)."""

    __slots__ = ("policy", "request", "ranked", "context", "candidates", "_eligible", "_verdict")

    def __init__(self, policy: Policy, request: Request, ranked: list[tuple[Key, Candidate]], context: Any,
                 candidates: Sequence[Candidate], eligible: Sequence[Candidate]) -> None:
        self.policy, self.request, self.ranked, self.context = policy, request, ranked, context
        self.candidates, self._eligible = candidates, eligible
        self._verdict: tuple[list[tuple[Candidate, str]], int] | None = None

    @property
    def winner(self) -> Candidate | None:
        return self.ranked[0][1] if self.ranked else None

    @property
    def rejected(self) -> list[tuple[Candidate, str]]:
        return self._reasons()[0]

    @property
    def queued(self) -> bool:
        return not self.ranked and self._reasons()[1] > 0

    def _reasons(self) -> tuple[list[tuple[Candidate, str]], int]:
        if self._verdict is None:
            kept = {id(c) for c in self._eligible}
            rejected: list[tuple[Candidate, str]] = []
            held = 0
            for c in self.candidates:
                if id(c) in kept:
                    continue
                reason = _common_reject(c, self.request)
                if reason is None and self.policy.rejects and c.held_by is not None:
                    reason = self.policy.reject(c, self.request)
                    held += reason is not None
                rejected.append((c, reason or ""))
            self._verdict = rejected, held
        return self._verdict

    def __repr__(self) -> str:
        return (f"Ranking(policy={self.policy.name!r}, winner={self.winner.name if self.winner else None!r}, "
                f"ranked={len(self.ranked)}, rejected={len(self.rejected)}, queued={self.queued})")


def _common_reject(candidate: Candidate, request: Request) -> str | None:
    info = candidate.info
    if request.exclude and (info.name in request.exclude or info.stable_id in request.exclude):
        return "excluded by the request"
    if candidate.quarantined:
        return "quarantined (see `hetero quarantine`)"
    if candidate.health is _UNHEALTHY:
        return "unhealthy" + (f": {candidate.health_reason}" if candidate.health_reason else "")
    if request.kinds and str(info.kind) not in request.kinds:
        return f"kind {info.kind} not requested ({', '.join(request.kinds)})"
    if request.vendors and info.vendor.lower() not in request.vendors:
        return f"vendor {info.vendor} not requested ({', '.join(request.vendors)})"
    if request.backends and info.backend not in request.backends:
        return f"backend {info.backend} not requested ({', '.join(request.backends)})"
    if request.memory > candidate.free:
        return f"needs {format_size(request.memory)}, {format_size(candidate.free)} free of {format_size(info.memory)}"
    return None


def _preference(candidate: Candidate, request: Request) -> int:
    info = candidate.info
    rank = 0
    if request.kinds:
        rank = request.kinds.index(str(info.kind))
    if request.vendors:
        rank = rank * 16 + request.vendors.index(info.vendor.lower())
    if request.backends:
        rank = rank * 16 + request.backends.index(info.backend)
    return rank


def rank(candidates: Sequence[Candidate], request: Request, policy: Policy, cost_model: CostModel | None = None,
         full: bool = True) -> Ranking:
    """Apply ``policy`` to ``candidates`` for ``request``: the :class:`Ranking` (pure, no I/O).
    ``full=False`` keeps only the winner in ``ranked`` (what placing needs; explaining needs all).

    Sort key of an eligible device: ``(preference, health rank, policy score, order, name,
    stable id, position)``. The tail is unique, so ties never depend on timing or hashing
    and sorting never compares candidates. Written for speed: it runs on every placement.
    """
    if not isinstance(candidates, (list, tuple)):
        candidates = list(candidates)  # walked again when the reasons for rejections are asked
    memory, unhealthy = request.memory, _UNHEALTHY  # locals: these run for every device of every placement
    filtered = bool(request.exclude or request.kinds or request.vendors or request.backends)
    if filtered:
        eligible = [c for c in candidates if _common_reject(c, request) is None]
    elif memory:
        eligible = [c for c in candidates if not (c.quarantined or c.health is unhealthy or c.info.memory - c.used < memory)]
    else:
        eligible = [c for c in candidates if not (c.quarantined or c.health is unhealthy)]
    if policy.rejects:
        eligible = policy.admit(eligible, request)
    preferred = filtered and bool(request.kinds or request.vendors or request.backends)
    if full:
        context = policy.prepare(eligible, request, cost_model)
        scores = policy.scores(eligible, request, context)
        ranked = [(_key(c, request, preferred, scores[index], index), c) for index, c in enumerate(eligible)]
        ranked.sort()
    elif not eligible:
        context, ranked = policy.prepare(eligible, request, cost_model), []
    else:
        # The winner alone: the device with the smallest lead (see Policy.leads) when it is healthy
        # and alone there; else (a degraded leader, orders shared by hand-made candidates, or a
        # request preferring kinds/vendors/backends) the smallest whole key.
        context, leads = policy.context_and_leads(eligible, request, cost_model)
        best = min(leads)
        i = leads.index(best)
        c = eligible[i]
        if not preferred and c.health is not _DEGRADED and leads.count(best) == 1:
            score = (best[0],) if policy.score_is_lead else policy.score(c, request, context)
            ranked = [(_key(c, request, False, score, i), c)]
        else:
            scores = policy.scores(eligible, request, context)  # as the full ranking scores them
            ranked = [min((_key(c, request, preferred, scores[i], i), c) for i, c in enumerate(eligible))]
    return Ranking(policy, request, ranked, context, candidates, eligible)


def _key(c: Candidate, request: Request, preferred: bool, score: Key, index: int) -> Key:
    """An eligible device's sort key (see :func:`rank`)."""
    return (_preference(c, request) if preferred else 0, 1 if c.health is _DEGRADED else 0, score,
            c.order, c.info.name, c.info.stable_id, index)
