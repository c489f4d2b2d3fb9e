"""What the scheduler reads from the floor above it: which devices are quarantined, and when
that may have changed. The fault floor registers both when :mod:`hetero.fault.quarantine` and
:mod:`hetero.fault.event_bus` are imported (see :mod:`hetero.hooks`); the package's ``__init__``
names them as providers, so the first placement loads them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from hetero.hooks import Hook

#: Stable ids of the quarantined devices now (the one quarantine query: hetero.fault.quarantine).
QUARANTINED_IDS: Hook[Callable[[], frozenset[str]]] = Hook(
    "quarantined_ids", "the stable ids of the quarantined devices")
#: A subscription (``pending() -> bool``) to the event kinds given, published in this process from
#: now on (hetero.fault.event_bus): the ``"auto"`` cache re-reads the quarantine when one arrives.
SUBSCRIBE: Hook[Callable[[Sequence[str]], Any]] = Hook(
    "subscribe_events", "subscribes to this process's fault events")


def quarantined_ids() -> frozenset[str]:
    """Stable ids of the devices in quarantine (asked of the fault floor)."""
    return QUARANTINED_IDS.call()
