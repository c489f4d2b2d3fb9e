"""The element types hetero arrays hold, and how user spellings map onto them.

Arrays hold contiguous data of bool, int8–int64, uint8–uint64, float16/32/64 and
complex64/128 (stored as NumPy stores them: interleaved float32 or float64 (real, imag)
pairs; kernels see them only through float component views, :mod:`hetero.array.components`).
Anything else (object, strings, datetimes) is refused with the list of what is supported.
This module imports nothing else of the project but errors.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core.errors import UnsupportedDtypeError

bool_ = np.dtype(np.bool_)
int8 = np.dtype(np.int8)
int16 = np.dtype(np.int16)
int32 = np.dtype(np.int32)
int64 = np.dtype(np.int64)
uint8 = np.dtype(np.uint8)
uint16 = np.dtype(np.uint16)
uint32 = np.dtype(np.uint32)
uint64 = np.dtype(np.uint64)
float16 = np.dtype(np.float16)
float32 = np.dtype(np.float32)
float64 = np.dtype(np.float64)
complex64 = np.dtype(np.complex64)
complex128 = np.dtype(np.complex128)

SUPPORTED: tuple[np.dtype[Any], ...] = (
    bool_, int8, int16, int32, int64, uint8, uint16, uint32, uint64, float16, float32, float64,
    complex64, complex128,
)
_SUPPORTED_SET = frozenset(SUPPORTED)
_NAMES = ", ".join(str(d) for d in SUPPORTED)
# Dtypes users meet in other libraries, with the conversion that keeps their data.
_HINTS = {
    "bfloat16": "bfloat16 has no portable representation on every device; convert it first "
                "(torch: tensor.float() for float32, or tensor.half() for float16)",
}


def as_dtype(spec: Any) -> np.dtype[Any]:
    """Resolve a dtype spelling (numpy dtype, type, name such as ``"float32"``, a torch dtype or a
    Numba type such as ``numba.float32``).

    Raises :class:`UnsupportedDtypeError` naming the supported dtypes.
    """
    if isinstance(spec, np.dtype) and spec in _SUPPORTED_SET:
        return spec
    text = str(spec)
    if type(spec).__module__.startswith("numba."):
        spec = text  # numba.float32 -> "float32": by name, so that this module never imports numba
    if text.startswith("torch."):
        # torch.float32 -> "float32": torch dtypes are resolved by name so that
        # this module never imports torch.
        spec = text.removeprefix("torch.")
    if str(spec) in _HINTS:
        raise UnsupportedDtypeError(f"dtype {spec} is not supported: {_HINTS[str(spec)]}; supported dtypes: {_NAMES}")
    try:
        dtype = np.dtype(spec)
    except TypeError as exc:
        raise UnsupportedDtypeError(f"unknown dtype {spec!r}; supported dtypes: {_NAMES}") from exc
    if not dtype.isnative:
        raise UnsupportedDtypeError(
            f"non-native byte order {dtype.str!r} is not supported; convert with .astype({dtype.name!r}) first"
        )
    if dtype not in _SUPPORTED_SET:
        raise UnsupportedDtypeError(f"dtype {dtype} is not supported by hetero arrays; supported dtypes: {_NAMES}")
    return dtype
