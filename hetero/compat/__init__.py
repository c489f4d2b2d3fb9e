"""Doors for code written against other accelerator APIs, so it moves to any device unchanged.

* :mod:`hetero.compat.cuda`: Numba's CUDA API (``from hetero.compat import cuda`` in place of
  ``from numba import cuda``): ``@cuda.jit`` kernels with Numba's typing and launch semantics,
  device arrays, atomics, ``cuda.random`` and ``cuda.reduce``, on every hetero device.
"""
