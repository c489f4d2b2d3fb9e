"""Work ``hetero-run`` does ahead of a failure, in one background thread, so that a restart
does not wait for it:

- each worker's newest checkpoint is verified (every payload's sha256) soon after it
  appears, and the outcome remembered with the files' identity
  (:func:`hetero.checkpoint.store.check`): the restart then learns its resume step without hashing,
  unless a file changed since (a corrupt checkpoint is still found and skipped), and tells the
  restarted worker (:data:`hetero.checkpoint.store.ENV_VERIFIED`), whose ``load`` then reads those
  files without hashing them a second time;
- each device a worker may move to gets its first health check early (an OpenCL device's
  builds a probe kernel: ~0.1 s the first time, well under a millisecond after), so the
  check a restart makes of its new device is cheap.

The thread is busy at most :data:`BUSY_FRACTION` of the time, so it does not compete with
the workers for the CPU; it only reads (checkpoints, device health) and never decides
anything: the supervisor asks it through :meth:`Warmup.latest_step`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterable
from pathlib import Path

from hetero.checkpoint.store import VerifiedCache, check, checkpoints, latest_step, settled, verified_token
from hetero.core.registry import device as find_device

#: Seconds between looks for new checkpoints (a listing of each worker's directory).
POLL_SECONDS = 0.025
#: The most of its time the thread spends working: after a round that took t seconds of
#: hashing or probing it rests t * (1 / BUSY_FRACTION - 1).
BUSY_FRACTION = 0.25


class Warmup:
    """The background thread (see the module docstring). ``watch`` checkpoint directories and
    ``probe`` devices; :meth:`latest_step` is :func:`hetero.checkpoint.store.latest_step` with the
    thread's remembered checks (waiting for a check of the same checkpoint in progress)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()  # held while checking checkpoints: one hash of a checkpoint at a time
        self._verified: VerifiedCache = {}
        self._directories: list[Path] = []
        self._to_probe: list[str] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def watch(self, directory: Path) -> None:
        """Verify the checkpoints appearing in ``directory`` from now on."""
        if directory not in self._directories:
            self._directories = [*self._directories, directory]
        self._start()

    def probe(self, device_names: Iterable[str]) -> None:
        """Run the first health check of these devices (by hetero name) in the background."""
        self._to_probe = [*self._to_probe, *device_names]
        self._start()

    def latest_step(self, directory: Path) -> int | None:
        return self.latest(directory)[0]

    def latest(self, directory: Path) -> tuple[int | None, str | None]:
        """The newest valid checkpoint's step, and the :data:`hetero.checkpoint.store.ENV_VERIFIED` value
        that spares the worker hashing it again (None when it was checked too soon after it was
        written to be remembered)."""
        with self._lock:
            step = latest_step(directory, self._verified)
            if step is None:
                return None, None
            return step, verified_token(directory / f"step-{step:08d}.hckpt", self._verified)

    def close(self) -> None:
        """Stop the thread: it ends after the checkpoint it is hashing, if any (a daemon thread:
        waited for one second at most, never kept alive past the launcher)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=1)
            self._thread = None

    def _start(self) -> None:
        if self._thread is None and not self._stop.is_set():
            self._thread = threading.Thread(target=self._run, name="hetero-run-warmup", daemon=True)
            self._thread.start()

    def _run(self) -> None:
        rest = POLL_SECONDS
        while not self._stop.wait(rest):
            started = time.monotonic()
            for directory in self._directories:
                self._check_newest(directory)
            probes, self._to_probe = self._to_probe, []
            for name in probes:
                _first_health(name)
            worked = time.monotonic() - started
            rest = max(POLL_SECONDS, worked * (1 / BUSY_FRACTION - 1))

    def _check_newest(self, directory: Path) -> None:
        """Check the newest valid checkpoint in ``directory`` (and forget those pruned since)."""
        found = checkpoints(directory)
        present = {path for _, path in found}
        with self._lock:
            for path in [p for p in self._verified if p.parent == directory and p not in present]:
                del self._verified[path]
        for _, path in found:
            if self._stop.is_set() or not settled(path):
                return  # still being changed (or just written): the next round
            with self._lock:
                try:
                    check(path, self._verified)
                except Exception:  # noqa: BLE001, S112 - corrupt (remembered as such): the previous one then
                    continue
            return


def _first_health(name: str) -> None:
    try:
        find_device(name).health()
    except Exception:  # noqa: BLE001, S110 - only a warm-up: the restart asks again and acts on the answer
        pass
