"""Array manipulation as views where the layout allows: the array API's ``permute_dims``,
``broadcast_to``, ``expand_dims``, ``squeeze``, ``flip``, ``moveaxis`` and ``reshape``.

Each returns a view sharing the argument's buffer (new shape, strides, offset), except
``reshape`` of a layout that cannot be expressed with strides (NumPy's rule: e.g. a
transposed matrix flattened), which copies through the strided copy kernel.
A broadcast view (stride 0) is read-only: writing into it is an ArrayError.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

from hetero.core.errors import ArrayError

if TYPE_CHECKING:
    from hetero.array.ndarray import Array


def _axis(axis: int, ndim: int, what: str = "axis") -> int:
    try:
        index = operator.index(axis)
    except TypeError:
        raise ArrayError(f"{what} must be an int, got {axis!r}") from None
    if not -ndim <= index < ndim:
        raise ArrayError(f"{what} {index} is out of bounds for an array of {ndim} dimension(s)")
    return index % ndim


def normalize_axes(axis: int | Sequence[int], ndim: int, what: str = "axis") -> tuple[int, ...]:
    axes = tuple(_axis(a, ndim, what) for a in (axis if isinstance(axis, Sequence) else (axis,)))
    if len(set(axes)) != len(axes):
        raise ArrayError(f"repeated {what} in {axis!r}")
    return axes


def permute_dims(x: Array, axes: Sequence[int]) -> Array:
    """``x`` with its axes in the order ``axes`` (a permutation of ``range(x.ndim)``): a view."""
    order = normalize_axes(tuple(axes), x.ndim, "axes")
    if len(order) != x.ndim:
        raise ArrayError(f"axes {tuple(axes)} must name each of the {x.ndim} axes once")
    strides = x.strides
    return x._view(tuple(x.shape[a] for a in order), tuple(strides[a] for a in order), x.offset)


def matrix_transpose(x: Array) -> Array:
    """``x.mT``: the last two axes swapped (a view); ``x`` needs at least two dimensions."""
    if x.ndim < 2:
        raise ArrayError(f"mT needs an array of at least 2 dimensions, got {x.ndim}")
    return permute_dims(x, (*range(x.ndim - 2), x.ndim - 1, x.ndim - 2))


def moveaxis(x: Array, source: int | Sequence[int], destination: int | Sequence[int]) -> Array:
    """``x`` with the axes ``source`` moved to ``destination`` (the others keep their order): a view."""
    src = normalize_axes(source, x.ndim, "source")
    dst = normalize_axes(destination, x.ndim, "destination")
    if len(src) != len(dst):
        raise ArrayError(f"moveaxis: source {source!r} and destination {destination!r} name different numbers of axes")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        order.insert(d, s)
    return permute_dims(x, order)


def broadcast_to(x: Array, shape: int | Sequence[int]) -> Array:
    """``x`` broadcast to ``shape`` (NumPy's rules: trailing axes match or are 1): a read-only
    view whose broadcast axes have stride 0."""
    target = (operator.index(shape),) if not isinstance(shape, Sequence) else tuple(operator.index(s) for s in shape)
    if len(target) < x.ndim or any(d < 0 for d in target):
        raise ArrayError(f"cannot broadcast an array of shape {x.shape} to shape {target}")
    lead = len(target) - x.ndim
    strides = [0] * lead
    for size, want, stride in zip(x.shape, target[lead:], x.strides, strict=True):
        if size == want:
            strides.append(stride)
        elif size == 1:
            strides.append(0)
        else:
            raise ArrayError(f"cannot broadcast an array of shape {x.shape} to shape {target}")
    return x._view(target, tuple(strides), x.offset)


def broadcast_shapes(*shapes: tuple[int, ...]) -> tuple[int, ...]:
    """The shape arrays of ``shapes`` broadcast to together (NumPy's rule)."""
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for shape in shapes:
        for i, size in enumerate(shape, ndim - len(shape)):
            if size != 1:
                if out[i] not in (1, size):
                    raise ArrayError(f"shapes {', '.join(map(str, shapes))} cannot be broadcast together")
                out[i] = size
    return tuple(out)


def broadcast_arrays(*arrays: Array) -> list[Array]:
    """The arrays broadcast against each other: read-only views of one shape (the standard's
    ``broadcast_arrays``)."""
    shape = broadcast_shapes(*(a.shape for a in arrays))
    return [broadcast_to(a, shape) for a in arrays]


def unstack(x: Array, /, *, axis: int = 0) -> tuple[Array, ...]:
    """The views of ``x`` along ``axis``, one per index (the standard's ``unstack``; a 0-d array
    has no axis to split)."""
    if x.ndim == 0:
        raise ArrayError("unstack needs an array of at least one dimension; a 0-d array has no axis to split")
    a = _axis(axis, x.ndim)
    shape = x.shape[:a] + x.shape[a + 1:]
    strides = x.strides[:a] + x.strides[a + 1:]
    return tuple(x._view(shape, strides, x.offset + i * x.strides[a]) for i in range(x.shape[a]))


def expand_dims(x: Array, axis: int | Sequence[int] = 0) -> Array:
    """``x`` with new axes of length 1 at ``axis`` (positions in the result): a view."""
    ndim = x.ndim + (len(axis) if isinstance(axis, Sequence) else 1)
    new = set(normalize_axes(axis, ndim))
    sizes, strides = iter(x.shape), iter(x.strides)
    shape = tuple(1 if a in new else next(sizes) for a in range(ndim))
    return x._view(shape, tuple(0 if a in new else next(strides) for a in range(ndim)), x.offset)


def squeeze(x: Array, axis: int | Sequence[int] | None = None) -> Array:
    """``x`` without the length-1 axes ``axis`` (default: every length-1 axis): a view.
    An axis in ``axis`` whose length is not 1 is an ArrayError."""
    drop = tuple(a for a in range(x.ndim) if x.shape[a] == 1) if axis is None else normalize_axes(axis, x.ndim)
    for a in drop:
        if x.shape[a] != 1:
            raise ArrayError(f"cannot squeeze axis {a}: its length is {x.shape[a]}, not 1")
    keep = [a for a in range(x.ndim) if a not in drop]
    return x._view(tuple(x.shape[a] for a in keep), tuple(x.strides[a] for a in keep), x.offset)


def flip(x: Array, axis: int | Sequence[int] | None = None) -> Array:
    """``x`` with the order of elements reversed along ``axis`` (default: every axis): a view
    with negative strides."""
    axes = range(x.ndim) if axis is None else normalize_axes(axis, x.ndim)
    strides = list(x.strides)
    offset = x.offset
    for a in axes:
        if x.shape[a]:
            offset += (x.shape[a] - 1) * strides[a]
        strides[a] = -strides[a]
    return x._view(x.shape, tuple(strides), offset)


def reshape(x: Array, shape: int | Sequence[int], copy: bool | None = None) -> Array:
    """``x`` with ``shape`` (one entry may be -1), read in C order: a view when the layout allows
    (NumPy's rule), else a contiguous copy. ``copy=True`` always copies; ``copy=False`` raises
    where a copy would be needed."""
    target = _resolve(x, shape)
    strides = None if copy else view_strides(x.shape, x.strides, target)
    if strides is not None:
        return x._view(target, strides, x.offset)
    if copy is False:
        raise ArrayError(f"cannot reshape this view of shape {x.shape} and strides {x.strides} to {target} "
                         "without copying; pass copy=None to allow a copy")
    return x._copy_as(target, x.device)


def _resolve(x: Array, shape: int | Sequence[int]) -> tuple[int, ...]:
    try:
        dims = [operator.index(shape)] if not isinstance(shape, Sequence) else [operator.index(s) for s in shape]
    except TypeError:
        raise ArrayError(f"reshape: shape must be an int or a sequence of ints, got {shape!r}") from None
    unknown = [i for i, d in enumerate(dims) if d == -1]
    if len(unknown) > 1 or any(d < -1 for d in dims):
        raise ArrayError(f"reshape: shape {tuple(dims)} may have one -1 and no other negative size")
    known = math.prod(d for d in dims if d != -1)
    if unknown:
        if known == 0 or x.size % known:
            raise ArrayError(f"cannot reshape an array of size {x.size} into shape {tuple(dims)}")
        dims[unknown[0]] = x.size // known
    if math.prod(dims) != x.size:
        raise ArrayError(f"cannot reshape an array of size {x.size} into shape {tuple(dims)}")
    return tuple(dims)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The C-order strides (in elements) of ``shape``."""
    strides = []
    step = 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def view_strides(shape: tuple[int, ...], strides: tuple[int, ...], target: tuple[int, ...]) -> tuple[int, ...] | None:
    """Strides that read a layout of ``shape`` and ``strides`` in C order as ``target``, or None
    when no strides can (NumPy's ``_attempt_nocopy_reshape``)."""
    if math.prod(shape) == 0:
        return contiguous_strides(target)
    old = [(d, s) for d, s in zip(shape, strides, strict=True) if d != 1]
    sizes = [d for d, _ in old]
    steps = [s for _, s in old]
    new = [0] * len(target)
    ni, nj, oi, oj = 0, 1, 0, 1
    while ni < len(target) and oi < len(sizes):
        np_, op = target[ni], sizes[oi]
        while np_ != op:
            if np_ < op:
                np_ *= target[nj]
                nj += 1
            else:
                op *= sizes[oj]
                oj += 1
        for ok in range(oi, oj - 1):
            if steps[ok] != sizes[ok + 1] * steps[ok + 1]:
                return None
        new[nj - 1] = steps[oj - 1]
        for nk in range(nj - 1, ni, -1):
            new[nk - 1] = new[nk] * target[nk]
        ni, nj, oi, oj = nj, nj + 1, oj, oj + 1
    last = new[ni - 1] if ni else 1
    for nk in range(ni, len(target)):
        new[nk] = last
    return tuple(new)


class ViewMethods:
    """The manipulations above as methods of :class:`hetero.Array` (which inherits these)."""

    __slots__ = ()

    def _array(self) -> Array:
        return cast("Array", self)  # only hetero.Array inherits this class

    @property
    def T(self) -> Array:  # noqa: N802 (the array API's name)
        """The axes reversed (a view), as NumPy's ``.T``."""
        return permute_dims(self._array(), tuple(reversed(range(self._array().ndim))))

    @property
    def mT(self) -> Array:  # noqa: N802 (the array API's name)
        """The last two axes swapped (a view)."""
        return matrix_transpose(self._array())

    def reshape(self, *shape: Any, copy: bool | None = None) -> Array:
        """:func:`hetero.reshape`: a view when the layout allows, else a copy."""
        return reshape(self._array(), shape[0] if len(shape) == 1 else shape, copy=copy)

    def permute_dims(self, axes: Sequence[int]) -> Array:
        return permute_dims(self._array(), axes)

    def broadcast_to(self, shape: int | Sequence[int]) -> Array:
        return broadcast_to(self._array(), shape)

    def expand_dims(self, axis: int | Sequence[int] = 0) -> Array:
        return expand_dims(self._array(), axis)

    def squeeze(self, axis: int | Sequence[int] | None = None) -> Array:
        return squeeze(self._array(), axis)

    def flip(self, axis: int | Sequence[int] | None = None) -> Array:
        return flip(self._array(), axis)

    def moveaxis(self, source: int | Sequence[int], destination: int | Sequence[int]) -> Array:
        return moveaxis(self._array(), source, destination)
