"""OpenCL C for hetero kernels: one typed IR kernel, with its device functions, becomes one
readable OpenCL C 1.2 program that any OpenCL driver builds.

Arrays arrive as a ``__global`` pointer followed by their extents (:func:`default_abi`
with shapes) and are indexed row-major. Where C and Python disagree (floor division,
``**`` on integers, atomics on floats) the program calls a small helper function from
:mod:`hetero.compiler.opencl_prelude`, emitted once per type the kernel uses.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator

from hetero.errors import CompileError
from hetero.types import ArrayType, ScalarType, f16

from . import ir
from . import opencl_prelude as helpers
from .emitter import EmittedSource, Emitter, default_abi, entry_name
from .opencl_prelude import C_TYPES, LOCAL_STORAGE, STORAGE, c_literal, c_type, top
from .target import Target

_WORK_ITEMS = {"global_id": "get_global_id", "local_id": "get_local_id", "group_id": "get_group_id",
               "local_size": "get_local_size", "global_size": "get_global_size", "num_groups": "get_num_groups"}
_MATH = frozenset({"sqrt", "rsqrt", "exp", "log", "log2", "sin", "cos", "tan", "tanh", "pow", "fabs", "floor", "ceil",
                   "fmin", "fmax", "fma"})
_HELPERS = {"floordiv": helpers.floordiv, "mod": helpers.mod, "ipow": helpers.ipow, "round_half": helpers.round_to_half}
_MISSING = {
    "fp64": "uses f64 (double precision), but the OpenCL device {target} has no fp64 support; "
            "use f32, or run it on a device with double precision",
    "fp16": "declares an f16 scalar (parameter, variable or return value), but the OpenCL device {target} "
            "has no cl_khr_fp16; keep f16 in arrays only and compute in f32",
    "int64_atomics": "uses atomics on 64-bit values, but the OpenCL device {target} has no "
                     "cl_khr_int64_base_atomics; use i32/u32/f32 atomics or another device",
}


def opencl_target(extensions: str, fp64: bool, arch: str, toolchain: str) -> Target:
    """The Target of an OpenCL device, from its extension string and double support."""
    present = set(extensions.split())
    features = {"fp64"} if fp64 else set()
    if "cl_khr_fp16" in present:
        features.add("fp16")
    if "cl_khr_int64_base_atomics" in present:
        features.add("int64_atomics")
    return Target("opencl", arch, frozenset(features), toolchain)


class OpenCLEmitter(Emitter):
    dialect = "opencl"

    def emit(self, fn: ir.Function, target: Target) -> EmittedSource:
        if target.dialect != self.dialect:
            raise ValueError(f"OpenCLEmitter emits for opencl targets, not {target}")
        if not fn.is_kernel:
            raise ValueError(f"{fn.name!r} is a device function; emit the kernel that calls it")
        return _Program(fn, target).source()


EMITTER = OpenCLEmitter()


def own_expressions(node: ir.Expr | ir.Stmt) -> list[ir.Expr]:
    """The expressions directly inside ``node``, in field order (for a statement, the ones it
    evaluates itself, not those of the statements nested in it)."""
    found: list[ir.Expr] = []
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        found += [v for v in (value if isinstance(value, tuple) else (value,)) if isinstance(v, ir.Expr)]
    return found


def subexpressions(e: ir.Expr) -> Iterator[ir.Expr]:
    """``e`` and every expression inside it."""
    yield e
    for child in own_expressions(e):
        yield from subexpressions(child)


def all_expressions(body: tuple[ir.Stmt, ...]) -> Iterator[ir.Expr]:
    for stmt in ir.walk_stmts(body):
        for e in own_expressions(stmt):
            yield from subexpressions(e)


def direct_loop_vars(body: tuple[ir.Stmt, ...]) -> set[str]:
    """Loop variables a C ``for`` may step itself: never assigned inside their loops and never
    read outside them. The others get a hidden counter, so that Python's rules hold (the body
    cannot disturb the iteration, and after the loop the variable holds the last value)."""
    loop_vars = {s.var for s in ir.walk_stmts(body) if isinstance(s, ir.For)}
    unsafe: set[str] = set()

    def visit(stmts: tuple[ir.Stmt, ...], inside: frozenset[str]) -> None:
        for s in stmts:
            for e in own_expressions(s):
                unsafe.update(x.name for x in subexpressions(e)
                              if isinstance(x, ir.Var) and x.name in loop_vars and x.name not in inside)
            if isinstance(s, ir.Assign) and s.name in inside:
                unsafe.add(s.name)
            if isinstance(s, ir.For):
                if s.var in inside:
                    unsafe.add(s.var)
                visit(s.body, inside | {s.var})
            elif isinstance(s, ir.If):
                visit(s.then, inside)
                visit(s.orelse, inside)
            elif isinstance(s, ir.While):
                visit(s.body, inside)

    visit(body, frozenset())
    return loop_vars - unsafe


@dataclasses.dataclass(frozen=True)
class _ArrayInfo:
    name: str  # the C name
    dtype: ScalarType
    space: str  # __global or __local
    dims: tuple[str, ...]  # the extent of each axis, as C text


class _Program:
    """One emitted program: the kernel, its device functions and the helpers they call."""

    def __init__(self, kernel: ir.Function, target: Target) -> None:
        self.kernel = kernel
        self.target = target
        self.entry = entry_name(kernel)
        self.functions: dict[str, ir.Function] = {}
        self._collect(kernel.callees)
        self.c_names = {name: f"hetero_fn_{helpers.ascii_name(name)}" for name in self.functions}
        self.helpers: dict[str, str] = {}
        self.extensions: set[str] = set()
        self._check_features()

    def _collect(self, callees: tuple[ir.Function, ...]) -> None:
        for callee in callees:  # callees first, so each is defined before its callers
            if callee.name not in self.functions:
                self._collect(callee.callees)
                self.functions[callee.name] = callee

    def fail(self, message: str, loc: ir.Loc) -> CompileError:
        return CompileError(message, loc.file, loc.line, loc.col)

    def _check_features(self) -> None:
        every = (*self.functions.values(), self.kernel)
        needs = {f for fn in every for f in fn.features} & {"fp64", "int64_atomics"}
        for fn in every:
            scalars = [p.type for p in fn.params if isinstance(p.type, ScalarType)]
            declared = [*fn.locals.values(), *scalars, fn.return_type]
            element_types = [a.dtype for a in fn.local_arrays] + [t.dtype for t in fn.array_params().values()]
            if any(t.name == "f64" for t in [*declared, *element_types]) or any(
                    e.type.name == "f64" for e in all_expressions(fn.body)):
                needs.add("fp64")
            if any(t == f16 for t in declared):
                needs.add("fp16")
        for feature in sorted(needs):
            if feature not in self.target.features:
                raise self.fail(f"kernel {self.kernel.name!r} " + _MISSING[feature].format(target=self.target.arch),
                                self.kernel.loc)
            if feature != "int64_atomics":  # that pragma only where 64-bit atomics are emitted
                self.extensions.add(f"cl_khr_{feature}")

    def helper(self, kind: str, ctype: str, space: str = "") -> str:
        """The name of helper ``kind`` for ``ctype`` (and address space), adding its text once."""
        name = "_".join(part for part in ("hetero", kind, ctype, space) if part)
        if name not in self.helpers:
            if kind.startswith("atomic_"):
                self.helpers[name] = helpers.atomic_update(name, ctype, f"__{space}", kind.removeprefix("atomic_"))
            else:
                self.helpers[name] = _HELPERS[kind](name, ctype)
        return name

    def source(self) -> EmittedSource:
        bodies = [_FunctionWriter(fn, self).write() for fn in self.functions.values()]
        bodies.append(_FunctionWriter(self.kernel, self).write())
        clashes = [n for n in [*self.helpers, *self.c_names.values()] if n == self.entry]
        if clashes:
            raise self.fail(f"kernel {self.kernel.name!r}: its OpenCL entry point {self.entry!r} clashes with a "
                            f"function hetero generates; rename the kernel", self.kernel.loc)
        where = f"{os.path.basename(self.kernel.loc.file)}:{self.kernel.loc.line}"
        parts = [f"// Kernel {self.kernel.name!r} ({where}), generated by hetero. Do not edit."]
        parts += [f"#pragma OPENCL EXTENSION {ext} : enable" for ext in sorted(self.extensions)]
        parts += [self.helpers[name] for name in sorted(self.helpers)]
        text = "\n\n".join(parts + bodies) + "\n"
        return EmittedSource(self.target.dialect, self.entry, text, default_abi(self.kernel, with_shapes=True))


class _FunctionWriter:
    """Writes one kernel or device function; all per-function state (names, temporaries)."""

    def __init__(self, fn: ir.Function, program: _Program) -> None:
        self.fn = fn
        self.program = program
        self.loc = fn.loc
        self.lines: list[str] = []
        self.temporaries = 0
        self.names: dict[str, str] = {}
        self.arrays: dict[str, _ArrayInfo] = {}
        self._taken: set[str] = set()
        self.direct_loops = direct_loop_vars(fn.body)
        for param in fn.params:
            self._name(param.name)
        for local in fn.local_arrays:
            self._name(local.name)
        for name in sorted(fn.locals):
            self._name(name)
        for param in fn.params:  # shape names last: a user's variable keeps its own name
            if isinstance(param.type, ArrayType):
                if param.type.ndim is None:
                    raise self.fail(f"array parameter {param.name!r} has no rank yet (internal: specialise first)")
                c_name = self.names[param.name]
                dims = tuple(self._take(f"{c_name}_shape{axis}") for axis in range(param.type.ndim))
                self.arrays[param.name] = _ArrayInfo(c_name, param.type.dtype, "__global", dims)
        for local in fn.local_arrays:
            self.arrays[local.name] = _ArrayInfo(self.names[local.name], local.dtype, "__local",
                                                 tuple(map(str, local.shape)))

    def _take(self, wanted: str) -> str:
        name, n = wanted, 2
        while name in self._taken:
            name, n = f"{wanted}_{n}", n + 1
        self._taken.add(name)
        return name

    def _name(self, user_name: str) -> None:
        if user_name not in self.names:
            self.names[user_name] = self._take(helpers.c_identifier(user_name))

    def fail(self, message: str) -> CompileError:
        return self.program.fail(message, self.loc)

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    # -- the function --------------------------------------------------------------
    def write(self) -> str:
        fn = self.fn
        written = {e.array for e in all_expressions(fn.body) if isinstance(e, ir.Atomic)}
        written |= {s.array for s in ir.walk_stmts(fn.body) if isinstance(s, ir.Store)}
        written |= {a.name for e in all_expressions(fn.body) if isinstance(e, ir.Call)
                    for a in e.args if isinstance(a, ir.Var) and a.name in self.arrays}
        params = []
        for param in fn.params:
            if isinstance(param.type, ArrayType):
                info = self.arrays[param.name]
                const = "" if param.name in written else "const "
                # restrict on kernels only: a device function may get the same array twice.
                restrict = "restrict " if fn.is_kernel else ""
                params.append(f"__global {const}{STORAGE[info.dtype.name]}* {restrict}{info.name}"
                              + "".join(f", long {dim}" for dim in info.dims))
            else:  # OpenCL kernels cannot take a bool: it arrives as one byte
                ctype = "uchar" if fn.is_kernel and param.type.kind == "b" else c_type(param.type)
                params.append(f"{ctype} {self.names[param.name]}")
        if fn.is_kernel:
            head = f"__kernel void {self.program.entry}("
        else:
            head = f"{c_type(fn.return_type)} {self.program.c_names[fn.name]}("
        self.lines.append(head + (",\n" + " " * len(head)).join(params) + ") {")
        for local in fn.local_arrays:
            info = self.arrays[local.name]
            self.emit(1, f"__local {LOCAL_STORAGE[local.dtype.name]} {info.name}[{' * '.join(info.dims) or '1'}];")
        params_by_name = {p.name for p in fn.params}
        for name in sorted(fn.locals):
            if name not in params_by_name:
                t = fn.locals[name]
                self.emit(1, f"{c_type(t)} {self.names[name]} = {'false' if t.kind == 'b' else '0'};")
        self.statements(fn.body, 1)
        self.lines.append("}")
        return "\n".join(self.lines)

    # -- statements ----------------------------------------------------------------
    def statements(self, body: tuple[ir.Stmt, ...], depth: int) -> None:
        for stmt in body:
            self.statement(stmt, depth)

    def statement(self, s: ir.Stmt, depth: int) -> None:
        self.loc = s.loc
        match s:
            case ir.Assign():
                self.emit(depth, f"{self.var(s.name)} = {top(self.expr(s.value))};")
            case ir.Store():
                self.store(s, depth)
            case ir.If():
                self.emit(depth, f"if ({top(self.expr(s.cond))}) {{")
                self.statements(s.then, depth + 1)
                orelse = s.orelse
                while len(orelse) == 1 and isinstance(orelse[0], ir.If):
                    self.loc = orelse[0].loc
                    self.emit(depth, f"}} else if ({top(self.expr(orelse[0].cond))}) {{")
                    self.statements(orelse[0].then, depth + 1)
                    orelse = orelse[0].orelse
                if orelse:
                    self.emit(depth, "} else {")
                    self.statements(orelse, depth + 1)
                self.emit(depth, "}")
            case ir.For():
                self.for_loop(s, depth)
            case ir.While():
                self.emit(depth, f"while ({top(self.expr(s.cond))}) {{")
                self.statements(s.body, depth + 1)
                self.emit(depth, "}")
            case ir.Break():
                self.emit(depth, "break;")
            case ir.Continue():
                self.emit(depth, "continue;")
            case ir.Return():
                if s.value is None:
                    self.emit(depth, "return;")
                elif self.fn.is_kernel:
                    raise self.fail(f"kernel {self.fn.name!r} returns a value; kernels write results to arrays")
                else:
                    self.emit(depth, f"return {top(self.expr(s.value))};")
            case ir.ExprStmt():
                self.emit(depth, f"{top(self.expr(s.value))};")
            case ir.Barrier():
                self.emit(depth, "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);")
            case _:
                raise self.fail(f"internal: the OpenCL emitter has no rule for {type(s).__name__}")

    def store(self, s: ir.Store, depth: int) -> None:
        info = self.array(s.array)
        index = self.index(info, s.indices)
        if info.dtype != f16:
            self.emit(depth, f"{info.name}[{index}] = {top(self.expr(s.value))};")
            return
        value = s.value
        if isinstance(value, ir.Cast) and value.type == f16 and value.value.type.name in ("f32", "f64"):
            text = top(self.expr(value.value))  # vstore_half rounds float or double to f16 itself
        else:
            inner = value.value if isinstance(value, ir.Cast) and value.type == f16 else value
            text = f"(float)({top(self.expr(inner))})"
        self.emit(depth, f"vstore_half({text}, {index}, {self.half_pointer(info)});")

    def temporary(self, depth: int, kind: str, value: ir.Expr) -> str:
        name = f"hetero_{kind}{self.temporaries}"
        self.temporaries += 1
        self.emit(depth, f"const {c_type(value.type)} {name} = {top(self.expr(value))};")
        return name

    def for_loop(self, s: ir.For, depth: int) -> None:
        # range() evaluates start, stop and step once, in that order, before the loop begins.
        hoist_stop = not isinstance(s.stop, (ir.Const, ir.Shape))
        hoist_step = not isinstance(s.step, ir.Const)
        effects = any(isinstance(e, (ir.Call, ir.Atomic)) for x in (s.start, s.stop, s.step) for e in subexpressions(x))
        start = self.temporary(depth, "start", s.start) if effects and (hoist_stop or hoist_step) else None
        stop = self.temporary(depth, "stop", s.stop) if hoist_stop else self.expr(s.stop)
        start = start or top(self.expr(s.start))
        if s.var in self.direct_loops:
            counter = self.var(s.var)
            init = f"{counter} = {start}"
        else:
            counter = f"hetero_i{self.temporaries}"
            self.temporaries += 1
            init = f"{c_type(s.start.type)} {counter} = {start}"
        if isinstance(s.step, ir.Const):
            if s.step.value == 0:
                raise self.fail("range() step must not be zero")
            positive = s.step.value > 0
            condition = f"{counter} {'<' if positive else '>'} {stop}"
            step = {1: f"{counter}++", -1: f"{counter}--"}.get(int(s.step.value), f"{counter} += {top(self.expr(s.step))}")
        else:  # a zero step runs no iterations (Python raises ValueError)
            amount = self.temporary(depth, "step", s.step)
            condition = f"{amount} > 0 ? {counter} < {stop} : ({amount} < 0 && {counter} > {stop})"
            step = f"{counter} += {amount}"
        self.emit(depth, f"for ({init}; {condition}; {step}) {{")
        if s.var not in self.direct_loops:
            self.emit(depth + 1, f"{self.var(s.var)} = {counter};")
        self.statements(s.body, depth + 1)
        self.emit(depth, "}")

    # -- expressions ---------------------------------------------------------------
    def var(self, name: str) -> str:
        if name not in self.names:
            raise self.fail(f"internal: variable {name!r} is used but not declared in {self.fn.name!r}")
        return self.names[name]

    def array(self, name: str) -> _ArrayInfo:
        if name not in self.arrays:
            raise self.fail(f"internal: {name!r} is not an array of {self.fn.name!r}")
        return self.arrays[name]

    def index(self, info: _ArrayInfo, indices: tuple[ir.Expr, ...]) -> str:
        if len(indices) != len(info.dims):
            raise self.fail(f"array {info.name!r} has {len(info.dims)} dimensions but is indexed with {len(indices)}")
        if not indices:
            return "0"
        flat = self.expr(indices[0])
        for axis in range(1, len(indices)):
            flat = f"{flat if axis == 1 else f'({flat})'} * {info.dims[axis]} + {self.expr(indices[axis])}"
        return top(flat)

    def half_pointer(self, info: _ArrayInfo) -> str:
        # A local f16 array is stored as ushort: without cl_khr_fp16 OpenCL has no half array.
        return info.name if info.space == "__global" else f"(__local half*){info.name}"

    def expr(self, e: ir.Expr) -> str:
        """``e`` as C text that is safe as an operand: a name, a literal, a call, a cast or
        something in parentheses."""
        match e:
            case ir.Const():
                return c_literal(e.type, e.value)
            case ir.Var():
                return self.var(e.name)
            case ir.BinOp():
                return self.binop(e)
            case ir.UnaryOp():
                return self.unary(e)
            case ir.Compare():
                return f"({self.expr(e.left)} {e.op} {self.expr(e.right)})"
            case ir.Logical():
                op = {"and": "&&", "or": "||"}.get(e.op, e.op)
                return f"({self.expr(e.left)} {op} {self.expr(e.right)})"
            case ir.Select():
                return f"({self.expr(e.cond)} ? {self.expr(e.if_true)} : {self.expr(e.if_false)})"
            case ir.Cast():
                return self.cast(e)
            case ir.Load():
                info = self.array(e.array)
                index = self.index(info, e.indices)
                if info.dtype == f16:
                    return f"vload_half({index}, {self.half_pointer(info)})"
                return f"{info.name}[{index}]"
            case ir.Shape():
                return self.array(e.array).dims[e.axis]
            case ir.WorkItem():
                return f"(long){_WORK_ITEMS[e.name]}({e.axis})"
            case ir.Math():
                if e.name not in _MATH:
                    raise self.fail(f"math function {e.name!r} has no OpenCL built-in here")
                return f"{e.name}({', '.join(top(self.expr(a)) for a in e.args)})"
            case ir.Atomic():
                return self.atomic(e)
            case ir.Call():
                return self.call(e)
        raise self.fail(f"internal: the OpenCL emitter has no rule for {type(e).__name__}")

    def binop(self, e: ir.BinOp) -> str:
        t, ctype, op = e.type, c_type(e.type), e.op
        left, right = self.expr(e.left), self.expr(e.right)
        if op in ("min", "max"):
            return f"{'f' if t.is_float else ''}{op}({top(left)}, {top(right)})"
        if op in ("//", "%"):
            return f"{self.program.helper('floordiv' if op == '//' else 'mod', ctype)}({top(left)}, {top(right)})"
        if op == "**":
            if t.is_float:
                return f"pow({top(left)}, {top(right)})"
            return f"{self.program.helper('ipow', ctype)}({top(left)}, {top(right)})"
        text = f"({left} {op} {right})"
        # C computes narrow integers in int: bring the result back to the IR's type.
        return f"({ctype})({top(text)})" if t.is_int and t.bits < 32 else text

    def unary(self, e: ir.UnaryOp) -> str:
        t, operand = e.type, self.expr(e.operand)
        if e.op == "not":
            return f"(!{operand})"
        if e.op == "abs":
            if t.is_float:
                return f"fabs({top(operand)})"
            # OpenCL's abs returns the unsigned type: cast back (abs of the minimum wraps).
            return f"({c_type(t)})(abs({top(operand)}))" if t.kind == "i" else operand
        if e.op not in ("-", "~"):
            raise self.fail(f"internal: unknown unary operator {e.op!r}")
        text = f"({e.op}{operand})"
        return f"({c_type(t)}){text}" if t.is_int and t.bits < 32 else text

    def cast(self, e: ir.Cast) -> str:
        inner = top(self.expr(e.value))
        if e.type != f16:
            return f"({c_type(e.type)})({inner})"
        if "cl_khr_fp16" in self.program.extensions:  # the kernel declares half values anyway
            return f"(half)({inner})"
        source = "double" if e.value.type.name == "f64" else "float"
        inner = inner if e.value.type.name in ("f32", "f64") else f"(float)({inner})"
        return f"{self.program.helper('round_half', source)}({inner})"

    def atomic(self, e: ir.Atomic) -> str:
        info = self.array(e.array)
        t, op, space = info.dtype, e.op, info.space.removeprefix("__")
        ctype = C_TYPES[t.name]
        address = f"&{info.name}[{self.index(info, e.indices)}]"
        args = [top(self.expr(a)) for a in e.args]
        if op not in ("add", "sub", "min", "max", "cas") or len(args) != (2 if op == "cas" else 1):
            raise self.fail(f"internal: atomic {op!r} with {len(args)} arguments")
        if t.name not in ("i32", "u32", "f32", "i64", "u64", "f64"):
            raise self.fail(f"atomic {op} on a {t} array is not supported on OpenCL; "
                            "use an i32, u32 or f32 array (i64, u64, f64 where the device has 64-bit atomics)")
        if t.bits == 64:
            if "int64_atomics" not in self.program.target.features:
                raise self.fail(f"atomic {op} on a {t} array needs 64-bit atomics, which the OpenCL device "
                                f"{self.program.target.arch} lacks (no cl_khr_int64_base_atomics); use a 32-bit type")
            self.program.extensions.add("cl_khr_int64_base_atomics")
        bits = {"f32": "int", "f64": "long"}.get(t.name, ctype)
        cas = "atomic_cmpxchg" if t.bits == 32 else "atom_cmpxchg"
        if op == "cas" and t.is_float:  # compares bit patterns: -0.0 differs from 0.0, a NaN can match
            word = f"(volatile {info.space} {bits}*){address}"
            return f"as_{ctype}({cas}({word}, as_{bits}({args[0]}), as_{bits}({args[1]})))"
        if op == "cas":
            return f"{cas}({address}, {args[0]}, {args[1]})"
        if t.is_int and (t.bits == 32 or op in ("add", "sub")):
            return f"{'atomic' if t.bits == 32 else 'atom'}_{op}({address}, {args[0]})"
        return f"{self.program.helper('atomic_' + op, ctype, space)}({address}, {args[0]})"

    def call(self, e: ir.Call) -> str:
        callee = self.program.functions.get(e.func)
        if callee is None:
            raise self.fail(f"internal: {e.func!r} is called but is not among the kernel's callees")
        if len(callee.params) != len(e.args):
            raise self.fail(f"{e.func}() takes {len(callee.params)} arguments but is called with {len(e.args)}")
        args: list[str] = []
        for param, arg in zip(callee.params, e.args):
            if not isinstance(param.type, ArrayType):
                args.append(top(self.expr(arg)))
                continue
            if not (isinstance(arg, ir.Var) and arg.name in self.arrays):
                raise self.fail(f"argument {param.name!r} of {e.func}() must be an array")
            info = self.arrays[arg.name]
            if info.space != "__global":
                raise self.fail(f"local array {arg.name!r} cannot be passed to device function {e.func}() "
                                "on OpenCL; pass an array parameter, or index the local array in the kernel")
            args.append(", ".join((info.name,) + info.dims))
        return f"{self.program.c_names[e.func]}({', '.join(args)})"
