"""Barrier regions for the CPU target: how a kernel body is cut at ``barrier()`` so one
thread can run a whole work-group ("work-group loops", as PoCL does).

The body becomes a tree of *runs* (straight code with no barrier inside, executed for
every work-item of the group before the next run starts) and *group-level* loops and ifs
(control flow that contains a barrier; it must be uniform across the group and is
decided once per group). Scalars that live from one run into another are promoted to
per-work-item arrays. Everything the CPU target cannot do is refused here with a
:class:`~hetero.core.errors.CompileError` at the user's line.
"""

from __future__ import annotations

import dataclasses
import linecache
from collections.abc import Iterator

from hetero.core.errors import CompileError

from hetero.compiler.ir import nodes as ir

#: Index built-ins whose value differs between the work-items of one group.
DIVERGENT_BUILTINS = frozenset({"local_id", "global_id"})
#: Variables a kernel written against CUDA takes as uniform by CUDA's contract
#: (:mod:`hetero.compiler.frontend.cuda_contract`): never tainted, never recomputed per group.
UNIFORM_PREFIX = "_uniform"


@dataclasses.dataclass
class Run:
    """Barrier-free statements, executed for every work-item of the group in turn."""

    stmts: tuple[ir.Stmt, ...]
    in_group_loop: bool
    final: bool = False  # no barrier can follow: a ``return`` here is allowed


@dataclasses.dataclass
class GroupFor:
    stmt: ir.For
    body: list[Node]


@dataclasses.dataclass
class GroupWhile:
    stmt: ir.While
    body: list[Node]


@dataclasses.dataclass
class GroupIf:
    stmt: ir.If
    then: list[Node]
    orelse: list[Node]


Node = Run | GroupFor | GroupWhile | GroupIf


@dataclasses.dataclass
class Plan:
    """How a kernel runs on one thread per work-group."""

    nodes: list[Node]
    runs: list[Run]
    #: Loop variables of group-level loops: one scalar per group.
    group_vars: frozenset[str]
    #: Scalars that cross a run boundary: one array slot per work-item.
    promoted: frozenset[str]
    #: Scalars recomputed from their one assignment wherever they are read, in order.
    remat: dict[str, ir.Expr] = dataclasses.field(default_factory=dict)

    @property
    def has_barrier(self) -> bool:
        return len(self.runs) != 1 or not isinstance(self.nodes[0], Run)


def error(message: str, loc: ir.Loc) -> CompileError:
    return CompileError(message, loc.file, loc.line, loc.col, linecache.getline(loc.file, loc.line))


# -- walking expressions -------------------------------------------------------------
def subexprs(e: ir.Expr) -> Iterator[ir.Expr]:
    """``e`` and every expression inside it."""
    yield e
    for field in dataclasses.fields(e):
        value = getattr(e, field.name)
        if isinstance(value, ir.Expr):
            yield from subexprs(value)
        elif isinstance(value, tuple):
            for item in value:
                if isinstance(item, ir.Expr):
                    yield from subexprs(item)


def stmt_exprs(s: ir.Stmt) -> tuple[ir.Expr, ...]:
    """The expressions a statement evaluates itself (not those of nested statements)."""
    if isinstance(s, ir.Assign):
        return (s.value,)
    if isinstance(s, ir.Store):
        return (*s.indices, s.value)
    if isinstance(s, (ir.If, ir.While)):
        return (s.cond,)
    if isinstance(s, ir.For):
        return (s.start, s.stop, s.step)
    if isinstance(s, (ir.Return, ir.ExprStmt)) and s.value is not None:
        return (s.value,)
    return ()


def vars_read(exprs: tuple[ir.Expr, ...]) -> set[str]:
    return {e.name for root in exprs for e in subexprs(root) if isinstance(e, ir.Var)}


def vars_referenced(body: tuple[ir.Stmt, ...]) -> set[str]:
    names: set[str] = set()
    for s in ir.walk_stmts(body):
        names |= vars_read(stmt_exprs(s))
        if isinstance(s, ir.Assign):
            names.add(s.name)
        elif isinstance(s, ir.For):
            names.add(s.var)
    return names


def vars_assigned(body: tuple[ir.Stmt, ...]) -> set[str]:
    return {s.name if isinstance(s, ir.Assign) else s.var for s in ir.walk_stmts(body) if isinstance(s, (ir.Assign, ir.For))}


def exposed_reads(body: tuple[ir.Stmt, ...], assigned: frozenset[str] = frozenset()) -> set[str]:
    """Variables ``body`` may read before it has assigned them (its live-in scalars)."""
    exposed: set[str] = set()

    def visit(stmts: tuple[ir.Stmt, ...], done: set[str]) -> set[str]:
        for s in stmts:
            exposed.update(vars_read(stmt_exprs(s)) - done)
            if isinstance(s, ir.Assign):
                done = done | {s.name}
            elif isinstance(s, ir.If):
                done = visit(s.then, set(done)) & visit(s.orelse, set(done))
            elif isinstance(s, ir.For):
                visit(s.body, done | {s.var})
            elif isinstance(s, ir.While):
                visit(s.body, set(done))
        return done

    visit(body, set(assigned))
    return exposed


def first_barrier(body: tuple[ir.Stmt, ...]) -> ir.Barrier:
    return next(s for s in ir.walk_stmts(body) if isinstance(s, ir.Barrier))


# -- divergence ----------------------------------------------------------------------
def divergent_functions(callees: tuple[ir.Function, ...]) -> set[str]:
    """Device functions whose result may differ between work-items given equal arguments."""
    result: set[str] = set()
    for fn in callees:  # each callee comes before its callers
        for s in ir.walk_stmts(fn.body):
            for root in stmt_exprs(s):
                if any(_divergent_leaf(e, result) for e in subexprs(root)):
                    result.add(fn.name)
    return result


def _divergent_leaf(e: ir.Expr, divergent_calls: set[str]) -> bool:
    if isinstance(e, ir.WorkItem):
        return e.name in DIVERGENT_BUILTINS
    if isinstance(e, (ir.Load, ir.Atomic, ir.Warp)):
        return True
    return isinstance(e, ir.Call) and e.func in divergent_calls


def divergent_vars(body: tuple[ir.Stmt, ...], divergent_calls: set[str]) -> set[str]:
    """Variables that may differ between the work-items of a group: those computed from
    local/global ids, array loads, atomics, or assigned under a condition that is."""
    tainted: set[str] = set()

    def divergent(e: ir.Expr) -> bool:
        return any(_divergent_leaf(x, divergent_calls) or (isinstance(x, ir.Var) and x.name in tainted) for x in subexprs(e))

    def escapes(stmts: tuple[ir.Stmt, ...], under: bool) -> bool:
        # a break/continue/return under a divergent condition makes the loop's trip count divergent
        for s in stmts:
            if isinstance(s, (ir.Break, ir.Continue, ir.Return)) and under:
                return True
            if isinstance(s, ir.If) and (escapes(s.then, under or divergent(s.cond)) or escapes(s.orelse, under or divergent(s.cond))):
                return True
        return False

    def visit(stmts: tuple[ir.Stmt, ...], context: bool) -> None:
        for s in stmts:
            if isinstance(s, ir.Assign):
                if (context or divergent(s.value)) and not s.name.startswith(UNIFORM_PREFIX):
                    tainted.add(s.name)
            elif isinstance(s, ir.If):
                inner = context or divergent(s.cond)
                visit(s.then, inner)
                visit(s.orelse, inner)
            elif isinstance(s, ir.For):
                inner = context or any(map(divergent, (s.start, s.stop, s.step))) or escapes(s.body, False)
                if inner:
                    tainted.add(s.var)
                visit(s.body, inner)
            elif isinstance(s, ir.While):
                visit(s.body, context or divergent(s.cond) or escapes(s.body, False))

    size = -1
    while size != len(tainted):
        size = len(tainted)
        visit(body, False)
    return tainted


# -- the plan ------------------------------------------------------------------------
def check_barriers(fn: ir.Function) -> None:
    """Refuse a kernel whose barriers not every work-item of a group reaches, on every device.

    The frontend runs this once per kernel, and every emitter before it prints anything, so
    one kernel is accepted or refused the same way on cpu, OpenCL, CUDA and HIP. A barrier
    may stand under control flow whose condition reads only values uniform across the
    work-group (sizes, group ids, shapes, scalar parameters, constants); one reading
    ``local_id``/``global_id``, array contents or anything computed from them is refused
    (CUDA and OpenCL leave it undefined; the CPU target cannot run it). Jumps the CPU
    target's region-by-region execution cannot make are refused everywhere too.
    """
    if not ir.contains_barrier(fn.body):
        return
    try:
        plan_kernel(fn)
    except CompileError as exc:
        raise CompileError(f"kernel {fn.name!r}: {exc.message}", exc.file, exc.line, exc.col, exc.source_line) from None


def plan_kernel(fn: ir.Function) -> Plan:
    """Cut ``fn``'s body at its barriers and decide where each scalar lives."""
    runs: list[Run] = []
    group_exprs: list[ir.Expr] = []
    group_vars: set[str] = set()
    checks: list[tuple[ir.Stmt, tuple[ir.Expr, ...]]] = []

    def build(body: tuple[ir.Stmt, ...], in_loop: bool) -> list[Node]:
        nodes: list[Node] = []
        pending: list[ir.Stmt] = []

        def flush() -> None:
            if pending:
                run = Run(tuple(pending), in_loop)
                runs.append(run)
                nodes.append(run)
                pending.clear()

        for s in body:
            if isinstance(s, ir.Barrier):
                flush()
            elif isinstance(s, (ir.If, ir.For, ir.While)) and ir.contains_barrier((s,)):
                flush()
                exprs = stmt_exprs(s)
                group_exprs.extend(exprs)
                checks.append((s, exprs))
                if isinstance(s, ir.If):
                    nodes.append(GroupIf(s, build(s.then, in_loop), build(s.orelse, in_loop)))
                elif isinstance(s, ir.For):
                    group_vars.add(s.var)
                    nodes.append(GroupFor(s, build(s.body, True)))
                else:
                    if isinstance(s.cond, ir.Const) and s.cond.value:
                        raise error(
                            "'while True:' holding barrier() never ends: no break or return may leave a loop "
                            "that contains barrier() (the CPU target runs it region by region, so hetero "
                            "refuses that on every device). Put the exit in the condition: "
                            "done = False; while not done: ...; barrier(); done = <a uniform test>",
                            s.loc,
                        )
                    nodes.append(GroupWhile(s, build(s.body, True)))
            else:
                pending.append(s)
        flush()
        return nodes

    nodes = build(fn.body, False)
    if not nodes:
        empty = Run((), False)
        nodes, runs = [empty], [empty]
    if isinstance(nodes[-1], Run):
        nodes[-1].final = True

    _check_uniform(fn, checks)
    for run in runs:
        _check_exits(run, has_barrier=len(runs) > 1 or not isinstance(nodes[0], Run))
    for run in runs:
        clash = sorted(vars_assigned(run.stmts) & group_vars)
        if clash:
            loc = next(
                s.loc
                for s in ir.walk_stmts(run.stmts)
                if isinstance(s, (ir.Assign, ir.For)) and clash[0] in (getattr(s, "name", None), getattr(s, "var", None))
            )
            raise error(
                f"'{clash[0]}' is the variable of a loop that contains barrier() and cannot also be assigned "
                "inside it (the CPU target cannot run that, so hetero refuses it on every device); use another variable",
                loc,
            )

    # A scalar set once at the top of the kernel from ids, sizes, shapes and parameters
    # is recomputed where needed ("rematerialised"); any other scalar that a run may read
    # before assigning it (its value comes from an earlier run, or from the previous
    # iteration of a group-level loop), or that a group-level condition reads, gets one
    # slot per work-item.
    remat = rematerialisable(fn)
    promoted = vars_read(tuple(group_exprs))
    for run in runs:
        promoted |= exposed_reads(run.stmts)
    promoted = (promoted & set(fn.locals)) - group_vars - set(remat)
    if len(nodes) == 1 and isinstance(nodes[0], Run):
        promoted = set()  # one run, no barrier: nothing crosses one (a loop carries its values itself)
    return Plan(nodes, runs, frozenset(group_vars), frozenset(promoted), remat)


_PURE = (ir.Const, ir.WorkItem, ir.Shape, ir.BinOp, ir.UnaryOp, ir.Compare, ir.Logical, ir.Select, ir.Cast, ir.Math)


def rematerialisable(fn: ir.Function) -> dict[str, ir.Expr]:
    """Scalars assigned exactly once, at the top level of the kernel, from work-item ids,
    sizes, shapes, unassigned parameters and other such scalars: the same value wherever
    it is recomputed. In assignment order."""
    counts: dict[str, int] = {}
    for s in ir.walk_stmts(fn.body):
        if isinstance(s, (ir.Assign, ir.For)):
            name = s.name if isinstance(s, ir.Assign) else s.var
            counts[name] = counts.get(name, 0) + 1
    params = {p.name for p in fn.params}
    found: dict[str, ir.Expr] = {}
    for s in fn.body:
        if not isinstance(s, ir.Assign) or counts[s.name] != 1 or s.name in params or s.name.startswith(UNIFORM_PREFIX):
            continue
        if all(isinstance(e, _PURE) or (isinstance(e, ir.Var) and (e.name in found or (e.name in params and e.name not in counts)))
               for e in subexprs(s.value)):  # fmt: skip
            found[s.name] = s.value
    return found


def divergent_expr_test(fn: ir.Function):  # type: ignore[no-untyped-def]
    """A test: whether an expression of ``fn`` may differ between the work-items of a group."""
    divergent_calls = divergent_functions(fn.callees)
    tainted = divergent_vars(fn.body, divergent_calls)

    def divergent(e: ir.Expr) -> bool:
        return any(_divergent_leaf(x, divergent_calls) or (isinstance(x, ir.Var) and x.name in tainted) for x in subexprs(e))

    return divergent


def _check_uniform(fn: ir.Function, checks: list[tuple[ir.Stmt, tuple[ir.Expr, ...]]]) -> None:
    if not checks:
        return
    divergent_calls = divergent_functions(fn.callees)
    tainted = divergent_vars(fn.body, divergent_calls)
    for stmt, exprs in checks:
        for root in exprs:
            for e in subexprs(root):
                why = ""
                if isinstance(e, ir.WorkItem) and e.name in DIVERGENT_BUILTINS:
                    why = f"{e.name}({e.axis})"
                elif isinstance(e, ir.Load):
                    why = f"a load from '{e.array}'"
                elif isinstance(e, ir.Atomic):
                    why = f"an atomic on '{e.array}'"
                elif isinstance(e, ir.Call) and e.func in divergent_calls:
                    why = f"a call of '{e.func}', which reads ids or arrays"
                elif isinstance(e, ir.Var) and e.name in tainted:
                    why = f"'{e.name}', which is computed from local_id/global_id or array contents"
                if why:
                    kind = {ir.If: "if", ir.For: "for", ir.While: "while"}[type(stmt)]
                    raise error(
                        f"barrier() inside control flow that depends on the work-item (the {kind} at line "
                        f"{stmt.loc.line} uses {why}): every work-item of a group must reach the same "
                        "barriers; make the condition uniform across the group or move barrier() out of it",
                        first_barrier((stmt,)).loc,
                    )


def _check_exits(run: Run, has_barrier: bool) -> None:
    """Refuse a break/continue that leaves a run, and a return that skips a later barrier."""

    def visit(stmts: tuple[ir.Stmt, ...], in_loop: bool) -> None:
        for s in stmts:
            if isinstance(s, (ir.Break, ir.Continue)) and not in_loop:
                word = "break" if isinstance(s, ir.Break) else "continue"
                raise error(
                    f"'{word}' here leaves a loop that contains barrier(); the CPU target runs a "
                    "work-group's items region by region between barriers and cannot jump across one, "
                    "so hetero refuses it on every device. Restructure the loop (e.g. a uniform while condition)",
                    s.loc,
                )
            if isinstance(s, ir.Return) and has_barrier and not run.final:
                raise error(
                    "'return' before a barrier(): every work-item of a group must reach each barrier "
                    "(OpenCL and CUDA leave this undefined); guard the work with an if instead",
                    s.loc,
                )
            if isinstance(s, ir.If):
                visit(s.then, in_loop)
                visit(s.orelse, in_loop)
            elif isinstance(s, (ir.For, ir.While)):
                visit(s.body, True)

    visit(run.stmts, False)
