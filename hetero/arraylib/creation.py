"""The array API's creation functions beyond :mod:`hetero.array.ndarray`'s: ``empty_like``,
``zeros_like``, ``ones_like``, ``full_like``, ``linspace``, ``eye``, ``meshgrid``, ``tril``
and ``triu`` (2024.12 signatures, NumPy 2's values).

Each is made of existing pieces: ``eye`` writes ones through a strided view of the diagonal
of a zero array (the strided copy kernel); ``tril``/``triu`` are one ``where`` kernel over a
mask that one comparison kernel makes from two small ``arange`` uploads; ``meshgrid`` returns
read-only broadcast views (no copy; ``.copy()`` one to write into it). ``linspace`` is
computed by NumPy on the host and uploaded once, as ``arange`` is: its values are NumPy's
exactly (start + i * step in float64, the last set to ``stop`` when ``endpoint``), converted
to the dtype.
"""

from __future__ import annotations

import numbers
import operator
from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array, byte_size, from_host, arange, empty, full
from hetero.arraylib.cast import astype
from hetero.arraylib.elementwise import apply, same_device
from hetero.array.views import broadcast_to, reshape
from hetero.core.device import Device
from hetero.core.errors import ArrayError
from hetero.array.promotion import result_type
from hetero.core.named_device import device as resolve_device


def _like(name: str, x: Any) -> Array:
    if not isinstance(x, Array):
        raise ArrayError(f"hetero.{name} takes a hetero.Array, not {type(x).__name__}; make one first: "
                         "hetero.asarray(value, device=...)")
    return x


def empty_like(x: Array, /, *, dtype: Any = None, device: str | Device | None = None) -> Array:
    """An uninitialised array of ``x``'s shape (and dtype and device, unless given)."""
    x = _like("empty_like", x)
    return empty(x.shape, x.dtype if dtype is None else dtype, x.device if device is None else device)


def zeros_like(x: Array, /, *, dtype: Any = None, device: str | Device | None = None) -> Array:
    """Zeros of ``x``'s shape (and dtype and device, unless given)."""
    return full_like(_like("zeros_like", x), 0, dtype=dtype, device=device)


def ones_like(x: Array, /, *, dtype: Any = None, device: str | Device | None = None) -> Array:
    """Ones of ``x``'s shape (and dtype and device, unless given)."""
    return full_like(_like("ones_like", x), 1, dtype=dtype, device=device)


def full_like(x: Array, /, fill_value: Any, *, dtype: Any = None, device: str | Device | None = None) -> Array:
    """``fill_value`` in an array of ``x``'s shape (and dtype and device, unless given); a float
    value in an integer dtype truncates, as NumPy's ``full_like``."""
    x = _like("full_like", x)
    return full(x.shape, fill_value, x.dtype if dtype is None else dtype, x.device if device is None else device)


def linspace(start: float, stop: float, /, num: int, *, dtype: Any = None, device: str | Device | None = None,
             endpoint: bool = True) -> Array:
    """``num`` evenly spaced values from ``start`` to ``stop`` (``stop`` left out unless ``endpoint``),
    float32 unless ``dtype`` says otherwise: NumPy's values (see the module docstring)."""
    for what, bound in (("start", start), ("stop", stop)):
        if not isinstance(bound, numbers.Real) or isinstance(bound, bool):
            raise ArrayError(f"hetero.linspace: {what} must be a real number, got {bound!r}")
    try:
        count = operator.index(num)
    except TypeError:
        raise ArrayError(f"hetero.linspace: num must be an int, got {num!r}") from None
    if count < 0:
        raise ArrayError(f"hetero.linspace: num must be >= 0, got {count}")
    kind = dtypes.float32 if dtype is None else dtypes.as_dtype(dtype)
    if kind == dtypes.bool_:
        raise ArrayError("hetero.linspace makes numbers, not bool; pass a numeric dtype")
    byte_size((count,), np.dtype(np.float64))  # NumPy computes in float64 first
    with np.errstate(invalid="ignore", over="ignore"):  # (an integer dtype floors, then converts)
        host = np.linspace(float(start), float(stop), count, endpoint=endpoint, dtype=kind)
    return from_host(host, resolve_device(device), copy=True)


def eye(n_rows: int, n_cols: int | None = None, /, *, k: int = 0, dtype: Any = None,
        device: str | Device | None = None) -> Array:
    """A ``n_rows`` x ``n_cols`` (default square) array with ones on diagonal ``k`` (above the
    main one for ``k > 0``, below for ``k < 0``) and zeros elsewhere; float32 unless ``dtype``."""
    try:
        rows = operator.index(n_rows)
        cols = rows if n_cols is None else operator.index(n_cols)
        offset = operator.index(k)
    except TypeError:
        raise ArrayError(f"hetero.eye: n_rows, n_cols and k must be ints, got {n_rows!r}, {n_cols!r}, {k!r}") from None
    if rows < 0 or cols < 0:
        raise ArrayError(f"hetero.eye: n_rows and n_cols must be >= 0, got {rows} and {cols}")
    out = full((rows, cols), 0, dtypes.float32 if dtype is None else dtype, device)
    length = max(0, min(rows, cols - offset) if offset >= 0 else min(rows + offset, cols))
    if length:
        start = offset if offset >= 0 else -offset * cols
        out._view((length,), (cols + 1,), start)[...] = 1  # the diagonal, through the strided copy
    return out


def meshgrid(*arrays: Array, indexing: str = "xy") -> list[Array]:
    """Coordinate arrays from the 1-D ``arrays``: with ``indexing="xy"`` (Cartesian) each has
    shape ``(len(arrays[1]), len(arrays[0]), len(arrays[2]), ...)``, with ``"ij"`` (matrix)
    ``(len(arrays[0]), len(arrays[1]), ...)``. Each is a read-only broadcast view of its input
    (converted to the arrays' promoted dtype first where it differs); ``.copy()`` it to write."""
    if indexing not in ("xy", "ij"):
        raise ArrayError(f"hetero.meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    for a in arrays:
        if not isinstance(a, Array) or a.ndim != 1:
            shown = f"a {a.ndim}-d array" if isinstance(a, Array) else type(a).__name__
            raise ArrayError(f"hetero.meshgrid takes 1-D hetero arrays, got {shown}; flatten it first: "
                             "hetero.reshape(x, (-1,))")
    if not arrays:
        return []
    same_device("meshgrid", list(arrays))
    kind = result_type(*arrays)
    sizes = [a.shape[0] for a in arrays]
    axes = list(range(len(arrays)))
    if indexing == "xy" and len(arrays) > 1:
        axes[0], axes[1] = 1, 0
    shape = [0] * len(arrays)
    for axis, size in zip(axes, sizes, strict=True):
        shape[axis] = size
    grids = []
    for axis, a in zip(axes, arrays, strict=True):
        alone = [1] * len(arrays)
        alone[axis] = a.shape[0]
        grids.append(broadcast_to(reshape(astype(a, kind, copy=False), alone), shape))
    return grids


def _triangle(name: str, x: Array, k: int, keep: str) -> Array:
    if not isinstance(x, Array) or x.ndim < 2:
        shown = f"a {x.ndim}-d array" if isinstance(x, Array) else type(x).__name__
        raise ArrayError(f"hetero.{name} takes a hetero array of at least 2 dimensions (matrices on the last two), "
                         f"got {shown}")
    try:
        offset = operator.index(k)
    except TypeError:
        raise ArrayError(f"hetero.{name}: k must be an int, got {k!r}") from None
    rows, cols = x.shape[-2:]
    # element (i, j) is kept where i >= j - k (tril) or i <= j - k (triu)
    row = reshape(arange(rows, dtype=dtypes.int64, device=x.device), (rows, 1))
    col = reshape(arange(-offset, cols - offset, dtype=dtypes.int64, device=x.device), (1, cols))
    mask = apply(keep, row, col)
    return apply("where", mask, x, False if x.dtype == dtypes.bool_ else 0)


def tril(x: Array, /, *, k: int = 0) -> Array:
    """The lower triangle of each matrix on ``x``'s last two axes (diagonal ``k`` and below), zeros above."""
    return _triangle("tril", x, k, "greater_equal")


def triu(x: Array, /, *, k: int = 0) -> Array:
    """The upper triangle of each matrix on ``x``'s last two axes (diagonal ``k`` and above), zeros below."""
    return _triangle("triu", x, k, "less_equal")


__all__ = ["empty_like", "eye", "full_like", "linspace", "meshgrid", "ones_like", "tril", "triu", "zeros_like"]
