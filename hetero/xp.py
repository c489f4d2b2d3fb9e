"""hetero's Python array API namespace (the standard's 2024.12 revision): ``hetero.xp``.

``x.__array_namespace__()`` returns this module for every hetero array, so array-API consumers
(scikit-learn with ``array_api_dispatch=True``, SciPy with ``SCIPY_ARRAY_API=1``,
array-api-compat) run on any hetero device, NVIDIA, AMD, Intel or OpenCL CPU alike::

    import hetero.xp as xp
    x = xp.asarray([[1.0, 2.0], [3.0, 4.0]], device="oneapi:0")
    xp.linalg.vector_norm(x, axis=1)

``hetero`` itself holds the same functions beside the device and kernel API; this module holds
the standard's names only (plus ``float16``, which hetero arrays also have), with the standard's
signatures. What the standard leaves to the library, decided once (see :mod:`hetero.arraylib.info`):
the default floating dtype is float32 on every device, the default integer and index dtype int64,
the default device :func:`hetero.device`'s (``HETERO_DEVICE``). ``copy=None`` shares memory where
it can, ``copy=False`` raises where a copy is needed, ``copy=True`` always copies.

Complex arrays (complex64, complex128 where the device has fp64) are stored as NumPy stores them
and computed on their real and imaginary parts (:mod:`hetero.arraylib.complex.elementwise`).
"""

from __future__ import annotations

import builtins
import math as _math
import sys
from types import ModuleType
from typing import Any


from hetero.core import dtypes as _dtypes
from hetero.array.ndarray import Array
from hetero.array.ndarray import arange, asarray, empty, full, ones, zeros
from hetero.array.ndarray import dlpack_owner, from_dlpack_object
from hetero.arraylib.cast import astype
from hetero.arraylib.creation import empty_like, eye, full_like, linspace, meshgrid, ones_like, tril, triu, zeros_like
from hetero.arraylib.complex import elementwise as _complex
from hetero.arraylib.fft import transforms as fft
from hetero.arraylib.linalg import namespace as linalg
from hetero.array.hooks import NAMESPACE
from hetero.arraylib.functions import (
    abs, acos, acosh, add, asin, asinh, atan, atan2, atanh, bitwise_and, bitwise_invert, bitwise_left_shift,
    bitwise_or, bitwise_right_shift, bitwise_xor, ceil, clip, copysign, cos, cosh, divide, equal, exp, expm1, floor,
    floor_divide, greater, greater_equal, hypot, isfinite, isinf, isnan, less, less_equal, log, log1p, log2, log10,
    logaddexp, logical_and, logical_not, logical_or, logical_xor, maximum, minimum, multiply, negative, nextafter,
    not_equal, positive, pow, reciprocal, remainder, round, sign, signbit, sin, sinh, sqrt, square, subtract, tan,
    tanh, trunc, where,
)  # noqa: A004 (the standard's names)
from hetero.arraylib.diff import diff
from hetero.arraylib.manipulation import concat, repeat, roll, stack, tile
from hetero.arraylib.linalg.matmul import matmul, matrix_transpose, tensordot, vecdot
from hetero.arraylib.reductions import all, any, argmax, argmin, cumulative_prod, cumulative_sum, max, mean, min, prod, std, sum, var  # noqa: A004 (the standard's names)
from hetero.arraylib.search import count_nonzero, nonzero
from hetero.arraylib.searchsorted import searchsorted
from hetero.arraylib.sets import unique_all, unique_counts, unique_inverse, unique_values
from hetero.arraylib.sort import argsort, sort
from hetero.arraylib.take import take, take_along_axis
from hetero.array.views import broadcast_arrays, broadcast_to, expand_dims, flip, moveaxis, permute_dims, reshape
from hetero.array.views import squeeze, unstack
from hetero.core.device import Device
from hetero.core.errors import ArrayError
from hetero.array.promotion import can_cast, result_type
from hetero.arraylib.dtype_functions import finfo, iinfo, isdtype
from hetero.arraylib.info import __array_namespace_info__

__array_api_version__ = "2024.12"

bool = _dtypes.bool_  # noqa: A001 (the standard's name)
int8, int16, int32, int64 = _dtypes.int8, _dtypes.int16, _dtypes.int32, _dtypes.int64
uint8, uint16, uint32, uint64 = _dtypes.uint8, _dtypes.uint16, _dtypes.uint32, _dtypes.uint64
float16, float32, float64 = _dtypes.float16, _dtypes.float32, _dtypes.float64
complex64, complex128 = _dtypes.complex64, _dtypes.complex128

e = _math.e
pi = _math.pi
inf = _math.inf
nan = _math.nan
newaxis = None


def from_dlpack(x: Any, /, *, device: str | Device | None = None, copy: builtins.bool | None = None) -> Array:
    """An array over a DLPack-capable object (torch, CuPy, NumPy): zero-copy on its own device,
    a copy where ``device`` names another one or ``copy=True``; ``copy=False`` raises where a copy
    is needed (``BufferError``, as the standard says)."""
    if not hasattr(x, "__dlpack_device__"):
        raise TypeError(f"from_dlpack takes an object with __dlpack__ and __dlpack_device__, not {type(x).__name__}")
    if isinstance(x, Array):  # hetero's own: no capsule (OpenCL devices have none), the same rules
        return _from_hetero(x, x.device if device is None else _resolve(device), copy)
    target = dlpack_owner(x) if device is None else _resolve(device)
    try:
        return from_dlpack_object(x, target, None, copy)
    except ArrayError as exc:
        if copy is False:
            raise BufferError(str(exc)) from exc
        raise


def _from_hetero(x: Array, target: Device, copy: builtins.bool | None) -> Array:
    """:func:`from_dlpack` of a hetero array: a view sharing its memory on its own device (``copy``
    None or False), a copy where ``copy=True`` or ``target`` is another device (BufferError for
    ``copy=False`` then)."""
    if target is not x.device:
        if copy is False:
            raise BufferError(f"from_dlpack(copy=False) cannot move an array from {x.device.name} to {target.name} "
                              "without a copy; pass copy=None or copy=True")
        return x.to_device(target)
    return x.copy() if copy else x[...]


def _resolve(device: str | Device) -> Device:
    from hetero.core.named_device import device as find

    return find(device)


def conj(x: Array, /) -> Array:
    """The complex conjugate (a copy of a real ``x``)."""
    return _complex.conj(x)


def real(x: Array, /) -> Array:
    """The real parts of ``x``: a view of a complex ``x``, as NumPy's; a real ``x`` itself."""
    return _complex.real(x)


def imag(x: Array, /) -> Array:
    """The imaginary parts of ``x``: a view of a complex ``x``; zeros of a real one."""
    return _complex.imag(x)


__all__ = [
    "__array_api_version__", "__array_namespace_info__", "Array",
    "bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32", "float64",
    "complex64", "complex128",
    "e", "pi", "inf", "nan", "newaxis",
    "arange", "asarray", "empty", "empty_like", "eye", "from_dlpack", "full", "full_like", "linspace", "meshgrid",
    "ones", "ones_like", "tril", "triu", "zeros", "zeros_like",
    "astype", "can_cast", "finfo", "iinfo", "isdtype", "result_type",
    "abs", "acos", "acosh", "add", "asin", "asinh", "atan", "atan2", "atanh", "bitwise_and", "bitwise_invert",
    "bitwise_left_shift", "bitwise_or", "bitwise_right_shift", "bitwise_xor", "ceil", "clip", "conj", "copysign",
    "cos", "cosh", "divide", "equal", "exp", "expm1", "floor", "floor_divide", "greater", "greater_equal", "hypot",
    "imag", "isfinite", "isinf", "isnan", "less", "less_equal", "log", "log1p", "log2", "log10", "logaddexp",
    "logical_and", "logical_not", "logical_or", "logical_xor", "maximum", "minimum", "multiply", "negative",
    "nextafter", "not_equal", "positive", "pow", "real", "reciprocal", "remainder", "round", "sign", "signbit", "sin",
    "sinh", "sqrt", "square", "subtract", "tan", "tanh", "trunc",
    "matmul", "matrix_transpose", "tensordot", "vecdot",
    "broadcast_arrays", "broadcast_to", "concat", "expand_dims", "flip", "moveaxis", "permute_dims", "repeat",
    "reshape", "roll", "squeeze", "stack", "tile", "unstack",
    "argmax", "argmin", "count_nonzero", "nonzero", "searchsorted", "where",
    "argsort", "sort", "unique_all", "unique_counts", "unique_inverse", "unique_values",
    "take", "take_along_axis",
    "cumulative_prod", "cumulative_sum", "max", "mean", "min", "prod", "std", "sum", "var",
    "all", "any", "diff",
    "fft", "linalg",
]


def _namespace() -> ModuleType:
    return sys.modules[__name__]


NAMESPACE.register(_namespace)
