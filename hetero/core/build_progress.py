"""Saying so when kernel builds take long: a cold first operation is not a silent hang.

:func:`building` wraps one kernel build. While builds for a device are running for longer than
:data:`THRESHOLD` seconds, one line goes to stderr::

    hetero: building kernels for oneapi:0 (the first run compiles them; later runs load them from the cache) ...

and when the last of them ends::

    hetero: built 3 kernels for oneapi:0 in 5.8 s; cached in /home/me/.cache/hetero

Only builds slower than the threshold are announced, and only where the ``progress`` setting
(``HETERO_PROGRESS``) allows: ``auto`` (the default) when stderr is a terminal, ``on`` always,
``off`` never. Every build also leaves a record on the ``hetero.compiler`` logger (INFO when it
took longer than the threshold, DEBUG otherwise), so ``HETERO_LOG=INFO`` shows the slow ones.

One daemon thread watches the builds in flight, started at the first build; a build costs a
lock and a dict entry, nothing when the cache already holds the kernel's record and binary.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import sys
import threading
import time
from collections.abc import Iterator
from typing import TextIO

from hetero.core.config import get_config

log = logging.getLogger("hetero.compiler")

#: Seconds a device's builds run before the line saying so is printed.
THRESHOLD = 1.0


@dataclasses.dataclass
class _Episode:
    """A device's builds, from the first that starts while none runs until :data:`GRACE` seconds pass
    with none running (a first operation builds its kernels one after another: one episode)."""

    started: float
    running: int = 0
    done: int = 0
    ended: float = 0.0
    announced: bool = False
    cache_dir: str = ""


#: Seconds without a build that end a device's episode.
GRACE = 0.5

_lock = threading.Condition()
_episodes: dict[str, _Episode] = {}
_watcher: list[threading.Thread] = []


def _enabled(stream: TextIO) -> bool:
    mode = get_config().progress
    if mode == "auto":
        isatty = getattr(stream, "isatty", None)
        return bool(isatty and isatty())
    return mode == "on"


def _say(line: str) -> None:
    stream = sys.stderr
    if _enabled(stream):
        try:
            print(line, file=stream, flush=True)
        except (OSError, ValueError):  # a closed or broken stderr: the build goes on
            pass


def _announce(device: str) -> str:
    return (f"hetero: building kernels for {device} (the first run compiles them; later runs load them from "
            "the cache) ...")


def _finished(device: str, episode: _Episode) -> str:
    where = f"; cached in {episode.cache_dir}" if episode.cache_dir else ""
    count = f"{episode.done} kernel{'s' if episode.done != 1 else ''}"
    return f"hetero: built {count} for {device} in {episode.ended - episode.started:.1f} s{where}"


def _step(now: float) -> tuple[list[str], float | None]:
    """The lines due at ``now`` and the seconds until the next may be (under the lock)."""
    lines: list[str] = []
    waits: list[float] = []
    for device, episode in list(_episodes.items()):
        if episode.running:
            if not episode.announced:
                if now - episode.started >= THRESHOLD:
                    episode.announced = True
                    lines.append(_announce(device))
                else:
                    waits.append(THRESHOLD - (now - episode.started))
        elif now - episode.ended >= GRACE:
            del _episodes[device]
            if episode.announced:
                lines.append(_finished(device, episode))
        else:
            waits.append(GRACE - (now - episode.ended))
    return lines, (min(waits) if waits else None)


def _watch() -> None:
    """Announce devices whose builds run past the threshold, and close their episodes (the thread's loop)."""
    while True:
        with _lock:
            while not any(e.running and not e.announced or not e.running for e in _episodes.values()):
                _lock.wait()
            lines, wait = _step(time.monotonic())
        for line in lines:
            _say(line)
        time.sleep(min(max(wait, 0.01), 0.25) if wait is not None else 0.25)


def _at_exit() -> None:
    """Close the announced episodes still open when the process ends (its last build's line)."""
    with _lock:
        lines = [_finished(device, e) for device, e in _episodes.items() if e.announced and not e.running]
        _episodes.clear()
    for line in lines:
        _say(line)


@contextlib.contextmanager
def building(device: str, kernel: str, cache_dir: str = "") -> Iterator[None]:
    """One build of ``kernel`` (its signature) for ``device``: counted into the device's episode."""
    start = time.monotonic()
    with _lock:
        episode = _episodes.get(device)
        if episode is None:
            episode = _episodes[device] = _Episode(started=start, cache_dir=cache_dir)
        episode.running += 1
        if not _watcher:
            thread = threading.Thread(target=_watch, name="hetero-build-progress", daemon=True)
            _watcher.append(thread)
            thread.start()
            atexit.register(_at_exit)
        _lock.notify_all()
    try:
        yield
    finally:
        end = time.monotonic()
        log.log(logging.INFO if end - start >= THRESHOLD else logging.DEBUG, "built %s for %s in %.2f s", kernel,
                device, end - start)
        with _lock:
            episode.running -= 1
            episode.done += 1
            episode.ended = end
            _lock.notify_all()


__all__ = ["GRACE", "THRESHOLD", "building"]
