"""Inlining device functions into their kernel, for what only a kernel body can hold.

A warp operation emulated through work-group memory needs barriers that every work-item of
the group reaches, which the predicated form of :mod:`hetero.compiler.ir.warp_emulation` builds
in the kernel body. A device function that holds one (``warp_reduce(v)``, CUDA C's
``warpReduceSum<T>(mask, v)``) is therefore copied into each place the kernel calls it: its
parameters and locals get fresh names, array parameters become the caller's arrays, and each
``return value`` assigns the call's result.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from hetero.core.errors import CompileError
from hetero.core.types import ArrayType, i64

from hetero.compiler.ir import nodes as ir
from hetero.compiler.ir.queries import all_expressions, map_children, subexpressions


def _error(message: str, loc: ir.Loc) -> CompileError:
    return CompileError(message, loc.file, loc.line, loc.col)


class _Inliner:
    def __init__(self, kernel: ir.Function, wanted: Callable[[ir.Function], bool]) -> None:
        self.kernel = kernel
        self.functions = {f.name: f for f in _all_callees(kernel)}
        self.wanted = {name for name, f in self.functions.items() if wanted(f)}
        self.locals = dict(kernel.locals)
        self.shapes = {a.name: a.shape for a in kernel.local_arrays}
        self.local_arrays = list(kernel.local_arrays)
        self.counter = 0

    def fresh(self, name: str, t: ir.ScalarType) -> str:
        while True:
            candidate = f"_inl{self.counter}_{name}"
            self.counter += 1
            if candidate not in self.locals:
                self.locals[candidate] = t
                return candidate

    def run(self) -> ir.Function:
        body = self.block(self.kernel.body)
        called = _called(body, self.functions)
        callees = tuple(f for f in self.kernel.callees if f.name in called)
        return dataclasses.replace(self.kernel, body=body, locals=self.locals, callees=callees,
                                   local_arrays=tuple(self.local_arrays))

    def block(self, body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in body:
            out += self.statement(s)
        return tuple(out)

    def statement(self, s: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(s, ir.If):
            pre, cond = self.hoist(s.cond, s.loc)
            return [*pre, ir.If(s.loc, cond, self.block(s.then), self.block(s.orelse))]
        if isinstance(s, ir.While):
            if self.calls_wanted(s.cond):
                raise _error("a device function with warp operations is called in a while condition; call it "
                             "before the loop and again at the end of its body", s.loc)
            return [ir.While(s.loc, s.cond, self.block(s.body))]
        if isinstance(s, ir.For):
            out: list[ir.Stmt] = []
            bounds: list[ir.Expr] = []
            for bound in (s.start, s.stop, s.step):
                pre, bound = self.hoist(bound, s.loc)
                out += pre
                bounds.append(bound)
            start, stop, step = bounds
            return out + [ir.For(s.loc, s.var, start, stop, step, self.block(s.body))]
        if isinstance(s, ir.ExprStmt) and isinstance(s.value, ir.Call) and s.value.func in self.wanted:
            return self.expand(s.value, None, s.loc)
        changes: dict[str, object] = {}
        out = []
        for field in dataclasses.fields(s):
            value = getattr(s, field.name)
            if isinstance(value, ir.Expr):
                pre, changes[field.name] = self.hoist(value, s.loc)
                out += pre
            elif isinstance(value, tuple) and value and isinstance(value[0], ir.Expr):
                items = []
                for item in value:
                    pre, item = self.hoist(item, s.loc)
                    out += pre
                    items.append(item)
                changes[field.name] = tuple(items)
        return out + [dataclasses.replace(s, **changes) if changes else s]  # type: ignore[arg-type]

    def calls_wanted(self, e: ir.Expr) -> bool:
        return any(isinstance(x, ir.Call) and x.func in self.wanted for x in subexpressions(e))

    def hoist(self, e: ir.Expr, loc: ir.Loc) -> tuple[list[ir.Stmt], ir.Expr]:
        out: list[ir.Stmt] = []

        def visit(x: ir.Expr) -> ir.Expr:
            x = map_children(x, visit)
            if isinstance(x, ir.Call) and x.func in self.wanted:
                result = self.fresh(f"{x.func}_result", x.type)
                out.extend(self.expand(x, result, loc))
                return ir.Var(x.type, result)
            return x

        result = visit(e)
        return out, result

    def expand(self, call: ir.Call, result: str | None, loc: ir.Loc) -> list[ir.Stmt]:
        """The body of ``call``'s function with the call's arguments, assigning ``result``."""
        fn = self.functions[call.func]
        scalars: dict[str, str] = {}
        arrays: dict[str, str] = {}
        out: list[ir.Stmt] = []
        for param, arg in zip(fn.params, call.args, strict=True):
            if isinstance(param.type, ArrayType):
                assert isinstance(arg, ir.Var)
                arrays[param.name] = arg.name
            else:
                scalars[param.name] = self.fresh(param.name, param.type)
                out.append(ir.Assign(loc, scalars[param.name], arg))
        for name, t in fn.locals.items():
            if name not in scalars:
                scalars[name] = self.fresh(name, t)
        for local in fn.local_arrays:  # the function's own arrays become the kernel's, once per call
            arrays[local.name] = self.fresh(local.name, local.dtype)
            del self.locals[arrays[local.name]]
            self.local_arrays.append(dataclasses.replace(local, name=arrays[local.name]))
            self.shapes[arrays[local.name]] = local.shape
        body = _rename(fn.body, scalars, arrays, self.shapes)
        body = self.block(body)  # calls inside it, expanded too
        last = body[-1] if body else None
        early = [s for s in ir.walk_stmts(body[:-1] if isinstance(last, ir.Return) else body) if isinstance(s, ir.Return)]
        if not early:
            if isinstance(last, ir.Return):
                body = body[:-1] + ((ir.Assign(last.loc, result, last.value),) if result and last.value is not None else ())
            return out + list(body)
        # returns before the end: the body runs as a loop of one trip, each return leaving it
        once = self.fresh("once", i64)
        if _returns_in_loops(body):
            raise _error(f"{fn.name}: a return inside a loop of a device function hetero inlines into the kernel "
                         "(it holds a barrier, warp operations or local arrays) is not supported; leave the loop "
                         "with break and return after it", fn.loc)

        def leave(stmts: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
            done: list[ir.Stmt] = []
            for s in stmts:
                if isinstance(s, ir.Return):
                    if result and s.value is not None:
                        done.append(ir.Assign(s.loc, result, s.value))
                    done.append(ir.Break(s.loc))
                elif isinstance(s, ir.If):
                    done.append(ir.If(s.loc, s.cond, leave(s.then), leave(s.orelse)))
                else:
                    done.append(s)
            return tuple(done)

        return out + [ir.For(loc, once, ir.Const(i64, 0), ir.Const(i64, 1), ir.Const(i64, 1), leave(body))]


def _returns_in_loops(body: tuple[ir.Stmt, ...]) -> bool:
    return any(isinstance(s, (ir.For, ir.While)) and any(isinstance(x, ir.Return) for x in ir.walk_stmts(s.body))
               for s in ir.walk_stmts(body))


def _rename(body: tuple[ir.Stmt, ...], scalars: dict[str, str], arrays: dict[str, str],
            shapes: dict[str, tuple[int, ...]]) -> tuple[ir.Stmt, ...]:
    def expr(e: ir.Expr) -> ir.Expr:
        e = map_children(e, expr)
        changes: dict[str, object] = {}
        if isinstance(e, ir.Var):
            changes["name"] = arrays.get(e.name) or scalars.get(e.name, e.name)
        if isinstance(e, ir.Shape) and arrays.get(e.array) in shapes:
            return ir.Const(e.type, shapes[arrays[e.array]][e.axis])  # a local array's shape is constant
        if isinstance(e, (ir.Load, ir.Atomic, ir.Shape)):
            changes["array"] = arrays.get(e.array, e.array)
        return dataclasses.replace(e, **changes) if changes else e  # type: ignore[arg-type]

    def stmt(s: ir.Stmt) -> ir.Stmt:
        changes: dict[str, object] = {}
        for field in dataclasses.fields(s):
            value = getattr(s, field.name)
            if isinstance(value, ir.Expr):
                changes[field.name] = expr(value)
            elif isinstance(value, tuple) and value and isinstance(value[0], ir.Expr):
                changes[field.name] = tuple(expr(v) for v in value)
            elif isinstance(value, tuple) and value and isinstance(value[0], ir.Stmt):
                changes[field.name] = tuple(stmt(v) for v in value)
        if isinstance(s, ir.Assign):
            changes["name"] = scalars.get(s.name, s.name)
        elif isinstance(s, ir.For):
            changes["var"] = scalars.get(s.var, s.var)
        elif isinstance(s, ir.Store):
            changes["array"] = arrays.get(s.array, s.array)
        return dataclasses.replace(s, **changes) if changes else s  # type: ignore[arg-type]

    return tuple(stmt(s) for s in body)


def _all_callees(fn: ir.Function) -> list[ir.Function]:
    found: dict[str, ir.Function] = {}

    def visit(callees: tuple[ir.Function, ...]) -> None:
        for callee in callees:
            if callee.name not in found:
                visit(callee.callees)
                found[callee.name] = callee

    visit(fn.callees)
    return list(found.values())


def _called(body: tuple[ir.Stmt, ...], functions: dict[str, ir.Function]) -> set[str]:
    """The functions ``body`` calls, directly or through other functions."""
    names: set[str] = set()
    pending = [body]
    while pending:
        for e in _calls(pending.pop()):
            if e.func not in names:
                names.add(e.func)
                pending.append(functions[e.func].body)
    return names


def kernel_bound(kernel: ir.Function) -> Callable[[ir.Function], bool]:
    """The device functions of ``kernel`` that only its body can hold: those with a barrier or
    arrays of their own, and those given one of its local arrays (directly, or through a function
    that is)."""
    functions = {f.name: f for f in _all_callees(kernel)}
    wanted = {name for name, f in functions.items() if ir.contains_barrier(f.body) or f.local_arrays}
    changed = True
    while changed:
        changed = False
        for fn in [kernel, *functions.values()]:
            if fn is kernel:
                carriers = {a.name for a in kernel.local_arrays}
            elif fn.name in wanted:
                carriers = set(fn.array_params()) | {a.name for a in fn.local_arrays}
            else:
                continue
            for e in _calls(fn.body):
                if e.func not in wanted and any(isinstance(a, ir.Var) and a.name in carriers for a in e.args):
                    wanted.add(e.func)
                    changed = True
    return lambda f: f.name in wanted


def _calls(body: tuple[ir.Stmt, ...]) -> list[ir.Call]:
    return [e for e in all_expressions(body) if isinstance(e, ir.Call)]


def inline_calls(kernel: ir.Function, wanted: Callable[[ir.Function], bool]) -> ir.Function:
    """``kernel`` with every call of a device function for which ``wanted`` holds (or that calls one)
    replaced by the function's body. Raises CompileError for a call it cannot inline."""
    inliner = _Inliner(kernel, wanted)
    # a function calling a wanted one is wanted too (its body must reach the kernel's)
    changed = True
    while changed:
        changed = False
        for name, f in inliner.functions.items():
            if name not in inliner.wanted and _called(f.body, inliner.functions) & inliner.wanted:
                inliner.wanted.add(name)
                changed = True
    if not inliner.wanted:
        return kernel
    return inliner.run()
