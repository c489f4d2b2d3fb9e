"""The failover standby of ``hetero.guard``: get the device the work would move to ready, in the
background, before any fault.

Moving work to a device this process has not used yet pays for discovering every backend
(importing CuPy alone can take half a second), opening the device, and loading its backend's
compiler (Numba takes one to two seconds to load). The standby thread does that once, when
the guard starts: it lists the devices, picks the failover candidate as a recovery would,
checks its health, and runs one tiny hetero kernel on it. A recovery then finds the device
open and its libraries loaded, and pays only for restoring the state and replaying.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from hetero.array import zeros
from hetero.device import Device
from hetero.kernels import kernel
from hetero.language import global_id

log = logging.getLogger("hetero.fault.guard")


@kernel
def standby_probe(out):
    i = global_id(0)
    if i < out.shape[0]:
        out[i] = 1.0


class Standby:
    """Prepares the device ``pick()`` returns on a daemon thread; :meth:`wait` joins it."""

    def __init__(self, pick: Callable[[], Device | None]) -> None:
        self.device: Device | None = None  # the prepared device, once ready
        self.error: str | None = None  # why it could not be prepared
        self._thread = threading.Thread(target=self._prepare, args=(pick,), name="hetero-guard-standby", daemon=True)
        self._thread.start()

    def _prepare(self, pick: Callable[[], Device | None]) -> None:
        try:
            device = pick()
            if device is None:
                return
            out = zeros(1, device=device)
            standby_probe[1](out)
            out.numpy()
            self.device = device
            log.debug("hetero.guard: %s is ready as the failover device", device.name)
        except Exception as exc:  # noqa: BLE001 - a standby not prepared is no error: recovery prepares it then
            self.error = f"{type(exc).__name__}: {exc}"
            log.info("hetero.guard: could not prepare a failover device: %s", self.error)

    def wait(self, timeout: float | None = None) -> Device | None:
        """Wait (at most ``timeout`` seconds) for the preparation; the prepared device, or None."""
        self._thread.join(timeout)
        return self.device

    @property
    def running(self) -> bool:
        return self._thread.is_alive()
