"""``numba.cuda.cudadrv`` for ``hetero.compat.cuda``: only :mod:`devicearray`, which programs import
the device array type from (CUDA's driver itself has no counterpart on other devices)."""

from __future__ import annotations

from hetero.compat.cuda import devicearray

__all__ = ["devicearray"]
