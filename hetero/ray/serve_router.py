"""How the ingress of :mod:`hetero.ray.serve` picks a replica: Ray Serve's power of two choices
among the replicas whose devices may answer.

Ray Serve's default router prefers the replica with the shorter queue. A replica whose devices are
all quarantined refuses requests at once, so its queue stays empty, and the default router would
send it most requests until Ray Serve's health check removes it (a black hole, for seconds). Each
replica reports whether it has a usable device in its routing stats (``record_routing_stats``,
polled every :data:`STATS_PERIOD` seconds); this router leaves out those that report none, unless
every replica does. The ingress's retries cover the moments before a report arrives.

Importing this module imports Ray Serve: it is loaded by Ray Serve in the ingress, from its path.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from ray.serve.request_router import FIFOMixin, PendingRequest, RequestRouter, RunningReplica

#: The routing stat a replica reports: whether some device of its pool may answer.
USABLE = "hetero_usable"
#: Seconds between two reports of a replica.
STATS_PERIOD = 0.5
PATH = "hetero.ray.serve_router.DeviceHealthRouter"

T = TypeVar("T")


def usable_replicas(replicas: Sequence[T], stats: Callable[[T], dict[str, Any]]) -> list[T]:
    """The replicas that did not report their devices unusable; all of them when every one did (the
    ingress then gets their refusal, and answers 503 once its retries are spent)."""
    kept = [r for r in replicas if stats(r).get(USABLE, True) is not False]
    return kept or list(replicas)


class DeviceHealthRouter(FIFOMixin, RequestRouter):
    """Power of two choices over the replicas with a usable device."""

    async def choose_replicas(self, candidate_replicas: list[RunningReplica],
                              pending_request: PendingRequest | None = None) -> list[list[RunningReplica]]:
        kept = usable_replicas(candidate_replicas, lambda r: r.routing_stats or {})
        if not kept:
            return []
        return [random.sample(kept, min(2, len(kept)))]


__all__ = ["PATH", "STATS_PERIOD", "USABLE", "DeviceHealthRouter", "usable_replicas"]
