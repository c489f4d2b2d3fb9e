"""Fault handling: error taxonomy, health monitor, quarantine, injection and migration.

    >>> import hetero
    >>> c = hetero.fault.classify(error)           # fault class + action, joined with Xid events
    >>> c.fault_class, c.action, c.quarantine, c.ttl
    >>> with hetero.fault.events(kind="health") as sub:   # subscribe to the event bus
    ...     for event in sub: ...
    >>> hetero.fault.quarantine.entries()           # devices no process should pick
    >>> hetero.fault.monitor.start()                # poll device health in the background
    >>> with hetero.fault.inject("cpu:alloc:nth=3:oom"): ...   # fault injection (tests, drills)

Importing this package loads no vendor library. May import: the scheduler, the backends' error
tables and the ground floor; what it needs from above (torch's op boundary) it asks through hooks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetero.fault import event_bus, monitor, quarantine, taxonomy
from hetero.fault.classify import Classification, classify
from hetero.fault.event_bus import Subscription, events, publish, recent
from hetero.fault.taxonomy import Action, FaultClass

if TYPE_CHECKING:
    from hetero.fault.injection import inject

__all__ = [
    "Action", "Classification", "FaultClass", "Subscription", "classify", "event_bus", "events", "inject",
    "monitor", "publish", "quarantine", "recent", "taxonomy",
]


def __getattr__(name: str) -> object:
    # ``inject`` (the function) lives in hetero.fault.injection (the module); load it on first use.
    if name == "inject":
        from hetero.fault.injection import inject

        return inject
    raise AttributeError(f"module 'hetero.fault' has no attribute {name!r}")
