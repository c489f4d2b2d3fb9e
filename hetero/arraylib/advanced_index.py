"""Advanced indexing of hetero arrays: ``x[key]`` and ``x[key] = value`` where ``key`` holds
integer arrays or boolean masks (the array API standard's integer-array and boolean-array
indexing, with NumPy's rules where the standard leaves a case open).

A key part may be a hetero integer or bool array, a NumPy array, a (nested) list of ints or
bools, a Python bool, an int, a slice, ``None`` or ``...``:

- Integer arrays (and the ints beside them) broadcast together; the result's axes are those of
  the slices and ``None`` s, with the broadcast shape in place of the indexed axes when those are
  next to each other in the key, else first (NumPy's rule). Negative indices wrap.
- A boolean mask of ``M`` dimensions indexes ``M`` axes, whose lengths it must match (or be 0;
  else IndexError), as the integer arrays of ``nonzero(mask)`` would; a 0-d mask (or a Python
  bool) adds an axis of length 1 when true, 0 when false.

Results are new arrays (a gather, :func:`hetero.arraylib.take.gather`), never views; assignment is
the scatter of the same kernel, ``value`` (a scalar, a NumPy array or a hetero array) converted
to ``x``'s dtype and broadcast to the indexed shape. Host reads, each one wait for the device:
each mask's true count (the result's shape depends on it, :func:`hetero.arraylib.search.nonzero`),
and the kernel's record of an out-of-range index, raised as an IndexError naming the value.
The common ``x[mask] = value`` (one hetero mask over leading axes, a value that broadcasts over
the rest) reads nothing back: it is one elementwise ``where(mask, value, x)`` written into ``x``.
"""

from __future__ import annotations

import math
import operator
from typing import Any, NamedTuple

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array, asarray, full
from hetero.arraylib.cast import astype
from hetero.arraylib.copy import check_writeable
from hetero.arraylib.elementwise import apply
from hetero.array.hooks import ADVANCED_GET, ADVANCED_SET
from hetero.arraylib.search import nonzero
from hetero.arraylib.take import Term, broadcast_strides, checked, gather, index_array, scatter
from hetero.array.views import broadcast_shapes, reshape
from hetero.core.errors import ArrayError


class _Axis(NamedTuple):
    """A result axis from a slice or ``None``: its length and its step in ``x``'s buffer."""

    length: int
    stride: int


class _Index(NamedTuple):
    """An indexed axis of ``x`` (length ``dim``, step ``step``) and its int64 index array (None for an int)."""

    array: Array | None
    dim: int
    step: int
    axis: int


class _Layout(NamedTuple):
    shape: tuple[int, ...]
    strides: tuple[int, ...]
    offset: int
    terms: list[Term]


def _part(part: Any, x: Array) -> Any:
    """A key part as an int, slice, None, Ellipsis or a hetero array (int64 or bool) on ``x``'s device."""
    if part is None or part is Ellipsis or isinstance(part, slice):
        return part
    if isinstance(part, (bool, np.bool_)):
        return asarray(bool(part), device=x.device)
    if isinstance(part, Array):
        if part.dtype == dtypes.bool_:
            if part.device is not x.device:
                raise IndexError(f"a mask on {part.device.name} cannot index an array on {x.device.name}; move it "
                                 f"first: mask.to({x.device.name!r})")
            return part
        return index_array(part, x.device, "indexing")
    if isinstance(part, (np.ndarray, list, tuple)):
        host = np.asarray(part)
        if host.dtype == np.bool_:
            return asarray(host, device=x.device)
        return index_array(host, x.device, "indexing")
    try:
        return operator.index(part)
    except TypeError:
        raise IndexError(f"only integers, slices (`:`), ellipsis (`...`), None, and integer or boolean arrays are "
                         f"valid indices, got {type(part).__name__}") from None


def _consumes(part: Any) -> int:
    if part is None or part is Ellipsis:
        return 0
    if isinstance(part, Array) and part.dtype == dtypes.bool_:
        return part.ndim
    return 1


def _layout(x: Array, key: Any) -> _Layout:
    """Where ``x[key]`` reads ``x``: the result's shape, ``x``'s steps per result axis, the offset
    of the basic parts, and the index arrays (see the module docstring)."""
    raw = key if isinstance(key, tuple) else (key,)
    parts = [_part(p, x) for p in raw]
    if sum(1 for p in parts if p is Ellipsis) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(_consumes(p) for p in parts)
    if consumed > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, but {consumed} were indexed")
    if Ellipsis not in parts:
        parts.append(Ellipsis)
    slots: list[_Axis | _Index] = []
    offset = x.offset
    axis = 0
    for part in parts:
        if part is None:
            slots.append(_Axis(1, 0))
        elif part is Ellipsis:
            for _ in range(x.ndim - consumed):
                slots.append(_Axis(x.shape[axis], x.strides[axis]))
                axis += 1
        elif isinstance(part, slice):
            start, stop, step = part.indices(x.shape[axis])
            length = len(range(start, stop, step))
            offset += start * x.strides[axis] if length else 0
            slots.append(_Axis(length, x.strides[axis] * step))
            axis += 1
        elif isinstance(part, int):
            size = x.shape[axis]
            if not -size <= part < size:
                raise IndexError(f"index {part} is out of bounds for axis {axis} with size {size}")
            offset += (part % size) * x.strides[axis]
            slots.append(_Index(None, size, x.strides[axis], axis))
            axis += 1
        elif part.dtype == dtypes.bool_:
            slots += _mask_slots(x, part, axis)
            axis += part.ndim
        else:
            slots.append(_Index(part, x.shape[axis], x.strides[axis], axis))
            axis += 1
    return _arrange(slots, offset)


def _mask_slots(x: Array, mask: Array, axis: int) -> list[_Axis | _Index]:
    """The integer-array slots a mask at ``axis`` stands for (its ``nonzero``)."""
    if mask.ndim == 0:  # a new axis of length 1, kept once when the mask is true
        (where,) = nonzero(reshape(mask, (1,)))
        return [_Index(where, 1, 0, axis)]
    for j, length in enumerate(mask.shape):
        if length not in (x.shape[axis + j], 0):
            raise IndexError(f"boolean index did not match indexed array along axis {axis + j}; size of axis is "
                             f"{x.shape[axis + j]} but size of corresponding boolean axis is {length}")
    return [_Index(where, x.shape[axis + j], x.strides[axis + j], axis + j) for j, where in enumerate(nonzero(mask))]


def _arrange(slots: list[_Axis | _Index], offset: int) -> _Layout:
    indexed = [k for k, slot in enumerate(slots) if isinstance(slot, _Index)]
    arrays = [(slot, slot.array) for slot in slots if isinstance(slot, _Index) and slot.array is not None]
    try:
        common = broadcast_shapes(*(index.shape for _, index in arrays))
    except (ValueError, ArrayError):
        shapes = " ".join(str(index.shape) for _, index in arrays)
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast together with shapes {shapes}") from None
    axes = [slot for slot in slots if isinstance(slot, _Axis)]
    together = bool(indexed) and indexed == list(range(indexed[0], indexed[-1] + 1))
    before = sum(1 for k, slot in enumerate(slots) if isinstance(slot, _Axis) and k < indexed[0]) if together else 0
    lead, trail = axes[:before], axes[before:]
    shape = tuple(a.length for a in lead) + common + tuple(a.length for a in trail)
    strides = tuple(a.stride for a in lead) + (0,) * len(common) + tuple(a.stride for a in trail)
    terms = [Term(index, index.offset, (0,) * len(lead) + broadcast_strides(index, common) + (0,) * len(trail),
                  slot.dim, slot.step, slot.axis) for slot, index in arrays]
    return _Layout(shape, strides, offset, terms)


def getitem(x: Array, key: Any) -> Array:
    """``x[key]`` for a key with integer arrays or masks: a new array (see the module docstring)."""
    x = checked(x, "advanced indexing")
    layout = _layout(x, key)
    return gather(x, layout.shape, layout.strides, layout.offset, layout.terms)


def setitem(x: Array, key: Any, value: Any) -> None:
    """``x[key] = value`` for a key with integer arrays or masks: a scatter into ``x``."""
    x = checked(x, "advanced index assignment")
    check_writeable(x)
    values = _values(value, x)
    if _masked_select(x, key, values):
        return
    layout = _layout(x, key)
    try:
        fits = broadcast_shapes(values.shape, layout.shape) == layout.shape
    except (ValueError, ArrayError):
        fits = False
    if not fits:
        raise ValueError(f"could not broadcast a value of shape {values.shape} into the indexed shape {layout.shape}")
    if math.prod(layout.shape):
        scatter(x, layout.shape, layout.strides, layout.offset, layout.terms, values)


def _masked_select(x: Array, key: Any, values: Array) -> bool:
    """``x[mask] = values`` as one elementwise ``where(mask, values, x)`` into ``x``, when the key is
    one hetero mask over ``x``'s leading axes and ``values`` broadcasts to the rest of them: no
    compaction, no host read. Whether it applied."""
    mask = key[0] if isinstance(key, tuple) and len(key) == 1 else key
    if not isinstance(mask, Array) or mask.dtype != dtypes.bool_ or mask.device is not x.device:
        return False
    rest = x.shape[mask.ndim:]
    if not 0 < mask.ndim <= x.ndim or mask.shape != x.shape[:mask.ndim] or values.ndim > len(rest):
        return False
    try:
        if broadcast_shapes(values.shape, rest) != rest:
            return False
    except ArrayError:
        return False
    apply("where", reshape(mask, mask.shape + (1,) * len(rest)), values, x, out=x)
    return True


def _values(value: Any, x: Array) -> Array:
    """``value`` as a hetero array of ``x``'s dtype on ``x``'s device (converted on the device for hetero arrays)."""
    if isinstance(value, Array):
        if value.device is not x.device:
            value = value.to(x.device)
        return value if value.dtype == x.dtype else astype(value, x.dtype)
    if isinstance(value, (np.ndarray, list, tuple)):
        return asarray(np.asarray(value).astype(x.dtype), device=x.device)
    return full((), value, dtype=x.dtype, device=x.device)


ADVANCED_GET.register(getitem)
ADVANCED_SET.register(setitem)

__all__ = ["getitem", "setitem"]
