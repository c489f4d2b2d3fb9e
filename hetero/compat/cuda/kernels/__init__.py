"""``numba.cuda.kernels`` for ``hetero.compat.cuda``: the kernels Numba-CUDA ships (:mod:`.transpose`)."""

from __future__ import annotations

from hetero.compat.cuda.kernels import transpose

__all__ = ["transpose"]
