"""Complex numbers in kernel expressions: what the frontend builds for ``1j``, ``z.real``,
``z.imag``, ``z.conjugate()``, ``abs(z)``, ``complex(a, b)``, ``cmath.exp(z)`` and its kin
(a mixin of :class:`~hetero.compiler.frontend.expressions.ExpressionLowering`).

It builds :class:`~hetero.compiler.ir.nodes.ComplexOp` nodes and complex-typed arithmetic;
:mod:`hetero.compiler.ir.complex_lowering` turns them into float parts before any emitter runs.
What complex numbers cannot do in Python (``<``, ``//``, ``%``, bit operations, ``min``) is a
CompileError here, as is a math-module function given one (use ``cmath``).
"""

from __future__ import annotations

import ast
import cmath
from typing import TYPE_CHECKING, Any

from hetero.core.types import ScalarType, bool_t, complex_of, part_type

from hetero.compiler.ir import nodes as ir
from hetero.compiler.frontend.values import Value, cast, const, weak


#: cmath functions a kernel may call, by their ComplexOp name.
CMATH = {getattr(cmath, name): name for name in ("exp", "log", "log10", "sqrt", "sin", "cos", "tan", "sinh", "cosh",
                                                   "tanh", "phase", "isnan", "isinf", "isfinite")}
_SUPPORTED = ", ".join(f"cmath.{name}" for name in CMATH.values())
#: Operators Python refuses for complex operands.
_NOT_FOR_COMPLEX = {"//", "%", "&", "|", "^", "<<", ">>", "min", "max"}


class ComplexExpressions:
    """The complex parts of expression lowering (see the module docstring)."""

    if TYPE_CHECKING:
        from hetero.compiler.frontend.source import FunctionSource

        src: FunctionSource
        rules: Any

        def expr(self, node: ast.expr) -> Value: ...

        def args(self, node: ast.Call, count: int) -> list[Value]: ...

        def note_type(self, t: ScalarType) -> None: ...

    def check_complex_operator(self, op: str, left: ScalarType, right: ScalarType, node: ast.AST) -> None:
        if (left.is_complex or right.is_complex) and op in _NOT_FOR_COMPLEX:
            raise self.src.error(node, f"operator {op} is not defined for complex numbers ({left}, {right})")

    def check_complex_compare(self, op: str, t: ScalarType, node: ast.AST) -> None:
        if t.is_complex and op not in ("==", "!="):
            raise self.src.error(node, f"complex numbers are not ordered: {op} is not defined for {t}; compare abs(z) "
                                       "or z.real")

    def complex_value(self, v: Value) -> ir.Expr:
        """``v`` as a complex expression of its own complex type, or of the complex type its float
        type has (a weak literal takes the rules' literal type)."""
        own = self.rules.literal_type(v.expr.value) if v.weak else v.type  # type: ignore[attr-defined]
        target = own if own.is_complex else complex_of(self.rules.math_type(own))
        self.note_type(target)
        return cast(v, target)

    def part(self, node: ast.Attribute) -> Value:
        """``z.real`` / ``z.imag`` (of a float or integer, itself and 0, as in Python)."""
        value = self.expr(node.value)
        if value.weak:
            number = complex(value.expr.value)  # type: ignore[attr-defined]
            return weak(number.real if node.attr == "real" else number.imag)
        if value.type.is_complex:
            return Value(ir.ComplexOp(part_type(value.type), node.attr, (value.expr,)))
        if node.attr == "real":
            return value
        return Value(const(0, value.type))

    def conjugate(self, node: ast.Call) -> Value:
        assert isinstance(node.func, ast.Attribute)
        if node.args or node.keywords:
            raise self.src.error(node, "conjugate() takes no arguments")
        value = self.expr(node.func.value)
        if not value.type.is_complex:
            return value
        return Value(ir.ComplexOp(value.type, "conj", (value.expr,)))

    def complex_abs(self, value: Value) -> Value:
        return Value(ir.ComplexOp(part_type(value.type), "abs", (value.expr,)))

    def call_complex(self, node: ast.Call) -> Value:
        """``complex(re)`` / ``complex(re, im)``: the complex number of the (promoted) parts."""
        if not 1 <= len(node.args) <= 2:
            raise self.src.error(node, "complex() in kernels takes the real part and optionally the imaginary part")
        parts = [self.expr(a) for a in node.args]
        if any(p.type.is_complex and not p.weak for p in parts):
            raise self.src.error(node, "complex() takes real parts; a complex argument is already complex")
        own = [self.rules.literal_type(p.expr.value) if p.weak else p.type for p in parts]  # type: ignore[attr-defined]
        t = self.rules.math_type(own[0])
        for other in own[1:]:
            t = self.rules.promote(t, self.rules.math_type(other))
        whole = complex_of(t)
        t = part_type(whole)
        self.note_type(whole)
        re = cast(parts[0], t)
        im = cast(parts[1], t) if len(parts) == 2 else ir.Const(t, 0.0)
        return Value(ir.ComplexOp(whole, "make", (re, im)))

    def call_cmath(self, name: str, node: ast.Call) -> Value:
        (value,) = self.args(node, 1)
        z = self.complex_value(value)
        t: ScalarType = z.type
        if name in ("isnan", "isinf", "isfinite"):
            t = bool_t
        elif name == "phase":
            t = part_type(z.type)
        return Value(ir.ComplexOp(t, name, (z,)))

    def unknown_cmath(self, callee: Any) -> str:
        if getattr(callee, "__module__", None) == "cmath" or (callable(callee) and callee in vars(cmath).values()):
            name = getattr(callee, "__name__", "?")
            return f"cmath.{name} is not supported in kernels (supported: {_SUPPORTED})"
        return ""


__all__ = ["CMATH", "ComplexExpressions"]
