"""``hetero.heartbeat(step)``: tell the ``hetero-run`` supervisor this worker is alive.

Outside ``hetero-run`` (``HETERO_HEARTBEAT_FILE`` unset) a call costs one check of a
module-level cached value, so training loops may call it every step unconditionally.
Under ``hetero-run`` it rewrites the heartbeat file (JSON, fields in
:data:`hetero.fault.protocol.HEARTBEAT_FIELDS`) atomically, at most every
:data:`MIN_INTERVAL` seconds; the first call always writes, and :func:`flush` writes the
latest step at once (the worker bootstrap calls it on a clean exit).
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

from hetero.core import launch_counts
from hetero.fault.protocol import ENV_HEARTBEAT_FILE
from hetero.core.files import atomic_write
from hetero.core.registry import current_device, opened_devices
from hetero.core.torch_devices import loaded_torch_device

#: The shortest time between two heartbeat writes, in seconds.
MIN_INTERVAL = 0.2

_UNRESOLVED: Any = object()
_path: Path | None | Any = _UNRESOLVED  # resolved from the environment on first call
_last_write = float("-inf")  # monotonic time of the last write
_step: int | None = None  # the latest step reported, written or not
_warned = False  # a write failure was reported


def heartbeat(step: int | None = None) -> None:
    """Report that this worker is alive (and, optionally, at ``step``).

    A no-op unless the process runs under ``hetero-run``; writes are throttled to one
    every :data:`MIN_INTERVAL` seconds, so calling it every step is cheap."""
    global _step
    path = _path if _path is not _UNRESOLVED else _resolve()
    if path is None:
        return
    if step is not None:
        _step = int(step)
    if time.monotonic() - _last_write >= MIN_INTERVAL:
        _write(path)


def flush() -> None:
    """Write the latest heartbeat now, unthrottled (no-op outside ``hetero-run``)."""
    path = _path if _path is not _UNRESOLVED else _resolve()
    if path is not None:
        _write(path)


def heartbeat_path() -> Path | None:
    """The heartbeat file this process writes, or None outside ``hetero-run``."""
    return _path if _path is not _UNRESOLVED else _resolve()


def reset() -> None:
    """Forget the cached environment and throttle state (for tests that change the env)."""
    global _path, _last_write, _step, _warned
    _path, _last_write, _step, _warned = _UNRESOLVED, float("-inf"), None, False


def _resolve() -> Path | None:
    global _path
    value = os.environ.get(ENV_HEARTBEAT_FILE, "")
    _path = Path(value) if value else None
    return _path


def _write(path: Path) -> None:
    global _last_write, _warned
    record = {
        "time": time.time(),
        "step": _step,
        "pid": os.getpid(),
        "device": _device_name(),
        "launches": _launches(),
        "host_fallbacks": _host_fallbacks(),
        "torch_device": worker_torch_device(),
    }
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(record))
    except OSError as exc:
        # A heartbeat that cannot be written must not kill the training step; the supervisor
        # will notice the silence. Say so on stderr, once per process.
        if not _warned:
            _warned = True
            print(f"hetero: cannot write heartbeat file {path}: {exc} "
                  f"(check that {ENV_HEARTBEAT_FILE}'s directory is writable)", file=sys.stderr)
    _last_write = time.monotonic()


def _host_fallbacks() -> int | None:
    # Functions computed on the host for want of a device library (ground-floor counter, as launches).
    try:
        return sum(launch_counts.host_fallbacks().values())
    except Exception:  # noqa: BLE001 - a counter bug must not break the heartbeat
        return None


def _device_name() -> str | None:
    # Never opens a backend: the device in use (hetero.use_device) or the configured spec.
    current = current_device()
    if current is not None:
        return str(current.name)
    return os.environ.get("HETERO_DEVICE") or None


def worker_torch_device() -> str | None:
    """Where torch runs for this worker's device (:func:`hetero.torch_device`): the device in use,
    else the opened device ``HETERO_DEVICE`` names. Never opens a backend nor imports torch: None
    while neither device is known, or a GPU's torch device before the program imported torch."""
    try:
        found = current_device()
        name = os.environ.get("HETERO_DEVICE")
        if found is None and name:
            found = next((each for each in opened_devices() if each.name == name), None)
        return loaded_torch_device(found) if found is not None else None
    except Exception:  # noqa: BLE001 - a report of where torch runs must not break the heartbeat
        return None


def _launches() -> int | None:
    # The kernel layer's counters, kept on the ground floor: reading them imports no compiler.
    try:
        return launch_counts.total()
    except Exception:  # noqa: BLE001 - a counter bug must not break the heartbeat
        return None
