"""``numba.cuda.np.numpy_support`` for ``hetero.compat.cuda``: between NumPy dtypes and Numba's
types (``from_dtype``, ``as_dtype``). Record (structured) dtypes have no hetero type yet: they are
refused, naming the dtype. ``carray``/``farray`` (arrays over raw pointers) exist in CUDA's
address space only, and are refused.
"""

from __future__ import annotations

from typing import Any, NoReturn

import numpy as np

from hetero.compat.cuda import types as nbtypes

_BY_DTYPE: dict[np.dtype[Any], nbtypes.NumbaType] = {
    t.dtype: t for t in (nbtypes.boolean, nbtypes.int8, nbtypes.int16, nbtypes.int32, nbtypes.int64, nbtypes.uint8,
                         nbtypes.uint16, nbtypes.uint32, nbtypes.uint64, nbtypes.float16, nbtypes.float32,
                         nbtypes.float64, nbtypes.complex64, nbtypes.complex128)
}


def from_dtype(dtype: Any) -> nbtypes.NumbaType:
    """The Numba scalar type of a NumPy dtype (``np.float32`` -> ``float32``)."""
    found = np.dtype(dtype)
    if found.fields is not None:
        raise TypeError(f"from_dtype({found}): record (structured) dtypes have no hetero type; pass each field "
                        "as an array of its own")
    if found not in _BY_DTYPE:
        raise TypeError(f"from_dtype({found}): hetero's kernels take {', '.join(str(d) for d in _BY_DTYPE)}")
    return _BY_DTYPE[found]


def as_dtype(numba_type: Any) -> np.dtype[Any]:
    """The NumPy dtype of a Numba scalar type (``float32`` -> ``np.float32``)."""
    if not isinstance(numba_type, nbtypes.NumbaType) or numba_type.hetero_type is None:
        raise TypeError(f"as_dtype({numba_type!r}): not a scalar type with a dtype")
    return numba_type.dtype


def _pointer_array(name: str) -> NoReturn:
    raise TypeError(f"numba.cuda.np.numpy_support.{name}: arrays over raw pointers exist only in CUDA's address space; "
                    "hetero runs kernels on devices without one. Pass the array itself to the kernel")


def carray(ptr: Any, shape: Any, dtype: Any = None) -> NoReturn:
    _pointer_array("carray")


def farray(ptr: Any, shape: Any, dtype: Any = None) -> NoReturn:
    _pointer_array("farray")
