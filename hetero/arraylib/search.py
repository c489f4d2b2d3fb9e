"""The array API's searching functions ``nonzero`` and ``count_nonzero`` (2024.12), on the
array's device.

``nonzero`` is a stream compaction in three generated kernels: the flags ``x != 0`` (the cast
kernel to bool, so NaN counts as nonzero, as in NumPy), their running count (the scan of
:mod:`hetero.compiler.array_kernels.scan`), and the compaction kernel (:mod:`hetero.compiler.array_kernels.compact`) that
writes each nonzero element's multi-index at its place in the count: indices in C order, no
atomics, the same result every time. The result's length depends on the data, so the count is
read back to the host once (one wait for the device). ``count_nonzero`` is the sum of those
flags (:func:`hetero.sum`, int64, any axes); it reads nothing back.
"""

from __future__ import annotations

from collections.abc import Sequence

from hetero.core import dtypes
from hetero.array.ndarray import Array, empty
from hetero.arraylib.cast import astype
from hetero.kernels.generated import GeneratedSpecialization, SpecializationCache
from hetero.arraylib.reductions import cumulative_sum
from hetero.arraylib.reductions import sum as _sum
from hetero.arraylib.take import checked
from hetero.array.views import reshape
from hetero.compiler.array_kernels import compact
from hetero.core.device import Device

_kernels: SpecializationCache[int] = SpecializationCache(compact.build)


def _kernel(rank: int, device: Device) -> GeneratedSpecialization:
    return _kernels.get(rank, device)


def _flags(x: Array) -> Array:
    return x if x.dtype == dtypes.bool_ else astype(x, dtypes.bool_)


def nonzero(x: Array, /) -> tuple[Array, ...]:
    """The indices of ``x``'s nonzero (true) elements, one int64 array per axis, in C order (each
    a row of one new ``(x.ndim, count)`` array). A 0-d ``x`` is a ValueError, as the standard says."""
    x = checked(x, "hetero.nonzero")
    if x.ndim == 0:
        raise ValueError("hetero.nonzero of a 0-d array is not defined by the array API standard; reshape it "
                         "first: hetero.nonzero(hetero.reshape(x, (1,)))")
    n = x.size
    count = 0
    pos = None
    if n:
        pos = cumulative_sum(reshape(_flags(x), (-1,)), dtype=dtypes.int64)
        count = int(pos[n - 1]._host())  # the one host read: the result's length
    out = empty((x.ndim, count), dtypes.int64, device=x.device)
    if count and pos is not None:
        _kernel(x.ndim, x.device).run((n,), [reshape(out, (-1,)), pos, n, count, *x.shape])  # 1-D, as the kernel takes it
    return tuple(out[k] for k in range(x.ndim))


def count_nonzero(x: Array, /, *, axis: int | Sequence[int] | None = None, keepdims: bool = False) -> Array:
    """How many elements of ``x`` are nonzero (true; NaN counts) over ``axis`` (all axes when
    None, a tuple of axes too), as int64."""
    x = checked(x, "hetero.count_nonzero")
    return _sum(_flags(x), axis=axis, dtype=dtypes.int64, keepdims=keepdims)


__all__ = ["count_nonzero", "nonzero"]
