"""The array API's ``linalg`` functions that need no LAPACK (2024.12): ``cross diagonal matrix_norm
matrix_power outer trace vector_norm``, computed on the arrays' device by hetero's generated
operations (elementwise kernels, reductions, views, matmul on the device's BLAS).

- ``diagonal`` is a view (no copy): the diagonal's stride is the row stride plus the column one.
- ``trace`` sums that view; its dtype follows ``sum``'s rules (:mod:`hetero.arraylib.accumulate`).
- ``vector_norm``: ``ord`` inf / -inf the largest / smallest ``|x|``, 0 the count of non-zero
  elements, 1 the sum of ``|x|``, 2 the square root of the sum of squares, any other p
  ``sum(|x|**p) ** (1/p)`` (NumPy's definitions). float16 is computed in float32 (squares of
  float16 overflow past 256) and rounded once.
- ``matrix_norm``: ``"fro"``, 1 / -1 (largest / smallest column sum of ``|x|``), inf / -inf
  (row sums) here; 2, -2 and ``"nuc"`` need singular values (:mod:`hetero.arraylib.linalg.lapack_functions`).
- ``matrix_power`` squares and multiplies (about 2 log2 n matmuls); n = 0 gives identities and a
  negative n the power of ``inv(x)``.
- ``cross`` of vectors of 3 along ``axis``, the other axes broadcast; ``outer`` of two vectors.

Floating functions (norms) take floating arrays only, as the standard says; an integer or bool
array is an :class:`hetero.UnsupportedDtypeError` naming the conversion.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.arraylib import functions as fn
from hetero.arraylib import reductions as red
from hetero.core import dtypes
from hetero.array.ndarray import Array
from hetero.arraylib.cast import astype
from hetero.arraylib.creation import eye
from hetero.arraylib.elementwise import same_device
from hetero.arraylib.linalg.lapack import float_dtype
from hetero.arraylib.linalg.lapack_functions import inv, matrices, singular_value_norm
from hetero.arraylib.manipulation import stack
from hetero.arraylib.linalg.matmul import matmul
from hetero.array.views import broadcast_to, expand_dims, moveaxis, reshape
from hetero.core.errors import ArrayError, UnsupportedDtypeError


def diagonal(x: Array, /, *, offset: int = 0) -> Array:
    """The diagonal ``offset`` (above the main one for ``offset > 0``) of each matrix: a view of
    shape ``(..., L)``, L its length (0 when it lies outside the matrix)."""
    x = matrices("linalg.diagonal", x)
    try:
        k = operator.index(offset)
    except TypeError:
        raise ArrayError(f"hetero.linalg.diagonal: offset must be an int, got {offset!r}") from None
    rows, cols = x.shape[-2:]
    rs, cs = x.strides[-2:]
    length = max(0, min(rows, cols - k) if k >= 0 else min(rows + k, cols))
    start = (k * cs if k >= 0 else -k * rs) if length else 0
    return x._view((*x.shape[:-2], length), (*x.strides[:-2], rs + cs), x.offset + start)


def trace(x: Array, /, *, offset: int = 0, dtype: Any = None) -> Array:
    """The sum of diagonal ``offset`` of each matrix (0 for an empty one), of ``sum``'s dtype for ``x``
    (int64 for signed integers, uint64 for unsigned, the float's own) or ``dtype``."""
    return red.sum(diagonal(x, offset=offset), axis=-1, dtype=dtype)


def outer(x1: Array, x2: Array, /) -> Array:
    """The outer product of two vectors: ``out[i, j] = x1[i] * x2[j]``, their promoted dtype."""
    for name, x in (("x1", x1), ("x2", x2)):
        if not isinstance(x, Array) or x.ndim != 1:
            shown = f"shape {x.shape}" if isinstance(x, Array) else type(x).__name__
            raise ArrayError(f"hetero.linalg.outer takes two 1-D hetero arrays; {name} is {shown}")
    same_device("linalg.outer", [x1, x2])
    return fn.multiply(reshape(x1, (-1, 1)), reshape(x2, (1, -1)))


def cross(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
    """The cross product of the 3-element vectors along ``axis`` of ``x1`` and ``x2`` (the other axes
    broadcast); ``axis`` counts from the end (-1) in both, a non-negative one from the front of the
    broadcast shape."""
    for name, x in (("x1", x1), ("x2", x2)):
        if not isinstance(x, Array) or x.ndim == 0:
            shown = "0-d" if isinstance(x, Array) else type(x).__name__
            raise ArrayError(f"hetero.linalg.cross takes hetero arrays of at least one dimension; {name} is {shown}")
    same_device("linalg.cross", [x1, x2])
    try:
        shape = tuple(np.broadcast_shapes(x1.shape, x2.shape))
        index = operator.index(axis)
    except (ValueError, TypeError):
        raise ArrayError(f"hetero.linalg.cross: shapes {x1.shape} and {x2.shape} do not broadcast, or axis {axis!r} "
                         "is not an int") from None
    index = index - len(shape) if index >= 0 else index
    low = min(x1.ndim, x2.ndim)
    if not -low <= index <= -1:
        raise ArrayError(f"hetero.linalg.cross: axis {axis} is out of range for shapes {x1.shape} and {x2.shape} "
                         f"(it must be in [{-low}, -1])")
    if x1.shape[index] != 3 or x2.shape[index] != 3:
        raise ArrayError(f"hetero.linalg.cross: the vectors along axis {axis} must have 3 elements; shapes {x1.shape} "
                         f"and {x2.shape} have {x1.shape[index]} and {x2.shape[index]}")
    a = moveaxis(broadcast_to(x1, shape), index, -1)
    b = moveaxis(broadcast_to(x2, shape), index, -1)
    parts = [a[..., i] * b[..., j] - a[..., j] * b[..., i] for i, j in ((1, 2), (2, 0), (0, 1))]
    return stack(parts, axis=len(shape) + index)


def _floating(function: str, x: Any) -> Array:
    if not isinstance(x, Array):
        raise ArrayError(f"hetero.{function} takes a hetero.Array, got {type(x).__name__}")
    float_dtype(function, [x])
    return x


def _norm_axes(x: Array, axis: int | Sequence[int] | None) -> tuple[int, ...]:
    if axis is None:
        return tuple(range(x.ndim))
    raw = [axis] if not isinstance(axis, Sequence) else list(axis)
    try:
        axes = [operator.index(a) for a in raw]
    except TypeError:
        raise ArrayError(f"hetero.linalg.vector_norm: axis must be None, an int or a tuple of ints, got {axis!r}") from None
    for a in axes:
        if not -x.ndim <= a < max(x.ndim, 1):
            raise ArrayError(f"hetero.linalg.vector_norm: axis {a} is out of range for shape {x.shape}")
    resolved = tuple(sorted({a % x.ndim for a in axes})) if x.ndim else ()
    if len(resolved) != len(axes):
        raise ArrayError(f"hetero.linalg.vector_norm: axis {axis!r} names an axis twice")
    return resolved


def _order(function: str, ord: Any) -> float:
    if isinstance(ord, bool) or not isinstance(ord, numbers.Real) or math.isnan(float(ord)):
        raise ArrayError(f"hetero.{function}: ord must be a real number (inf, -inf, 0, 1, 2, p), got {ord!r}")
    return float(ord)


def vector_norm(x: Array, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False,
                ord: float = 2) -> Array:  # noqa: A002  (the standard's name)
    """The ``ord``-norm of the vectors along ``axis`` (all axes by default; see the module docstring)."""
    if isinstance(x, Array) and x.dtype.kind == "c":  # the norm of complex vectors: of their magnitudes
        x = fn.abs(x)
    x = _floating("linalg.vector_norm", x)
    p = _order("linalg.vector_norm", ord)
    axes = _norm_axes(x, axis)
    work = astype(x, dtypes.float32) if x.dtype == dtypes.float16 else x
    if p == math.inf:
        result = red.max(fn.abs(work), axis=axes, keepdims=keepdims)
    elif p == -math.inf:
        result = red.min(fn.abs(work), axis=axes, keepdims=keepdims)
    elif p == 0:
        result = astype(red.sum(fn.not_equal(work, 0), axis=axes, keepdims=keepdims), work.dtype)
    elif p == 1:
        result = red.sum(fn.abs(work), axis=axes, keepdims=keepdims)
    elif p == 2:
        result = fn.sqrt(red.sum(fn.multiply(work, work), axis=axes, keepdims=keepdims))
    else:
        result = fn.pow(red.sum(fn.pow(fn.abs(work), p), axis=axes, keepdims=keepdims), 1.0 / p)
    return astype(result, x.dtype) if result.dtype != x.dtype else result


_MATRIX_ORDERS = ("fro", "nuc", 1, -1, 2, -2, math.inf, -math.inf)


def matrix_norm(x: Array, /, *, keepdims: bool = False, ord: int | float | str | None = "fro") -> Array:  # noqa: A002
    """The ``ord``-norm of each matrix: ``"fro"`` (default), ``"nuc"``, 1, -1, 2, -2, inf, -inf (NumPy's
    definitions); shape ``x.shape[:-2]``, or ``(..., 1, 1)`` with ``keepdims``."""
    x = matrices("linalg.matrix_norm", x)
    order = "fro" if ord is None else ord
    if x.dtype.kind == "c" and order not in ("nuc", 2, -2):  # of the magnitudes: real-valued, as the standard says
        x = fn.abs(x)
    float_dtype("linalg.matrix_norm", [x], complex_ok=True)  # complex only for the singular-value norms, here
    if isinstance(order, bool) or order not in _MATRIX_ORDERS:
        raise ArrayError(f"hetero.linalg.matrix_norm: ord must be one of 'fro', 'nuc', 1, -1, 2, -2, inf, -inf; "
                         f"got {ord!r}")
    if order == "fro":
        result = vector_norm(x, axis=(-2, -1))
    elif order in ("nuc", 2, -2):
        result = singular_value_norm(x, order)
    else:
        if 0 in x.shape[-2:]:
            raise ArrayError(f"hetero.linalg.matrix_norm: ord={ord} of matrices with no elements (shape {x.shape}) is "
                             "undefined")
        work = astype(x, dtypes.float32) if x.dtype == dtypes.float16 else x
        along = -2 if order in (1, -1) else -1  # column sums for 1, row sums for inf
        sums = red.sum(fn.abs(work), axis=along)
        result = red.max(sums, axis=-1) if order in (1, math.inf) else red.min(sums, axis=-1)
        result = astype(result, x.dtype) if result.dtype != x.dtype else result
    return expand_dims(result, (-2, -1)).copy() if keepdims else result


def matrix_power(x: Array, n: int, /) -> Array:
    """``x`` multiplied by itself ``n`` times (square matrices): identities for 0, the power of ``inv(x)``
    for a negative ``n`` (floating ``x`` only)."""
    x = matrices("linalg.matrix_power", x, square=True)
    try:
        count = operator.index(n)
    except TypeError:
        raise ArrayError(f"hetero.linalg.matrix_power: n must be an int, got {n!r}") from None
    if x.dtype == dtypes.bool_:
        raise UnsupportedDtypeError("hetero.linalg.matrix_power takes numeric arrays, not bool; convert first, "
                                    "e.g. hetero.astype(x, hetero.float32)")
    if count == 0:
        return broadcast_to(eye(x.shape[-1], dtype=x.dtype, device=x.device), x.shape).copy()
    if count < 0:
        x, count = inv(x), -count
    elif count == 1:
        return x.copy()
    while not count & 1:  # the factors below the lowest set bit are never multiplied in
        x, count = matmul(x, x), count >> 1
    result, square, count = x, x, count >> 1
    while count:
        square = matmul(square, square)
        if count & 1:
            result = matmul(result, square)
        count >>= 1
    return result


__all__ = ["cross", "diagonal", "matrix_norm", "matrix_power", "outer", "trace", "vector_norm"]
