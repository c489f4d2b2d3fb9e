"""Request routing: which member of a serving pool takes the next request.

A pool (:class:`hetero.onnx.Pool`) holds several members (a model session on a device; several
per device where throughput needs them) and asks a :class:`Router` for one per request. The
router keeps, per member, the requests outstanding on it and a moving average of how long it
answers; it knows nothing of ONNX Runtime. Policies (lower score wins; ties go to the member
listed first, so routing never depends on timing or hashing):

==================== =====================================================================
policy               score
==================== =====================================================================
least-outstanding    requests in flight on the member (the default: a slow or stuck member
                     gathers requests, so the others take the new ones)
round-robin          the next member in turn, among those allowed
fastest              expected finish: (in flight + 1) x the member's moving-average latency
                     (members not measured yet go first, so each gets measured)
==================== =====================================================================

Members leave routing (``disable``, a failed or quarantined device) and come back
(``enable``); a request can exclude members it has already tried. Thread-safe.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from collections.abc import Iterable, Sequence

from hetero.core.errors import ConfigError, did_you_mean

ROUTING_POLICIES = ("least-outstanding", "round-robin", "fastest")
DEFAULT_ROUTING = "least-outstanding"
#: Weight of the newest latency in the moving average of ``fastest``.
EWMA_WEIGHT = 0.2


@dataclasses.dataclass
class MemberLoad:
    """What the router knows of one member: requests in flight, answered and failed on it, and its
    moving-average latency (seconds)."""

    name: str
    outstanding: int = 0
    answered: int = 0
    failed: int = 0
    ewma_seconds: float | None = None
    enabled: bool = True


class Router:
    """Picks a member per request by ``policy`` over the members named ``members`` (in order)."""

    def __init__(self, members: Sequence[str], policy: str = DEFAULT_ROUTING) -> None:
        if policy not in ROUTING_POLICIES:
            raise ConfigError(f"unknown routing policy {policy!r}; valid: {', '.join(ROUTING_POLICIES)}"
                              + did_you_mean(policy, ROUTING_POLICIES))
        if len(set(members)) != len(members) or not members:
            raise ValueError(f"a router needs distinct member names, got {list(members)}")
        self.policy = policy
        self._loads = {name: MemberLoad(name) for name in members}
        self._order = list(members)
        self._enabled = [self._loads[name] for name in self._order]  # in order; rebuilt on disable/enable
        self._next = 0
        self._lock = threading.Lock()

    def acquire(self, exclude: Iterable[str] = ()) -> str | None:
        """The member the next request goes to (its outstanding count taken), or None when every
        enabled member is excluded or none is enabled."""
        skip = set(exclude) if exclude else None
        with self._lock:
            allowed = self._enabled if skip is None else [load for load in self._enabled if load.name not in skip]
            if not allowed:
                return None
            chosen = self._choose(allowed)
            chosen.outstanding += 1
            return chosen.name

    def release(self, member: str, seconds: float | None = None) -> None:
        """A request on ``member`` ended; ``seconds``: how long it took when it answered (None: it failed)."""
        with self._lock:
            load = self._loads[member]
            load.outstanding = max(load.outstanding - 1, 0)
            if seconds is None:
                load.failed += 1
                return
            load.answered += 1
            load.ewma_seconds = seconds if load.ewma_seconds is None else \
                (1 - EWMA_WEIGHT) * load.ewma_seconds + EWMA_WEIGHT * seconds

    def disable(self, member: str) -> None:
        with self._lock:
            self._loads[member].enabled = False
            self._enabled = [self._loads[name] for name in self._order if self._loads[name].enabled]

    def enable(self, member: str) -> None:
        with self._lock:
            self._loads[member].enabled = True
            self._enabled = [self._loads[name] for name in self._order if self._loads[name].enabled]

    def enabled(self) -> list[str]:
        with self._lock:
            return [load.name for load in self._enabled]

    def loads(self) -> list[MemberLoad]:
        with self._lock:
            return [copy.copy(self._loads[name]) for name in self._order]  # snapshots the caller may keep

    def _choose(self, allowed: list[MemberLoad]) -> MemberLoad:
        if self.policy == "round-robin":
            count = len(self._order)
            names = {load.name for load in allowed}
            for step in range(count):
                name = self._order[(self._next + step) % count]
                if name in names:
                    self._next = (self._order.index(name) + 1) % count
                    return self._loads[name]
        if self.policy == "fastest":
            unmeasured = [load for load in allowed if load.ewma_seconds is None]
            if unmeasured:
                return min(unmeasured, key=lambda load: load.outstanding)
            return min(allowed, key=lambda load: (load.outstanding + 1) * (load.ewma_seconds or 0.0))
        best = allowed[0]  # least outstanding; the first listed wins a tie
        for load in allowed:
            if load.outstanding < best.outstanding:
                best = load
        return best


__all__ = ["DEFAULT_ROUTING", "ROUTING_POLICIES", "MemberLoad", "Router"]
