"""The C library's math functions for code the CPU emitter generates, so a kernel on ``cpu``
computes what the C dialects compute (C99 semantics: NaN or infinity where Python's ``math``
raises, ``round`` halfway away from zero, IEEE ``remainder``) with the same functions a C
compiler calls: ``libm_X`` is C's ``X`` on float64, ``libm_Xf`` C's ``Xf`` on float32.

Numba calls each as an external symbol that the running process already has (CPython links
the C math library), so nothing is loaded and compiled kernels stay cacheable. The ``libm_X``
names are made on first use (generated modules import them), so that the emitter, which needs
only :data:`FUNCTIONS` and :func:`symbol`, does not import Numba.
"""

from __future__ import annotations

from typing import Any

#: C functions, by the number of float arguments they take.
_FUNCTIONS = {
    1: ("atan", "asin", "acos", "sinh", "cosh", "asinh", "acosh", "atanh", "log10", "log2", "log1p", "expm1", "exp2",
        "erf", "erfc", "lgamma", "tgamma", "cbrt", "trunc", "round", "rint"),
    2: ("atan2", "hypot", "copysign", "fmod", "remainder", "nextafter"),
}  # fmt: skip
#: The hetero math functions computed by a C library call here.
FUNCTIONS = frozenset(name for names in _FUNCTIONS.values() for name in names)


_ARITY = {name: arity for arity, names in _FUNCTIONS.items() for name in names}


def __getattr__(attribute: str) -> Any:
    """``libm_X`` / ``libm_Xf``: C's ``X`` on float64 / ``Xf`` on float32, as Numba external functions."""
    name = attribute.removeprefix("libm_")
    double = name in _ARITY
    base = name if double else name[:-1] if name.endswith("f") else ""
    if not attribute.startswith("libm_") or base not in _ARITY:
        raise AttributeError(f"module {__name__!r} has no attribute {attribute!r}")
    from numba import types

    t = types.float64 if double else types.float32
    function = types.ExternalFunction(name, t(*[t] * _ARITY[base]))
    globals()[attribute] = function
    return function


def symbol(name: str, double: bool) -> str:
    """The Python name generated code imports for math function ``name``."""
    return f"libm_{name}" if double else f"libm_{name}f"
