"""Lowering of kernel expressions from Python AST to typed IR, following
:mod:`~hetero.compiler.frontend.typing_rules` (every conversion becomes an explicit Cast).

A :class:`Value` is a lowered expression plus whether it is still a weakly typed
literal, which takes the type of the operand it meets.
"""

from __future__ import annotations

import ast
import dataclasses
import math
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

from hetero import language
from hetero.language import bits as language_bits, cuda as language_cuda, warp_match as language_warp_match
from hetero import math as hetero_math
from hetero.core.types import ArrayType, ScalarType, bool_t, f16, f32, f64, i32, i64, scalar_type, u32, u64

from hetero.compiler.ir import nodes as ir
from hetero.compiler.frontend.complex_expressions import CMATH, ComplexExpressions
from hetero.compiler.frontend.numba_builtins import CUDA_MATH, NumbaBuiltins
from hetero.compiler.frontend import operator_calls, static_args
from hetero.compiler.frontend.values import Value, cast, const, weak
from hetero.compiler.frontend.source import MISSING, FunctionSource, function_source
from hetero.compiler.ir.warp_emulation import warp_lane



_FP16_BINARY = {"hadd": "+", "hsub": "-", "hmul": "*", "hdiv": "/"}
_FP16_COMPARE = {"heq": "==", "hne": "!=", "hgt": ">", "hge": ">=", "hlt": "<", "hle": "<="}


class DeviceFunctions(Protocol):
    """Where a call lowers its device function (:class:`hetero.compiler.frontend.python.Program` is one):
    declared here so that this module never imports the frontend that mixes it in."""

    #: The device functions lowered so far, callees before their callers.
    order: list[ir.Function]
    #: Bytes of dynamic shared memory the kernel is compiled for (``cuda.shared.array(0, dtype)``).
    dynamic_shared: int
    #: How many values each device function returning a tuple returns (by id of its function).
    arity: dict[int, int]

    def function(self, callee: language.DeviceFunction, types: Sequence[ScalarType | ArrayType | static_args.Bound],
                 caller: FunctionSource, node: ast.AST, element: int | None = None) -> ir.Function:
        """``callee`` lowered for argument ``types`` (once per types; ``element``: the variant returning
        that value of a tuple); errors point at ``node`` in ``caller``."""
        ...

    def foreign(self, callee: Any, caller: FunctionSource, node: ast.AST) -> ir.Function:
        """A foreign function's IR (its ``__hetero_foreign__``), with the functions it calls."""
        ...


BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
          ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>"}
_PY_BINOPS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv, "//": operator.floordiv,
              "%": operator.mod, "**": operator.pow, "&": operator.and_, "|": operator.or_, "^": operator.xor,
              "<<": operator.lshift, ">>": operator.rshift}
_COMPARES = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
#: Python's math module functions a kernel may call, by their hetero.math name.
_PY_MATH = {getattr(math, name): name for name in language.MATH_FUNCTIONS if hasattr(math, name)}
_PY_MATH[math.gamma] = "tgamma"
_SUPPORTED_MATH = ", ".join(language.MATH_FUNCTIONS)
_UNSUPPORTED = {
    ast.List: "list literals", ast.Dict: "dict literals", ast.Set: "set literals", ast.ListComp: "list comprehensions",
    ast.DictComp: "dict comprehensions", ast.SetComp: "set comprehensions", ast.GeneratorExp: "generator expressions",
    ast.Lambda: "lambda functions", ast.JoinedStr: "f-strings", ast.Starred: "starred expressions",
    ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield", ast.NamedExpr: "assignment expressions (:=)",
    ast.Tuple: "tuples (outside assignment, indexing and unpacking)", ast.Slice: "slices",
}


@dataclasses.dataclass(frozen=True)
class ArrayAlias:
    """A local name bound to one of several arrays (``data = buf_0`` in one branch, ``data = buf_1``
    in another), as Numba-CUDA kernels write: an i32 local holding the position of the array it
    names in ``candidates``; each use picks that array (a Select for loads and shapes, an If for stores)."""

    candidates: tuple[str, ...]
    dtype: ScalarType
    ndim: int


class ExpressionLowering(ComplexExpressions, NumbaBuiltins):
    """Mixed into :class:`~hetero.compiler.frontend.python.Lowerer`: one method per expression form."""

    if TYPE_CHECKING:  # provided by Lowerer
        src: FunctionSource
        arrays: dict[str, Any]
        var_types: dict[str, ScalarType]
        assigned: set[str]
        features: set[str]
        program: DeviceFunctions
        rules: Any  # hetero.compiler.frontend.typing_rules or typing_numba
        ufunc_loads: dict[str, ir.Load]
        pointers: dict[str, str]  # cffi's ffi.from_buffer(a) names: the array they point at

        def var_type(self, name: str, node: ast.AST) -> ScalarType: ...

        def note_type(self, t: ScalarType) -> None: ...

        def call_ufunc(self, ufunc: np.ufunc, node: ast.Call) -> Value: ...

    # -- tuple values: hetero.compiler.frontend.tuple_locals overrides these in the Lowerer --------
    tuple_locals: dict[str, int] = {}

    def tuple_item(self, node: ast.Subscript) -> Value | None:
        return None

    def tuple_length(self, node: ast.expr) -> Value | None:
        return None

    def index_items(self, index: ast.expr) -> list[Value] | None:
        return None

    def whole_tuple_error(self, node: ast.Name) -> Exception:
        return self.src.error(node, f"{node.id!r} is a tuple; it cannot be used whole here")

    def expr(self, node: ast.expr) -> Value:
        method = getattr(self, f"expr_{type(node).__name__}", None)
        if method is None:
            what = _UNSUPPORTED.get(type(node), f"{type(node).__name__} expressions")
            raise self.src.error(node, f"{what} are not supported in kernels")
        result: Value = method(node)
        return result

    # -- leaves ------------------------------------------------------------------------
    def expr_Constant(self, node: ast.Constant) -> Value:
        if isinstance(node.value, (bool, int, float, complex)):
            return weak(node.value)
        raise self.src.error(node, f"{type(node.value).__name__} constants are not supported in kernels")

    def expr_Name(self, node: ast.Name) -> Value:
        load = self.ufunc_loads.get(node.id) if self.ufunc_loads else None
        if load is not None:
            return Value(load)
        if node.id in self.arrays:
            raise self.src.error(node, f"array {node.id!r} cannot be used as a value: index it, e.g. {node.id}[i]")
        if node.id in self.tuple_locals:
            raise self.whole_tuple_error(node)
        if node.id in self.pointers:
            raise self.src.error(node, f"{node.id!r} is a pointer to {self.pointers[node.id]!r}: pass it to a foreign "
                                       "function (cuda.declare_device)")
        if node.id in self.var_types or node.id in self.assigned:
            return Value(ir.Var(self.var_type(node.id, node), node.id))
        return self.constant(self.src.resolve(node.id), node, node.id)

    def constant(self, obj: Any, node: ast.AST, name: str) -> Value:
        if obj is MISSING:
            raise self.src.error(node, f"name {name!r} is not defined")
        if isinstance(obj, (bool, int, float, complex)):
            return weak(obj)
        if isinstance(obj, np.generic) and obj.dtype.kind in "biufc":
            return Value(const(obj.item(), scalar_type(obj.dtype)))
        if isinstance(obj, language_cuda.IndexValue):
            return Value(ir.Cast(scalar_type(language_cuda.INDEX_VALUE_TYPE), ir.WorkItem(i64, obj.builtin, obj.axis)))
        if obj is language_cuda.laneid:
            return Value(ir.Cast(i32, warp_lane()))
        if obj is language_cuda.warpsize:
            return Value(ir.Const(i32, ir.WARP_SIZE))
        raise self.src.error(node, f"{name!r} is a {type(obj).__name__}; kernels can only use int, float and bool "
                                   "constants from outside the kernel")

    def static(self, node: ast.expr) -> Any:
        """The Python object a name or attribute chain denotes at compile time (MISSING if none)."""
        if isinstance(node, ast.Name):
            if node.id in self.var_types or node.id in self.assigned or node.id in self.arrays:
                return MISSING
            return self.src.resolve(node.id)
        if isinstance(node, ast.Attribute):
            base = self.static(node.value)
            return MISSING if base is MISSING else getattr(base, node.attr, MISSING)
        return MISSING

    def expr_Attribute(self, node: ast.Attribute) -> Value:
        if isinstance(node.value, ast.Name) and node.value.id in self.arrays:
            array = self.arrays[node.value.id]
            if node.attr == "ndim":
                return weak(len(array.shape) if isinstance(array, ir.LocalArray) else array.ndim or 0)
            if node.attr == "size":
                return self.size_of(node.value.id, node)
            raise self.src.error(node, f"{node.value.id}.{node.attr} is not supported in kernels; "
                                       "use .shape[k], .size or .ndim")
        obj = self.static(node)
        if obj is MISSING and node.attr in ("real", "imag"):
            return self.part(node)
        return self.constant(obj, node, ast.unparse(node))

    def expr_Subscript(self, node: ast.Subscript) -> Value:
        target = node.value
        if isinstance(target, ast.Attribute) and target.attr == "shape" and isinstance(target.value, ast.Name) \
                and target.value.id in self.arrays:
            axis = self.static_int(node.slice, "a shape index")
            return self.shape_of(target.value.id, axis, node)
        if isinstance(target, ast.Name) and target.id in self.arrays:
            indices = self.indices(target.id, node.slice, node)
            element = self.element_type(target.id)
            load = self.through_alias(target.id, lambda array: ir.Load(element, array, indices))
            return Value(ir.Cast(f32, load) if element == f16 else load)
        item = self.tuple_item(node)
        if item is not None:
            return item
        raise self.src.error(node, "only arrays, tuples and x.shape can be indexed in kernels")

    def through_alias(self, name: str, use: Any) -> ir.Expr:
        """``use(array)`` for the array ``name`` names: a Select over the arrays an alias may name."""
        alias = self.arrays[name]
        if not isinstance(alias, ArrayAlias):
            return use(name)  # type: ignore[no-any-return]
        selector = ir.Var(i32, name)
        result: ir.Expr = use(alias.candidates[-1])
        for k in reversed(range(len(alias.candidates) - 1)):
            chosen = use(alias.candidates[k])
            result = ir.Select(chosen.type, ir.Compare(bool_t, "==", selector, const(k, i32)), chosen, result)
        return result

    def shape_of(self, name: str, axis: int, node: ast.AST) -> Value:
        array = self.arrays[name]
        ndim = len(array.shape) if isinstance(array, ir.LocalArray) else (array.ndim or 0)
        if not -ndim <= axis < ndim:
            raise self.src.error(node, f"{name} has {ndim} dimension(s); shape[{axis}] is out of range")
        axis %= ndim
        if isinstance(array, ir.LocalArray):
            return Value(const(array.shape[axis], i64))
        return Value(self.through_alias(name, lambda a: ir.Shape(i64, a, axis)))

    def size_of(self, name: str, node: ast.AST) -> Value:
        """``array.size``: the product of its shape (i64)."""
        array = self.arrays[name]
        ndim = len(array.shape) if isinstance(array, ir.LocalArray) else (array.ndim or 0)
        if isinstance(array, ir.LocalArray):
            return Value(const(math.prod(array.shape), i64))
        size: ir.Expr = const(1, i64)
        for axis in range(ndim):
            shape = self.shape_of(name, axis, node).expr
            size = shape if axis == 0 else ir.BinOp(i64, "*", size, shape)
        return Value(size)

    def indices(self, name: str, index: ast.expr, node: ast.AST, wrap: bool = False) -> tuple[ir.Expr, ...]:
        """The i64 index of each axis. A negative constant counts from the axis' end, as in Python and
        Numba; in Numba-CUDA kernels (which Numba wraps) and with ``wrap`` (atomics), so does any
        negative signed index computed at run time. hetero's own kernel language leaves a run-time
        index as it is (C's rule; checked mode, HETERO_BOUNDS_CHECK, catches one out of bounds)."""
        items = self.index_items(index)  # a tuple value as the whole index: sm[bin], a[cuda.grid(2)]
        parts: list[ast.expr] = index.elts if isinstance(index, ast.Tuple) else [index] * len(items or [index])
        if any(isinstance(p, ast.Slice) for p in parts):
            raise self.src.error(node, "slicing is not supported in kernels: index one element at a time")
        array = self.arrays[name]
        ndim = len(array.shape) if isinstance(array, ir.LocalArray) else (array.ndim or 0)
        if len(parts) != ndim:
            raise self.src.error(node, f"{name} has {ndim} dimension(s) but is indexed with {len(parts)}")
        lowered = []
        for axis, part in enumerate(parts):
            value = items[axis] if items is not None else self.expr(part)
            if not (value.type.is_int or value.type == bool_t):
                raise self.src.error(part, f"array index must be an integer, got {value.type}")
            index_value = cast(value, i64)
            signed = value.weak or value.type.kind == "i"
            if isinstance(index_value, ir.Const) and int(ir.number(index_value)) < 0:
                index_value = ir.BinOp(i64, "+", self.shape_of(name, axis, node).expr, index_value)
            elif (wrap or self.rules.NAME == "numba") and signed and not isinstance(index_value, ir.Const):
                index_value = ir.Select(i64, ir.Compare(bool_t, "<", index_value, const(0, i64)), ir.BinOp(
                    i64, "+", self.shape_of(name, axis, node).expr, index_value), index_value)
            lowered.append(index_value)
        return tuple(lowered)

    def element_type(self, name: str) -> ScalarType:
        array = self.arrays[name]
        return array.dtype

    def static_int(self, node: ast.expr, what: str) -> int:
        value = self.expr(node)
        if not (value.weak and isinstance(value.expr, ir.Const) and isinstance(value.expr.value, int)):
            if isinstance(value.expr, ir.Const) and value.type.is_int:
                return int(ir.number(value.expr))
            raise self.src.error(node, f"{what} must be a constant integer")
        return int(value.expr.value)

    # -- operators ---------------------------------------------------------------------
    def expr_BinOp(self, node: ast.BinOp) -> Value:
        op = BINOPS.get(type(node.op))
        if op is None:
            raise self.src.error(node, f"operator {type(node.op).__name__} is not supported in kernels")
        return self.binop(op, self.expr(node.left), self.expr(node.right), node)

    def binop(self, op: str, left: Value, right: Value, node: ast.AST) -> Value:
        if left.weak and right.weak:
            return self.fold(op, left, right, node)
        left, right = self.unweaken(left, right), self.unweaken(right, left)
        lt, rt = left.type, right.type
        self.check_complex_operator(op, lt, rt, node)
        if op in ("<<", ">>", "&", "|", "^") and not ((lt.is_int or lt == bool_t) and (rt.is_int or rt == bool_t)):
            raise self.src.error(node, f"operator {op} needs integer operands, got {lt} and {rt}")
        if op in ("<<", ">>"):
            t = self.rules.integer_promote(lt)
            return Value(ir.BinOp(t, op, cast(left, t), cast(right, self.rules.integer_promote(rt))))
        if op in ("&", "|", "^") and lt == rt == bool_t:
            return Value(ir.BinOp(bool_t, op, left.expr, right.expr))
        t = (self.power_type(lt, rt) if op == "**" else None) or self.rules.promote(lt, rt)
        if op == "/":
            t = self.rules.division_type(t)
        self.note_type(t)
        return Value(ir.BinOp(t, op, cast(left, t), cast(right, t)))

    def unweaken(self, value: Value, other: Value) -> Value:
        if not value.weak:
            return value
        assert isinstance(value.expr, ir.Const)
        return Value(const(value.expr.value, self.rules.weak_literal_type(value.expr.value, other.type)))

    def fold(self, op: str, left: Value, right: Value, node: ast.AST) -> Value:
        assert isinstance(left.expr, ir.Const) and isinstance(right.expr, ir.Const)
        try:
            result = _PY_BINOPS[op](left.expr.value, right.expr.value)
        except (ZeroDivisionError, OverflowError, ValueError, TypeError) as exc:
            raise self.src.error(node, f"constant expression fails: {exc}") from None
        if isinstance(result, complex) and not any(isinstance(v.expr.value, complex)  # type: ignore[attr-defined]
                                                   for v in (left, right)):
            raise self.src.error(node, "constant expression gives a complex number")
        return weak(result)

    def expr_UnaryOp(self, node: ast.UnaryOp) -> Value:
        operand = self.expr(node.operand)
        if isinstance(node.op, ast.Not):
            return Value(ir.UnaryOp(bool_t, "not", self.truth(operand)))
        if isinstance(node.op, ast.UAdd):
            return operand
        if operand.weak:
            assert isinstance(operand.expr, ir.Const)
            value = operand.expr.value
            if isinstance(value, complex) and not isinstance(node.op, ast.USub):
                raise self.src.error(node, "operator ~ needs an integer operand, got a complex")
            if isinstance(node.op, ast.USub):
                return weak(-value)
            return weak(~int(ir.number(operand.expr)))
        if isinstance(node.op, ast.Invert):
            if not operand.type.is_int:
                raise self.src.error(node, f"operator ~ needs an integer operand, got {operand.type}")
        t = self.rules.arithmetic_type(operand.type)
        return Value(ir.UnaryOp(t, "-" if isinstance(node.op, ast.USub) else "~", cast(operand, t)))

    def truth(self, value: Value) -> ir.Expr:
        if value.type == bool_t:
            return cast(value, bool_t)
        if value.weak:
            assert isinstance(value.expr, ir.Const)
            return ir.Const(bool_t, bool(value.expr.value))
        return ir.Compare(bool_t, "!=", value.expr, const(0, value.type))  # a complex too: either part nonzero

    def expr_BoolOp(self, node: ast.BoolOp) -> Value:
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = self.truth(self.expr(node.values[0]))
        for operand in node.values[1:]:
            result = ir.Logical(bool_t, op, result, self.truth(self.expr(operand)))
        return Value(result)

    def expr_Compare(self, node: ast.Compare) -> Value:
        operands = [self.expr(node.left)] + [self.expr(c) for c in node.comparators]
        result: ir.Expr | None = None
        for index, op_node in enumerate(node.ops):
            op = _COMPARES.get(type(op_node))
            if op is None:
                raise self.src.error(node, f"comparison {type(op_node).__name__} is not supported in kernels")
            left, right = operands[index], operands[index + 1]
            if left.weak and right.weak:
                left = Value(const(left.expr.value, self.rules.literal_type(left.expr.value)))  # type: ignore[attr-defined]
            left, right = self.unweaken(left, right), self.unweaken(right, left)
            t = self.rules.promote(left.type, right.type)
            self.check_complex_compare(op, t, node)
            compare = ir.Compare(bool_t, op, cast(left, t), cast(right, t))
            result = compare if result is None else ir.Logical(bool_t, "and", result, compare)
        assert result is not None
        return Value(result)

    def expr_IfExp(self, node: ast.IfExp) -> Value:
        cond = self.truth(self.expr(node.test))
        yes, no = self.expr(node.body), self.expr(node.orelse)
        if yes.weak and no.weak:
            yes = Value(const(yes.expr.value, self.rules.literal_type(yes.expr.value)))  # type: ignore[attr-defined]
        yes, no = self.unweaken(yes, no), self.unweaken(no, yes)
        t = yes.type if yes.type == no.type else self.rules.promote(yes.type, no.type)
        return Value(ir.Select(t, cond, cast(yes, t), cast(no, t)))

    # -- calls ---------------------------------------------------------------------------
    def expr_Call(self, node: ast.Call) -> Value:
        callee = self.static(node.func)
        if node.keywords:
            node = self.positional(node, callee)
        name = ast.unparse(node.func)
        if isinstance(callee, language.Intrinsic):
            return self.call_intrinsic(callee.name, node)
        if callee in _PY_MATH:
            return self.call_math(_PY_MATH[callee], node)
        if callee in CMATH:
            return self.call_cmath(CMATH[callee], node)
        if callee is complex:
            return self.call_complex(node)
        if operator_calls.is_operator(callee):  # op(a, b) given operator.add: a + b
            return self.expr(operator_calls.written_out(callee, node, self.src.error))
        if callee is MISSING and isinstance(node.func, ast.Attribute) and node.func.attr == "conjugate":
            return self.conjugate(node)
        if callee is MISSING and isinstance(node.func, ast.Attribute) and node.func.attr == "bit_count":
            return self.bit_count(node)
        if isinstance(callee, language.DeviceFunction):
            return self.call_function(callee, node)
        if hasattr(callee, "__hetero_foreign__"):
            return self.call_foreign(callee, node)
        if isinstance(callee, np.ufunc):
            return self.call_ufunc(callee, node)
        foreign = foreign_device_function(callee)
        if foreign is not None:
            return self.call_function(foreign, node)
        target_type = _cast_type(callee)
        if target_type is not None:
            if len(node.args) != 1:
                raise self.src.error(node, f"cast {name}() takes one argument")
            value = self.expr(node.args[0])
            self.note_type(target_type)
            return Value(cast(value, target_type))
        if callee is min or callee is max:
            if len(node.args) < 2:
                raise self.src.error(node, f"{name}() in kernels takes two or more scalar arguments")
            result = self.expr(node.args[0])
            for arg in node.args[1:]:
                result = self.minmax(callee.__name__, result, self.expr(arg), node)
            return result
        builtin = self.numba_builtin(callee, node) if callee is not round or self.rules.NAME == "numba" else None
        if builtin is not None:
            return builtin
        if callee is round:  # Python's: ties to even (hetero.math.round is C's, ties away from zero)
            if len(node.args) != 1:
                raise self.src.error(node, "round(x) in kernels takes one argument and returns a float; "
                                           "to round to digits, scale: hetero.math.rint(x * 100.0) / 100.0")
            return self.call_math("rint", node)
        if callee is abs:
            (value,) = self.args(node, 1)
            if value.weak:
                return weak(abs(value.expr.value))  # type: ignore[attr-defined]
            if value.type.is_complex:
                return self.complex_abs(value)
            t = self.rules.arithmetic_type(value.type)
            return Value(ir.UnaryOp(t, "abs", cast(value, t)))
        if callee is len:
            length = self.tuple_length(node.args[0]) if len(node.args) == 1 else None
            if length is not None:
                return length
            if len(node.args) != 1 or not (isinstance(node.args[0], ast.Name) and node.args[0].id in self.arrays):
                raise self.src.error(node, "len() in kernels takes one array")
            return self.shape_of(node.args[0].id, 0, node)
        if callee is range:
            raise self.src.error(node, "range() can only be used as the iterable of a for loop")
        unknown = self.unknown_math(node.func, callee)
        if self.unknown_cmath(callee):
            raise self.src.error(node, self.unknown_cmath(callee))
        if unknown:
            raise self.src.error(node, f"{unknown} is not supported (supported: {_SUPPORTED_MATH}); "
                                       "compute it from those, or in a @hetero.func")
        if callee in (int, float, bool):
            if self.rules.NAME != "numba" or len(node.args) != 1:
                raise self.src.error(node, f"{name}() is ambiguous in kernels; use a sized cast such as hetero.i32(x) or "
                                           "hetero.f32(x)")
            value = self.expr(node.args[0])  # Numba's: int() is i64 (truncating), float() f64, bool() a test
            if callee is bool:
                return Value(self.truth(value))
            target = i64 if callee is int else f64
            self.note_type(target)
            return Value(cast(value, target))
        raise self.src.error(node, f"calling {name} is not supported in kernels: only hetero built-ins, math functions, "
                                   "casts and @hetero.func functions can be called")

    def positional(self, node: ast.Call, callee: Any) -> ast.Call:
        """``node`` with its keyword arguments moved into place, for the built-ins that name their
        parameters (:attr:`hetero.language.Intrinsic.params`); a CompileError for any other call."""
        params = callee.params if isinstance(callee, language.Intrinsic) else ()
        if not params:
            raise self.src.error(node, "keyword arguments are not supported in this kernel call")
        args: list[ast.expr | None] = [*node.args, *([None] * max(0, len(params) - len(node.args)))]
        for keyword in node.keywords:
            if keyword.arg not in params:
                raise self.src.error(keyword, f"{ast.unparse(node.func)}() has no parameter {keyword.arg!r} "
                                              f"(its parameters: {', '.join(params)})")
            position = params.index(keyword.arg)
            if args[position] is not None:
                raise self.src.error(keyword, f"{ast.unparse(node.func)}() got {keyword.arg!r} twice")
            args[position] = keyword.value
        while args and args[-1] is None:
            args.pop()
        if any(a is None for a in args):
            missing = [params[i] for i, a in enumerate(args) if a is None]
            raise self.src.error(node, f"{ast.unparse(node.func)}() is missing {', '.join(missing)}")
        return ast.copy_location(ast.Call(node.func, [a for a in args if a is not None], []), node)

    def args(self, node: ast.Call, count: int) -> list[Value]:
        if len(node.args) != count:
            raise self.src.error(node, f"{ast.unparse(node.func)}() takes {count} argument(s), got {len(node.args)}")
        return [self.expr(a) for a in node.args]

    def minmax(self, op: str, left: Value, right: Value, node: ast.AST) -> Value:
        if left.weak and right.weak:
            return weak((min if op == "min" else max)(left.expr.value, right.expr.value))  # type: ignore[attr-defined]
        left, right = self.unweaken(left, right), self.unweaken(right, left)
        self.check_complex_operator(op, left.type, right.type, node)
        t = self.rules.promote(left.type, right.type)
        return Value(ir.BinOp(t, op, cast(left, t), cast(right, t)))

    def unknown_math(self, func: ast.expr, callee: Any) -> str:
        """``math.X`` when ``func`` names a math function kernels lack (Python's math module
        or hetero.math), else ''."""
        if getattr(callee, "__module__", None) == "math" or (callee is MISSING and isinstance(func, ast.Attribute)
                                                             and self.static(func.value) in (math, hetero_math)):
            return f"math.{func.attr if isinstance(func, ast.Attribute) else getattr(callee, '__name__', '?')}"
        return ""

    def call_math(self, name: str, node: ast.Call) -> Value:
        if name not in language.MATH_FUNCTIONS:
            raise self.src.error(node, f"math.{name} is not supported (supported: {_SUPPORTED_MATH})")
        values = self.args(node, language.MATH_ARITY.get(name, 1))
        if any(v.type.is_complex for v in values):
            raise self.src.error(node, f"math.{name} takes real numbers; for complex ones use cmath (kernels support "
                                       f"{', '.join('cmath.' + n for n in CMATH.values())})")
        t: ScalarType | None = None
        for v in values:
            own = self.rules.literal_type(v.expr.value) if v.weak else v.type  # type: ignore[attr-defined]
            t = self.rules.math_type(own) if t is None else self.rules.promote(t, self.rules.math_type(own))
        assert t is not None
        t = (self.math_pow_type(values) if name == "pow" else None) or t
        self.note_type(t)
        result = bool_t if name in language.MATH_PREDICATES else t
        return Value(ir.Math(result, name, tuple(cast(v, t) for v in values)))

    def call_intrinsic(self, name: str, node: ast.Call) -> Value:
        if name.startswith("math."):
            return self.call_math(name[5:], node)
        if name in ("cuda.grid", "cuda.gridsize"):
            values = self.grid_values(name, node)
            if len(values) != 1:
                raise self.src.error(node, f"{name}({len(values)}) is a tuple: unpack it, e.g. x, y = {name}(2)")
            return values[0]
        if name == "cuda.atomic.compare_and_swap":
            if len(node.args) != 3:
                raise self.src.error(node, "usage: cuda.atomic.compare_and_swap(ary, old, val) (on ary[0])")
            target, start = node.args[0], ast.copy_location(ast.Constant(0), node)
            if isinstance(target, ast.Subscript) and isinstance(target.slice, ast.Slice):
                # on ary[lo:] (a view whose element 0 is ary[lo], as Numba compiles it): ary at lo
                if target.slice.step is not None or target.slice.upper is not None:
                    raise self.src.error(target, "compare_and_swap on a slice takes ary[lo:] (element 0 of the view "
                                                 "is ary[lo]); for other views pass the array and use "
                                                 "cuda.atomic.cas(ary, index, old, val)")
                target, start = target.value, target.slice.lower or start
            return self.call_atomic("cas", ast.copy_location(ast.Call(node.func, [target, start, *node.args[1:]], []), node))
        if name in CUDA_MATH:
            return self.call_math(CUDA_MATH[name], node)
        if name.startswith("cuda.fp16."):
            return self.call_fp16(name.removeprefix("cuda.fp16."), node)
        if name == "cuda.selp":  # a select: the conditional expression's rules
            if len(node.args) != 3 or node.keywords:
                raise self.src.error(node, "usage: cuda.selp(predicate, a, b)")
            return self.expr_IfExp(ast.copy_location(ast.IfExp(node.args[0], node.args[1], node.args[2]), node))
        if name in language_cuda.WARP_CALLS:
            return self.call_warp(language_cuda.WARP_CALLS[name], node)
        if name == "cuda.eq_sync":  # the same in every lane: all true, or none
            every, some = self.call_warp("all", node).expr, self.call_warp("any", node).expr
            return Value(ir.BinOp(bool_t, "|", every, ir.UnaryOp(bool_t, "not", some)))
        if name == "cuda.match_any_sync":
            return self.call_match(node)
        if name == "cuda.match_all_sync":
            raise self.src.error(node, "cuda.match_all_sync() returns a tuple: unpack it, m, pred = "
                                       "cuda.match_all_sync(mask, value)")
        if name in language_cuda.BIT_CALLS:
            return self.call_bits(name.removeprefix("cuda."), node)
        if name == "cuda.lanemask_lt":
            self.args(node, 0)
            lane = ir.Cast(u32, warp_lane())
            return Value(ir.BinOp(u32, "-", ir.BinOp(u32, "<<", ir.Const(u32, 1), lane), ir.Const(u32, 1)))
        if name in language_cuda.FENCES:
            raise self.src.error(node, f"{name}() is a statement: call it on a line of its own")
        if name in ("cuda.syncthreads_count", "cuda.syncthreads_and", "cuda.syncthreads_or"):
            raise self.src.error(node, f"{name}() is a barrier: assign it to a name on a line of its own, "
                                       f"n = {name}(predicate)")
        if name in ("cuda.shared.array", "cuda.local.array"):
            raise self.src.error(node, f"{name}() must be assigned to a name: sA = {name}((16, 16), float32)")
        if name in language.INDEX_BUILTINS:
            axis = self.static_int(node.args[0], "the axis") if node.args else 0
            if len(node.args) > 1 or not 0 <= axis <= 2:
                raise self.src.error(node, f"{name}(axis) takes one constant axis 0, 1 or 2")
            return Value(ir.WorkItem(i64, name, axis))
        if name.startswith("atomic_"):
            return self.call_atomic(name[7:], node)
        if name == "barrier":
            raise self.src.error(node, "barrier() is a statement: call it on a line of its own")
        if name == "local_array":
            raise self.src.error(node, "local_array() must be assigned to a name: tile = hetero.local_array((16, 16), hetero.f32)")
        raise self.src.error(node, f"hetero.{name} is not supported here")  # pragma: no cover

    def call_fp16(self, op: str, node: ast.Call) -> Value:
        """``cuda.fp16.<op>``: float16 operands (as f32 values, the way f16 is computed), the result rounded
        to float16 once, as CUDA's half intrinsics give it: exact for +, -, *, / and sqrt (f32 holds the
        f16 result's rounding bits); hfma goes through an f64 fma, so only its final rounding is to f16."""
        if op not in language_cuda.FP16:
            raise self.src.error(node, f"cuda.fp16.{op} is not supported (supported: {', '.join(language_cuda.FP16)})")
        arity = 3 if op == "hfma" else 2 if op in _FP16_BINARY or op in _FP16_COMPARE or op in ("hmax", "hmin") else 1
        values = [cast(v, f32) for v in self.args(node, arity)]
        for v in values:
            self.note_type(f16)
        a = values[0]
        if op in _FP16_COMPARE:
            return Value(ir.Compare(bool_t, _FP16_COMPARE[op], a, values[1]))
        if op in _FP16_BINARY:
            result: ir.Expr = ir.BinOp(f32, _FP16_BINARY[op], a, values[1])
        elif op == "hfma":
            result = ir.Math(f64, "fma", tuple(ir.Cast(f64, v) for v in values))
        elif op == "hneg":
            result = ir.UnaryOp(f32, "-", a)
        elif op == "hrcp":
            result = ir.BinOp(f32, "/", ir.Const(f32, 1.0), a)
        elif op == "hexp10":
            result = ir.Math(f32, "pow", (ir.Const(f32, 10.0), a))
        else:
            function = {"habs": "fabs", "hmax": "fmax", "hmin": "fmin"}.get(op, op[1:])
            result = ir.Math(f32, function, tuple(values))
        return Value(ir.Cast(f32, ir.Cast(f16, result)))

    def call_warp(self, op: str, node: ast.Call) -> Value:
        """A warp shuffle or vote (:class:`ir.Warp`), with CUDA's argument types."""
        params = ir.WARP_OPS[op]
        if op == "sync" and not node.args:
            node = ast.copy_location(ast.Call(node.func, [ast.Constant(0xFFFFFFFF)], []), node)
        values = self.args(node, len(params) - (1 if op.startswith("shfl") else 0))
        args: list[ir.Expr] = []
        for param, value in zip(params, values):
            if param == "mask":
                args.append(cast(value, u32))
            elif param == "predicate":
                args.append(self.truth(value))
            elif param == "value":
                if value.weak:
                    value = Value(const(value.expr.value, self.rules.literal_type(value.expr.value)))  # type: ignore[attr-defined]
                args.append(value.expr)
            else:
                args.append(cast(value, i32))
        if op.startswith("shfl"):
            args.append(ir.Const(i32, ir.WARP_SIZE))
            t = args[1].type
        else:
            t = {"all": bool_t, "any": bool_t, "sync": ir.VOID}.get(op, u32)
        return Value(ir.Warp(t, op, tuple(args)))

    def call_match(self, node: ast.Call, which: str = "match_any") -> Value:
        """``cuda.match_any_sync(mask, value)``: a call of :func:`hetero.language.warp_match.match_any`
        (``which="match_all"``: of ``match_all``, the mask part of ``cuda.match_all_sync``)."""
        mask, value = self.args(node, 2)
        own = self.rules.literal_type(value.expr.value) if value.weak else value.type  # type: ignore[attr-defined]
        if not (own.is_int or own == bool_t):
            raise self.src.error(node, f"match_*_sync takes an integer value here, got {own}: CUDA compares bit "
                                       "patterns, so pass the bits, e.g. a view of the array as int32/int64")
        function = self.program.function(getattr(language_warp_match, which), [u32, own], self.src, node)
        return Value(ir.Call(u32, function.name, (cast(mask, u32), cast(value, own))))

    def match_all(self, node: ast.Call) -> list[Value]:
        """``m, pred = cuda.match_all_sync(mask, value)``: ``(the lanes of mask taking part, True)``
        when they all match, else ``(0, False)``."""
        found = self.call_match(node, "match_all").expr
        return [Value(found), Value(ir.Compare(bool_t, "!=", found, ir.Const(u32, 0)))]

    def call_bits(self, op: str, node: ast.Call) -> Value:
        """``cuda.popc/clz/ffs/brev(x)`` in Numba's types: the first two give x's type, ``ffs`` u32,
        ``brev`` u32 or u64; computed on x's bit pattern at its width, widened to 32 or 64 bits."""
        (value,) = self.args(node, 1)
        own = self.rules.literal_type(value.expr.value) if value.weak else value.type  # type: ignore[attr-defined]
        if not (own.is_int or own == bool_t):
            raise self.src.error(node, f"cuda.{op}() takes an integer, got {own}")
        width = 8 if own == bool_t else own.bits
        pattern = cast(value, scalar_type(f"u{width}"))  # the bits of x at its own width
        wide = u64 if width == 64 else u32
        function = self.program.function(language_bits.FUNCTIONS[op][width == 64], [wide], self.src, node)
        result: ir.Expr = ir.Call(function.return_type, function.name, (cast(Value(pattern), wide),))
        if op == "clz" and width < 32:  # leading zeros of the widened value, less the added ones
            result = ir.BinOp(u32, "-", result, ir.Const(u32, 32 - width))
        if op in ("ffs", "brev"):
            return Value(result)
        return Value(cast(Value(result), own))

    def bit_count(self, node: ast.Call) -> Value:
        """``x.bit_count()``: Python's, the bits set in ``|x|`` (an integer of x's type; -2**63 counts 1,
        as its magnitude is 2**63)."""
        if node.args or node.keywords:
            raise self.src.error(node, "x.bit_count() takes no arguments")
        assert isinstance(node.func, ast.Attribute)
        value = self.expr(node.func.value)
        own = self.rules.literal_type(value.expr.value) if value.weak else value.type  # type: ignore[attr-defined]
        if not own.is_int:
            raise self.src.error(node, f"bit_count() is a method of integers, got {own}")
        pattern = scalar_type(f"u{own.bits}")
        bits = cast(value, pattern)
        if own.kind == "i":  # the magnitude, computed on the unsigned pattern (0 - x wraps for the lowest value)
            negative = ir.Compare(bool_t, "<", value.expr, ir.Const(own, 0))
            bits = ir.Select(pattern, negative, ir.BinOp(pattern, "-", ir.Const(pattern, 0), bits), bits)
        wide = u64 if own.bits == 64 else u32
        function = self.program.function(language_bits.FUNCTIONS["popc"][own.bits == 64], [wide], self.src, node)
        return Value(cast(Value(ir.Call(function.return_type, function.name, (cast(Value(bits), wide),))), own))

    def grid_values(self, name: str, node: ast.Call) -> list[Value]:
        """``cuda.grid(n)`` / ``cuda.gridsize(n)``: n values (i64), axis 0 first."""
        if len(node.args) != 1:
            raise self.src.error(node, f"usage: {name}(ndim) with ndim 1, 2 or 3")
        ndim = self.static_int(node.args[0], "ndim")
        if not 1 <= ndim <= 3:
            raise self.src.error(node, f"{name}(ndim) takes ndim 1, 2 or 3, got {ndim}")
        builtin = "global_id" if name == "cuda.grid" else "global_size"
        return [Value(ir.WorkItem(i64, builtin, axis)) for axis in range(ndim)]

    def call_atomic(self, op: str, node: ast.Call) -> Value:
        count = 4 if op == "cas" else 3
        if len(node.args) != count or not isinstance(node.args[0], ast.Name) or node.args[0].id not in self.arrays:
            usage = "atomic_cas(array, index, compare, value)" if op == "cas" else f"atomic_{op}(array, index, value)"
            raise self.src.error(node, f"usage: {usage}")
        array = node.args[0].id
        if isinstance(self.arrays[array], ArrayAlias):
            raise self.src.error(node, f"atomics on {array!r}, a name for one of several arrays, are not supported; "
                                       "use the array itself")
        if isinstance(self.arrays[array], ir.LocalArray) and self.arrays[array].private:
            raise self.src.error(node, f"{array!r} is a per-thread array: no other thread sees it, so update it "
                                       "without an atomic")
        element = self.element_type(array)
        if element.name not in ("i32", "u32", "f32", "i64", "u64", "f64"):
            raise self.src.error(node, f"atomics work on i32, u32, f32, i64, u64 and f64 arrays; {array} holds {element}")
        if op in language.UNSIGNED_ATOMICS and element.kind != "u":
            raise self.src.error(node, f"atomic {op} works on u32 and u64 arrays (CUDA's wrapping {op}); {array} holds {element}")
        if op in language.INTEGER_ATOMICS and not element.is_int:
            raise self.src.error(node, f"atomic {op} works on integer arrays; {array} holds {element}")
        if op in ("nanmin", "nanmax") and not element.is_float:
            op = op[3:]  # an integer has no NaN
        if element.bits == 64:
            self.features.add("int64_atomics")
        self.note_type(element)
        indices = self.indices(array, node.args[1], node, wrap=True)
        values = tuple(cast(self.expr(a), element) for a in node.args[2:])
        return Value(ir.Atomic(element, op, array, indices, values))

    def call_foreign(self, callee: Any, node: ast.Call) -> Value:
        """A call of a foreign CUDA C function (``cuda.declare_device``): its IR, inlined into the kernel."""
        function = self.program.foreign(callee, self.src, node)
        params = function.params
        if len(node.args) != len(params):
            raise self.src.error(node, f"{callee.name}() takes {len(params)} argument(s), got {len(node.args)}")
        args: list[ir.Expr] = []
        for arg, param in zip(node.args, params, strict=True):
            if isinstance(param.type, ArrayType):
                name = self.pointers.get(arg.id, arg.id) if isinstance(arg, ast.Name) else None
                array = self.arrays.get(name) if name is not None else None
                if name is None or not isinstance(array, ArrayType) or array.ndim != 1 or array.dtype != param.type.dtype:
                    raise self.src.error(arg, f"{callee.name}() takes a 1-D {param.type.dtype} array here (a "
                                              "CPointer argument: the array itself, or ffi.from_buffer(array))")
                args.append(ir.Var(array.dtype, name))
            else:
                args.append(cast(self.expr(arg), param.type))
        return Value(ir.Call(function.return_type, function.name, tuple(args)))

    def call_function(self, callee: language.DeviceFunction, node: ast.Call, element: int | None = None) -> Value:
        args: list[Value] = []
        types: list[ScalarType | ArrayType | static_args.Bound] = []
        tree = function_source(callee.py_func).tree
        shapes = static_args.shape_params(tree) if language.typing_of(callee.py_func) == "numba" else set()
        for position, arg in enumerate(node.args):
            obj = self.static(arg)
            fixed = static_args.bound(obj, _cast_type(obj) is not None) if obj is not MISSING else None
            if fixed is None and isinstance(arg, ast.Tuple) and arg.elts and all(
                    isinstance(e, ast.Constant) and type(e.value) in (int, float, bool) for e in arg.elts):
                fixed = static_args.Bound(tuple(e.value for e in arg.elts))  # type: ignore[union-attr]
            if fixed is None and (isinstance(arg, ast.Tuple) or self.index_items(arg) is not None):
                raise self.src.error(arg, f"passing the tuple {ast.unparse(arg)} to a device function is not supported "
                                          "yet (a tuple of constants is); pass its items as arguments of their own")
            if fixed is None and position < len(tree.args.args) and tree.args.args[position].arg in shapes:
                value = self.expr(arg)
                if value.weak and type(getattr(value.expr, "value", None)) is int:
                    fixed = static_args.Bound(value.expr.value)  # type: ignore[attr-defined]
            if fixed is not None:  # a type, an atomic, a device function: bound in the callee
                types.append(fixed)
                continue
            if isinstance(arg, ast.Name) and arg.id in self.arrays:
                array = self.arrays[arg.id]
                if isinstance(array, ArrayAlias):
                    raise self.src.error(arg, f"{arg.id!r} names one of several arrays; pass the array itself")
                args.append(Value(ir.Var(array.dtype, arg.id)))
                # a local array: the function is inlined where it is called (hetero.compiler.ir.inline)
                types.append(ArrayType(array.dtype, len(array.shape)) if isinstance(array, ir.LocalArray) else array)
                continue
            value = self.expr(arg)
            if value.weak:
                value = Value(const(value.expr.value, self.rules.literal_type(value.expr.value)))  # type: ignore[attr-defined]
            args.append(value)
            types.append(value.type)
        function = self.program.function(callee, types, self.src, node, element)
        params = function.params
        if len(params) != len(args):
            raise self.src.error(node, f"{callee.py_func.__name__}() takes {len(params)} argument(s), got {len(args)}")
        lowered = tuple(a.expr if isinstance(p.type, ArrayType) else cast(a, p.type) for a, p in zip(args, params, strict=True))
        return Value(ir.Call(function.return_type, function.name, lowered))


def foreign_device_function(obj: Any) -> language.DeviceFunction | None:
    """A device function for a function another JIT compiled for the host (``@numba.jit``), whose
    Python source a kernel may call as Numba-CUDA kernels do: lowered with Numba's typing."""
    py_func = getattr(obj, "py_func", None)
    if py_func is None or not type(obj).__module__.startswith("numba.") or not callable(py_func):
        return None
    return language.DeviceFunction(py_func, typing="numba")


def _cast_type(obj: Any) -> ScalarType | None:
    obj = getattr(obj, "hetero_type", obj)  # the types of hetero.compat.cuda.types
    if isinstance(obj, ScalarType):
        return obj
    if type(obj).__module__.startswith("numba.core.types"):  # numba.float32(x) in a kernel
        try:
            return scalar_type(obj)
        except Exception:
            return None
    if isinstance(obj, type) and issubclass(obj, np.generic):
        try:
            return scalar_type(np.dtype(obj))
        except Exception:
            return None
    return None
