"""Warps where a device has none: CUDA's warp operations through work-group memory and barriers.

CUDA groups the threads of a block into warps of 32 consecutive linear ids that run in lock
step, and ``__shfl_down_sync`` or ``__ballot_sync`` exchange values inside one warp with no
barrier. OpenCL devices without a matching subgroup, and the CPU target, which runs a
work-group one work-item after another, have no such thing. Here a kernel's warp operations
(:class:`~hetero.compiler.ir.nodes.Warp`) become exchanges through work-group memory: every
work-item writes its value at its linear local id, a barrier, every work-item reads its
partner's slot, a barrier. The result is CUDA's, lane for lane, on every device.

A barrier must be reached by every work-item of the group, but CUDA runs warp operations
under divergent control flow (``if (tid < 32) { v += tile.shfl_down(v, 16); ... }``). So the
kernel is first put into *predicated* form wherever a warp operation (or a ``return``) is:

* an ``if`` whose condition may differ between work-items is flattened: each work-item computes
  whether it takes the branch, both branches run in every work-item, and each statement in
  them takes effect only where its predicate holds (assignments to values that are the same
  in every work-item run everywhere, so uniform loop bounds stay uniform);
* a loop whose trip count may differ runs until no work-item of the group still iterates (a
  vote through work-group memory, taken as uniform), each iteration predicated on the work-items
  still in it; ``break``, ``continue`` and ``return`` become per-work-item flags;
* a warp operation itself runs in every work-item at a point all of them reach; the arguments
  of a work-item outside its predicate are not evaluated (a load that would be out of bounds
  is not made), and what it contributes is ignored, as CUDA ignores inactive lanes.

Statements without a warp operation keep their shape; a kernel without one is unchanged.
Work-groups may hold up to :data:`MAX_GROUP` work-items (CUDA's own limit per block).

On a target with 32-wide sub-groups (``subgroups32``: Intel's OpenCL runtimes) the predicated
form stays, and each vote becomes sub-group ballots (:data:`ir.SUBGROUP_OPS`) with no barrier,
where the sub-groups are CUDA's warps; each shuffle becomes a sub-group shuffle too where the
target's shuffles are fast (``subgroup_shuffles32``: not Intel's CPU runtime, where a 32-wide
shuffle is about ten times slower than the exchange through work-group memory). That depends on the launch: Intel's
runtimes cut sub-groups along dimension 0 only, so a block of 16 x 4 gets four sub-groups of 16.
So the kernel asks once, at its start, whether every work-item's ``sub_group_id * 32 +
sub_group_local_id`` is its linear local id (a vote through work-group memory, the same in the
whole group), and each warp operation takes the sub-group path where that holds and the
work-group memory path where it does not: the same answer, lane for lane, either way.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from hetero.core.types import ScalarType, bool_t, f32, i32, i64, u32

from hetero.compiler.ir import nodes as ir
from hetero.compiler.emit.cpu_regions import UNIFORM_PREFIX, divergent_expr_test, stmt_exprs, subexprs
from hetero.compiler.ir.inline import inline_calls
from hetero.compiler.ir.queries import map_children

_BOUNDS_FAIL = "_hetero_bounds_fail"  # hetero.compiler.ir.bounds.FAIL (that module imports this one's neighbours)
#: The most work-items a work-group of a kernel with warp operations may have here (CUDA's own
#: limit per block), and so the slots of each exchange array.
MAX_GROUP = 1024
FEATURE = "warps"
_PREFIX = "_warp_"
TRUE = ir.Const(bool_t, True)
FALSE = ir.Const(bool_t, False)


def _warp_ops(body: tuple[ir.Stmt, ...]) -> set[str]:
    """The warp (and sub-group) operations ``body`` holds."""
    return {e.op for s in ir.walk_stmts(body) for root in stmt_exprs(s) for e in subexprs(root) if isinstance(e, ir.Warp)}


def has_warp(body: tuple[ir.Stmt, ...]) -> bool:
    return any(isinstance(e, ir.Warp) for s in ir.walk_stmts(body) for root in stmt_exprs(s) for e in subexprs(root))


def _own_warps(s: ir.Stmt) -> bool:
    return any(isinstance(e, ir.Warp) for root in stmt_exprs(s) for e in subexprs(root))


def _has_return(body: tuple[ir.Stmt, ...]) -> bool:
    return any(isinstance(s, ir.Return) for s in ir.walk_stmts(body))


def _has_jump(body: tuple[ir.Stmt, ...]) -> bool:
    """A ``break`` or ``continue`` of the loop around ``body`` (not of a loop inside it)."""
    for s in body:
        if isinstance(s, (ir.Break, ir.Continue)):
            return True
        if isinstance(s, ir.If) and (_has_jump(s.then) or _has_jump(s.orelse)):
            return True
    return False


def _effects(e: ir.Expr) -> bool:
    # a checked access's failure record (hetero.compiler.ir.bounds) is no effect of the program's:
    # a uniform value that reads an array stays computed everywhere, in checked mode too
    return any(isinstance(x, ir.Atomic) or (isinstance(x, ir.Call) and x.func != _BOUNDS_FAIL) for x in subexprs(e))


def _and(a: ir.Expr | None, b: ir.Expr) -> ir.Expr:
    return b if a is None else ir.Logical(bool_t, "and", a, b)


def _not(e: ir.Expr) -> ir.Expr:
    return ir.UnaryOp(bool_t, "not", e)


def _i64(value: int) -> ir.Const:
    return ir.Const(i64, value)


def _bin(op: str, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    return ir.BinOp(a.type, op, a, b)


def linear_id() -> ir.Expr:
    """The work-item's linear local id (i64), the numbering CUDA cuts into warps."""
    lid: ir.Expr = ir.WorkItem(i64, "local_id", 2)
    for axis in (1, 0):
        lid = _bin("+", _bin("*", lid, ir.WorkItem(i64, "local_size", axis)), ir.WorkItem(i64, "local_id", axis))
    return lid


def warp_lane() -> ir.Expr:
    """The work-item's lane in its warp (i64): CUDA's ``laneid``."""
    return _bin("&", linear_id(), _i64(ir.WARP_SIZE - 1))


def _group_size() -> ir.Expr:
    return _bin("*", _bin("*", ir.WorkItem(i64, "local_size", 0), ir.WorkItem(i64, "local_size", 1)),
                ir.WorkItem(i64, "local_size", 2))


@dataclasses.dataclass
class _Loop:
    """Flags of a loop in predicated form: per work-item, did it break, did it continue."""

    brk: str | None
    cont: str | None


class _Emulation:
    def __init__(self, fn: ir.Function, subgroups: bool = False, shuffles: bool = False) -> None:
        self.fn = fn
        self.shuffles = subgroups and shuffles
        self.locals = dict(fn.locals)
        self.arrays = list(fn.local_arrays)
        original = divergent_expr_test(fn)
        known = set(fn.locals) | {p.name for p in fn.params}
        # names made here are per work-item (predicates, flags, exchanged values): never uniform
        self.divergent = lambda e: original(e) or any(isinstance(x, ir.Var) and x.name not in known for x in subexprs(e))
        self.counter = 0
        self.alive = self.fresh("alive", bool_t) if _has_return(fn.body) else None
        #: Where sub-groups serve some warp operation of the kernel: the (uniform) name of "this
        #: launch's sub-groups are warps". A kernel with none keeps its default sub-group size.
        served = _VOTES | (_SHUFFLES if self.shuffles else frozenset())
        wanted = subgroups and bool(_warp_ops(fn.body) & served)
        self.native = self.fresh("subgroups", bool_t, UNIFORM_PREFIX + _PREFIX) if wanted else None

    # -- names -----------------------------------------------------------------------
    def fresh(self, stem: str, t: ScalarType, prefix: str = _PREFIX) -> str:
        while True:
            name = f"{prefix}{stem}{self.counter}"
            self.counter += 1
            if name not in self.locals:
                self.locals[name] = t
                return name

    def exchange(self, t: ScalarType) -> str:
        name = f"{_PREFIX}x_{t.name}"
        if all(a.name != name for a in self.arrays):
            self.arrays.append(ir.LocalArray(name, t, (MAX_GROUP,)))
        return name

    # -- the kernel ------------------------------------------------------------------
    def run(self) -> ir.Function:
        body: list[ir.Stmt] = []
        if self.alive is not None:
            body.append(ir.Assign(self.fn.loc, self.alive, TRUE))
        if self.native is not None:
            body += self.subgroups_are_warps(self.fn.loc)
        body += self.block(self.fn.body, None, None)
        features = self.fn.features | {FEATURE, "barrier"}
        return dataclasses.replace(self.fn, body=tuple(body), locals=self.locals, local_arrays=tuple(self.arrays),
                                   features=frozenset(features))

    def needs(self, s: ir.Stmt, pred: ir.Expr | None, loop: _Loop | None) -> bool:
        body = (s,)
        return (has_warp(body) or _has_return(body) or (loop is not None and _has_jump(body))
                or (pred is not None and ir.contains_barrier(body)))

    def guard(self, s: ir.Stmt, pred: ir.Expr | None) -> list[ir.Stmt]:
        if pred is None:
            return [s]
        if isinstance(s, ir.Barrier):
            return [s]  # predicated code runs in every work-item: the barrier is reached by all
        if (isinstance(s, ir.Assign) and s.name in self.fn.locals and not self.divergent(ir.Var(self.locals[s.name], s.name))
                and not self.divergent(s.value) and not _effects(s.value)):
            return [s]  # the same value in every work-item: compute it everywhere, bounds stay uniform
        return [ir.If(s.loc, pred, (s,))]

    def refresh(self, pred: ir.Expr | None, loop: _Loop | None, loc: ir.Loc) -> tuple[list[ir.Stmt], ir.Expr | None]:
        """The predicate after a statement that may have ended the work-item, the loop or the iteration."""
        flags: ir.Expr | None = None if self.alive is None else ir.Var(bool_t, self.alive)
        if loop is not None:
            for flag in (loop.brk, loop.cont):
                if flag is not None:
                    flags = _and(flags, _not(ir.Var(bool_t, flag)))
        if flags is None:
            return [], pred
        name = self.fresh("p", bool_t)
        return [ir.Assign(loc, name, _and(pred, flags))], ir.Var(bool_t, name)

    def block(self, body: tuple[ir.Stmt, ...], pred: ir.Expr | None, loop: _Loop | None) -> list[ir.Stmt]:
        out: list[ir.Stmt] = []
        for s in body:
            if not self.needs(s, pred, loop):
                out += self.guard(s, pred)
                continue
            ends = _has_return((s,)) or (loop is not None and _has_jump((s,)))
            out += self.statement(s, pred, loop)
            if ends:
                more, pred = self.refresh(pred, loop, s.loc)
                out += more
        return out

    def statement(self, s: ir.Stmt, pred: ir.Expr | None, loop: _Loop | None) -> list[ir.Stmt]:
        loc = s.loc
        if isinstance(s, ir.Return):
            if s.value is not None:
                raise ValueError("internal: a kernel returns no value")
            assert self.alive is not None
            return self.guard(ir.Assign(loc, self.alive, FALSE), pred)
        if isinstance(s, (ir.Break, ir.Continue)):
            assert loop is not None
            flag = loop.brk if isinstance(s, ir.Break) else loop.cont
            assert flag is not None
            return self.guard(ir.Assign(loc, flag, TRUE), pred)
        if isinstance(s, ir.If):
            out, cond = self.hoist(s.cond, pred, loc)
            if not self.divergent(s.cond) and not _own_warps(s):
                return out + [ir.If(loc, cond, tuple(self.block(s.then, pred, loop)),
                                    tuple(self.block(s.orelse, pred, loop)))]
            taken, other = self.fresh("p", bool_t), self.fresh("p", bool_t)
            out += [ir.Assign(loc, taken, _and(pred, cond)), ir.Assign(loc, other, _and(pred, _not(ir.Var(bool_t, taken))))]
            out += self.block(s.then, ir.Var(bool_t, taken), loop)
            out += self.block(s.orelse, ir.Var(bool_t, other), loop)
            return out
        if isinstance(s, ir.While):
            return self.while_loop(s, pred)
        if isinstance(s, ir.For):
            return self.for_loop(s, pred)
        if isinstance(s, (ir.Assign, ir.Store, ir.ExprStmt)):
            if isinstance(s, ir.ExprStmt) and isinstance(s.value, ir.Warp) and s.value.op == "sync":
                return [ir.Barrier(loc)]  # __syncwarp: the group's barrier orders the warp's memory too
            out = []
            if isinstance(s, ir.Assign):
                more, value = self.hoist(s.value, pred, loc)
                out += more + self.guard(dataclasses.replace(s, value=value), pred)
            elif isinstance(s, ir.Store):
                indices: list[ir.Expr] = []
                for index in s.indices:
                    more, index = self.hoist(index, pred, loc)
                    out += more
                    indices.append(index)
                more, value = self.hoist(s.value, pred, loc)
                out += more + self.guard(ir.Store(loc, s.array, tuple(indices), value), pred)
            else:
                more, value = self.hoist(s.value, pred, loc)
                out += more + self.guard(ir.ExprStmt(loc, value), pred)
            return out
        if isinstance(s, ir.Barrier):
            return [s]
        raise ValueError(f"internal: no predicated form for {type(s).__name__}")

    # -- loops -----------------------------------------------------------------------
    def uniform_loop(self, s: ir.For | ir.While) -> bool:
        if _has_return(s.body) or _has_jump(s.body) or _own_warps(s):
            return False
        if isinstance(s, ir.While):
            return not self.divergent(s.cond)
        return not any(self.divergent(e) for e in (s.start, s.stop, s.step))

    def flags(self, body: tuple[ir.Stmt, ...], loc: ir.Loc) -> tuple[_Loop, list[ir.Stmt]]:
        brk = self.fresh("break", bool_t) if any(isinstance(x, ir.Break) for x in _jumps(body)) else None
        cont = self.fresh("continue", bool_t) if any(isinstance(x, ir.Continue) for x in _jumps(body)) else None
        init: list[ir.Stmt] = [ir.Assign(loc, flag, FALSE) for flag in (brk, cont) if flag is not None]
        return _Loop(brk, cont), init

    def staying(self, active: str, loop: _Loop, loc: ir.Loc) -> ir.Expr:
        """Whether a work-item active in this iteration takes the next one's test."""
        stay: ir.Expr = ir.Var(bool_t, active)
        if loop.brk is not None:
            stay = _and(stay, _not(ir.Var(bool_t, loop.brk)))
        if self.alive is not None:
            stay = _and(stay, ir.Var(bool_t, self.alive))
        return stay

    def while_loop(self, s: ir.While, pred: ir.Expr | None) -> list[ir.Stmt]:
        loc = s.loc
        if self.uniform_loop(s):
            return [ir.While(loc, s.cond, tuple(self.block(s.body, pred, None)))]
        loop, out = self.flags(s.body, loc)
        inside, active = self.fresh("in", bool_t), self.fresh("p", bool_t)
        out.append(ir.Assign(loc, inside, pred if pred is not None else TRUE))
        test = self.loop_test(ir.Var(bool_t, inside), s.cond, active, loc)
        body: list[ir.Stmt] = [ir.Assign(loc, loop.cont, FALSE)] if loop.cont is not None else []
        body += self.block(s.body, ir.Var(bool_t, active), loop)
        body.append(ir.Assign(loc, inside, self.staying(active, loop, loc)))
        more, any_left = test
        out += more
        again, _ = self.loop_test(ir.Var(bool_t, inside), s.cond, active, loc, any_left)
        return out + [ir.While(loc, ir.Var(bool_t, any_left), tuple(body + again))]

    def loop_test(self, inside: ir.Expr, cond: ir.Expr, active: str, loc: ir.Loc,
                  vote: str | None = None) -> tuple[list[ir.Stmt], str]:
        """Each work-item's ``active = inside and cond``, then whether any in the group is (uniform)."""
        out, cond = self.hoist(cond, inside, loc)
        out.append(ir.Assign(loc, active, _and(inside, cond)))
        vote = vote or self.fresh("any", bool_t, UNIFORM_PREFIX + _PREFIX)
        return out + self.group_any(ir.Var(bool_t, active), vote, loc), vote

    def for_loop(self, s: ir.For, pred: ir.Expr | None) -> list[ir.Stmt]:
        loc = s.loc
        out: list[ir.Stmt] = []
        bounds: list[ir.Expr] = []
        for bound in (s.start, s.stop, s.step):  # range() evaluates them once, in order
            more, bound = self.hoist(bound, pred, loc)
            out += more
            bounds.append(bound)
        start, stop, step = bounds
        if self.uniform_loop(dataclasses.replace(s, start=start, stop=stop, step=step)):
            return out + [ir.For(loc, s.var, start, stop, step, tuple(self.block(s.body, pred, None)))]
        t = self.locals[s.var]
        counter, end, stride = self.fresh("i", t), self.fresh("stop", t), self.fresh("step", t)
        setup: tuple[ir.Stmt, ...] = (ir.Assign(loc, counter, start), ir.Assign(loc, end, stop), ir.Assign(loc, stride, step))
        out += list(setup) if pred is None else [ir.If(loc, pred, setup)]
        i, n, d = ir.Var(t, counter), ir.Var(t, end), ir.Var(t, stride)
        zero = ir.Const(t, 0)
        if isinstance(step, ir.Const):
            cond: ir.Expr = ir.Compare(bool_t, "<" if ir.number(step) > 0 else ">", i, n)
        else:
            cond = ir.Select(bool_t, ir.Compare(bool_t, ">", d, zero), ir.Compare(bool_t, "<", i, n),
                             ir.Logical(bool_t, "and", ir.Compare(bool_t, "<", d, zero), ir.Compare(bool_t, ">", i, n)))
        loop, flags = self.flags(s.body, loc)
        out += flags
        inside, active = self.fresh("in", bool_t), self.fresh("p", bool_t)
        out.append(ir.Assign(loc, inside, pred if pred is not None else TRUE))
        more, any_left = self.loop_test(ir.Var(bool_t, inside), cond, active, loc)
        out += more
        now = ir.Var(bool_t, active)
        body: list[ir.Stmt] = [ir.Assign(loc, loop.cont, FALSE)] if loop.cont is not None else []
        body.append(ir.If(loc, now, (ir.Assign(loc, s.var, i),)))
        body += self.block(s.body, now, loop)
        body.append(ir.If(loc, now, (ir.Assign(loc, counter, ir.BinOp(t, "+", i, d)),)))
        body.append(ir.Assign(loc, inside, self.staying(active, loop, loc)))
        again, _ = self.loop_test(ir.Var(bool_t, inside), cond, active, loc, any_left)
        return out + [ir.While(loc, ir.Var(bool_t, any_left), tuple(body + again))]

    # -- exchanges -------------------------------------------------------------------
    def group_any(self, value: ir.Expr, result: str, loc: ir.Loc) -> list[ir.Stmt]:
        """``result = any work-item of the group has value``, the same in each of them."""
        slot = self.exchange(i32)
        first = (_i64(0),)
        return [
            ir.If(loc, ir.Compare(bool_t, "==", linear_id(), _i64(0)), (ir.Store(loc, slot, first, ir.Const(i32, 0)),)),
            ir.Barrier(loc),
            # an atomic, not a plain store of the same value from many: PoCL hangs on that one
            ir.If(loc, value, (ir.ExprStmt(loc, ir.Atomic(i32, "or", slot, first, (ir.Const(i32, 1),))),)),
            ir.Barrier(loc),
            ir.Assign(loc, result, ir.Compare(bool_t, "!=", ir.Load(i32, slot, first), ir.Const(i32, 0))),
            ir.Barrier(loc),
        ]

    def subgroups_are_warps(self, loc: ir.Loc) -> list[ir.Stmt]:
        """``native = every work-item's sub-group position is its warp position`` (uniform)."""
        assert self.native is not None
        astray = self.fresh("astray", bool_t)
        vote = self.fresh("any", bool_t, UNIFORM_PREFIX + _PREFIX)
        position = ir.Warp(i64, "sg_linear", ())
        return [ir.Assign(loc, astray, ir.Compare(bool_t, "!=", position, linear_id())),
                *self.group_any(ir.Var(bool_t, astray), vote, loc),
                ir.Assign(loc, self.native, _not(ir.Var(bool_t, vote)))]

    def either(self, native: Sequence[ir.Stmt], emulated: Sequence[ir.Stmt], loc: ir.Loc) -> list[ir.Stmt]:
        """The sub-group statements where this launch's sub-groups are warps, else the emulation."""
        if self.native is None:
            return list(emulated)
        return [ir.If(loc, ir.Var(bool_t, self.native), tuple(native), tuple(emulated))]

    def hoist(self, e: ir.Expr, pred: ir.Expr | None, loc: ir.Loc) -> tuple[list[ir.Stmt], ir.Expr]:
        """``e`` with each warp operation in it computed beforehand, in every work-item, into a local."""
        out: list[ir.Stmt] = []

        def visit(x: ir.Expr) -> ir.Expr:
            x = map_children(x, visit)
            if isinstance(x, ir.Warp):
                name = self.fresh(x.op, x.type)
                out.extend(self.warp(x, pred, name, loc))
                return ir.Var(x.type, name)
            return x

        result = visit(e)
        return out, result

    def warp(self, w: ir.Warp, pred: ir.Expr | None, result: str, loc: ir.Loc) -> list[ir.Stmt]:
        if w.op.startswith("shfl"):
            return self.shuffle(w, pred, result, loc)
        if w.op in ("all", "any", "ballot", "activemask"):
            return self.vote(w, pred, result, loc)
        raise ValueError(f"internal: warp operation {w.op!r} has no emulation")

    def operand(self, e: ir.Expr, pred: ir.Expr | None) -> ir.Expr:
        """``e`` where the work-item is active, else a zero nobody reads (and no load is made)."""
        if pred is None or isinstance(e, (ir.Const, ir.Var)):
            return e
        return ir.Select(e.type, pred, e, ir.Const(e.type, False if e.type == bool_t else 0))

    def shuffle(self, w: ir.Warp, pred: ir.Expr | None, result: str, loc: ir.Loc) -> list[ir.Stmt]:
        _, value, lane_arg, width_arg = w.args
        stored_type = i32 if value.type == bool_t else value.type
        slot = self.exchange(stored_type)
        lid = linear_id()
        own = value if value.type == stored_type else ir.Cast(stored_type, value)
        lane_v, width_v = self.fresh("lane", i64), self.fresh("width", i64)
        out: list[ir.Stmt] = [
            ir.Store(loc, slot, (lid,), self.operand(own, pred)),
            # CUDA's lane arguments are unsigned: a negative delta is a huge one
            ir.Assign(loc, lane_v, ir.Cast(i64, ir.Cast(u32, self.operand(lane_arg, pred)))),
            ir.Assign(loc, width_v, ir.Cast(i64, self.operand(width_arg, pred))),
        ]
        lane, width = ir.Var(i64, lane_v), ir.Var(i64, width_v)
        in_warp = _bin("&", lid, _i64(ir.WARP_SIZE - 1))
        in_segment = _bin("&", in_warp, _bin("-", width, _i64(1)))  # widths are powers of two
        segment = _bin("-", lid, in_segment)
        if w.op == "shfl":
            source = _bin("+", segment, _bin("&", lane, _bin("-", width, _i64(1))))
            valid: ir.Expr = TRUE
        elif w.op == "shfl_up":
            source = _bin("-", lid, lane)
            valid = ir.Compare(bool_t, ">=", in_segment, lane)
        elif w.op == "shfl_down":
            source = _bin("+", lid, lane)
            valid = ir.Compare(bool_t, "<", _bin("+", in_segment, lane), width)
        else:  # shfl_xor: later segments are out of reach, earlier ones are not (CUDA's rule)
            partner = _bin("^", in_warp, lane)
            source = _bin("+", _bin("-", lid, in_warp), partner)
            valid = ir.Compare(bool_t, "<=", _bin("//", partner, width), _bin("//", in_warp, width))
            valid = _and(ir.Compare(bool_t, "<", partner, _i64(ir.WARP_SIZE)), valid)
        valid = _and(valid, ir.Compare(bool_t, "<", source, _group_size()))
        read: ir.Expr = ir.Load(stored_type, slot, (ir.Select(i64, valid, source, lid),))
        if stored_type != value.type:
            read = ir.Compare(bool_t, "!=", read, ir.Const(i32, 0))
        emulated = [out[0], ir.Barrier(loc), ir.Assign(loc, result, read), ir.Barrier(loc)]
        # the sub-group's lane of the source: in range wherever valid, the caller's own elsewhere
        lane_in = ir.Cast(u32, ir.Select(i64, valid, _bin("-", source, _bin("-", lid, in_warp)), in_warp))
        wide = _SHUFFLED.get(value.type.name, value.type)
        shuffled: ir.Expr = ir.Warp(wide, "sg_shuffle", (self.operand(value if wide == value.type else ir.Cast(wide, value), pred),
                                                         lane_in))
        if wide != value.type:
            shuffled = ir.Compare(bool_t, "!=", shuffled, ir.Const(wide, 0)) if value.type == bool_t else ir.Cast(value.type, shuffled)
        native = [ir.Assign(loc, result, shuffled)]
        return out[1:3] + (self.either(native, emulated, loc) if self.shuffles else emulated)

    def vote(self, w: ir.Warp, pred: ir.Expr | None, result: str, loc: ir.Loc) -> list[ir.Stmt]:
        slot = self.exchange(i32)
        lid = linear_id()
        if w.op == "activemask":
            mask: ir.Expr = ir.Const(u32, 0xFFFFFFFF)
            holds: ir.Expr = TRUE
        else:
            mask, holds = w.args
        # 0: not active; 1: active, predicate false; 3: active, predicate true
        code = ir.Select(i32, holds, ir.Const(i32, 3), ir.Const(i32, 1)) if holds != TRUE else ir.Const(i32, 3)
        if pred is not None:
            code = ir.Select(i32, pred, code, ir.Const(i32, 0))
        mask_v, act_v, true_v, j = (self.fresh("mask", u32), self.fresh("active", u32), self.fresh("true", u32),
                                    self.fresh("j", i64))
        other = _bin("+", _bin("-", lid, _bin("&", lid, _i64(ir.WARP_SIZE - 1))), ir.Var(i64, j))
        seen = ir.Load(i32, slot, (other,))
        bit = ir.BinOp(u32, "<<", ir.Const(u32, 1), ir.Var(i64, j))
        gather = (ir.If(loc, ir.Compare(bool_t, "<", other, _group_size()), (
            ir.If(loc, ir.Compare(bool_t, "!=", seen, ir.Const(i32, 0)),
                  (ir.Assign(loc, act_v, ir.BinOp(u32, "|", ir.Var(u32, act_v), bit)),)),
            ir.If(loc, ir.Compare(bool_t, "==", seen, ir.Const(i32, 3)),
                  (ir.Assign(loc, true_v, ir.BinOp(u32, "|", ir.Var(u32, true_v), bit)),)),
        )),)
        emulated: list[ir.Stmt] = [
            ir.Store(loc, slot, (lid,), code),
            ir.Barrier(loc),
            ir.Assign(loc, act_v, ir.Const(u32, 0)),
            ir.Assign(loc, true_v, ir.Const(u32, 0)),
            ir.For(loc, j, _i64(0), _i64(ir.WARP_SIZE), _i64(1), gather),
            ir.Barrier(loc),  # every slot read before the next exchange writes them
        ]
        native: list[ir.Stmt] = []
        if self.native is not None:
            code_v = self.fresh("code", i32)
            seen_v = ir.Var(i32, code_v)
            native = [
                ir.Assign(loc, code_v, code),
                ir.Assign(loc, act_v, ir.Warp(u32, "sg_ballot", (ir.Compare(bool_t, "!=", seen_v, ir.Const(i32, 0)),))),
                ir.Assign(loc, true_v, ir.Warp(u32, "sg_ballot", (ir.Compare(bool_t, "==", seen_v, ir.Const(i32, 3)),))),
            ]
        out: list[ir.Stmt] = [ir.Assign(loc, mask_v, self.operand(mask, pred)), *self.either(native, emulated, loc)]
        m = ir.Var(u32, mask_v)
        votes = ir.BinOp(u32, "&", ir.Var(u32, true_v), m)
        if w.op in ("ballot", "activemask"):
            value: ir.Expr = votes if w.op == "ballot" else ir.Var(u32, act_v)
        elif w.op == "any":
            value = ir.Compare(bool_t, "!=", votes, ir.Const(u32, 0))
        else:
            value = ir.Compare(bool_t, "==", votes, ir.BinOp(u32, "&", ir.Var(u32, act_v), m))
        return out + [ir.Assign(loc, result, value)]


_VOTES = frozenset({"all", "any", "ballot", "activemask"})
_SHUFFLES = frozenset({"shfl", "shfl_up", "shfl_down", "shfl_xor"})
#: What a value narrower than 32 bits travels as through a sub-group shuffle (exactly, both ways).
_SHUFFLED = {"bool": i32, "i8": i32, "i16": i32, "u8": u32, "u16": u32, "f16": f32}


def _jumps(body: tuple[ir.Stmt, ...]) -> list[ir.Stmt]:
    found: list[ir.Stmt] = []
    for s in body:
        if isinstance(s, (ir.Break, ir.Continue)):
            found.append(s)
        elif isinstance(s, ir.If):
            found += _jumps(s.then) + _jumps(s.orelse)
    return found


def group_limit(fn: ir.Function) -> int:
    """The most work-items a work-group of kernel ``fn`` may hold on every device (0: the device's
    limit): CUDA's 1024 where it has warp operations, native or emulated, so that a launch is
    accepted or refused alike everywhere."""
    return MAX_GROUP if has_warp(fn.body) or any(has_warp(c.body) for c in fn.callees) else 0


def emulate(fn: ir.Function, subgroups: bool = False, shuffles: bool = False) -> ir.Function:
    """``fn`` with its warp operations done through work-group memory (unchanged without any), or
    its votes (and its shuffles too, with ``shuffles``) through 32-wide sub-groups where
    ``subgroups`` and the launch's sub-groups are warps; the device functions holding some are
    inlined first (:mod:`hetero.compiler.ir.inline`)."""
    if not fn.is_kernel or not group_limit(fn):
        return fn
    fn = inline_calls(fn, lambda f: has_warp(f.body))
    return _Emulation(fn, subgroups, shuffles).run()


def uses_subgroups(fn: ir.Function) -> bool:
    """Whether (emulated) kernel ``fn`` holds sub-group operations: it must then ask for 32-wide sub-groups."""
    return bool(_warp_ops(fn.body) & set(ir.SUBGROUP_OPS))
