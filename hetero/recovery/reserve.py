"""Memory the guard's standby holds on the failover device for the state's arrays, so that a
restore there copies into memory already mapped instead of allocating it.

A restore onto another device used to allocate each array afresh; the operating system then maps
every page of it on first touch, which costs more than the copy itself (512 MiB: ~0.2 s of page
faults against ~0.05 s of copying, on the host and on CPU OpenCL devices alike). The standby
allocates arrays of the last snapshot's shapes and dtypes on the failover device in the
background and writes the snapshot into them (which maps every page); a restore takes them
(:func:`hetero.recovery.snapshot.restore`'s ``spare``) and overwrites them with the snapshot it
restores. They are only ever the restored state: nothing reads them before that copy.

A reserve is held only while it fits in a quarter of the device's memory (:data:`SHARE`); past
that, or on a device that does not say its memory, the restore allocates as before.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.array.ndarray import Array, copyto, empty
from hetero.core.device import Device

log = logging.getLogger("hetero.recovery.guard")

#: The largest part of the failover device's memory a reserve may hold.
SHARE = 0.25

Layout = tuple[tuple[tuple[int, ...], str], ...]


def layout_of(hosts: Sequence[np.ndarray]) -> Layout:
    """What a reserve for these host copies holds: each array's shape and dtype."""
    return tuple((tuple(h.shape), h.dtype.str) for h in hosts)


class Reserve:
    """Arrays on ``device`` by shape and dtype; :meth:`take` hands each out once."""

    def __init__(self, device: Device, layout: Layout) -> None:
        self.device = device
        self.layout = layout
        self.nbytes = 0
        self._free: dict[tuple[tuple[int, ...], str], list[Array]] = {}
        self._lock = threading.Lock()

    @classmethod
    def fill(cls, device: Device, hosts: Sequence[np.ndarray]) -> Reserve | None:
        """A reserve on ``device`` for ``hosts`` (a snapshot's host copies: their shapes and dtypes,
        never their contents, which may still be on their way from the device), each array
        written once (zeros) so that its pages are mapped; None when it would not fit."""
        total = sum(h.nbytes for h in hosts)
        memory = device.info.memory
        if not hosts or memory <= 0 or total > SHARE * memory:
            if hosts:
                log.debug("hetero.guard: no reserve on %s for %d bytes of state (limit %.0f%% of %d bytes)",
                          device.name, total, SHARE * 100, memory)
            return None
        reserve = cls(device, layout_of(hosts))
        for host in hosts:
            made = empty(host.shape, dtype=host.dtype, device=device)
            copyto(made, np.zeros(host.shape, host.dtype))  # calloc'd: no pass over host memory to make it
            reserve._free.setdefault((tuple(host.shape), host.dtype.str), []).append(made)
            reserve.nbytes += host.nbytes
        device.synchronize()
        return reserve

    def take(self, device: Device, shape: tuple[int, ...], dtype: Any) -> Array | None:
        """An array of ``shape`` and ``dtype`` on ``device`` from the reserve, or None."""
        if device is not self.device:
            return None
        with self._lock:
            free = self._free.get((tuple(shape), np.dtype(dtype).str))
            return free.pop() if free else None
