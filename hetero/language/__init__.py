"""The names of hetero's kernel language: index built-ins, barrier, local arrays,
atomics, and the ``@hetero.func`` device-function marker.

These objects only *name* things: the compiler recognises them inside a kernel's
source and lowers them. Called from ordinary Python they raise, saying so.
Vocabulary: imports nothing else of the project.

May import: the ground floor (:mod:`hetero.core`) only; the compiler and the public API import it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any


class Intrinsic:
    """A kernel-language built-in such as ``hetero.global_id`` or ``hetero.math.sqrt``.

    ``params`` names its parameters where a kernel may pass them by keyword
    (``cuda.shared.array(shape=16, dtype=float32)``)."""

    def __init__(self, name: str, doc: str, params: tuple[str, ...] = ()) -> None:
        self.name = name
        self.params = params
        self.__doc__ = doc

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"hetero.{self.name}() can only be used inside a @hetero.kernel or @hetero.func")

    def __repr__(self) -> str:
        return f"<hetero kernel intrinsic {self.name}>"


def _intrinsic(name: str, doc: str, params: tuple[str, ...] = ()) -> Intrinsic:
    return Intrinsic(name, doc, params)


global_id = _intrinsic("global_id", "global_id(axis): this work-item's index in the whole launch (i64)")
local_id = _intrinsic("local_id", "local_id(axis): this work-item's index in its work-group (i64)")
group_id = _intrinsic("group_id", "group_id(axis): this work-group's index (i64)")
local_size = _intrinsic("local_size", "local_size(axis): work-items per work-group along axis (i64)")
global_size = _intrinsic("global_size", "global_size(axis): work-items in the launch along axis (i64)")
num_groups = _intrinsic("num_groups", "num_groups(axis): work-groups along axis (i64)")
barrier = _intrinsic("barrier", "barrier(): wait until every work-item of the group gets here; local memory is then visible")
local_array = _intrinsic("local_array", "local_array(shape, dtype): work-group shared memory of constant shape",
                         ("shape", "dtype"))
_ATOMIC_PARAMS = ("ary", "idx", "val")
atomic_add = _intrinsic("atomic_add", "atomic_add(array, index, value): add atomically, return the old value", _ATOMIC_PARAMS)
atomic_sub = _intrinsic("atomic_sub", "atomic_sub(array, index, value): subtract atomically, return the old value",
                        _ATOMIC_PARAMS)
atomic_min = _intrinsic("atomic_min", "atomic_min(array, index, value): minimum atomically, return the old value",
                        _ATOMIC_PARAMS)
atomic_max = _intrinsic("atomic_max", "atomic_max(array, index, value): maximum atomically, return the old value",
                        _ATOMIC_PARAMS)
atomic_cas = _intrinsic("atomic_cas", "atomic_cas(array, index, compare, value): store value if the element "
                        "equals compare; return the old value", ("ary", "idx", "old", "val"))
atomic_nanmin = _intrinsic("atomic_nanmin", "atomic_nanmin(array, index, value): minimum atomically, a NaN taken as "
                           "missing (C's fmin); return the old value", _ATOMIC_PARAMS)
atomic_nanmax = _intrinsic("atomic_nanmax", "atomic_nanmax(array, index, value): maximum atomically, a NaN taken as "
                           "missing (C's fmax); return the old value", _ATOMIC_PARAMS)

INDEX_BUILTINS = ("global_id", "local_id", "group_id", "local_size", "global_size", "num_groups")
atomic_exch = _intrinsic("atomic_exch", "atomic_exch(array, index, value): store value atomically, return the old one",
                         _ATOMIC_PARAMS)
atomic_and = _intrinsic("atomic_and", "atomic_and(array, index, value): bitwise and atomically (integers), return "
                        "the old value", _ATOMIC_PARAMS)
atomic_or = _intrinsic("atomic_or", "atomic_or(array, index, value): bitwise or atomically (integers), return the "
                       "old value", _ATOMIC_PARAMS)
atomic_xor = _intrinsic("atomic_xor", "atomic_xor(array, index, value): bitwise xor atomically (integers), return "
                        "the old value", _ATOMIC_PARAMS)
atomic_inc = _intrinsic("atomic_inc", "atomic_inc(array, index, value): CUDA's wrapping increment on unsigned "
                        "integers: old >= value ? 0 : old + 1; returns the old value", _ATOMIC_PARAMS)
atomic_dec = _intrinsic("atomic_dec", "atomic_dec(array, index, value): CUDA's wrapping decrement on unsigned "
                        "integers: (old == 0 or old > value) ? value : old - 1; returns the old value", _ATOMIC_PARAMS)

#: ``min``/``max`` on floats keep the stored value when either is NaN (numba-cuda's rule);
#: ``nanmin``/``nanmax`` take a NaN as missing.
ATOMICS = ("add", "sub", "min", "max", "cas", "exch", "and", "or", "xor", "inc", "dec", "nanmin", "nanmax")
#: Atomics on integers only, and on unsigned integers only.
INTEGER_ATOMICS = ("and", "or", "xor", "inc", "dec")
UNSIGNED_ATOMICS = ("inc", "dec")
#: The math functions kernels may call (``hetero.math.X``; Python's ``math.X`` where it has one).
MATH_FUNCTIONS = ("sqrt", "rsqrt", "exp", "log", "log2", "sin", "cos", "tan", "tanh", "pow", "fabs", "floor",
                  "ceil", "fmin", "fmax", "fma",
                  "atan", "atan2", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "log10", "log1p",
                  "expm1", "exp2", "erf", "erfc", "lgamma", "tgamma", "hypot", "cbrt", "trunc", "round", "rint",
                  "copysign", "fmod", "remainder", "nextafter", "isnan", "isinf", "isfinite", "signbit")
#: Math functions taking more than one argument, and how many.
MATH_ARITY = {"pow": 2, "fmin": 2, "fmax": 2, "fma": 3, "atan2": 2, "hypot": 2, "copysign": 2, "fmod": 2, "remainder": 2,
               "nextafter": 2}
#: Math functions that test a float and return ``bool``.
MATH_PREDICATES = ("isnan", "isinf", "isfinite", "signbit")


class DeviceFunction:
    """A ``@hetero.func``: a function kernels (and other device functions) may call.

    Parameters may be annotated with hetero types; unannotated ones take the types of
    the call's arguments. The return type is the annotation, or that of the returns.
    """

    def __init__(self, py_func: Callable[..., Any], typing: str | None = None) -> None:
        self.py_func = py_func
        if typing is not None:
            set_typing(py_func, typing)
        functools.update_wrapper(self, py_func)  # type: ignore[arg-type]

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise RuntimeError(f"@hetero.func {self.py_func.__name__} can only be called from a kernel or another @hetero.func")

    def __repr__(self) -> str:
        return f"<hetero.func {self.py_func.__qualname__}>"


#: The typing rules a function's body is lowered with: hetero's own (the default) or Numba's
#: (kernels written against ``hetero.compat.cuda``; see :mod:`hetero.compiler.frontend.typing_numba`).
TYPINGS = ("hetero", "numba")


def set_typing(py_func: Callable[..., Any], typing: str) -> None:
    """Lower ``py_func`` (a kernel's or device function's Python function) with ``typing``'s rules."""
    if typing not in TYPINGS:
        raise ValueError(f"typing must be one of {TYPINGS}, got {typing!r}")
    py_func.__hetero_typing__ = typing  # type: ignore[attr-defined]


def typing_of(py_func: Callable[..., Any]) -> str:
    """The typing rules ``py_func`` is lowered with (see :func:`set_typing`)."""
    return str(getattr(py_func, "__hetero_typing__", "hetero"))


def set_dynamic_shared(py_func: Callable[..., Any], nbytes: int) -> None:
    """Give ``py_func``'s kernel ``nbytes`` of launch-sized shared memory: CUDA's dynamic shared
    memory, which ``cuda.shared.array(0, dtype)`` names (one compiled variant per size)."""
    py_func.__hetero_dynamic_shared__ = int(nbytes)  # type: ignore[attr-defined]


def dynamic_shared_of(py_func: Callable[..., Any]) -> int:
    """The bytes of dynamic shared memory ``py_func``'s kernel is compiled for (see :func:`set_dynamic_shared`)."""
    return int(getattr(py_func, "__hetero_dynamic_shared__", 0))


#: How a kernel's tuple arguments are laid out: per parameter, a tree whose leaves (None) are the
#: scalars and arrays passed in its place, and whose nodes are ``(field names or None, children)``.
TupleLayout = tuple[tuple[str, Any], ...]


def set_tuple_args(py_func: Callable[..., Any], layout: TupleLayout) -> None:
    """Lower ``py_func`` with its tuple parameters flattened as ``layout`` says (the launch passes
    each leaf as an argument of its own: :mod:`hetero.compiler.frontend.tuple_args`)."""
    py_func.__hetero_tuple_args__ = layout  # type: ignore[attr-defined]


def tuple_args_of(py_func: Callable[..., Any]) -> TupleLayout:
    """The tuple layout ``py_func`` is lowered with (see :func:`set_tuple_args`); empty if none."""
    return tuple(getattr(py_func, "__hetero_tuple_args__", ()))


def func(py_func: Callable[..., Any]) -> DeviceFunction:
    """Mark ``py_func`` as a device function callable from kernels."""
    return DeviceFunction(py_func)
