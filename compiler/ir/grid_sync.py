"""Grid-wide synchronisation on every device: a kernel cut at its ``GridSync`` statements into
phases that one launch after another runs, each work-item resuming where it stopped.

No portable API waits for a whole launch inside a kernel (CUDA's needs a cooperative launch and
every block resident at once; OpenCL has none), but the end of a launch is such a wait. So the
kernel becomes a resumable one: every work-item keeps, in device memory, where it stopped
(``_grid_state``: 0 not started, ``k`` stopped at the k-th sync, -1 finished) and its local
variables (``_grid_spill_<type>_<count>``: one row per work-item). A launch restores them, skips
the code before the resume point (control flow is structured: an ``if`` or loop is entered
without its test when the point lies inside it), runs to the next sync, saves, records the phase
in ``_grid_more`` and returns. The launch (:mod:`hetero.kernels.kernel`) repeats until a phase ends with
no work-item stopped at a sync. Between phases every write of the previous one is visible, as
after a grid sync; work-items that returned count as arrived, as in CUDA.

Refused with a CompileError: a kernel with grid syncs that also uses work-group barriers or
shared memory (its contents would not outlive a phase), and ``continue`` in a ``for`` loop that
holds a grid sync.
"""

from __future__ import annotations

import dataclasses
import re

from hetero.core.errors import CompileError
from hetero.core.types import ArrayType, ScalarType, bool_t, i64, scalar_type, u8

from hetero.compiler.ir import nodes as ir

STATE = "_grid_state"
PHASE = "_grid_phase"
MORE = "_grid_more"
SPILL_PREFIX = "_grid_spill_"
_PC, _RESUMING, _GID = "_grid_pc", "_grid_resuming", "_grid_gid"
_SPILL = re.compile(r"^_grid_spill_([a-z0-9]+)_(\d+)$")


def has_grid_sync(fn: ir.Function) -> bool:
    return any(isinstance(s, ir.GridSync) for s in ir.walk_stmts(fn.body))


def spill_layout(name: str) -> tuple[str, int] | None:
    """``(type name, slots)`` of a spill parameter's name, None for any other name."""
    found = _SPILL.match(name)
    return (found.group(1), int(found.group(2))) if found else None


def _error(message: str, loc: ir.Loc) -> CompileError:
    return CompileError(message, loc.file, loc.line, loc.col)


def _const(value: int | bool, t: ScalarType = i64) -> ir.Const:
    return ir.Const(t, value)


def _not(e: ir.Expr) -> ir.Expr:
    return ir.UnaryOp(bool_t, "not", e)


def _and(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Logical(bool_t, "and", a, b)


def _or(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.Logical(bool_t, "or", a, b)


class _Cutter:
    def __init__(self, fn: ir.Function) -> None:
        self.fn = fn
        self.labels: dict[int, int] = {}  # id(GridSync) -> its number, from 1
        for s in ir.walk_stmts(fn.body):
            if isinstance(s, ir.GridSync):
                self.labels[id(s)] = len(self.labels) + 1
        self.locals = dict(fn.locals)
        self.loops: dict[int, int] = {}  # id(For holding a sync) -> its number: its helper variables
        for s in ir.walk_stmts(fn.body):
            if isinstance(s, ir.For) and any(isinstance(x, ir.GridSync) for x in ir.walk_stmts(s.body)):
                n = self.loops[id(s)] = len(self.loops)
                for name in (f"_grid_it{n}", f"_grid_stop{n}", f"_grid_step{n}"):
                    self.locals[name] = self.locals[s.var]
        self.pc = ir.Var(i64, _PC)
        self.resuming = ir.Var(bool_t, _RESUMING)
        self.gid = ir.Var(i64, _GID)
        self.slots: dict[str, int] = {}  # variable -> its column in its type's spill array
        self.layout = self.spilled()

    def inside(self, body: tuple[ir.Stmt, ...]) -> list[int]:
        return [self.labels[id(s)] for s in ir.walk_stmts(body) if isinstance(s, ir.GridSync)]

    def resume_into(self, body: tuple[ir.Stmt, ...]) -> ir.Expr:
        """``resuming and pc is one of the syncs in body``."""
        test: ir.Expr | None = None
        for k in self.inside(body):
            one = ir.Compare(bool_t, "==", self.pc, _const(k))
            test = one if test is None else _or(test, one)
        assert test is not None
        return _and(self.resuming, test)

    # -- statements ------------------------------------------------------------------------
    def block(self, body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        plain: list[ir.Stmt] = []

        def flush() -> None:
            if plain:
                out.append(ir.If(plain[0].loc, _not(self.resuming), tuple(plain)))
                plain.clear()

        for s in body:
            if self.inside((s,)):
                flush()
                out.extend(self.stmt(s))
            else:
                plain.extend(self.finish_returns(s))
        flush()
        return tuple(out)

    def finish_returns(self, s: ir.Stmt) -> list[ir.Stmt]:
        """``s`` with each ``return`` marking the work-item finished first."""
        if isinstance(s, ir.Return):
            return [self.mark(-1, s.loc), s]
        if isinstance(s, ir.If):
            return [dataclasses.replace(s, then=self.plain(s.then), orelse=self.plain(s.orelse))]
        if isinstance(s, (ir.For, ir.While)):
            return [dataclasses.replace(s, body=self.plain(s.body))]
        return [s]

    def plain(self, body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        return tuple(x for s in body for x in self.finish_returns(s))

    def mark(self, value: int | ir.Expr, loc: ir.Loc) -> ir.Stmt:
        expr = _const(value) if isinstance(value, int) else value
        return ir.Store(loc, STATE, (self.gid,), expr)

    def stmt(self, s: ir.Stmt) -> list[ir.Stmt]:
        if isinstance(s, ir.GridSync):
            k = self.labels[id(s)]
            arrive = [ir.If(s.loc, ir.Compare(bool_t, "==", self.pc, _const(k)), (ir.Assign(s.loc, _RESUMING, _const(False, bool_t)),))]
            suspend = [*self.save(s.loc), self.mark(k, s.loc), ir.Store(s.loc, MORE, (_const(0),), ir.Var(i64, PHASE)),
                       ir.Return(s.loc)]
            return [ir.If(s.loc, self.resuming, tuple(arrive), tuple(suspend))]
        if isinstance(s, ir.If):
            cond = _or(self.resume_into(s.then), _and(_not(self.resuming), s.cond)) if self.inside(s.then) \
                else _and(_not(self.resuming), s.cond)
            return [ir.If(s.loc, cond, self.block(s.then), self.block(s.orelse))]
        if isinstance(s, ir.While):
            cond = _or(self.resume_into(s.body), _and(_not(self.resuming), s.cond))
            return [ir.While(s.loc, cond, self.block(s.body))]
        if isinstance(s, ir.For):
            return self.for_loop(s)
        raise AssertionError(f"a grid sync inside {type(s).__name__}")  # pragma: no cover

    def for_loop(self, s: ir.For) -> list[ir.Stmt]:
        for inner in ir.walk_stmts(s.body):
            if isinstance(inner, ir.Continue) and not _in_nested_loop(s.body, inner):
                raise _error("'continue' in a for loop that holds a grid sync is not supported; use an if", inner.loc)
        n = self.loops[id(s)]
        t = self.locals[s.var]
        it, stop, step = f"_grid_it{n}", f"_grid_stop{n}", f"_grid_step{n}"
        vi, vs, vt = ir.Var(t, it), ir.Var(t, stop), ir.Var(t, step)
        zero = ir.Const(t, 0)
        going: ir.Expr
        if isinstance(s.step, ir.Const):
            going = ir.Compare(bool_t, "<" if ir.number(s.step) > 0 else ">", vi, vs)
        else:
            going = ir.Select(bool_t, ir.Compare(bool_t, ">", vt, zero), ir.Compare(bool_t, "<", vi, vs),
                              ir.Compare(bool_t, ">", vi, vs))
        start = ir.If(s.loc, _not(self.resuming), (ir.Assign(s.loc, it, s.start), ir.Assign(s.loc, stop, s.stop),
                                                   ir.Assign(s.loc, step, s.step)))
        body = (ir.Assign(s.loc, s.var, vi), *s.body, ir.Assign(s.loc, it, ir.BinOp(t, "+", vi, vt)))
        # the first statement (var = it) has no sync, so block() guards it; so is the increment
        loop = ir.While(s.loc, _or(self.resume_into(s.body), _and(_not(self.resuming), going)), self.block(body))
        return [start, loop]

    # -- state -----------------------------------------------------------------------------
    def spilled(self) -> dict[str, list[str]]:
        """Type name -> its variables, each with its slot, in a stable order."""
        by_type: dict[str, list[str]] = {}
        for name in sorted(self.locals):
            if name in (_PC, _RESUMING, _GID):
                continue
            key = _storage(self.locals[name]).name
            self.slots[name] = len(by_type.setdefault(key, []))
            by_type[key].append(name)
        return by_type

    def save(self, loc: ir.Loc) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for key, names in self.layout.items():
            for name in names:
                t = self.locals[name]
                value: ir.Expr = ir.Var(t, name)
                if t != _storage(t):
                    value = ir.Cast(_storage(t), value)
                out.append(ir.Store(loc, self.spill_name(key), (self.gid, _const(self.slots[name])), value))
        return out

    def restore(self, loc: ir.Loc) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for key, names in self.layout.items():
            for name in names:
                t = self.locals[name]
                value: ir.Expr = ir.Load(_storage(t), self.spill_name(key), (self.gid, _const(self.slots[name])))
                if t != _storage(t):
                    value = ir.Compare(bool_t, "!=", value, ir.Const(u8, 0)) if t == bool_t else ir.Cast(t, value)
                out.append(ir.Assign(loc, name, value))
        return out

    def spill_name(self, key: str) -> str:
        return f"{SPILL_PREFIX}{key}_{len(self.layout[key])}"

    def cut(self) -> ir.Function:
        fn = self.fn
        loc = fn.loc
        for s in ir.walk_stmts(fn.body):
            if isinstance(s, ir.Barrier):
                raise _error("a kernel with a grid sync cannot use work-group barriers too (not supported yet)", s.loc)
        if fn.local_arrays:
            raise _error(f"a kernel with a grid sync cannot use shared memory ({fn.local_arrays[0].name}): its contents "
                         "would not outlive the sync here (not supported yet)", loc)
        body = self.block(fn.body)
        gid: ir.Expr = ir.WorkItem(i64, "global_id", 2)
        gid = ir.BinOp(i64, "+", ir.WorkItem(i64, "global_id", 1), ir.BinOp(i64, "*", ir.WorkItem(i64, "global_size", 1), gid))
        gid = ir.BinOp(i64, "+", ir.WorkItem(i64, "global_id", 0), ir.BinOp(i64, "*", ir.WorkItem(i64, "global_size", 0), gid))
        head: list[ir.Stmt] = [
            ir.Assign(loc, _GID, gid),
            ir.Assign(loc, _PC, ir.Load(i64, STATE, (self.gid,))),
            ir.If(loc, ir.Compare(bool_t, "<", self.pc, _const(0)), (ir.Return(loc),)),
            ir.Assign(loc, _RESUMING, ir.Compare(bool_t, ">", self.pc, _const(0))),
            ir.If(loc, self.resuming, tuple(self.restore(loc))),
        ]
        new_body = (*head, *body, self.mark(-1, loc))
        params = [*fn.params, ir.Param(STATE, ArrayType(i64, 1))]
        for key in self.layout:
            params.append(ir.Param(self.spill_name(key), ArrayType(_storage_by_name(key), 2)))
        params += [ir.Param(PHASE, i64), ir.Param(MORE, ArrayType(i64, 1))]
        locals_ = {**self.locals, _PC: i64, _RESUMING: bool_t, _GID: i64}
        return dataclasses.replace(fn, params=tuple(params), locals=locals_, body=new_body)


def _storage(t: ScalarType) -> ScalarType:
    return u8 if t == bool_t else t


def _storage_by_name(name: str) -> ScalarType:
    return scalar_type(name)


def _in_nested_loop(body: tuple[ir.Stmt, ...], target: ir.Stmt) -> bool:
    for s in body:
        if isinstance(s, (ir.For, ir.While)) and any(x is target for x in ir.walk_stmts(s.body)):
            return True
        if isinstance(s, ir.If) and (_in_nested_loop(s.then, target) or _in_nested_loop(s.orelse, target)):
            return True
    return False


def cut(fn: ir.Function) -> ir.Function:
    """``fn`` made resumable at its grid syncs (see the module docstring); ``fn`` itself when it has none."""
    if not has_grid_sync(fn):
        return fn
    if not fn.is_kernel:
        raise _error("grid syncs are only allowed in kernels", fn.loc)
    return _Cutter(fn).cut()
