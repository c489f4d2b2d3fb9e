"""The reductions and scans of :mod:`hetero.arraylib.reductions` as methods of :class:`hetero.Array`
(which inherits :class:`ReductionMethods`); they reach that module through the
:data:`hetero.array.hooks.REDUCTION` hook, as it imports :mod:`hetero.array.ndarray`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hetero.array.hooks import REDUCTION

if TYPE_CHECKING:
    from hetero.array.ndarray import Array

Axis = int | Sequence[int] | None


class ReductionMethods:
    """``x.sum()``, ``x.mean(axis=0)``, ``x.cumulative_sum(axis=1)``...: see :mod:`hetero.arraylib.reductions`."""

    __slots__ = ()

    def sum(self, *, axis: Axis = None, dtype: Any = None, keepdims: bool = False) -> Array:
        return REDUCTION.call("sum", self, axis=axis, dtype=dtype, keepdims=keepdims)  # type: ignore[no-any-return]

    def prod(self, *, axis: Axis = None, dtype: Any = None, keepdims: bool = False) -> Array:
        return REDUCTION.call("prod", self, axis=axis, dtype=dtype, keepdims=keepdims)  # type: ignore[no-any-return]

    def min(self, *, axis: Axis = None, keepdims: bool = False) -> Array:
        return REDUCTION.call("min", self, axis=axis, keepdims=keepdims)  # type: ignore[no-any-return]

    def max(self, *, axis: Axis = None, keepdims: bool = False) -> Array:
        return REDUCTION.call("max", self, axis=axis, keepdims=keepdims)  # type: ignore[no-any-return]

    def mean(self, *, axis: Axis = None, keepdims: bool = False) -> Array:
        return REDUCTION.call("mean", self, axis=axis, keepdims=keepdims)  # type: ignore[no-any-return]

    def var(self, *, axis: Axis = None, correction: float = 0.0, keepdims: bool = False) -> Array:
        return REDUCTION.call("var", self, axis=axis, correction=correction, keepdims=keepdims)  # type: ignore[no-any-return]

    def std(self, *, axis: Axis = None, correction: float = 0.0, keepdims: bool = False) -> Array:
        return REDUCTION.call("std", self, axis=axis, correction=correction, keepdims=keepdims)  # type: ignore[no-any-return]

    def any(self, *, axis: Axis = None, keepdims: bool = False) -> Array:
        return REDUCTION.call("any", self, axis=axis, keepdims=keepdims)  # type: ignore[no-any-return]

    def all(self, *, axis: Axis = None, keepdims: bool = False) -> Array:
        return REDUCTION.call("all", self, axis=axis, keepdims=keepdims)  # type: ignore[no-any-return]

    def argmax(self, *, axis: int | None = None, keepdims: bool = False) -> Array:
        return REDUCTION.call("argmax", self, axis=axis, keepdims=keepdims)  # type: ignore[no-any-return]

    def argmin(self, *, axis: int | None = None, keepdims: bool = False) -> Array:
        return REDUCTION.call("argmin", self, axis=axis, keepdims=keepdims)  # type: ignore[no-any-return]

    def cumulative_sum(self, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Array:
        return REDUCTION.call("cumulative_sum", self, axis=axis, dtype=dtype,  # type: ignore[no-any-return]
                              include_initial=include_initial)

    def cumulative_prod(self, *, axis: int | None = None, dtype: Any = None, include_initial: bool = False) -> Array:
        return REDUCTION.call("cumulative_prod", self, axis=axis, dtype=dtype,  # type: ignore[no-any-return]
                              include_initial=include_initial)
