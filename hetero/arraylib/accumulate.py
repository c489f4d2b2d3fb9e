"""The dtype rules of reductions and scans: what each one returns, and the type it folds in.

The array API standard (2024.12) and NumPy agree on these:

- ``sum``, ``prod``, ``cumulative_sum``, ``cumulative_prod`` without ``dtype=``: signed
  integers (and bool) give int64, unsigned integers uint64, floats their own dtype. With
  ``dtype=`` the result has that dtype (each element converted to it first, as NumPy does).
- ``min``, ``max``: the input's dtype. ``argmin``, ``argmax``: int64. ``any``, ``all``: bool.
- ``mean``, ``std``, ``var``: floating input only, result of its dtype; an integer or bool
  input is a TypeError naming the remedy (``x.astype(hetero.float32)`` first).

The type folded in (the accumulator) is the result's, except that float16 folds in float32
and is rounded to float16 once at the end (so a float16 sum is as accurate as float32's,
rounded once), and that integers narrower than 32 bits and bool fold min/max in 32-bit
integers (exactly); ``any``/``all`` fold 0/1 as int32.

(Elementwise type promotion lives elsewhere; these rules concern reductions only.)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.core.errors import UnsupportedDtypeError
from hetero.core.types import ScalarType, i32, scalar_type, u32


def _check_dtype(dtype: Any) -> np.dtype[Any]:
    return dtypes.as_dtype(dtype)


def sum_dtype(x: np.dtype[Any], dtype: Any = None) -> np.dtype[Any]:
    """The result dtype of ``sum``/``prod``/``cumulative_*`` of ``x`` (with ``dtype=`` when given)."""
    if dtype is not None:
        return _check_dtype(dtype)
    if x.kind in "bi":
        return dtypes.int64
    if x.kind == "u":
        return dtypes.uint64
    return x


def float_dtype(x: np.dtype[Any], what: str) -> np.dtype[Any]:
    """The result dtype of ``mean``/``std``/``var`` of ``x``: TypeError for non-float input."""
    if x.kind != "f":
        raise UnsupportedDtypeError(f"{what}() needs a floating-point array, got {x}; convert it first, "
                                    f"e.g. x.astype(hetero.float32) (or float64 where the device has fp64)")
    return x


def accumulator(result: np.dtype[Any]) -> ScalarType:
    """The type a sum, product, mean or variance with result dtype ``result`` folds in."""
    return scalar_type(dtypes.float32 if result == dtypes.float16 else result)


def extreme_accumulator(x: np.dtype[Any]) -> ScalarType:
    """The type ``min``/``max``/``argmin``/``argmax`` of ``x`` fold in (exact for every input)."""
    if x == dtypes.float16:
        return scalar_type(dtypes.float32)
    if x.kind == "b" or (x.kind == "i" and x.itemsize < 4):
        return i32
    if x.kind == "u" and x.itemsize < 4:
        return u32
    return scalar_type(x)


__all__ = ["accumulator", "extreme_accumulator", "float_dtype", "sum_dtype"]
