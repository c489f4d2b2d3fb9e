"""Complex arrays as the float arrays kernels can see: the *component view* of a complex64
(complex128) array is a float32 (float64) view of the same buffer with one more axis of
length 2, holding each element's (real, imag) pair, as NumPy lays complex numbers out.

Generated kernels never see a complex dtype: copies, casts and every complex operation
(:mod:`hetero.arraylib.complex.elementwise`) run on these views, so writes through them change the
complex array, and the fusion bookkeeping (keyed on the buffer's owner) sees them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array
from hetero.core.errors import UnsupportedDtypeError

_PART: dict[np.dtype[Any], np.dtype[Any]] = {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}
_WHOLE = {part: whole for whole, part in _PART.items()}


def is_complex(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "c"


def part_dtype(dtype: np.dtype[Any]) -> np.dtype[Any]:
    """float32 for complex64, float64 for complex128 (the dtype of each component)."""
    return _PART[dtype]


def complex_dtype(part: np.dtype[Any]) -> np.dtype[Any]:
    """complex64 for float32 (and float16, bool and the integers NumPy promotes to float32 or
    less), complex128 for float64: the complex dtype whose components hold ``part``."""
    if part in _WHOLE:
        return _WHOLE[part]
    found = np.result_type(part, np.complex64)
    if found not in _PART:
        raise UnsupportedDtypeError(f"no complex dtype holds {part}")
    return np.dtype(found)


def components(x: Array) -> Array:
    """The float view of complex ``x``, of shape ``x.shape + (2,)`` (see the module docstring)."""
    if not is_complex(x.dtype):
        raise UnsupportedDtypeError(f"components() takes a complex array, not {x.dtype}")
    root = x.base if x.base is not None else x
    strides = tuple(2 * s for s in x.strides) + (1,)
    view = Array(x.buffer, x.device, x.shape + (2,), _PART[x.dtype], strides, 2 * x.offset, root)
    if view.size and not (view.is_contiguous and (view.offset == 0 or x.device.runtime.host_memory)):
        view._copied_by_kernels()  # as Array._view marks views a kernel cannot take as they are
    return view


def real_part(x: Array) -> Array:
    """The real components of complex ``x``: a strided float view (writes change ``x``)."""
    return components(x)[..., 0]


def imag_part(x: Array) -> Array:
    """The imaginary components of complex ``x``: a strided float view (writes change ``x``)."""
    return components(x)[..., 1]


def as_complex(parts: Array) -> Array:
    """The complex array whose component view is ``parts`` (a C-contiguous float32/float64
    array whose last axis has length 2, owning its buffer): the same buffer, no copy."""
    if parts.base is not None or parts.ndim == 0 or parts.shape[-1] != 2 or parts.dtype not in _WHOLE:
        raise UnsupportedDtypeError(f"as_complex takes a contiguous float array of shape (..., 2), got "
                                    f"{parts.dtype}{list(parts.shape)}")
    made = Array(parts.buffer, parts.device, parts.shape[:-1], _WHOLE[parts.dtype])
    made._outside, parts._outside = parts._outside, 0  # the ledger's count follows the buffer's new owner
    return made


__all__ = ["as_complex", "complex_dtype", "components", "imag_part", "is_complex", "part_dtype", "real_part"]
