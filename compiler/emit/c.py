"""C-family source for hetero kernels: one typed IR kernel, with its device functions, becomes
one readable program (one statement a line, the user's names kept) in OpenCL C, CUDA C or
HIP. The printing lives here once; a :class:`~hetero.compiler.emit.c_dialect.CDialect` says how
its language spells types, index built-ins, atomics, f16 and the rest.

Every dialect takes the same arguments (:func:`default_abi` with shapes): an array is a
pointer followed by its extents as 64-bit integers, indexed row-major; a scalar is passed by
value. Where C and Python disagree (floor division, ``**`` on integers, atomics on floats)
the program calls a small helper function, emitted once per type the kernel uses.
"""

from __future__ import annotations

import dataclasses
import os

from hetero.core.errors import CompileError
from hetero.language import ATOMICS, MATH_FUNCTIONS, MATH_PREDICATES
from hetero.core.types import ArrayType, ScalarType, f16

from hetero.compiler.ir import nodes as ir, warp_emulation
from hetero.compiler.emit.c_dialect import ATOMIC_TYPES, ArrayInfo, CDialect, ascii_name, top
from hetero.compiler.emit.cpu_regions import check_barriers
from hetero.compiler.emit.base import EmittedSource, Emitter, default_abi, entry_name, work_group_arrays
from hetero.compiler.ir.queries import all_expressions, direct_loop_vars, subexpressions
from hetero.core.target import Target

_HELPER_OPS = {"//": "floordiv", "%": "mod"}
#: The IR's math functions (every dialect has each, for f32 and f64).
_MATH = frozenset(MATH_FUNCTIONS)
#: Size queries a kernel reads once, at its entry, into a local: PoCL 3.1 miscompiles a
#: loop holding barrier() whose condition is the kernel's only ``get_local_size`` call.
_HOISTED_QUERIES = ("local_size", "global_size", "num_groups")


class CEmitter(Emitter):
    """The emitter of one C-family dialect."""

    def __init__(self, language: CDialect) -> None:
        self.dialect = language.name
        self.language = language
        self.declares_restrict = bool(language.restrict)
        self.native_warps = language.native_warps
        self.subgroup_warps = language.subgroup_warps

    def emit(self, fn: ir.Function, target: Target, *, restrict: bool = True) -> EmittedSource:
        self.language.check_target(target)
        if not fn.is_kernel:
            raise ValueError(f"{fn.name!r} is a device function; emit the kernel that calls it")
        limit = warp_emulation.group_limit(fn)
        if not self.language.native_warps:
            subgroups = self.language.subgroup_warps and "subgroups32" in target.features
            fn = warp_emulation.emulate(fn, subgroups, "subgroup_shuffles32" in target.features)
        check_barriers(fn)  # IR from a bundle skips the frontend, which checks this first
        source = Program(fn, target, self.language, restrict=restrict).source()
        return dataclasses.replace(source, max_group=limit, local_arrays=work_group_arrays(fn))


class Program:
    """One emitted program: the kernel, its device functions and the helpers they call."""

    def __init__(self, kernel: ir.Function, target: Target, dialect: CDialect, *, restrict: bool = True) -> None:
        self.kernel = kernel
        self.target = target
        self.dialect = dialect
        self.restrict = restrict  # declare the kernel's array parameters restrict (no launch aliases them)
        self.entry = entry_name(kernel)
        self.functions: dict[str, ir.Function] = {}
        self._collect(kernel.callees)
        # Three name spaces that cannot meet: the entry is hetero_<kernel>, a device function heterofn_<name>,
        # a generated helper heterohelp_<kind>_<type>[_<space>] (a kernel named atomic_add_double_global,
        # or fn_twice beside a function twice, once clashed with them).
        self.c_names = {name: f"heterofn_{ascii_name(name)}" for name in self.functions}
        self.helpers: dict[str, str] = {}
        #: Features the program uses and must enable (``fp64``, ``fp16`` values, ``int64_atomics``).
        self.enabled: set[str] = set()
        #: Does f16 appear anywhere (arrays included)?
        self.uses_half = False
        self.uses_subgroups = warp_emulation.uses_subgroups(kernel)
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
            computed = {e.type.name for e in all_expressions(fn.body)}
            named = {t.name for t in [*declared, *element_types]} | computed
            if "f64" in named:
                needs.add("fp64")
            if any(t == f16 for t in declared):
                needs.add("fp16")
            self.uses_half |= "f16" in named
        for feature in sorted(needs):
            if feature not in self.target.features:
                message = self.dialect.missing_feature[feature].format(title=self.dialect.title, target=self.target.arch)
                raise self.fail(f"kernel {self.kernel.name!r} {message}", self.kernel.loc)
            if feature != "int64_atomics":  # enabled only where 64-bit atomics are emitted
                self.enabled.add(feature)

    def helper(self, kind: str, t: ScalarType, space: str = "") -> str:
        """The name of helper ``kind`` for type ``t`` (and address space), adding its text once."""
        ctype = self.dialect.c_type(t).replace(" ", "_")
        name = "_".join(part for part in ("heterohelp", kind, ctype, space) if part)
        if name not in self.helpers:
            self.helpers[name] = self.dialect.helper_text(kind, name, t, space)
        return name

    def source(self) -> EmittedSource:
        bodies = [FunctionWriter(fn, self).write() for fn in self.functions.values()]
        bodies.append(FunctionWriter(self.kernel, self).write())
        if self.entry in [*self.helpers, *self.c_names.values()]:  # cannot happen (distinct prefixes): a hetero bug
            raise self.fail(f"kernel {self.kernel.name!r}: its {self.dialect.title} entry point {self.entry!r} "
                            f"clashes with a function hetero generates (a hetero bug; please report it)", self.kernel.loc)
        where = f"{os.path.basename(self.kernel.loc.file)}:{self.kernel.loc.line}"
        parts = [f"// Kernel {self.kernel.name!r} ({where}), generated by hetero. Do not edit."]
        parts += self.dialect.preamble(self)
        parts += [self.helpers[name] for name in sorted(self.helpers)]
        text = "\n\n".join(parts + bodies) + "\n"
        return EmittedSource(self.target.dialect, self.entry, text, default_abi(self.kernel, with_shapes=True),
                             self.dialect.options)


class FunctionWriter:
    """Writes one kernel or device function; all per-function state (names, temporaries)."""

    def __init__(self, fn: ir.Function, program: Program) -> None:
        self.fn = fn
        self.program = program
        self.dialect = program.dialect
        self.loc = fn.loc
        self.lines: list[str] = []
        self.temporaries = 0
        self.names: dict[str, str] = {}
        self.arrays: dict[str, ArrayInfo] = {}
        self._taken: set[str] = set()
        self.direct_loops = direct_loop_vars(fn.body)
        #: (query, axis) -> the local holding it, for the size queries hoisted to the kernel's entry.
        self.hoisted: dict[tuple[str, int], str] = {}
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
                self.arrays[param.name] = ArrayInfo(c_name, param.type.dtype, "global", dims)
        for local in fn.local_arrays:
            self.arrays[local.name] = ArrayInfo(self.names[local.name], local.dtype, "private" if local.private else "local",
                                                tuple(map(str, local.shape)))

    def _take(self, wanted: str) -> str:
        name, n = wanted, 2
        while name in self._taken:
            name, n = f"{wanted}_{n}", n + 1
        self._taken.add(name)
        return name

    def _name(self, user_name: str) -> None:
        if user_name not in self.names:
            self.names[user_name] = self._take(self.dialect.c_identifier(user_name))

    def fail(self, message: str) -> CompileError:
        return self.program.fail(message, self.loc)

    def emit(self, depth: int, line: str) -> None:
        self.lines.append("    " * depth + line)

    # -- the function --------------------------------------------------------------
    def write(self) -> str:
        fn, d = self.fn, self.dialect
        written = {e.array for e in all_expressions(fn.body) if isinstance(e, ir.Atomic)}
        written |= {s.array for s in ir.walk_stmts(fn.body) if isinstance(s, ir.Store)}
        written |= {a.name for e in all_expressions(fn.body) if isinstance(e, ir.Call)
                    for a in e.args if isinstance(a, ir.Var) and a.name in self.arrays}
        i64 = d.types["i64"]
        params = []
        for param in fn.params:
            if isinstance(param.type, ArrayType):
                info = self.arrays[param.name]
                const = "" if param.name in written else "const "
                # restrict on kernels only: a device function may get the same array twice; and
                # not in the variant the launcher takes when a launch's arrays share memory.
                restrict = d.restrict if fn.is_kernel and self.program.restrict else ""
                params.append(f"{d.global_qualifier}{const}{d.storage[info.dtype.name]}* {restrict}{info.name}"
                              + "".join(f", {i64} {dim}" for dim in info.dims))
            else:  # a kernel takes a bool as one byte (OpenCL kernels cannot take a bool at all)
                ctype = d.storage["bool"] if fn.is_kernel and param.type.kind == "b" else d.c_type(param.type)
                params.append(f"{ctype} {self.names[param.name]}")
        if fn.is_kernel:
            head = f"{d.kernel_attributes(self.program)}{d.kernel_head} {self.program.entry}("
        else:
            prefix = f"{d.function_head} " if d.function_head else ""
            head = f"{prefix}{d.c_type(fn.return_type)} {self.program.c_names[fn.name]}("
        self.lines.append(head + (",\n" + " " * len(head)).join(params) + ") {")
        for local in fn.local_arrays:
            info = self.arrays[local.name]
            size = " * ".join(info.dims) or "1"
            qualifier = "" if local.private else f"{d.local_qualifier} "  # private: each work-item's own
            self.emit(1, f"{qualifier}{d.local_storage[local.dtype.name]} {info.name}[{size}];")
        params_by_name = {p.name for p in fn.params}
        for name in sorted(fn.locals):
            if name not in params_by_name:
                t = fn.locals[name]
                self.emit(1, f"{d.c_type(t)} {self.names[name]} = {d.zero(t)};")
        if fn.is_kernel:
            self.hoist_size_queries()
        self.statements(fn.body, 1)
        self.lines.append("}")
        return "\n".join(self.lines)

    def hoist_size_queries(self) -> None:
        queries = sorted({(e.name, e.axis) for e in all_expressions(self.fn.body)
                          if isinstance(e, ir.WorkItem) and e.name in _HOISTED_QUERIES})
        for name, axis in queries:
            local = self._take(f"hetero_{name}{axis}")
            self.emit(1, f"const {self.dialect.types['i64']} {local} = {top(self.dialect.work_item(name, axis))};")
            self.hoisted[(name, axis)] = local

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
                info = self.array(s.array)
                self.emit(depth, self.dialect.store(self, info, self.index(info, s.indices), s.value))
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
                value = self.atomic(s.value, used=False) if isinstance(s.value, ir.Atomic) else self.expr(s.value)
                self.emit(depth, f"{top(value)};")
            case ir.Barrier():
                self.emit(depth, self.dialect.barrier)
            case ir.Fence():
                self.emit(depth, self.dialect.fences[s.scope])
            case _:
                raise self.fail(f"internal: the {self.dialect.title} emitter has no rule for {type(s).__name__}")

    def temporary(self, depth: int, kind: str, value: ir.Expr) -> str:
        name = f"hetero_{kind}{self.temporaries}"
        self.temporaries += 1
        self.emit(depth, f"const {self.dialect.c_type(value.type)} {name} = {top(self.expr(value))};")
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
            init = f"{self.dialect.c_type(s.start.type)} {counter} = {start}"
        if isinstance(s.step, ir.Const):
            if ir.number(s.step) == 0:
                raise self.fail("range() step must not be zero")
            positive = ir.number(s.step) > 0
            condition = f"{counter} {'<' if positive else '>'} {stop}"
            step = {1: f"{counter}++", -1: f"{counter}--"}.get(int(ir.number(s.step)), f"{counter} += {top(self.expr(s.step))}")
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

    def array(self, name: str) -> ArrayInfo:
        if name not in self.arrays:
            raise self.fail(f"internal: {name!r} is not an array of {self.fn.name!r}")
        return self.arrays[name]

    def index(self, info: ArrayInfo, indices: tuple[ir.Expr, ...]) -> str:
        if len(indices) != len(info.dims):
            raise self.fail(f"array {info.name!r} has {len(info.dims)} dimensions but is indexed with {len(indices)}")
        if not indices:
            return "0"
        flat = self.expr(indices[0])
        for axis in range(1, len(indices)):
            flat = f"{flat if axis == 1 else f'({flat})'} * {info.dims[axis]} + {self.expr(indices[axis])}"
        return top(flat)

    def expr(self, e: ir.Expr) -> str:
        """``e`` as C text that is safe as an operand: a name, a literal, a call, a cast or
        something in parentheses."""
        d = self.dialect
        match e:
            case ir.Const():
                return d.literal(e.type, ir.number(e))
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
                return d.cast(self, e)
            case ir.Load():
                info = self.array(e.array)
                return d.load(self, info, self.index(info, e.indices))
            case ir.Shape():
                return self.array(e.array).dims[e.axis]
            case ir.WorkItem():
                return self.hoisted.get((e.name, e.axis)) or d.work_item(e.name, e.axis)
            case ir.Math():
                if e.name not in _MATH:
                    raise self.fail(f"math function {e.name!r} has no {d.title} built-in here")
                args = ", ".join(top(self.expr(a)) for a in e.args)
                if e.name in MATH_PREDICATES:  # C's return a nonzero int, not necessarily 1
                    return f"({e.name}({args}) != 0)"
                return f"{d.math(e.name, e.type)}({args})"
            case ir.Atomic():
                return self.atomic(e)
            case ir.Call():
                return self.call(e)
            case ir.Warp():
                if not (d.native_warps or (d.subgroup_warps and e.op in ir.SUBGROUP_OPS)):
                    raise self.fail(f"internal: warp operation {e.op!r} reached the {d.title} emitter unemulated")
                return d.warp(self, e)
        raise self.fail(f"internal: the {d.title} emitter has no rule for {type(e).__name__}")

    def binop(self, e: ir.BinOp) -> str:
        t, op, d = e.type, e.op, self.dialect
        left, right = self.expr(e.left), self.expr(e.right)
        if op in ("min", "max"):
            return f"{d.min_max(op, t)}({top(left)}, {top(right)})"
        if op in _HELPER_OPS:
            return f"{self.program.helper(_HELPER_OPS[op], t)}({top(left)}, {top(right)})"
        if op == "**":
            function = d.math("pow", t) if t.is_float else self.program.helper("ipow", t)
            return f"{function}({top(left)}, {top(right)})"
        text = f"({left} {op} {right})"
        # C computes narrow integers in int: bring the result back to the IR's type.
        return f"({d.c_type(t)})({top(text)})" if t.is_int and t.bits < 32 else text

    def unary(self, e: ir.UnaryOp) -> str:
        t, operand, d = e.type, self.expr(e.operand), self.dialect
        if e.op == "not":
            return f"(!{operand})"
        if e.op == "abs":
            return f"{d.math('fabs', t)}({top(operand)})" if t.is_float else d.integer_abs(t, operand)
        if e.op not in ("-", "~"):
            raise self.fail(f"internal: unknown unary operator {e.op!r}")
        text = f"({e.op}{operand})"
        return f"({d.c_type(t)}){text}" if t.is_int and t.bits < 32 else text

    def atomic(self, e: ir.Atomic, used: bool = True) -> str:
        info = self.array(e.array)
        t, op, target = info.dtype, e.op, self.program.target
        address = f"&{info.name}[{self.index(info, e.indices)}]"
        args = [self.expr(a) for a in e.args]
        if op not in ATOMICS or len(args) != (2 if op == "cas" else 1):
            raise self.fail(f"internal: atomic {op!r} with {len(args)} arguments")
        if t.name not in ATOMIC_TYPES:
            raise self.fail(f"atomic {op} on a {t} array is not supported on {self.dialect.title}; "
                            "use an i32, u32 or f32 array (i64, u64, f64 where the device has 64-bit atomics)")
        if t.bits == 64:
            if "int64_atomics" not in target.features:
                lacks = self.dialect.lacks_64_bit_atomics.format(title=self.dialect.title, target=target.arch)
                raise self.fail(f"atomic {op} on a {t} array needs 64-bit atomics, which {lacks}; use a 32-bit type")
            self.program.enabled.add("int64_atomics")
        return self.dialect.atomic(self, info, op, address, args, used)

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
            if info.space != "global":
                raise self.fail(f"local array {arg.name!r} cannot be passed to device function {e.func}() "
                                f"on {self.dialect.title}; pass an array parameter, or index the local array "
                                "in the kernel")
            args.append(", ".join((info.name,) + info.dims))
        return f"{self.program.c_names[e.func]}({', '.join(args)})"

