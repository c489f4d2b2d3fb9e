"""Numba's typing, for kernels written against Numba's CUDA API (``hetero.compat.cuda``).

The same functions as :mod:`hetero.compiler.frontend.typing_rules`, with Numba's answers, so that a
kernel moved from ``numba.cuda`` computes in the types it computed in there (a Python float
is f64, ``int / int`` is f64: hetero's own rules would make both f32, a silently different
answer):

1. Literals are typed on their own, never by their neighbour: an ``int`` is i64 (u64 when
   only that holds it), a ``float`` is f64, a ``bool`` is bool. ``x * 2.0`` with an f32 ``x``
   is f64, as in Numba.
2. Integer arithmetic is at least 64 bits wide (Numba's "integer typing NBEP"): the result
   is signed when any operand is, ``i32 + i32`` is i64, ``u32 + u32`` is u64, ``i64 + u64``
   is i64. ``bool`` counts as an integer of 8 bits.
3. An integer meeting a float takes NumPy's common type: i8/i16/u8/u16 with f32 give f32,
   wider integers give f64; any operand f64 gives f64. f16 arithmetic is computed in f32.
4. ``/`` on two integers is f64. Math functions on integers compute in f64, on f32 in f32.
5. A variable assigned only literals is f64 if any is a float, bool if all are bools, else
   i64.

6. Complex: NumPy's common type, as Numba's (c64 with f32 stays c64; with f64 or any
   integer of 32 bits or more, c128). A complex literal is c128.

The index built-ins keep Numba's types: ``cuda.threadIdx.x`` and its kin are i32,
``cuda.grid(n)``, ``cuda.gridsize(n)``, ``len(a)`` and ``a.shape[k]`` are i64.
"""

from __future__ import annotations

import numpy as np

from hetero.core.types import ScalarType, bool_t, c128, f32, f64, i64, scalar_type, u64

NAME = "numba"


def integer_promote(t: ScalarType) -> ScalarType:
    if t == bool_t:
        return i64
    if t.is_int:
        return i64 if t.kind == "i" else u64
    return t


def arithmetic_type(t: ScalarType) -> ScalarType:
    if t.name == "f16":
        return f32
    return integer_promote(t)


def promote(a: ScalarType, b: ScalarType) -> ScalarType:
    if a.is_float or b.is_float or a.is_complex or b.is_complex:
        common = scalar_type(np.promote_types(_np(a), _np(b)))
        return f32 if common.name == "f16" else common
    a, b = integer_promote(a), integer_promote(b)
    return i64 if "i" in (a.kind, b.kind) else u64


def _np(t: ScalarType) -> np.dtype:
    return np.dtype(np.bool_) if t == bool_t else np.dtype(t.dtype)


def literal_type(value: float | bool | complex) -> ScalarType:
    if isinstance(value, complex):
        return c128
    if isinstance(value, bool):
        return bool_t
    if isinstance(value, int):
        return u64 if value >= 2**63 else i64
    return f64


def weak_literal_type(value: float | bool | complex, other: ScalarType) -> ScalarType:
    """Numba types a literal on its own (rule 1): its neighbour does not matter."""
    return literal_type(value)


def division_type(t: ScalarType) -> ScalarType:
    return t if t.is_float or t.is_complex else f64


def math_type(t: ScalarType) -> ScalarType:
    if t.is_complex:
        return t
    return t if t.is_float and t.bits >= 32 else (f32 if t.name == "f16" else f64)


def promote_literals(values: list[int | float | bool | complex]) -> ScalarType:
    if any(isinstance(v, complex) for v in values):
        return c128
    if any(isinstance(v, float) for v in values):
        return f64
    if all(isinstance(v, bool) for v in values):
        return bool_t
    return u64 if any(literal_type(v) == u64 for v in values) else i64
