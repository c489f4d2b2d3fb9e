"""The IR of each elementwise operation, for :mod:`hetero.compiler.array_kernels.elementwise`.

:func:`lower` gets the operands already converted to the operation's compute type ``t``
(f32 or f64 for floats, the integer type itself, or bool) and returns an expression of
the result's compute type. The rules where C, Python and NumPy could differ are written
here once, for every dialect, so every device gives NumPy's answer:

- signed integer ``+ - *``, negation and ``abs`` wrap (computed in the unsigned type: C's
  signed overflow is undefined); ``abs(MIN)`` is ``MIN``, as in NumPy;
- integer ``//`` and ``%`` by zero give 0 (the IR's floor division, never a trap);
- shifts by a count outside ``[0, bits)`` give 0 (left, and right of a non-negative value)
  or -1 (right shift of a negative value), as NumPy does;
- ``maximum``/``minimum`` return NaN when either operand is NaN (NumPy's formula:
  ``(isnan(a) or a > b) ? a : b``);
- ``sign`` keeps NaN and gives +0 for either zero; ``round`` is ``rint`` (halfway to even);
- ``logaddexp`` is NumPy's composition (``a == b``: ``a + log 2``; infinities exact);
- ``where`` selects one operand (the other is never read into the result: a NaN there
  cannot leak); its condition arrives as bool (:data:`BOOL_OPERANDS`);
- ``astype`` from a float to an integer truncates toward zero, as C and NumPy do, and
  defines what NumPy leaves to the platform: NaN gives 0, values past the integer's range
  (infinities included) saturate to its minimum or maximum;
- integer ``**`` wraps; a negative exponent gives the integer part of the true result (0
  unless the base is 1 or -1) where NumPy raises: :mod:`hetero.arraylib.elementwise` refuses a
  negative *scalar* exponent as NumPy does, but does not read exponent arrays back to check.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from hetero.core.types import ScalarType, bool_t, u64

from hetero.compiler.ir import nodes as ir

#: Unary math functions that are one :class:`ir.Math` call on floats (the hetero name -> the IR's).
MATH_UNARY = {name: name for name in ("acos", "acosh", "asin", "asinh", "atan", "atanh", "cos", "cosh", "exp",
                                      "expm1", "log", "log1p", "log2", "log10", "sin", "sinh", "sqrt", "tan", "tanh")}
#: Rounding functions: a Math call on floats, the identity on integers.
ROUNDING = {"ceil": "ceil", "floor": "floor", "trunc": "trunc", "round": "rint"}
MATH_BINARY = {"atan2": "atan2", "copysign": "copysign", "hypot": "hypot", "nextafter": "nextafter"}
PREDICATES = ("isnan", "isinf", "isfinite", "signbit")
COMPARISONS = {"equal": "==", "not_equal": "!=", "less": "<", "less_equal": "<=", "greater": ">", "greater_equal": ">="}
#: Operand positions of an operation that arrive as bool (not in its compute type).
BOOL_OPERANDS: dict[str, tuple[int, ...]] = {"where": (0,)}
_ARITH = {"add": "+", "subtract": "-", "multiply": "*"}
_PLAIN = {"divide": "/", "floor_divide": "//", "remainder": "%", "bitwise_and": "&", "bitwise_or": "|",
          "bitwise_xor": "^"}


def _const(t: ScalarType, value: float | bool) -> ir.Const:
    return ir.Const(t, value)


def _unsigned(t: ScalarType) -> ScalarType:
    return ScalarType("u" + t.name[1:], "u", t.bits)


def _wrapping(op: str, a: ir.Expr, b: ir.Expr, t: ScalarType) -> ir.Expr:
    """``a op b`` for integers, wrapping: signed values compute in the unsigned type."""
    if t.kind != "i":
        return ir.BinOp(t, op, a, b)
    u = _unsigned(t)
    return ir.Cast(t, ir.BinOp(u, op, ir.Cast(u, a), ir.Cast(u, b)))


def _isnan(a: ir.Expr) -> ir.Expr:
    return ir.Math(bool_t, "isnan", (a,))


def _pick(op: str, a: ir.Expr, b: ir.Expr, t: ScalarType) -> ir.Expr:
    """``maximum`` (op ``>``) or ``minimum`` (``<``): NaN if either is NaN."""
    better: ir.Expr = ir.Compare(bool_t, op, a, b)
    if t.is_float:
        better = ir.Logical(bool_t, "or", _isnan(a), better)
    return ir.Select(t, better, a, b)


def _shift(op: str, a: ir.Expr, b: ir.Expr, t: ScalarType) -> ir.Expr:
    in_range = ir.Compare(bool_t, "<", ir.Cast(u64, b), _const(u64, t.bits))
    if op == "<<":
        shifted = _wrapping("<<", a, b, t)
        return ir.Select(t, in_range, shifted, _const(t, 0))
    outside: ir.Expr = _const(t, 0)
    if t.kind == "i":
        outside = ir.Select(t, ir.Compare(bool_t, "<", a, _const(t, 0)), _const(t, -1), _const(t, 0))
    return ir.Select(t, in_range, ir.BinOp(t, ">>", a, b), outside)


def _negative(a: ir.Expr, t: ScalarType) -> ir.Expr:
    return ir.UnaryOp(t, "-", a) if t.is_float else _wrapping("-", _const(t, 0), a, t)


def _sign(a: ir.Expr, t: ScalarType) -> ir.Expr:
    zero = _const(t, 0)
    rest: ir.Expr = zero if not t.is_float else ir.Select(t, ir.Compare(bool_t, "==", a, zero), zero, a)  # NaN stays
    if t.kind != "u":
        rest = ir.Select(t, ir.Compare(bool_t, "<", a, zero), _const(t, -1), rest)
    return ir.Select(t, ir.Compare(bool_t, ">", a, zero), _const(t, 1), rest)


def _logaddexp(a: ir.Expr, b: ir.Expr, t: ScalarType) -> ir.Expr:
    """NumPy's ``npy_logaddexp``."""
    diff = ir.BinOp(t, "-", a, b)

    def tail(x: ir.Expr) -> ir.Expr:  # log1p(exp(x))
        return ir.Math(t, "log1p", (ir.Math(t, "exp", (x,)),))

    positive = ir.BinOp(t, "+", a, tail(ir.UnaryOp(t, "-", diff)))
    other = ir.Select(t, ir.Compare(bool_t, "<=", diff, _const(t, 0)), ir.BinOp(t, "+", b, tail(diff)), diff)
    unequal = ir.Select(t, ir.Compare(bool_t, ">", diff, _const(t, 0)), positive, other)
    return ir.Select(t, ir.Compare(bool_t, "==", a, b), ir.BinOp(t, "+", a, _const(t, math.log(2))), unequal)


def _float_to_int(a: ir.Expr, t: ScalarType, result: ScalarType) -> ir.Expr:
    """``a`` (float type ``t``) as integer type ``result``: truncated toward zero; NaN gives 0 and
    values past the range saturate (a C cast of those is undefined, NumPy's platform-defined)."""
    low = -(2.0 ** (result.bits - 1)) if result.kind == "i" else 0.0
    high = 2.0 ** (result.bits - 1 if result.kind == "i" else result.bits)  # both exact in f32 and f64
    top = (1 << (result.bits - 1)) - 1 if result.kind == "i" else (1 << result.bits) - 1
    inside = ir.Select(result, _isnan(a), _const(result, 0), ir.Cast(result, a))
    bottom = ir.Select(result, ir.Compare(bool_t, "<=", a, _const(t, low)), _const(result, int(low)), inside)
    return ir.Select(result, ir.Compare(bool_t, ">=", a, _const(t, high)), _const(result, top), bottom)


def _astype(a: ir.Expr, t: ScalarType, result: ScalarType) -> ir.Expr:
    if result == bool_t:
        return ir.Compare(bool_t, "!=", a, _const(t, 0))  # NaN is true, as bool(nan)
    if t.is_float and result.is_int:
        return _float_to_int(a, t, result)
    return a if t == result else ir.Cast(result, a)


def _unary(op: str, a: ir.Expr, t: ScalarType, result: ScalarType) -> ir.Expr | None:
    if op in MATH_UNARY:
        return ir.Math(t, MATH_UNARY[op], (a,))
    if op in ROUNDING:
        return ir.Math(t, ROUNDING[op], (a,)) if t.is_float else a
    if op in PREDICATES:
        if t.is_float:
            return ir.Math(bool_t, op, (a,))
        if op == "signbit":
            return ir.Compare(bool_t, "<", a, _const(t, 0)) if t.kind == "i" else _const(bool_t, False)
        return _const(bool_t, op == "isfinite")
    simple: dict[str, Callable[[], ir.Expr]] = {
        "negative": lambda: _negative(a, t),
        "positive": lambda: a,
        "abs": lambda: (ir.UnaryOp(t, "abs", a) if t.is_float else a if t.kind != "i"
                        else ir.Select(t, ir.Compare(bool_t, "<", a, _const(t, 0)), _negative(a, t), a)),
        "square": lambda: _wrapping("*", a, a, t),
        "sign": lambda: _sign(a, t),
        "reciprocal": lambda: ir.BinOp(t, "/", _const(t, 1), a),
        "bitwise_invert": lambda: ir.UnaryOp(t, "not" if t == bool_t else "~", a),
        "logical_not": lambda: ir.UnaryOp(bool_t, "not", a),
        "astype": lambda: _astype(a, t, result),
    }
    return simple[op]() if op in simple else None


def _binary(op: str, a: ir.Expr, b: ir.Expr, t: ScalarType) -> ir.Expr | None:
    if op in _ARITH:
        return _wrapping(_ARITH[op], a, b, t)
    if op in _PLAIN:
        return ir.BinOp(t, _PLAIN[op], a, b)
    if op in COMPARISONS:
        return ir.Compare(bool_t, COMPARISONS[op], a, b)
    if op in MATH_BINARY:
        return ir.Math(t, MATH_BINARY[op], (a, b))
    simple: dict[str, Callable[[], ir.Expr]] = {
        "pow": lambda: ir.Math(t, "pow", (a, b)) if t.is_float else ir.BinOp(t, "**", a, b),
        "maximum": lambda: _pick(">", a, b, t),
        "minimum": lambda: _pick("<", a, b, t),
        "bitwise_left_shift": lambda: _shift("<<", a, b, t),
        "bitwise_right_shift": lambda: _shift(">>", a, b, t),
        "logaddexp": lambda: _logaddexp(a, b, t),
        "logical_and": lambda: ir.Logical(bool_t, "and", a, b),
        "logical_or": lambda: ir.Logical(bool_t, "or", a, b),
        "logical_xor": lambda: ir.Compare(bool_t, "!=", a, b),
    }
    return simple[op]() if op in simple else None


def lower(op: str, args: list[ir.Expr], t: ScalarType, result: ScalarType) -> ir.Expr:
    """Operation ``op`` on ``args`` (each of type ``t``), of type ``result``."""
    value = _unary(op, args[0], t, result) if len(args) == 1 else _binary(op, args[0], args[1], t) \
        if len(args) == 2 else ir.Select(t, args[0], args[1], args[2]) if op == "where" and len(args) == 3 else None
    if value is None:
        raise ValueError(f"elementwise: no lowering for {op!r} with {len(args)} operands")
    return value


__all__ = ["BOOL_OPERANDS", "COMPARISONS", "MATH_BINARY", "MATH_UNARY", "PREDICATES", "ROUNDING", "lower"]
