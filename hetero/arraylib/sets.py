"""Set functions of hetero arrays (array API 2024.12): ``unique_values unique_counts unique_inverse unique_all``.

Built on the device sort (:func:`hetero.arraylib.sort.sorted_pairs`) of the flattened input and
the generated kernels of :mod:`hetero.compiler.array_kernels.unique`: mark where a new value starts, a
cumulative sum of the marks (:func:`hetero.arraylib.reductions.cumulative_sum`) numbers the
values, a scatter writes each value, its first index and its place in the input's inverse.

The number of distinct values decides the result's shape, so it is read back to the host
once (one 8-byte read, after the sort); everything else stays on the device.

Semantics (the standard's, and NumPy's ``np.unique(x.ravel(), equal_nan=False)``): values
ascending, NaNs last and each NaN a value of its own (count 1); -0.0 and +0.0 are one value,
shown as whichever comes first in the input. ``indices`` is the first occurrence in the
flattened input, ``inverse_indices`` has ``x``'s shape, ``counts`` how often each value occurs;
all index arrays are int64.
"""

from __future__ import annotations

from typing import NamedTuple

from hetero.core import dtypes
from hetero.array.ndarray import Array, empty
from hetero.kernels.generated import GeneratedSpecialization, SpecializationCache
from hetero.arraylib.reductions import cumulative_sum
from hetero.arraylib.sort import bits, checked, sorted_rows
from hetero.compiler.array_kernels import unique as kernels
from hetero.core.device import Device


class UniqueAllResult(NamedTuple):
    values: Array
    indices: Array
    inverse_indices: Array
    counts: Array


class UniqueCountsResult(NamedTuple):
    values: Array
    counts: Array


class UniqueInverseResult(NamedTuple):
    values: Array
    inverse_indices: Array


_kernels: SpecializationCache[kernels.Unique] = SpecializationCache(kernels.build)


def _kernel(spec: kernels.Unique, device: Device) -> GeneratedSpecialization:
    return _kernels.get(spec, device)


def _unique(x: Array, what: str) -> UniqueAllResult:
    x = checked(x, what)
    device = x.device
    n = x.size
    if n == 0:
        nothing = empty((0,), dtypes.int64, device=device)
        return UniqueAllResult(empty((0,), x.dtype, device=device), nothing, empty(x.shape, dtypes.int64, device=device),
                               empty((0,), dtypes.int64, device=device))
    flat = x.reshape(n)
    done = sorted_rows(flat.reshape((1, n)), descending=False)
    work = [done.keys] if done.index is None else [done.keys, done.index]

    def spec(stage: str) -> kernels.Unique:
        return kernels.Unique(stage, done.spec.kind, done.spec.source, done.spec.index)

    flags = empty((n,), dtypes.int64, device=device)
    _kernel(spec("marks"), device).run((n,), [flags, done.keys, n])
    ids = cumulative_sum(flags)
    count = int(ids[n - 1:].numpy()[0])  # the one read back: the result's size
    values = empty((count,), x.dtype, device=device)
    first = empty((count,), dtypes.int64, device=device)
    starts = empty((count,), dtypes.int64, device=device)
    inverse = empty((n,), dtypes.int64, device=device)
    _kernel(spec("scatter"), device).run((n,), [bits(values), first, starts, inverse, bits(flat), *work, flags, ids, n])
    counts = empty((count,), dtypes.int64, device=device)
    _kernel(spec("counts"), device).run((count,), [counts, starts, count, n])
    return UniqueAllResult(values, first, inverse.reshape(x.shape), counts)


def unique_all(x: Array, /) -> UniqueAllResult:
    """The distinct values of ``x`` (flattened, ascending), the index of each one's first
    occurrence, each element's place among them (``x``'s shape) and how often each occurs."""
    return _unique(x, "unique_all")


def unique_counts(x: Array, /) -> UniqueCountsResult:
    """The distinct values of ``x`` (flattened, ascending) and how often each occurs."""
    result = _unique(x, "unique_counts")
    return UniqueCountsResult(result.values, result.counts)


def unique_inverse(x: Array, /) -> UniqueInverseResult:
    """The distinct values of ``x`` and, for each element, the index of its value (``x``'s shape)."""
    result = _unique(x, "unique_inverse")
    return UniqueInverseResult(result.values, result.inverse_indices)


def unique_values(x: Array, /) -> Array:
    """The distinct values of ``x`` (flattened, ascending; each NaN distinct)."""
    return _unique(x, "unique_values").values


__all__ = ["UniqueAllResult", "UniqueCountsResult", "UniqueInverseResult", "unique_all", "unique_counts",
           "unique_inverse", "unique_values"]
