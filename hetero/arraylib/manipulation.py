"""The array API's manipulation functions that make new arrays: ``concat``, ``stack``, ``tile``,
``repeat`` and ``roll`` (2024.12 signatures, NumPy 2's values).

Each allocates its result and writes views of the inputs into views of it, so every byte moves
through the strided copy kernel on the arrays' device (:mod:`hetero.arraylib.copy`), any input
layout included (flipped, sliced, broadcast): ``concat`` and ``stack`` one copy per input,
``tile`` one copy of a stride-0 view, ``repeat`` one copy per run of equal repeat counts,
``roll`` one copy per block (two per rolled axis, multiplied). Inputs of different dtypes are
converted to their promoted dtype first by the generated cast kernel (:func:`hetero.astype`).
The one host read: ``repeat`` given a hetero array of repeats downloads it, as the result's
shape depends on its values.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.array.ndarray import Array, empty
from hetero.arraylib.cast import astype
from hetero.arraylib.elementwise import same_device
from hetero.array.views import broadcast_to, expand_dims, reshape
from hetero.core.errors import ArrayError
from hetero.array.promotion import result_type


def _axis(name: str, axis: Any, ndim: int) -> int:
    try:
        index = operator.index(axis)
    except TypeError:
        raise ArrayError(f"hetero.{name}: axis must be an int, got {axis!r}") from None
    if not -ndim <= index < ndim:
        raise ArrayError(f"hetero.{name}: axis {index} is out of bounds for {ndim} dimension(s); pass an axis "
                         f"in [{-ndim}, {ndim})")
    return index % ndim


def _arrays(name: str, arrays: Any) -> list[Array]:
    if isinstance(arrays, Array) or not isinstance(arrays, (list, tuple)):
        raise ArrayError(f"hetero.{name} takes a tuple or list of hetero arrays, not {type(arrays).__name__}")
    if not arrays:
        raise ArrayError(f"hetero.{name} needs at least one array")
    for a in arrays:
        if not isinstance(a, Array):
            raise ArrayError(f"hetero.{name} takes hetero arrays, not {type(a).__name__}; make one first: "
                             "hetero.asarray(value, device=...)")
    same_device(name, list(arrays))
    return list(arrays)


def _write(dst: Array, src: Array) -> None:
    """``dst[...] = src`` on one device through the copy kernel, converted to ``dst``'s dtype by
    the cast kernel first (assignment alone would convert on the host)."""
    dst[...] = src if src.dtype == dst.dtype else astype(src, dst.dtype)


def concat(arrays: tuple[Array, ...] | list[Array], /, *, axis: int | None = 0) -> Array:
    """The arrays joined along ``axis`` (their shapes equal but there), of their promoted dtype;
    ``axis=None`` joins them flattened."""
    xs = _arrays("concat", arrays)
    kind = result_type(*xs)
    if axis is None:
        xs = [reshape(x, (-1,)) for x in xs]
        axis = 0
    ndim = xs[0].ndim
    if ndim == 0 or any(x.ndim != ndim for x in xs):
        shapes = ", ".join(str(x.shape) for x in xs)
        raise ArrayError(f"hetero.concat joins arrays of one number of dimensions (at least 1) along an axis, got "
                         f"shapes {shapes}; pass axis=None to join them flattened, or use hetero.stack")
    a = _axis("concat", axis, ndim)
    first = xs[0].shape
    for x in xs[1:]:
        if x.shape[:a] + x.shape[a + 1:] != first[:a] + first[a + 1:]:
            raise ArrayError(f"hetero.concat: shapes {first} and {x.shape} differ on an axis other than {a}, the one "
                             "joined along; only that axis may differ")
    out = empty(first[:a] + (sum(x.shape[a] for x in xs),) + first[a + 1:], kind, xs[0].device)
    lead = (slice(None),) * a
    start = 0
    for x in xs:
        if x.shape[a]:
            _write(out[(*lead, slice(start, start + x.shape[a]))], x)
        start += x.shape[a]
    return out


def stack(arrays: tuple[Array, ...] | list[Array], /, *, axis: int = 0) -> Array:
    """The arrays (of one shape) joined along a new axis ``axis`` of the result, of their promoted dtype."""
    xs = _arrays("stack", arrays)
    shape = xs[0].shape
    for x in xs[1:]:
        if x.shape != shape:
            raise ArrayError(f"hetero.stack needs arrays of one shape, got {shape} and {x.shape}; use hetero.concat "
                             "to join along an existing axis")
    a = _axis("stack", axis, len(shape) + 1)
    out = empty(shape[:a] + (len(xs),) + shape[a:], result_type(*xs), xs[0].device)
    for i, x in enumerate(xs):
        _write(out[(*(slice(None),) * a, i)], x)
    return out


def _counts(name: str, values: Any) -> tuple[int, ...]:
    try:
        counts = (operator.index(values),) if not isinstance(values, Sequence) else tuple(operator.index(v) for v in values)
    except TypeError:
        raise ArrayError(f"hetero.{name}: repetitions must be ints, got {values!r}") from None
    if any(c < 0 for c in counts):
        raise ArrayError(f"hetero.{name}: repetitions must be >= 0, got {values!r}")
    return counts


def tile(x: Array, repetitions: int | Sequence[int], /) -> Array:
    """``x`` repeated ``repetitions[i]`` times along axis ``i`` (NumPy's rule: the shorter of
    ``x.shape`` and ``repetitions`` is padded with 1s at the front)."""
    if not isinstance(x, Array):
        raise ArrayError(f"hetero.tile takes a hetero.Array, not {type(x).__name__}")
    reps = _counts("tile", repetitions)
    ndim = max(len(reps), x.ndim)
    reps = (1,) * (ndim - len(reps)) + reps
    shape = (1,) * (ndim - x.ndim) + x.shape
    strides = (0,) * (ndim - x.ndim) + x.strides
    # axis i becomes (reps[i], shape[i]): the repeats a stride-0 axis in front of each
    pairs = tuple(zip(reps, shape, strict=True))
    source = x._view(tuple(n for pair in pairs for n in pair), tuple(s for st in strides for s in (0, st)), x.offset)
    out = empty(tuple(r * n for r, n in pairs), x.dtype, x.device)
    if out.size:
        reshape(out, source.shape)[...] = source
    return out


def repeat(x: Array, repeats: int | Sequence[int] | Array, /, *, axis: int | None = None) -> Array:
    """Each element of ``x`` repeated ``repeats`` times along ``axis`` (flattened when None):
    ``repeats`` an int, or one count per element along the axis (a sequence, or a hetero integer
    array, which is read back to the host: the result's shape depends on it)."""
    if not isinstance(x, Array):
        raise ArrayError(f"hetero.repeat takes a hetero.Array, not {type(x).__name__}")
    if axis is None:
        x, a = reshape(x, (-1,)), 0
    else:
        a = _axis("repeat", axis, x.ndim) if x.ndim else _axis("repeat", axis, 1)
    if isinstance(repeats, Array):
        if repeats.dtype.kind not in "iu" or repeats.ndim > 1:
            raise ArrayError(f"hetero.repeat: an array of repeats must be a 0-d or 1-d integer array, got a "
                             f"{repeats.ndim}-d {repeats.dtype} array")
        repeats = [int(v) for v in np.atleast_1d(repeats._host())]  # the documented host read
    counts = _counts("repeat", repeats)
    size = x.shape[a] if x.ndim else 1
    if len(counts) == 1:
        counts = counts * size
    if len(counts) != size:
        raise ArrayError(f"hetero.repeat: {len(counts)} repeats for {size} elements along axis {a}; pass one count, "
                         "or one per element")
    if not x.ndim:
        x = reshape(x, (1,))
    shape = x.shape
    out = empty(shape[:a] + (sum(counts),) + shape[a + 1:], x.dtype, x.device)
    lead = (slice(None),) * a
    start = done = 0
    for count, run in itertools.groupby(counts):  # one copy per run of equal counts
        length = len(list(run))
        if count:
            block = shape[:a] + (length, count) + shape[a + 1:]
            source = broadcast_to(expand_dims(x[(*lead, slice(start, start + length))], a + 1), block)
            reshape(out[(*lead, slice(done, done + length * count))], block)[...] = source
        start += length
        done += length * count
    return out


def roll(x: Array, /, shift: int | Sequence[int], *, axis: int | Sequence[int] | None = None) -> Array:
    """``x`` with its elements shifted by ``shift`` along ``axis`` (each shift with each axis, as
    NumPy broadcasts them; shifts of one axis add), those pushed past the end coming back at the
    start; flattened and shaped back when ``axis`` is None."""
    if not isinstance(x, Array):
        raise ArrayError(f"hetero.roll takes a hetero.Array, not {type(x).__name__}")
    if axis is None:
        flat = reshape(x, (-1,))
        return reshape(roll(flat, shift, axis=0), x.shape)
    try:
        shifts = [operator.index(shift)] if not isinstance(shift, Sequence) else [operator.index(s) for s in shift]
    except TypeError:
        raise ArrayError(f"hetero.roll: shift must be an int or a tuple of ints, got {shift!r}") from None
    axes = [axis] if not isinstance(axis, Sequence) else list(axis)
    if len(shifts) != len(axes) and 1 not in (len(shifts), len(axes)):
        raise ArrayError(f"hetero.roll: {len(shifts)} shifts for {len(axes)} axes; pass one shift, or one per axis")
    total = [0] * x.ndim
    for s, ax in zip(shifts * len(axes) if len(shifts) == 1 else shifts, axes * len(shifts) if len(axes) == 1 else axes,
                     strict=True):
        total[_axis("roll", ax, x.ndim)] += s
    out = empty(x.shape, x.dtype, x.device)
    if not out.size:
        return out
    pieces = []
    for size, s in zip(x.shape, total, strict=True):
        s %= size
        pieces.append([(slice(None), slice(None))] if not s else [(slice(0, size - s), slice(s, size)),
                                                                    (slice(size - s, size), slice(0, s))])
    for block in itertools.product(*pieces):
        out[tuple(dst for _, dst in block)] = x[tuple(src for src, _ in block)]
    return out


__all__ = ["concat", "repeat", "roll", "stack", "tile"]
