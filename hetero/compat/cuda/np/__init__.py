"""``numba.cuda.np`` for ``hetero.compat.cuda``: the NumPy side of Numba's types (:mod:`.numpy_support`)."""

from __future__ import annotations

from hetero.compat.cuda.np import numpy_support

__all__ = ["numpy_support"]
