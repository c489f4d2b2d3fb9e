"""Python's and Numba-CUDA's numeric built-ins in kernels, with Numba's types: ``round(x)`` (an
integer, ties to even), ``round(x, ndigits)`` (CPython's algorithm, in f64 as numba-cuda
computes it), ``pow(a, b)`` (the ``**`` operator), ``math.ldexp``, ``math.frexp`` (a pair:
``m, e = math.frexp(x)``), ``cuda.fma`` and ``cuda.cbrt``.

``frexp`` and ``ldexp`` are device functions of :mod:`hetero.language.float_scale`, exact on
every device. Mixed into :class:`~hetero.compiler.frontend.expressions.ExpressionLowering`.
"""

from __future__ import annotations

import ast
import math
from typing import TYPE_CHECKING, Any

from hetero.compiler.frontend.values import Value, cast
from hetero.compiler.ir import nodes as ir
from hetero.core.types import ScalarType, f32, f64, i32, i64
from hetero.language import float_scale

if TYPE_CHECKING:
    from hetero.compiler.frontend.expressions import DeviceFunctions
    from hetero.compiler.frontend.source import FunctionSource

#: The ``cuda.*`` intrinsics that are math functions of hetero's language, by that name.
CUDA_MATH = {"cuda.fma": "fma", "cuda.cbrt": "cbrt"}


class NumbaBuiltins:
    """``round``, ``pow``, ``math.ldexp``/``frexp``: see the module docstring."""

    if TYPE_CHECKING:
        src: FunctionSource
        program: DeviceFunctions
        rules: Any

        def expr(self, node: ast.expr) -> Value: ...

        def args(self, node: ast.Call, count: int) -> list[Value]: ...

        def binop(self, op: str, left: Value, right: Value, node: ast.AST) -> Value: ...

        def call_math(self, name: str, node: ast.Call) -> Value: ...

        def note_type(self, t: ScalarType) -> None: ...

    def numba_builtin(self, callee: Any, node: ast.Call) -> Value | None:
        """The call's value if ``callee`` is one of this module's built-ins, else None."""
        if callee is round:
            return self.call_round(node)
        if callee is pow:
            if len(node.args) != 2:
                raise self.src.error(node, "pow() in kernels takes two arguments (pow(base, exp, mod) is not supported)")
            left, right = self.args(node, 2)
            return self.binop("**", left, right, node)
        if callee is math.ldexp:
            x, n = self.args(node, 2)
            return self.ldexp(x, n, node)
        if callee is math.frexp:
            raise self.src.error(node, "math.frexp() returns a pair: unpack it, m, e = math.frexp(x)")
        return None

    def own_type(self, value: Value) -> ScalarType:
        return self.rules.literal_type(value.expr.value) if value.weak else value.type  # type: ignore[attr-defined,no-any-return]

    def float_argument(self, value: Value, what: str, node: ast.AST) -> Value:
        """``value`` as f32 or f64, as Numba's float-only signatures take it (integers as f64)."""
        t = self.own_type(value)
        if t.is_complex:
            raise self.src.error(node, f"{what} takes a real number, got {t}")
        t = t if t in (f32, f64) else (f32 if t.name == "f16" else f64)
        self.note_type(t)
        return Value(cast(value, t))

    def call_round(self, node: ast.Call) -> Value:
        """``round(x)``: the nearest integer, ties to even, as i64 (Numba's ``llrint``);
        ``round(x, ndigits)``: a float of x's type."""
        if not 1 <= len(node.args) <= 2:
            raise self.src.error(node, "round() takes a number and optionally ndigits")
        x = self.float_argument(self.expr(node.args[0]), "round()", node)
        if len(node.args) == 1:
            self.note_type(f64)
            return Value(ir.Cast(i64, ir.Math(f64, "rint", (cast(x, f64),))))
        digits = self.expr(node.args[1])
        if not self.own_type(digits).is_int:
            raise self.src.error(node.args[1], f"round()'s ndigits must be an integer, got {self.own_type(digits)}")
        self.note_type(f64)
        function = self.program.function(float_scale.round_ndigits, [x.type, i64], self.src, node)
        return Value(cast(Value(ir.Call(function.return_type, function.name, (x.expr, cast(digits, i64)))), x.type))

    def ldexp(self, x: Value, n: Value, node: ast.AST) -> Value:
        """``math.ldexp(x, n)``: ``x * 2**n`` rounded once, of x's type (f32 or f64)."""
        x = self.float_argument(x, "math.ldexp()", node)
        if not self.own_type(n).is_int:
            raise self.src.error(node, f"math.ldexp()'s exponent must be an integer, got {self.own_type(n)}")
        variant = float_scale.ldexp64 if x.type == f64 else float_scale.ldexp32
        function = self.program.function(variant, [x.type, i32], self.src, node)
        return Value(ir.Call(x.type, function.name, (x.expr, cast(n, i32))))

    def frexp(self, node: ast.Call) -> list[Value]:
        """``m, e = math.frexp(x)``: ``x == m * 2**e`` with ``0.5 <= |m| < 1`` (x's type), e an i32;
        ``(x, 0)`` for 0, inf and nan, as Python gives."""
        (x,) = self.args(node, 1)
        x = self.float_argument(x, "math.frexp()", node)
        function = self.program.function(float_scale.frexp_exponent, [x.type], self.src, node)
        exponent = Value(ir.Call(i32, function.name, (x.expr,)))
        return [self.ldexp(x, Value(ir.UnaryOp(i32, "-", exponent.expr)), node), exponent]

    def power_type(self, left: ScalarType, right: ScalarType) -> ScalarType | None:
        """Numba's type of ``left ** right`` where it is not the promoted one: a float to an integer
        power keeps the float's type (``f32 ** i64`` is f32); None elsewhere."""
        if self.rules.NAME == "numba" and left.is_float and right.is_int:
            return f32 if left.name == "f16" else left
        return None

    def math_pow_type(self, values: list[Value]) -> ScalarType | None:
        """Numba's ``math.pow(f32, i32)`` (an integer of up to 32 bits that i32 holds) is f32."""
        if self.rules.NAME != "numba" or len(values) != 2:
            return None
        base, exponent = (self.own_type(v) for v in values)
        if base == f32 and exponent.is_int and (exponent.bits < 32 or exponent.name == "i32"):
            return f32
        return None
