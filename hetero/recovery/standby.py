"""The failover standby of ``hetero.guard``: get the device the work would move to ready, in the
background, before any fault.

Moving work to a device this process has not used yet pays for discovering every backend
(importing CuPy alone can take half a second), opening the device, and loading its backend's
compiler (Numba takes one to two seconds to load). The standby thread does that once, when
the guard starts: it lists the devices, picks the failover candidate as a recovery would,
checks its health, and runs one tiny hetero kernel on it. A recovery then finds the device
open and its libraries loaded, and pays only for restoring the state and replaying.

Then it keeps the device's kernels ready: each time the guarded steps compile a kernel (new
argument types, or the first launch of a kernel) on the guarded device, :meth:`Standby.learn`
wakes the thread, which builds the same specializations for the failover device
(:meth:`hetero.kernels.kernel.Kernel.prebuild`). A cold move (a fresh process, an empty cache) then
finds its kernels built instead of building each at its first launch after the fault: on PoCL
that was most of a 2-5 s recovery.

And it holds memory there for the state's arrays (:mod:`hetero.recovery.reserve`): after each
snapshot whose arrays' shapes changed, :meth:`Standby.reserve_for` has the thread allocate them
on the failover device, so a restore there copies into mapped memory instead of faulting in
fresh pages (the most of a large restore); :meth:`Standby.take_reserve` hands it to the restore.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import numpy as np

from hetero.array.ndarray import zeros
from hetero.core.device import Device
from hetero.kernels import kernel as _kernels
from hetero.recovery import snapshot as _snapshot
from hetero.recovery.reserve import Layout, Reserve, layout_of
from hetero.kernels.kernel import kernel
from hetero.language import global_id

log = logging.getLogger("hetero.recovery.guard")


@kernel
def standby_probe(out):
    i = global_id(0)
    if i < out.shape[0]:
        out[i] = 1.0


class Standby:
    """Prepares the device ``pick()`` returns on a daemon thread, then builds there the kernels
    the guarded device ``on()`` compiles (each :meth:`learn` looks); :meth:`wait` waits for the
    preparation and the builds asked for so far, :meth:`stop` ends the thread."""

    def __init__(self, pick: Callable[[], Device | None], on: Callable[[], Device] | None = None) -> None:
        self.device: Device | None = None  # the prepared device, once ready
        self.error: str | None = None  # why it could not be prepared
        self.built = 0  # specializations built for the device ahead of a move
        self._on = on
        self._seen = -1  # the specialization generation last built for
        self.reserve: Reserve | None = None  # memory held on the device for the state's arrays
        self._wanted: tuple[Layout, list[np.ndarray]] | None = None  # a snapshot's layout and host copies to reserve for
        #: the shapes and dtypes reserve_for last asked for (compared before any layout is made), or None
        self._asked: tuple[Any, ...] | None = None
        self._reserve_lock = threading.Lock()
        self._wake = threading.Event()
        self._idle = threading.Event()
        self._stopped = False
        self._thread = threading.Thread(target=self._prepare, args=(pick,), name="hetero-guard-standby", daemon=True)
        self._thread.start()

    def _prepare(self, pick: Callable[[], Device | None]) -> None:
        try:
            device = pick()
            if device is None:
                self._idle.set()
                return
            out = zeros(1, device=device)
            standby_probe[1](out)
            out.numpy()
            self.device = device
            log.debug("hetero.guard: %s is ready as the failover device", device.name)
        except Exception as exc:  # noqa: BLE001 - a standby not prepared is no error: recovery prepares it then
            self.error = f"{type(exc).__name__}: {exc}"
            log.info("hetero.guard: could not prepare a failover device: %s", self.error)
            self._idle.set()
            return
        if self._on is None:
            self._idle.set()
            return
        self._build_loop(device)

    def _build_loop(self, device: Device) -> None:
        """Build what the guarded device has compiled so far, then again each time :meth:`learn` says more."""
        while not self._stopped:
            generation = _kernels.specialization_generation()
            if generation != self._seen:
                self._seen = generation
                self._build(device)
            self._fill_reserve(device)
            if _kernels.specialization_generation() == self._seen and self._wanted is None:
                self._idle.set()
            self._wake.wait()
            self._wake.clear()
        self._idle.set()

    def _build(self, device: Device) -> None:
        assert self._on is not None
        on = self._on()
        if on is device:
            return
        for each in _kernels.specialized_kernels():
            if self._stopped:
                return
            try:
                self.built += each.prebuild(device, on)
            except Exception as exc:  # noqa: BLE001 - built at its first launch after a move instead
                log.info("hetero.guard: could not build %s for %s ahead of a move: %s", each.name, device.name, exc)

    def _fill_reserve(self, device: Device) -> None:
        with self._reserve_lock:
            wanted, self._wanted = self._wanted, None
        if wanted is None or self._stopped:
            return
        layout, hosts = wanted
        try:
            made = Reserve.fill(device, hosts)
        except Exception as exc:  # noqa: BLE001 - no reserve: a restore allocates, as without one
            log.info("hetero.guard: could not reserve memory on %s for the state: %s", device.name, exc)
            made = None
        with self._reserve_lock:
            if self._wanted is None or self._wanted[0] == layout:  # not superseded meanwhile
                self.reserve = made

    def reserve_for(self, taken: _snapshot.Snapshot) -> None:
        """After a snapshot: when its arrays' shapes and dtypes differ from those last asked for (or
        the reserve was handed to a restore since), have the thread reserve memory for them on the
        failover device. Cheap when they do not: one tuple compared. A reserve that did not fit is
        not asked for again until the shapes change."""
        hosts = _snapshot.host_arrays(taken)
        asked = tuple([(h.shape, h.dtype) for h in hosts])
        if asked == self._asked:  # the common case, after every snapshot: asked already (held, or it did not fit)
            return
        if self._stopped or self.error is not None or self._on is None or not self._thread.is_alive():
            return
        self._asked = asked
        layout = layout_of(hosts)
        with self._reserve_lock:
            held = self.reserve.layout if self.reserve is not None else None
            if layout == held or (self._wanted is not None and self._wanted[0] == layout):
                return
            self._wanted = (layout, list(hosts))
        self._idle.clear()
        self._wake.set()

    def take_reserve(self, device: Device) -> Reserve | None:
        """The reserve, handed over for a restore onto ``device`` (None: none there)."""
        with self._reserve_lock:
            reserve = self.reserve if self.reserve is not None and self.reserve.device is device else None
            if reserve is not None:
                self.reserve, self._asked = None, None  # the next snapshot asks for a new one
            return reserve

    def learn(self) -> None:
        """After a guarded step: when some kernel was compiled since the last look, build it for the
        failover device in the background. Cheap when nothing was (one integer compared)."""
        if _kernels.specialization_generation() == self._seen:  # the common case, asked first
            return
        if self._stopped or self.error is not None or self._on is None or not self._thread.is_alive():
            return
        self._idle.clear()
        self._wake.set()

    def wait(self, timeout: float | None = None) -> Device | None:
        """Wait (at most ``timeout`` seconds) for the preparation and the builds asked for so far;
        the prepared device, or None."""
        if self._thread.is_alive():
            self._idle.wait(timeout)
        return self.device

    def stop(self) -> None:
        """End the thread after the build it is doing (if any)."""
        self._stopped = True
        self._wake.set()

    @property
    def running(self) -> bool:
        return self._thread.is_alive() and not self._idle.is_set()
