"""The health monitor while guarded: entering a :func:`hetero.guard` starts the process's
health monitor (:func:`hetero.fault.monitor.start`: a daemon thread polling every opened
device each ``health_interval`` seconds, ``HETERO_HEALTH_INTERVAL``), so Xid and health
events reach the classifier while the guarded loop runs.

Guards count as users: the first one entered starts the monitor when it is not running, and
the last one to leave stops it again, but only when guards started it (a monitor the program
started itself keeps running). Nested guards and guards in several threads share the one
monitor.
"""

from __future__ import annotations

import logging
import threading

log = logging.getLogger("hetero.recovery.guard")

_lock = threading.Lock()
_users = 0  # guards inside their `with` block
_started = False  # whether guards started the running monitor (then the last one out stops it)


def acquire() -> None:
    """A guard was entered: start the monitor if it is not running (never raises: a guard
    works without it)."""
    global _users, _started
    with _lock:
        _users += 1
        from hetero.fault import monitor

        if monitor.running():
            return
        try:
            monitor.start()
        except Exception as exc:  # noqa: BLE001 - health polling is an aid; the guard still recovers on errors
            log.warning("hetero.guard: could not start the health monitor (%s: %s); going on without it",
                        type(exc).__name__, exc)
            return
        _started = True


def release() -> None:
    """A guard was left: the last one out stops the monitor the guards started."""
    global _users, _started
    with _lock:
        _users = max(0, _users - 1)
        if _users or not _started:
            return
        _started = False
        from hetero.fault import monitor

        monitor.stop()


def users() -> int:
    """How many guards are inside their ``with`` block now."""
    return _users
