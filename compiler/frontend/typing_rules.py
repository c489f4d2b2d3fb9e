"""Type promotion in kernels: C's usual arithmetic conversions, written down once and
followed by every target (the frontend makes each conversion an explicit Cast).

1. Integer promotion: ``bool``, ``i8``, ``i16``, ``u8``, ``u16`` operands of arithmetic
   become ``i32`` (as in C).
2. Two integers: the same signedness -> the wider; mixed -> the unsigned one when it is
   at least as wide as the signed one, else the signed one (it holds every value).
3. Any float operand -> the widest float operand; an integer meets a float as that float.
   ``f16`` arithmetic is computed in ``f32`` (loads and stores of f16 stay f16).
4. ``/`` is true division: two integers divide as ``f32`` (cast to ``f64`` yourself for
   more precision). ``//`` and ``%`` floor towards negative infinity, as Python (and
   Numba) do, on every target: ``-7 // 2 == -4``, ``-7 % 2 == 1``.
5. Literals are weakly typed (as in JAX and Triton): ``2.0 * x`` has ``x``'s type when
   ``x`` is a float, so an f32 kernel never needs fp64; an int literal with an integer
   operand takes that operand's (promoted) type; a float literal with an integer operand
   gives f32. A literal on its own is ``i32`` (``i64`` when it does not fit, ``u64`` from 2**63) or ``f32``.
6. Comparisons promote both sides the same way and give ``bool``; ``and``/``or``/``not``
   take any scalar, tested against zero.
7. Shifts take the promoted type of the left operand. Bitwise ``& | ^`` on two bools
   stay bool.
8. Math functions take floats: integer arguments become f32, f16 becomes f32. The predicates
   (``isnan`` ``isinf`` ``isfinite`` ``signbit``) give ``bool``; see :mod:`hetero.math` for semantics.
9. ``x.shape[k]``, ``len(x)``, and the index built-ins (``global_id`` …) are ``i64``.
10. Complex (c64, c128): a complex operand makes the result complex, with parts as wide as
    rule 3 makes the floats (c64 with f32 or any integer is c64, with f64 c128). A complex
    literal (``1j``) is weak like a float one: c64 on its own or beside f32/c64, c128 beside
    f64/c128. Complex values compare only with ``==`` and ``!=``.

Left to the target, as in C and CUDA: signed integer overflow (wraps on every target
here, but OpenCL C does not promise it), shifts by the bit width or more, integer
division by zero (hetero's helpers give 0 instead of trapping), negative or
out-of-range array indices (never checked, never wrapped).
"""

from __future__ import annotations

from hetero.core.types import ScalarType, bool_t, c64, complex_of, f32, i32, i64, part_type, u64

NAME = "hetero"
_SMALL_INTS = {"bool", "i8", "i16", "u8", "u16"}


def integer_promote(t: ScalarType) -> ScalarType:
    return i32 if t.name in _SMALL_INTS else t


def arithmetic_type(t: ScalarType) -> ScalarType:
    """The type an operand is computed in (rule 1 and the f16 part of rule 3)."""
    if t.name == "f16":
        return f32
    return integer_promote(t)


def promote(a: ScalarType, b: ScalarType) -> ScalarType:
    """The common type of two operands of arithmetic or comparison (rules 1–3)."""
    a, b = arithmetic_type(a), arithmetic_type(b)
    if a == b:
        return a
    if a.is_complex or b.is_complex:  # rule 10
        return complex_of(promote(part_type(a) if a.is_complex else a, part_type(b) if b.is_complex else b))
    if a.is_float or b.is_float:
        floats = [t for t in (a, b) if t.is_float]
        return max(floats, key=lambda t: t.bits)
    if a.kind == b.kind:
        return a if a.bits >= b.bits else b
    signed, unsigned = (a, b) if a.kind == "i" else (b, a)
    return unsigned if unsigned.bits >= signed.bits else signed


def literal_type(value: int | float | bool | complex) -> ScalarType:
    """A literal's type when nothing else decides it (rule 5)."""
    if isinstance(value, complex):
        return c64
    if isinstance(value, bool):
        return bool_t
    if isinstance(value, int):
        return i32 if -(2**31) <= value < 2**31 else i64 if value < 2**63 else u64
    return f32


def weak_literal_type(value: int | float | bool | complex, other: ScalarType) -> ScalarType:
    """The type a literal takes next to an operand of type ``other`` (rules 5 and 10)."""
    if isinstance(value, complex):
        return other if other.is_complex else complex_of(other) if other.is_float else c64
    if other.is_complex:
        return other
    if isinstance(value, bool):
        return bool_t if other == bool_t else arithmetic_type(other)
    if isinstance(value, int):
        if other.is_float or other.is_int:
            return arithmetic_type(other)
        return literal_type(value)
    return arithmetic_type(other) if other.is_float else f32


def division_type(t: ScalarType) -> ScalarType:
    """The result type of ``/`` on operands promoted to ``t`` (rule 4)."""
    return t if t.is_float or t.is_complex else f32


def math_type(t: ScalarType) -> ScalarType:
    """The float type a math function computes in for an argument of type ``t`` (rule 8)."""
    return t if (t.is_float and t.bits >= 32) or t.is_complex else f32


INDEX_TYPE = i64


def promote_literals(values: list[int | float | bool | complex]) -> ScalarType:
    """The type of a variable assigned only literals: c64 if any is complex, f32 if any is a
    float, bool if all are bools, else i32 (i64 when a value does not fit)."""
    if any(isinstance(v, complex) for v in values):
        return c64
    if any(isinstance(v, float) for v in values):
        return f32
    if all(isinstance(v, bool) for v in values):
        return bool_t
    if any(literal_type(v) == u64 for v in values):
        return u64
    return i64 if any(literal_type(v) == i64 for v in values) else i32
