"""Python text for IR expressions and statements, as the CPU emitter's generated modules
(compiled by Numba) need it.

Every value is printed in exactly the IR's type: results that Numba would widen
(``int32 + int32`` is int64 in Numba) are cast back with ``np.int32(...)`` and so wrap like
C. An f16 value is held as the float32 that holds it exactly; f16 arrays as uint16 bits.
Array indices are printed as ``np.uint64(...)``: Numba then skips its negative-index
wrap-around, which keeps loops vectorisable (negative indices are out of bounds, as on
GPUs).
"""

from __future__ import annotations

import math
import re

import numpy as np

from hetero import language
from hetero.core.types import ScalarType

from hetero.compiler.emit import cpu_libm
from hetero.compiler.ir import nodes as ir
from hetero.compiler.emit.cpu_regions import Plan, error

VALUE = {
    "bool": "np.bool_", "i8": "np.int8", "i16": "np.int16", "i32": "np.int32", "i64": "np.int64",
    "u8": "np.uint8", "u16": "np.uint16", "u32": "np.uint32", "u64": "np.uint64",
    "f16": "np.float32", "f32": "np.float32", "f64": "np.float64",
}  # fmt: skip
#: How an array holds its elements (Numba's CPU target has no float16).
STORAGE = {**VALUE, "f16": "np.uint16"}
#: Types Numba already computes in: their results need no cast.
_NATIVE = {"i64", "f64", "bool"}
_ATOMIC_TYPES = {"i32", "u32", "i64", "u64", "f32", "f64"}
_MATH = {
    "sqrt": "math.sqrt", "exp": "math.exp", "log": "math.log", "log2": "math.log2", "sin": "math.sin",
    "cos": "math.cos", "tan": "math.tan", "tanh": "math.tanh", "pow": "math.pow", "fabs": "abs",
    "floor": "np.floor", "ceil": "np.ceil", "fmin": "fmin", "fmax": "fmax", "fma": "fma",
}  # fmt: skip
_HELPERS = {"fmin", "fmax", "fma"}
#: Math predicates (bool results); signbit through copysign, which keeps a NaN's sign.
_PREDICATES = {"isnan": "math.isnan({})", "isinf": "math.isinf({})", "isfinite": "math.isfinite({})",
               "signbit": "(math.copysign(1.0, {}) < 0.0)"}
#: A Var naming the incoming value of a scalar parameter that the kernel assigns.
PARAM_COPY = "\x00param:"
_SHORT = {"group_id": "grp", "local_size": "ls", "global_size": "gs", "num_groups": "ng"}


def wrap(t: ScalarType, text: str) -> str:
    return text if t.name in _NATIVE else f"{VALUE[t.name]}({text})"


def const(value: float, t: ScalarType) -> str:
    if t.kind == "b":
        return "True" if value else "False"
    if t.is_float:
        number = float(value)
        if t.name == "f16":
            number = float(np.float16(number))
        if math.isnan(number):
            text = "math.nan"
        elif math.isinf(number):
            text = "math.inf" if number > 0 else "(-math.inf)"
        else:
            text = repr(number) if number >= 0 else f"({number!r})"
        return text if t.name == "f64" else f"np.float32({text})"
    text = str(int(value)) if int(value) >= 0 else f"({int(value)})"
    return text if t.name == "i64" else f"{VALUE[t.name]}({text})"


class Names:
    """Python names for IR names, by kind; prefixes keep them apart from the emitter's own
    (``p_`` parameters, ``v_`` scalars, ``w_`` per-work-item arrays, ``s_`` local arrays,
    ``d_`` device functions, ``wi_`` index built-ins passed to device functions)."""

    def __init__(self) -> None:
        self._taken: set[str] = set()
        self._given: dict[tuple[str, str], str] = {}

    def __call__(self, prefix: str, name: str) -> str:
        key = (prefix, name)
        if key not in self._given:
            base = prefix + re.sub(r"\W", "_", name)
            candidate, n = base, 1
            while candidate in self._taken:
                n += 1
                candidate = f"{base}_{n}"
            self._taken.add(candidate)
            self._given[key] = candidate
        return self._given[key]


class FunctionPrinter:
    """Prints one function's expressions and statements. ``mode`` is ``item`` (kernel code
    run for one work-item), ``group`` (kernel code decided once per work-group) or
    ``device`` (a device function). ``flat``: the kernel never observes its work-groups and
    runs along axis 0 only (global ids on axes 1 and 2 are ``base1``/``base2``)."""

    def __init__(self, fn: ir.Function, plan: Plan | None, names: Names, imports: set[str],
                 hidden: dict[str, tuple[tuple[str, int], ...]]) -> None:  # fmt: skip
        self.fn = fn
        self.plan = plan
        self.names = names
        self.imports = imports
        self.hidden = hidden
        self.mode = "item" if fn.is_kernel else "device"
        self.flat = False
        self.loc = fn.loc
        self.params = {p.name for p in fn.params}
        self.shared = {a.name for a in fn.local_arrays}
        self.private = {a.name for a in fn.local_arrays if a.private}
        self.arrays = set(fn.array_params()) | self.shared
        self.assigned_params: set[str] = set()

    # -- names ---------------------------------------------------------------------------
    def array(self, name: str) -> str:
        return self.names("s_", name) if name in self.shared else self.names("p_", name)

    def read(self, name: str) -> str:
        if name in self.arrays:  # an array passed to a device function
            return self.array(name)
        if name.startswith(PARAM_COPY):
            return self.names("p_", name[len(PARAM_COPY) :])
        if self.mode == "device":
            return self.names("p_" if name in self.params else "v_", name)
        if name in self.params and name not in self.assigned_params:
            return self.names("p_", name)
        if self.plan is not None and name in self.plan.remat and self.mode == "group":
            return self.expr(self.plan.remat[name])
        if self.plan is not None and name in self.plan.promoted:
            return f"{self.names('w_', name)}[{'0' if self.mode == 'group' else 'li'}]"
        return self.names("v_", name)

    def write(self, name: str) -> str:
        if self.mode == "device":
            return self.names("p_" if name in self.params else "v_", name)
        return self.read(name)

    def work_item(self, name: str, axis: int) -> str:
        if self.mode == "device":
            return self.names("wi_", f"{name}{axis}")
        if name in ("local_id", "global_id") and self.mode == "group":
            raise error(f"internal error: {name}({axis}) in code run once per work-group", self.loc)
        if name == "local_id":
            return f"l{axis}"
        if name == "global_id":
            return f"(base{axis} + l{axis})" if axis == 0 or not self.flat else f"base{axis}"
        if name not in _SHORT:
            raise error(f"unknown index built-in '{name}' for the CPU target", self.loc)
        return f"{_SHORT[name]}{axis}"

    def helper(self, name: str) -> str:
        self.imports.add(name)
        return name

    # -- expressions ---------------------------------------------------------------------
    def result(self, t: ScalarType, text: str) -> str:
        """``text``, computed in Numba's types, brought to IR type ``t``."""
        if t.name == "f16":
            return f"{self.helper('f16_round')}(np.float32({text}))"
        return wrap(t, text)

    def index(self, indices: tuple[ir.Expr, ...]) -> str:
        return ", ".join(str(i.value) if isinstance(i, ir.Const) and ir.number(i) >= 0 else f"np.uint64({self.expr(i)})" for i in indices)

    def expr(self, e: ir.Expr) -> str:
        method = getattr(self, "expr_" + type(e).__name__.lower(), None)
        if method is None:
            raise error(f"the CPU target cannot compile a {type(e).__name__} expression", self.loc)
        return str(method(e))

    def expr_const(self, e: ir.Const) -> str:
        return const(ir.number(e), e.type)

    def expr_var(self, e: ir.Var) -> str:
        return self.read(e.name)

    def expr_binop(self, e: ir.BinOp) -> str:
        left, right, t = self.expr(e.left), self.expr(e.right), e.type
        if e.op in ("min", "max"):
            text = f"{self.helper('f' + e.op)}({left}, {right})" if t.is_float else f"{e.op}({left}, {right})"
        elif e.op == "**" and t.is_int:
            text = f"{self.helper('ipow')}({left}, {right}, {const(1, t)})"
        elif e.op == "//" and t.name == "i64":
            text = f"{self.helper('floordiv64')}({left}, {right})"
        elif e.op == "//" and t.is_float:
            text = f"{self.helper('floordivf')}({left}, {right})"
        elif e.op in ("<<", ">>"):
            if e.right.type != e.left.type:
                right = f"{VALUE[e.left.type.name]}({right})"
            text = f"({left} {e.op} {right})"
        elif e.op in ("+", "-", "*", "/", "//", "%", "**", "&", "|", "^"):
            text = f"({left} {e.op} {right})"
        else:
            raise error(f"unknown operator '{e.op}' for the CPU target", self.loc)
        return self.result(t, text)

    def expr_unaryop(self, e: ir.UnaryOp) -> str:
        operand, t = self.expr(e.operand), e.type
        if e.op == "not" or (e.op == "~" and t.kind == "b"):
            return f"(not {operand})"
        if e.op == "-":
            return self.result(t, f"({const(0, t)} - {operand})" if t.kind == "u" else f"(-{operand})")
        if e.op == "~":
            return self.result(t, f"(~{operand})")
        if e.op == "abs":
            return operand if t.kind == "u" else self.result(t, f"abs({operand})")
        raise error(f"unknown unary operator '{e.op}' for the CPU target", self.loc)

    def expr_compare(self, e: ir.Compare) -> str:
        return f"({self.expr(e.left)} {e.op} {self.expr(e.right)})"

    def expr_logical(self, e: ir.Logical) -> str:
        return f"({self.expr(e.left)} {e.op} {self.expr(e.right)})"

    def expr_select(self, e: ir.Select) -> str:
        return f"({self.expr(e.if_true)} if {self.expr(e.cond)} else {self.expr(e.if_false)})"

    def expr_cast(self, e: ir.Cast) -> str:
        source, t = e.value.type, e.type
        value = self.expr(e.value)
        if source == t:
            return value
        if t.kind == "b":
            return f"({value} != {const(0, source)})"
        if t.name == "f16":  # rounded once, from the source's own precision
            return f"{self.helper('f16_round' if source.name == 'f32' else 'f16_round_f64')}({value})"
        return f"{VALUE[t.name]}({value})"

    def element(self, array: str, indices: tuple[ir.Expr, ...]) -> str:
        """``array[indices]``; a private array is one row per work-item of the group (row ``li``)."""
        if array in self.private:
            return f"{self.array(array)}[li, {self.index(indices)}]"
        return f"{self.array(array)}[{self.index(indices) if indices else '()'}]"  # a 0-d array: r[()]

    def expr_load(self, e: ir.Load) -> str:
        text = self.element(e.array, e.indices)
        return f"{self.helper('h2f')}({text})" if self.fn.element_type(e.array).name == "f16" else text

    def expr_shape(self, e: ir.Shape) -> str:
        return f"{self.array(e.array)}.shape[{e.axis}]"

    def expr_workitem(self, e: ir.WorkItem) -> str:
        return self.work_item(e.name, e.axis)

    def expr_math(self, e: ir.Math) -> str:
        args = [self.expr(a) for a in e.args]
        if e.name in _PREDICATES:
            return _PREDICATES[e.name].format(*args)
        if e.name in cpu_libm.FUNCTIONS:  # the C library's own function, as the C dialects call
            return self.result(e.type, f"{self.helper(cpu_libm.symbol(e.name, e.type.name == 'f64'))}({', '.join(args)})")
        if e.name == "rsqrt":
            return self.result(e.type, f"({const(1, e.type)} / math.sqrt({args[0]}))")
        if e.name not in _MATH:
            raise error(f"math.{e.name} is not available on the CPU target", self.loc)
        function = _MATH[e.name]
        if function in _HELPERS:
            self.helper(function)
        return self.result(e.type, f"{function}({', '.join(args)})")

    def expr_atomic(self, e: ir.Atomic) -> str:
        t = self.fn.element_type(e.array)
        if t.name not in _ATOMIC_TYPES:
            raise error(f"atomic_{e.op} on '{e.array}' ({t}): the CPU target has atomics on i32, u32, i64, u64, f32 and f64 only", self.loc)
        if e.op not in language.ATOMICS:
            raise error(f"unknown atomic operation '{e.op}'", self.loc)
        # a local array belongs to one work-group, which one thread runs: no atomics needed
        local = e.array in self.shared
        name = "f" + e.op if e.op in ("min", "max", "nanmin", "nanmax") and t.is_float and not local else e.op
        function = self.helper(("local_atomic_" if local else "atomic_") + name)
        index = ", ".join(self.expr(i) for i in e.indices) + ("," if len(e.indices) == 1 else "")
        args = ", ".join(wrap(t, self.expr(a)) for a in e.args)
        return f"{function}({self.array(e.array)}, ({index}), {args})"

    def expr_call(self, e: ir.Call) -> str:
        local = {a.name for a in self.fn.local_arrays}
        for arg in e.args:
            if isinstance(arg, ir.Var) and arg.name in local:
                raise error(f"local array {arg.name!r} cannot be passed to device function {e.func}() here (its "
                            "memory is laid out per work-item); hetero's frontend inlines such calls", self.loc)
        args = [self.expr(a) for a in e.args]
        args += [self.work_item(name, axis) for name, axis in self.hidden[e.func]]
        return f"{self.names('d_', e.func)}({', '.join(args)})"

    # -- statements ----------------------------------------------------------------------
    def stmts(self, body: tuple[ir.Stmt, ...], depth: int, pad: str) -> list[str]:
        """Lines for ``body`` at indentation ``pad``; ``depth`` counts the enclosing loops."""
        lines: list[str] = []
        for s in body:
            self.loc = s.loc
            lines += self.stmt(s, depth, pad)
        return lines or [pad + "pass"]

    def stmt(self, s: ir.Stmt, depth: int, pad: str) -> list[str]:
        inner = pad + "    "
        if isinstance(s, ir.Assign):
            if self.plan is not None and s.name in self.plan.remat:
                return []  # computed at the start of every run that reads it
            return [f"{pad}{self.write(s.name)} = {self.expr(s.value)}"]
        if isinstance(s, ir.Store):
            stored = s.value
            if self.fn.element_type(s.array).name != "f16":
                value = self.expr(stored)
            elif isinstance(stored, ir.Cast) and stored.value.type.name != "f16":  # round once, to bits
                wide = stored.value.type.name == "f64" or stored.value.type.is_int
                value = f"{self.helper('f2h_f64' if wide else 'f2h')}({self.expr(stored.value)})"
            else:
                value = f"{self.helper('f2h')}({self.expr(stored)})"
            return [f"{pad}{self.element(s.array, s.indices)} = {value}"]
        if isinstance(s, ir.ExprStmt):
            return [f"{pad}{self.expr(s.value)}"]
        if isinstance(s, ir.If):
            lines = [f"{pad}if {self.expr(s.cond)}:", *self.stmts(s.then, depth, inner)]
            if s.orelse:
                lines += [f"{pad}else:", *self.stmts(s.orelse, depth, inner)]
            return lines
        if isinstance(s, (ir.For, ir.While)):
            lines = self.loop(s, depth, pad)
            if self.mode == "item" and has_return(s.body):  # the work-item ended inside the loop
                lines += [f"{pad}if _ret:", f"{inner}{'continue' if depth == 0 else 'break'}"]
            return lines
        if isinstance(s, ir.Break):
            return [pad + "break"]
        if isinstance(s, ir.Continue):
            return [pad + "continue"]
        if isinstance(s, ir.Return):
            if self.mode == "device":
                return [pad + "return" + (f" {self.expr(s.value)}" if s.value is not None else "")]
            # a kernel's return ends this work-item: on to the next item of the group
            return [pad + "continue"] if depth == 0 else [pad + "_ret = True", pad + "break"]
        if isinstance(s, ir.Fence):
            # one thread runs a group's items in turn, and the CPU target's atomics are sequentially
            # consistent LLVM atomics, which order the loads and stores around them as a fence would
            return [pad + "pass"]
        if isinstance(s, ir.Barrier):
            raise error("barrier() in a device function: the CPU target supports barrier() in kernels only", s.loc)
        raise error(f"the CPU target cannot compile a {type(s).__name__} statement", s.loc)

    def loop(self, s: ir.For | ir.While, depth: int, pad: str) -> list[str]:
        inner = pad + "    "
        if isinstance(s, ir.While):
            return [f"{pad}while {self.expr(s.cond)}:", *self.stmts(s.body, depth + 1, inner)]
        target = self.write(s.var)
        loop_var = target if target.isidentifier() else self.names("v_", s.var)
        bounds = [self.expr(s.start), self.expr(s.stop)]
        if not (isinstance(s.step, ir.Const) and s.step.value == 1):
            bounds.append(self.expr(s.step))
        lines = [f"{pad}for {loop_var} in range({', '.join(bounds)}):"]
        if loop_var != target:  # a promoted loop variable: keep its slot current
            lines.append(f"{inner}{target} = {loop_var}")
        return lines + self.stmts(s.body, depth + 1, inner)


def has_return(body: tuple[ir.Stmt, ...]) -> bool:
    return any(isinstance(s, ir.Return) for s in ir.walk_stmts(body))
