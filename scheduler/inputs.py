"""What the scheduler reads from the floors above it (which devices are quarantined, and when
that may have changed) and tells them (the tasks' memory quotas changed). The modules above
register each hook when imported (see :mod:`hetero.core.hooks`): :mod:`hetero.fault.quarantine`,
:mod:`hetero.fault.event_bus`, :mod:`hetero.torch.memory`; the package's ``__init__`` names them as
providers, so the first question loads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hetero.core.hooks import Hook

#: Stable ids of the quarantined devices now (the one quarantine query: hetero.fault.quarantine).
QUARANTINED_IDS: Hook[Callable[[], frozenset[str]]] = Hook(
    "quarantined_ids", "the stable ids of the quarantined devices")
#: A subscription (``pending() -> bool``) to the event kinds given, published in this process from
#: now on (hetero.fault.event_bus): the ``"auto"`` cache re-reads the quarantine when one arrives.
SUBSCRIBE: Hook[Callable[[Sequence[str]], Any]] = Hook(
    "subscribe_events", "subscribes to this process's fault events")

#: Called when a task with a memory quota starts or ends, with a function listing the tasks active
#: now: hetero.torch.memory sets torch's CUDA memory fractions to match (the scheduler imports no
#: vendor library).
QUOTAS_CHANGED: Hook[Callable[[Callable[[], Sequence[Any]]], None]] = Hook(
    "quotas_changed", "applies the active tasks' memory quotas to libraries that allocate by themselves")


def quarantined() -> frozenset[str]:
    """Stable ids of the devices in quarantine (asked of the fault floor)."""
    return QUARANTINED_IDS.call()
