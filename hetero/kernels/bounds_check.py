"""The launch side of checked mode (``HETERO_BOUNDS_CHECK=1``, ``@hetero.kernel(debug=True)``,
``cuda.jit(debug=True)``): the flag array a checked kernel records its first out-of-bounds access
in (:mod:`hetero.compiler.ir.bounds`), passed as its last argument and read back after each launch.

A launch of a checked kernel waits for the device (to read the flags), so checked mode is for
finding a bug, not for speed; a kernel that is not checked runs none of this.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from hetero.array.ndarray import Array, zeros
from hetero.compiler.ir import bounds
from hetero.core.device import Device
from hetero.core.errors import KernelIndexError


class BoundsFlags:
    """One checked specialization's flag array on its device, and what raising from it needs."""

    def __init__(self, kernel: str, device: Device, sites: Callable[[], tuple[bounds.Site, ...]]) -> None:
        self.kernel = kernel
        self.device = device
        self.sites = sites  # the kernel's sites, found again only when a launch fails
        self.array: Array = zeros(bounds.SLOTS, np.uint32, device=device)

    def check(self) -> None:
        """After a launch: KernelIndexError when it made an out-of-bounds access (then the flags
        start afresh for the next launch)."""
        flags = self.array.numpy()
        if not flags[0]:
            return
        self.array = zeros(bounds.SLOTS, np.uint32, device=self.device)
        raise KernelIndexError(bounds.describe(self.kernel, self.sites(), [int(f) for f in flags]))


__all__ = ["BoundsFlags"]
