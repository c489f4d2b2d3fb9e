"""Casts between dtypes as torch makes them, including float to integer, checked.

A float to integer cast truncates toward zero in torch, and in C, OpenCL and SYCL, for every
value the integer type holds; for NaN, infinities and values beyond its range C leaves the
result undefined and each device (and torch on each CPU) gives its own. :func:`astype` therefore
checks a float to integer cast's input on the device first: all in range, it casts there (the
same values as torch's); otherwise the node runs in torch on the host (:class:`NotLowered`),
so the result is torch's own. The check reads one bool on the host, so a graph holding such a
cast runs eagerly, not replayed as a launch plan. A complex to real cast keeps the real part, as
torch's does.
"""

from __future__ import annotations

from typing import Any

import numpy as np

import hetero
import hetero.xp as xp
from hetero.torch.backend.lowerings.registry import NotLowered


def in_range(x: hetero.Array, integer: np.dtype[Any]) -> bool:
    """Whether every value of the float array ``x`` truncates to a value ``integer`` holds (NaN
    does not). The bounds are powers of two (or 0), exact in every float type from float32 up;
    a value just below the lowest (``-2**31 - 0.5`` for int32) is refused too, which only sends it
    to the host."""
    if x.size == 0:
        return True
    info = np.iinfo(integer)
    wide = x if x.dtype.itemsize >= 4 else xp.astype(x, np.dtype(np.float32))  # float16 cannot hold 2**31
    inside = xp.logical_and(wide >= float(info.min), wide < float(info.max) + 1.0)
    return bool(xp.all(inside))


def astype(x: hetero.Array, dtype: np.dtype[Any]) -> hetero.Array:
    """``x`` in ``dtype`` with torch's values, or :class:`NotLowered` where only torch knows them."""
    if x.dtype == dtype:
        return x
    if x.dtype.kind == "c" and dtype.kind != "c":
        if dtype.kind == "b":
            raise NotLowered("a complex to bool cast")
        x = xp.real(x)  # torch keeps the real part (and warns that it drops the imaginary one)
        if x.dtype == dtype:
            return x
    if x.dtype.kind == "f" and dtype.kind in "iu" and not in_range(x, dtype):
        raise NotLowered(f"a float to integer cast of NaN, an infinity or a value beyond {dtype}'s range "
                         "(undefined in C: each device gives its own)")
    return xp.astype(x, dtype)


__all__ = ["astype", "in_range"]
