"""Type promotion for hetero arrays: which dtype an operation on mixed dtypes and Python
scalars computes in.

Among arrays (and NumPy scalars, which count as 0-d arrays) the rules are the array API
standard's table for bool, int8–int64, uint8–uint64 and float16/32/64; where the standard
leaves a case open (an integer with a float, ``int64`` with ``uint64``, bool with a number)
NumPy 2's :func:`numpy.result_type` decides (``int64`` with ``uint64`` is ``float64``,
``int8`` with ``float16`` is ``float16``, ``int32`` with ``float32`` is ``float64``).

Python scalars are *weak* (NEP 50): they take the dtype of the array they meet when it is
of their kind or above (``float32_array + 1.0`` is float32, ``int8_array + True`` int8,
``float16_array + 2`` float16). A Python int with a bool array gives int64, a Python float
with an integer or bool array float64, as NumPy 2; a Python complex beside a float32 or float16
array complex64, beside float64, an integer or bool array complex128. An integer the array's dtype cannot
hold (``uint8_array + 300``) is a :class:`ScalarOverflowError`, as NumPy 2 raises
``OverflowError``; a float beyond a float dtype's range becomes an infinity, as in NumPy.
"""

from __future__ import annotations

import numbers
from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.core.errors import ArrayError

_KINDS = {"b": 0, "i": 1, "u": 1, "f": 2, "c": 3}
_cache: dict[tuple[np.dtype[Any], np.dtype[Any]], np.dtype[Any]] = {}


class ScalarOverflowError(ArrayError, OverflowError):
    """A Python scalar does not fit the dtype it must take."""


def _dtype_of(value: Any) -> np.dtype[Any]:
    if isinstance(value, np.dtype):
        return dtypes.as_dtype(value)
    found = getattr(value, "dtype", None)
    if found is not None:
        return dtypes.as_dtype(found)
    return dtypes.as_dtype(value)


def promote(a: np.dtype[Any], b: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype of an operation on arrays of dtypes ``a`` and ``b``."""
    key = (a, b)
    found = _cache.get(key)
    if found is None:  # the standard's table agrees with NumPy 2 wherever it speaks
        found = _cache[key] = dtypes.as_dtype(np.result_type(a, b))
    return found


def result_type(*arrays_and_dtypes: Any) -> np.dtype[Any]:
    """The array API's ``result_type``: the promoted dtype of arrays, dtypes and Python scalars
    (weak: they never widen an array's dtype of their kind)."""
    kinds = [x for x in arrays_and_dtypes if not _is_python_scalar(x)]
    if not kinds:
        raise ArrayError("result_type needs at least one array or dtype (Python scalars alone have no dtype)")
    result = _dtype_of(kinds[0])
    for other in kinds[1:]:
        result = promote(result, _dtype_of(other))
    for scalar in arrays_and_dtypes:
        if _is_python_scalar(scalar):
            result = scalar_dtype(scalar, result)
    return result


def can_cast(from_: Any, to: Any) -> bool:
    """Whether values of ``from_`` (an array or dtype) convert to dtype ``to`` without loss of
    kind or range (the standard's "safe" casting, NumPy's ``can_cast``)."""
    return bool(np.can_cast(_dtype_of(from_), dtypes.as_dtype(to)))


def _is_python_scalar(value: Any) -> bool:
    return isinstance(value, (bool, int, float, complex)) and not isinstance(value, np.generic)


def scalar_dtype(value: bool | int | float | complex, other: np.dtype[Any]) -> np.dtype[Any]:
    """The dtype a Python scalar takes beside an array of dtype ``other`` (see the module
    docstring); an int that dtype cannot hold is a :class:`ScalarOverflowError`."""
    if isinstance(value, bool):
        return other
    if isinstance(value, numbers.Integral):
        if other.kind == "b":
            kind = dtypes.int64
        elif other.kind in "iu":
            kind = other
        else:
            return other
        info = np.iinfo(kind)
        if not info.min <= value <= info.max:
            raise ScalarOverflowError(f"Python int {value} does not fit the {kind} array it meets (range "
                                      f"{info.min}..{info.max}); use a value in range, or convert the array to a "
                                      f"wider dtype first: hetero.asarray(x, dtype='int64')")
        return kind
    if isinstance(value, float):
        return other if other.kind in "fc" else dtypes.float64
    if isinstance(value, complex):
        if other.kind == "c":
            return other
        # weak, as NumPy 2: float32 (and float16) arrays give complex64, float64, ints and bool complex128
        return dtypes.complex128 if other == dtypes.float64 or other.kind != "f" else dtypes.complex64
    raise ArrayError(f"{type(value).__name__} is not a Python bool, int, float or complex")


def kind_rank(dtype: np.dtype[Any]) -> int:
    """0 for bool, 1 for integers, 2 for real floats, 3 for complex."""
    return _KINDS[dtype.kind]


__all__ = ["ScalarOverflowError", "can_cast", "kind_rank", "promote", "result_type", "scalar_dtype"]
