"""Complex numbers become pairs of floats, so that every dialect and device runs them as it
runs float code (CUDA's ``cuComplex`` and OpenCL's missing complex type never matter).

Run on a kernel after the frontend: device functions that take, return or hold complex values
are inlined first (:mod:`hetero.compiler.ir.inline`), then

* a complex array parameter (c64, c128) becomes its *component view*: a float array (f32, f64)
  with one more axis of length 2 holding each element's (real, imag) pair, as NumPy lays
  complex arrays out; a launch passes that view of the same buffer (no copy). Complex local
  and shared arrays get the same extra axis;
* a complex scalar parameter ``z`` becomes two float parameters ``z__re`` and ``z__im``, a
  complex local ``z`` two float locals of those names;
* every complex operation becomes float arithmetic on the parts. Intermediate results go
  through fresh locals, so an expression never grows and no load, atomic or call is repeated.
  ``a and b``, ``x if c else y`` and ``while`` conditions keep evaluating only what Python does.

The formulas (parts ``a + bi``, ``c + di``; the same on every device up to each device's
rounding of the float functions used):

* ``*``: ``(ac - bd) + (ad + bc)i``; ``/``: Smith's algorithm, as Numba's (the ratio of the
  smaller part of the divisor to the larger), so dividing by zero gives NaN parts;
* ``abs``: ``hypot(a, b)``; ``cmath.phase``: ``atan2(b, a)``; ``cmath.log``:
  ``log(hypot(a, b)) + atan2(b, a)i``; ``cmath.log10`` is that over ``ln 10``;
* ``cmath.exp``: ``e^a (cos b + i sin b)``, exactly ``e^a + 0i`` when ``b == 0``;
* ``cmath.sqrt``: the principal root, ``t = sqrt((|a| + hypot(a, b)) / 2)``, giving
  ``t + (b / 2t)i`` for ``a >= 0`` and ``|b| / 2t + copysign(t, b)i`` otherwise, ``0 + bi`` at 0;
* ``sin``, ``cos``, ``sinh``, ``cosh`` by their sum formulas; ``tanh`` as
  ``(sinh 2a + i sin 2b) / (cosh 2a + cos 2b)``, ``±1`` once ``|a| > 20``; ``tan(z) = -i tanh(iz)``;
* ``z ** n`` for a constant integer ``n`` (|n| <= 64) by repeated squaring (``1 / z**|n|`` for
  negative ``n``), any other power as CPython's ``e^(w log z)`` (``0 ** w`` is 0 for a
  positive real ``w``, NaN for others);
* ``==`` compares both parts; a complex is true when either part is nonzero.

Converting a complex to a float or integer type is a CompileError (Python and Numba refuse
it too): take ``.real``, ``.imag`` or ``abs()``. Atomics and warp shuffles of complex values
are refused with the same kind of error.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from typing import TypeVar

from hetero.core.errors import CompileError
from hetero.core.types import ArrayType, ScalarType, bool_t, c128, i64, part_type

from hetero.compiler.ir import inline, nodes as ir
from hetero.compiler.ir.queries import all_expressions, map_children, own_expressions

Pair = tuple[ir.Expr, ir.Expr]
_T = TypeVar("_T")
#: Past this |real part| tanh is ±1 to within f64's precision (1 - tanh(20) < 2**-55).
_TANH_SATURATES = 20.0
_MAX_INT_POWER = 64


def _error(message: str, loc: ir.Loc) -> CompileError:
    return CompileError(message, loc.file, loc.line, loc.col)


def _is_complex(t: object) -> bool:
    return isinstance(t, ScalarType) and t.is_complex


def touches_complex(fn: ir.Function) -> bool:
    """Whether ``fn`` has a complex parameter, return value, local, local array or expression."""
    if _is_complex(fn.return_type) or any(_is_complex(t) for t in fn.locals.values()):
        return True
    if any(_is_complex(p.type.dtype if isinstance(p.type, ArrayType) else p.type) for p in fn.params):
        return True
    if any(_is_complex(a.dtype) for a in fn.local_arrays):
        return True
    return any(_is_complex(e.type) for e in all_expressions(fn.body))


def lower_complex(kernel: ir.Function) -> ir.Function:
    """``kernel`` with every complex value turned into float parts (see the module docstring)."""
    if not touches_complex(kernel) and not any(touches_complex(f) for f in inline._all_callees(kernel)):
        return kernel
    kernel = inline.inline_calls(kernel, touches_complex)
    return _Lowering(kernel).run()


def _const(t: ScalarType, value: float) -> ir.Const:
    return ir.Const(t, float(value))


def _bin(op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.BinOp(a.type, op, a, b)


def _math(name: str, *args: ir.Expr) -> ir.Expr:
    return ir.Math(bool_t if name in ("isnan", "isinf", "isfinite", "signbit") else args[0].type, name, args)


def _simple(e: ir.Expr) -> bool:
    return isinstance(e, (ir.Var, ir.Const))


class _Lowering:
    def __init__(self, fn: ir.Function) -> None:
        self.fn = fn
        self.complex_locals = {n for n, t in fn.locals.items() if t.is_complex}
        self.locals: dict[str, ScalarType] = {}
        for name, t in fn.locals.items():
            if t.is_complex:
                self.locals[f"{name}__re"] = self.locals[f"{name}__im"] = part_type(t)
            else:
                self.locals[name] = t
        self.counter = 0
        self.pre: list[ir.Stmt] = []
        self.loc = fn.loc
        self.fp64 = False

    # -- the function ------------------------------------------------------------------
    def run(self) -> ir.Function:
        fn = self.fn
        params: list[ir.Param] = []
        for p in fn.params:
            if isinstance(p.type, ArrayType) and p.type.dtype.is_complex:
                self.fp64 |= p.type.dtype == c128
                params.append(ir.Param(p.name, ArrayType(part_type(p.type.dtype), (p.type.ndim or 0) + 1)))
            elif isinstance(p.type, ScalarType) and p.type.is_complex:
                self.fp64 |= p.type == c128
                part = part_type(p.type)
                params += [ir.Param(f"{p.name}__re", part), ir.Param(f"{p.name}__im", part)]
                self.complex_locals.add(p.name)
            else:
                params.append(p)
        arrays = []
        for a in fn.local_arrays:
            if a.dtype.is_complex:
                self.fp64 |= a.dtype == c128
                a = dataclasses.replace(a, dtype=part_type(a.dtype), shape=(*a.shape, 2))
            arrays.append(a)
        body = self.block(fn.body)
        for callee in fn.callees:
            if touches_complex(callee):  # inline_calls took every such call into the kernel
                raise _error(f"{callee.name}: a device function with complex values could not be inlined", callee.loc)
        features = fn.features | ({"fp64"} if self.fp64 else set())
        return dataclasses.replace(fn, params=tuple(params), locals=self.locals, local_arrays=tuple(arrays), body=body,
                                   features=frozenset(features))

    def fresh(self, t: ScalarType) -> str:
        while True:
            name = f"_cx{self.counter}"
            self.counter += 1
            if name not in self.locals:
                self.locals[name] = t
                return name

    def temp(self, e: ir.Expr) -> ir.Expr:
        """``e`` as a Var (assigned to a fresh local first unless it is a Var or Const already)."""
        if _simple(e):
            return e
        name = self.fresh(e.type)
        self.pre.append(ir.Assign(self.loc, name, e))
        return ir.Var(e.type, name)

    def temps(self, z: Pair) -> Pair:
        return self.temp(z[0]), self.temp(z[1])

    def captured(self, f: Callable[[], _T]) -> tuple[list[ir.Stmt], _T]:
        """``(statements, result)``: what ``f()`` needs evaluated first, kept apart from ``self.pre``."""
        saved, self.pre = self.pre, []
        try:
            result = f()
            return self.pre, result
        finally:
            self.pre = saved

    # -- statements --------------------------------------------------------------------
    def block(self, body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in body:
            out += self.stmt(s)
        return tuple(out)

    def stmt(self, s: ir.Stmt) -> list[ir.Stmt]:
        self.loc = s.loc
        saved, self.pre = self.pre, []
        try:
            done = self.statement(s)
            return [*self.pre, *done] if not isinstance(s, ir.While) else done
        finally:
            self.pre = saved

    def statement(self, s: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(s, ir.Assign):
            if s.name in self.complex_locals:
                re, im = self.temps(self.pair(s.value))  # z = z * w reads z's parts after both are computed
                return [ir.Assign(s.loc, f"{s.name}__re", re), ir.Assign(s.loc, f"{s.name}__im", im)]
            return [ir.Assign(s.loc, s.name, self.real(s.value))]
        if isinstance(s, ir.Store):
            if s.value.type.is_complex:
                indices = tuple(self.temp(self.real(i)) for i in s.indices)
                re, im = self.temps(self.pair(s.value))
                return [ir.Store(s.loc, s.array, (*indices, ir.Const(i64, 0)), re),
                        ir.Store(s.loc, s.array, (*indices, ir.Const(i64, 1)), im)]
            return [ir.Store(s.loc, s.array, tuple(self.real(i) for i in s.indices), self.real(s.value))]
        if isinstance(s, ir.If):
            cond = self.real(s.cond)
            pre, self.pre = self.pre, []
            done: ir.Stmt = ir.If(s.loc, cond, self.block(s.then), self.block(s.orelse))
            self.pre = pre
            return [done]
        if isinstance(s, ir.While):
            pre, cond = self.captured(lambda: self.real(s.cond))
            body = self.block(s.body)
            if not pre:
                return [ir.While(s.loc, cond, body)]
            leave = ir.If(s.loc, ir.UnaryOp(bool_t, "not", cond), (ir.Break(s.loc),))
            return [ir.While(s.loc, ir.Const(bool_t, True), (*pre, leave, *body))]
        if isinstance(s, ir.For):
            start, stop, step = (self.real(e) for e in (s.start, s.stop, s.step))
            pre, self.pre = self.pre, []
            loop = ir.For(s.loc, s.var, start, stop, step, self.block(s.body))
            self.pre = pre
            return [loop]
        if isinstance(s, ir.Return):
            if s.value is not None and s.value.type.is_complex:
                raise _error("a kernel cannot return a value", s.loc)
            return [ir.Return(s.loc, None if s.value is None else self.real(s.value))]
        if isinstance(s, ir.ExprStmt):
            if s.value.type.is_complex:
                self.temps(self.pair(s.value))
                return []
            return [ir.ExprStmt(s.loc, self.real(s.value))]
        for e in own_expressions(s):  # Barrier, Fence, Break, Continue, GridSync
            raise _error(f"internal: {type(s).__name__} holds {e}", s.loc)
        return [s]

    # -- expressions of a real type ----------------------------------------------------
    def real(self, e: ir.Expr) -> ir.Expr:
        if e.type.is_complex:
            raise _error(f"internal: a complex {e.type} where a real value is needed", self.loc)
        if isinstance(e, ir.ComplexOp):
            return self.complex_to_real(e)
        if isinstance(e, ir.Compare) and e.left.type.is_complex:
            (a, b), (c, d) = self.temps(self.pair(e.left)), self.temps(self.pair(e.right))
            if e.op == "==":
                return ir.Logical(bool_t, "and", ir.Compare(bool_t, "==", a, c), ir.Compare(bool_t, "==", b, d))
            return ir.Logical(bool_t, "or", ir.Compare(bool_t, "!=", a, c), ir.Compare(bool_t, "!=", b, d))
        if isinstance(e, ir.Cast) and e.value.type.is_complex:
            raise _error(f"cannot convert a complex {e.value.type} to {e.type}: take .real, .imag or abs() of it",
                         self.loc)
        if isinstance(e, ir.Logical):
            left = self.real(e.left)
            pre, right = self.captured(lambda: self.real(e.right))
            if not pre:
                return ir.Logical(e.type, e.op, left, right)
            flag = self.fresh(bool_t)  # the right side runs only when Python would evaluate it
            self.pre.append(ir.Assign(self.loc, flag, left))
            test: ir.Expr = ir.Var(bool_t, flag)
            self.pre.append(ir.If(self.loc, test if e.op == "and" else ir.UnaryOp(bool_t, "not", test),
                                  (*pre, ir.Assign(self.loc, flag, right))))
            return ir.Var(bool_t, flag)
        if isinstance(e, ir.Select):
            cond = self.real(e.cond)
            yes_pre, yes = self.captured(lambda: self.real(e.if_true))
            no_pre, no = self.captured(lambda: self.real(e.if_false))
            if not yes_pre and not no_pre:
                return ir.Select(e.type, cond, yes, no)
            result = self.fresh(e.type)
            self.pre.append(ir.If(self.loc, cond, (*yes_pre, ir.Assign(self.loc, result, yes)),
                                  (*no_pre, ir.Assign(self.loc, result, no))))
            return ir.Var(e.type, result)
        if isinstance(e, (ir.Atomic, ir.Warp)) and any(x.type.is_complex for x in own_expressions(e)):
            raise _error(f"{type(e).__name__.lower()} operations on complex values are not supported; apply them to "
                         "the .real and .imag parts", self.loc)
        return map_children(e, self.real)

    def complex_to_real(self, e: ir.ComplexOp) -> ir.Expr:
        a, b = self.pair(e.args[0])
        if e.op == "real":
            return a
        if e.op == "imag":
            return b
        a, b = self.temps((a, b))
        if e.op == "abs":
            return _math("hypot", a, b)
        if e.op == "phase":
            return _math("atan2", b, a)
        if e.op in ("isnan", "isinf"):
            return ir.Logical(bool_t, "or", _math(e.op, a), _math(e.op, b))
        if e.op == "isfinite":
            return ir.Logical(bool_t, "and", _math(e.op, a), _math(e.op, b))
        raise _error(f"internal: complex operation {e.op} gives a complex value", self.loc)

    # -- expressions of a complex type -------------------------------------------------
    def pair(self, e: ir.Expr) -> Pair:
        t = part_type(e.type)
        self.fp64 |= e.type == c128
        if isinstance(e, ir.Const):
            value = complex(e.value)
            return _const(t, value.real), _const(t, value.imag)
        if isinstance(e, ir.Var):
            return ir.Var(t, f"{e.name}__re"), ir.Var(t, f"{e.name}__im")
        if isinstance(e, ir.Load):
            indices = tuple(self.temp(self.real(i)) for i in e.indices)
            return (ir.Load(t, e.array, (*indices, ir.Const(i64, 0))), ir.Load(t, e.array, (*indices, ir.Const(i64, 1))))
        if isinstance(e, ir.Cast):
            if e.value.type.is_complex:
                a, b = self.pair(e.value)
                return self.cast(a, t), self.cast(b, t)
            return self.cast(self.real(e.value), t), _const(t, 0.0)
        if isinstance(e, ir.UnaryOp) and e.op == "-":
            a, b = self.pair(e.operand)
            return ir.UnaryOp(t, "-", a), ir.UnaryOp(t, "-", b)
        if isinstance(e, ir.BinOp):
            return self.binop(e)
        if isinstance(e, ir.Select):
            cond = self.temp(self.real(e.cond))
            yes_pre, yes = self.captured(lambda: self.pair(e.if_true))
            no_pre, no = self.captured(lambda: self.pair(e.if_false))
            if not yes_pre and not no_pre:
                return ir.Select(t, cond, yes[0], no[0]), ir.Select(t, cond, yes[1], no[1])
            re, im = self.fresh(t), self.fresh(t)
            self.pre.append(ir.If(self.loc, cond,
                                  (*yes_pre, ir.Assign(self.loc, re, yes[0]), ir.Assign(self.loc, im, yes[1])),
                                  (*no_pre, ir.Assign(self.loc, re, no[0]), ir.Assign(self.loc, im, no[1]))))
            return ir.Var(t, re), ir.Var(t, im)
        if isinstance(e, ir.ComplexOp):
            return self.complex_op(e, t)
        what = {ir.Atomic: "atomic operations", ir.Warp: "warp operations", ir.Call: "device function calls"}
        raise _error(f"{what.get(type(e), type(e).__name__)} on complex values are not supported; apply them to the "
                     ".real and .imag parts", self.loc)

    @staticmethod
    def cast(e: ir.Expr, t: ScalarType) -> ir.Expr:
        if e.type == t:
            return e
        if isinstance(e, ir.Const) and not isinstance(e.value, complex):
            return _const(t, float(e.value))
        return ir.Cast(t, e)

    def binop(self, e: ir.BinOp) -> Pair:
        if e.op in ("+", "-"):
            (a, b), (c, d) = self.pair(e.left), self.pair(e.right)
            return _bin(e.op, a, c), _bin(e.op, b, d)
        if e.op == "*":
            return self.multiply(self.pair(e.left), self.pair(e.right))
        if e.op == "/":
            return self.divide(self.pair(e.left), self.pair(e.right))
        if e.op == "**":
            return self.power(e)
        raise _error(f"operator {e.op} is not defined for complex numbers", self.loc)

    def multiply(self, x: Pair, y: Pair) -> Pair:
        (a, b), (c, d) = self.temps(x), self.temps(y)
        return _bin("-", _bin("*", a, c), _bin("*", b, d)), _bin("+", _bin("*", a, d), _bin("*", b, c))

    def divide(self, x: Pair, y: Pair) -> Pair:
        (a, b), (c, d) = self.temps(x), self.temps(y)
        big = self.temp(ir.Compare(bool_t, ">=", _math("fabs", c), _math("fabs", d)))
        ratio = self.temp(ir.Select(c.type, big, _bin("/", d, c), _bin("/", c, d)))
        denom = self.temp(ir.Select(c.type, big, _bin("+", c, _bin("*", d, ratio)), _bin("+", _bin("*", c, ratio), d)))
        re = ir.Select(c.type, big, _bin("+", a, _bin("*", b, ratio)), _bin("+", _bin("*", a, ratio), b))
        im = ir.Select(c.type, big, _bin("-", b, _bin("*", a, ratio)), _bin("-", _bin("*", b, ratio), a))
        return _bin("/", re, denom), _bin("/", im, denom)

    def power(self, e: ir.BinOp) -> Pair:
        t = part_type(e.type)
        exponent = e.right
        if isinstance(exponent, ir.Const) and complex(exponent.value).imag == 0:
            n = complex(exponent.value).real
            if n == int(n) and abs(n) <= _MAX_INT_POWER:
                return self.integer_power(self.pair(e.left), int(n), t)
        (a, b), (c, d) = self.temps(self.pair(e.left)), self.temps(self.pair(exponent))
        size = self.temp(_math("hypot", a, b))
        angle = self.temp(_math("atan2", b, a))
        length = _bin("/", _math("pow", size, c), _math("exp", _bin("*", angle, d)))
        length = self.temp(length)
        phase = self.temp(_bin("+", _bin("*", angle, c), _bin("*", d, _math("log", size))))
        re, im = _bin("*", length, _math("cos", phase)), _bin("*", length, _math("sin", phase))
        zero = self.temp(ir.Logical(bool_t, "and", ir.Compare(bool_t, "==", a, _const(t, 0)),
                                    ir.Compare(bool_t, "==", b, _const(t, 0))))
        nothing = self.temp(ir.Logical(bool_t, "and", ir.Compare(bool_t, "==", c, _const(t, 0)),
                                       ir.Compare(bool_t, "==", d, _const(t, 0))))
        positive = ir.Logical(bool_t, "and", ir.Compare(bool_t, ">", c, _const(t, 0)), ir.Compare(bool_t, "==", d, _const(t, 0)))
        at_zero = ir.Select(t, positive, _const(t, 0), _const(t, math.nan))
        re = ir.Select(t, nothing, _const(t, 1), ir.Select(t, zero, at_zero, re))
        im = ir.Select(t, nothing, _const(t, 0), ir.Select(t, zero, ir.Select(t, positive, _const(t, 0),
                                                                                 _const(t, math.nan)), im))
        return re, im

    def integer_power(self, z: Pair, n: int, t: ScalarType) -> Pair:
        if n == 0:
            return _const(t, 1), _const(t, 0)
        base = self.temps(z)
        result: Pair | None = None
        k = abs(n)
        while True:
            if k & 1:
                result = base if result is None else self.temps(self.multiply(result, base))
            k >>= 1
            if not k:
                break
            base = self.temps(self.multiply(base, base))
        assert result is not None
        return self.divide((_const(t, 1), _const(t, 0)), result) if n < 0 else result

    def complex_op(self, e: ir.ComplexOp, t: ScalarType) -> Pair:
        if e.op == "make":
            return self.cast(self.real(e.args[0]), t), self.cast(self.real(e.args[1]), t)
        if e.op == "conj":
            a, b = self.pair(e.args[0])
            return a, ir.UnaryOp(t, "-", b)
        a, b = self.temps(self.pair(e.args[0]))
        if e.op == "exp":
            scale = self.temp(_math("exp", a))
            real_only = self.temp(ir.Compare(bool_t, "==", b, _const(t, 0)))
            return (ir.Select(t, real_only, scale, _bin("*", scale, _math("cos", b))),
                    ir.Select(t, real_only, b, _bin("*", scale, _math("sin", b))))
        if e.op in ("log", "log10"):
            re, im = _math("log", _math("hypot", a, b)), _math("atan2", b, a)
            if e.op == "log10":
                scale = _const(t, 1 / math.log(10))
                return _bin("*", re, scale), _bin("*", im, scale)
            return re, im
        if e.op == "sqrt":
            root = self.temp(_math("sqrt", _bin("/", _bin("+", _math("fabs", a), _math("hypot", a, b)), _const(t, 2))))
            twice = _bin("*", _const(t, 2), root)
            at_zero = self.temp(ir.Compare(bool_t, "==", root, _const(t, 0)))
            positive = self.temp(ir.Compare(bool_t, ">=", a, _const(t, 0)))
            re = ir.Select(t, positive, root, _bin("/", _math("fabs", b), twice))
            im = ir.Select(t, positive, _bin("/", b, twice), _math("copysign", root, b))
            return ir.Select(t, at_zero, _const(t, 0), re), ir.Select(t, at_zero, b, im)
        if e.op == "sin":
            return _bin("*", _math("sin", a), _math("cosh", b)), _bin("*", _math("cos", a), _math("sinh", b))
        if e.op == "cos":
            return (_bin("*", _math("cos", a), _math("cosh", b)),
                    ir.UnaryOp(t, "-", _bin("*", _math("sin", a), _math("sinh", b))))
        if e.op == "sinh":
            return _bin("*", _math("sinh", a), _math("cos", b)), _bin("*", _math("cosh", a), _math("sin", b))
        if e.op == "cosh":
            return _bin("*", _math("cosh", a), _math("cos", b)), _bin("*", _math("sinh", a), _math("sin", b))
        if e.op == "tanh":
            return self.tanh(a, b, t)
        if e.op == "tan":  # tan(z) = -i tanh(iz), iz = -b + ai
            re, im = self.tanh(self.temp(ir.UnaryOp(t, "-", b)), a, t)
            return im, ir.UnaryOp(t, "-", re)
        raise _error(f"internal: complex operation {e.op} gives a real value", self.loc)

    def tanh(self, a: ir.Expr, b: ir.Expr, t: ScalarType) -> Pair:
        two_a, two_b = self.temp(_bin("*", _const(t, 2), a)), self.temp(_bin("*", _const(t, 2), b))
        denom = self.temp(_bin("+", _math("cosh", two_a), _math("cos", two_b)))
        saturated = self.temp(ir.Compare(bool_t, ">", _math("fabs", a), _const(t, _TANH_SATURATES)))
        return (ir.Select(t, saturated, _math("copysign", _const(t, 1), a), _bin("/", _math("sinh", two_a), denom)),
                ir.Select(t, saturated, _bin("*", _const(t, 0), _math("sin", two_b)), _bin("/", _math("sin", two_b), denom)))


__all__ = ["lower_complex", "touches_complex"]
