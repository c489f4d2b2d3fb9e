"""The C library's math functions for code the CPU emitter generates, so a kernel on ``cpu``
computes what the C dialects compute (C99 semantics: NaN or infinity where Python's ``math``
raises, ``round`` halfway away from zero, IEEE ``remainder``) with the same functions a C
compiler calls: ``libm_X`` is C's ``X`` on float64, ``libm_Xf`` C's ``Xf`` on float32.

Numba calls each as an external symbol that the running process already has (CPython links
the C math library), so nothing is loaded and compiled kernels stay cacheable.
"""

from __future__ import annotations

from typing import Any

from numba import types

#: C functions, by the number of float arguments they take.
_FUNCTIONS = {
    1: ("atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "log10", "log2", "log1p", "expm1", "exp2",
        "erf", "erfc", "lgamma", "tgamma", "cbrt", "trunc", "round", "rint"),
    2: ("atan2", "hypot", "copysign", "fmod", "remainder", "nextafter"),
}  # fmt: skip
#: The hetero math functions computed by a C library call here.
FUNCTIONS = frozenset(name for names in _FUNCTIONS.values() for name in names)


def _external(symbol: str, arity: int, t: types.Float) -> Any:
    return types.ExternalFunction(symbol, t(*[t] * arity))


for _arity, _names in _FUNCTIONS.items():
    for _name in _names:
        globals()[f"libm_{_name}"] = _external(_name, _arity, types.float64)
        globals()[f"libm_{_name}f"] = _external(f"{_name}f", _arity, types.float32)


def symbol(name: str, double: bool) -> str:
    """The Python name generated code imports for math function ``name``."""
    return f"libm_{name}" if double else f"libm_{name}f"
