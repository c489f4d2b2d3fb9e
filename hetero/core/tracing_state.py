"""Whether this thread is tracing a function for :func:`hetero.jit` (set by :mod:`hetero.plans.recorder`).

On the ground floor so that the floors below the recorder can ask it cheaply: a host-memory
device's fast paths that write an array's memory from the host directly (``full`` on ``cpu``)
take the runtime's ``upload`` instead while tracing, so the write is a step of the plan.
"""

from __future__ import annotations

import threading

_STATE = threading.local()


def active() -> bool:
    """Whether this thread is tracing now."""
    return getattr(_STATE, "on", False)


def set_active(on: bool) -> None:
    """Mark this thread as tracing (or not)."""
    _STATE.on = on


__all__ = ["active", "set_active"]
