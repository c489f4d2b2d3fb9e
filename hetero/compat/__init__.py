"""Doors for code written against other accelerator APIs, so it moves to any device unchanged.

* :mod:`hetero.compat.cuda`: Numba's CUDA API (``from hetero.compat import cuda`` in place of
  ``from numba import cuda``): ``@cuda.jit`` kernels with Numba's typing and launch semantics,
  device arrays, atomics, ``cuda.random`` and ``cuda.reduce``, on every hetero device.
* :func:`explain`: what a kernel needs of a device (features, memory, barriers, grid syncs), and
  which devices here run it.

May import: every floor below, the kernels and arrays rooms, and its own floor's rooms.
"""

from __future__ import annotations

from hetero.compat.explain import explain

__all__ = ["explain"]
