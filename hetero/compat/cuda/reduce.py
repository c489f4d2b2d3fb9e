"""``@cuda.reduce`` for ``hetero.compat.cuda``: a reduction by a user's binary function on any device.

``sum_reduce = cuda.reduce(lambda a, b: a + b)`` (or as a decorator); ``sum_reduce(ary)``
returns the reduction of a 1-D array as a NumPy scalar. Two launches: :data:`PARTIALS`
work-items each fold every :data:`PARTIALS`-th element in index order, then one work-item folds
``init`` and the partials in order (``init`` enters once). The order is fixed, so the result is the same on every device up to the
rounding of the function itself.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import hetero
from hetero.compat.cuda.arrays import DeviceNDArray
from hetero.kernels.kernel import Kernel
from hetero.language import DeviceFunction, global_id, set_typing

PARTIALS = 1024


def _kernels(op: DeviceFunction) -> tuple[Kernel, Kernel]:
    def fold_strided(src, out, n):  # type: ignore[no-untyped-def]
        i = global_id(0)
        if i < out.shape[0]:
            acc = src[i]
            j = i + out.shape[0]
            while j < n:
                acc = op(acc, src[j])
                j += out.shape[0]
            out[i] = acc

    def fold_all(src, out, n, init):  # type: ignore[no-untyped-def]
        if global_id(0) == 0:
            acc = init
            for j in range(n):
                acc = op(acc, src[j])
            out[0] = acc

    for fn in (fold_strided, fold_all):
        set_typing(fn, "numba")
    return Kernel(fold_strided), Kernel(fold_all)


class Reduce:
    """A reduction by ``func`` (``func(a, b)`` must be associative for the result to mean much)."""

    def __init__(self, func: Callable[..., Any]) -> None:
        self.func = func
        self._op = DeviceFunction(getattr(func, "py_func", func), typing="numba")
        self._compiled: tuple[Kernel, Kernel] | None = None

    def __call__(self, arr: Any, size: int | None = None, res: DeviceNDArray | None = None, init: Any = 0,
                 stream: Any = 0) -> Any:
        source = arr.array if isinstance(arr, DeviceNDArray) else arr
        if not isinstance(source, hetero.Array):
            source = hetero.asarray(np.ascontiguousarray(arr))
        if source.ndim != 1:
            raise ValueError(f"cuda.reduce takes a 1-D array, got {source.ndim} dimensions")
        n = source.shape[0] if size is None else int(size)
        dtype = np.dtype(source.dtype)
        initial = dtype.type(init)
        if n == 0:
            result = initial
        else:
            if self._compiled is None:
                self._compiled = _kernels(self._op)
            strided, final = self._compiled
            partials = min(PARTIALS, n)
            middle = hetero.empty(partials, dtype=dtype, device=source.device)
            strided[partials](source, middle, np.int64(n))
            out = hetero.empty(1, dtype=dtype, device=source.device)
            final[1](middle, out, np.int64(partials), initial)
            result = out.numpy()[0]
        if res is not None:
            res.copy_to_device(np.asarray([result], dtype=dtype)[: res.size].reshape(res.shape))
            return None
        return result


def reduce(func: Callable[..., Any]) -> Reduce:
    """Numba's ``cuda.reduce``: ``@cuda.reduce def add(a, b): return a + b``."""
    return Reduce(func)
