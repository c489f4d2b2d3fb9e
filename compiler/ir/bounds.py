"""Checked mode: every array access of a kernel tested against its array's bounds.

By default hetero trusts a kernel's indices, as CUDA does: an access past an array's end reads
or writes whatever memory is there (on the cpu device and Intel's CPU runtime, the host's heap).
In checked mode (``HETERO_BOUNDS_CHECK=1``, ``@hetero.kernel(debug=True)``, ``cuda.jit(debug=True)``)
:func:`instrument` rewrites the kernel so that each load, store and atomic of an array it was given
or declared first tests ``0 <= index < extent`` on every axis. An access that fails is not made (a
load gives zero) and the first one records itself in the launch's flag array, the kernel's last
parameter :data:`FLAGS` (``u32[SLOTS]``): a set flag, the access's site, the axis, the index and
the extent. The launch reads the flags back and raises, naming the kernel, the array, the index
and the source line (:func:`describe`), as Numba-CUDA's ``debug=True`` and compute-sanitizer do.

Device functions that touch arrays are inlined first, so every access is the kernel's own. A site
is numbered in the order the pass meets it; the launch finds its description by instrumenting the
kernel's IR again (the same IR gives the same numbering), only when a flag is set.
"""

from __future__ import annotations

import dataclasses
import re

from hetero.core.errors import CompileError
from hetero.core.types import ArrayType, bool_t, i64, u32, u64

from hetero.compiler.ir import nodes as ir
from hetero.compiler.ir.inline import inline_calls
from hetero.compiler.ir.queries import map_children, subexpressions

#: The kernel parameter the launch passes its flag array as, and the device function recording a failure.
FLAGS = "_hetero_bounds"
FAIL = "_hetero_bounds_fail"
#: The flag array's slots: set, site, axis, index (low, high 32 bits), extent (low, high).
SLOTS = 8
#: Arrays hetero adds itself (grid syncs' saved state), which are not the kernel's to check.
_OWN_ARRAYS = ("_grid_",)
_INLINED = re.compile(r"^_inl\d+_")


@dataclasses.dataclass(frozen=True)
class Site:
    """One checked access: what it does (``read``, ``write``, ``atomic``), to which array, where."""

    kind: str
    array: str
    loc: ir.Loc


def instrument(fn: ir.Function) -> tuple[ir.Function, tuple[Site, ...]]:
    """Kernel ``fn`` with every access to its arrays checked, and its sites in number order."""
    fn = inline_calls(fn, _touches_arrays)
    pass_ = _Instrument(fn)
    body = pass_.block(fn.body)
    params = (*fn.params, ir.Param(FLAGS, ArrayType(u32, 1)))
    return dataclasses.replace(fn, params=params, body=body, callees=(*fn.callees, _fail_function(fn.loc))), \
        tuple(pass_.sites)


def describe(kernel: str, sites: tuple[Site, ...], flags: list[int]) -> str:
    """What a launch's flag array says, in words (``flags`` as read back; ``flags[0]`` is set)."""
    site, axis = int(flags[1]), int(flags[2])
    index = _signed(flags[3] | (flags[4] << 32))
    extent = _signed(flags[5] | (flags[6] << 32))
    where = sites[site] if 0 <= site < len(sites) else Site("access", "?", ir.Loc("?", 0))
    access = {"read": "a read of", "write": "a write to", "atomic": "an atomic on"}.get(where.kind, "an access to")
    return (f"{kernel}: {access} {_INLINED.sub('', where.array)!r} at {where.loc.file}:{where.loc.line} is out of "
            f"bounds: index {index} on axis {axis}, whose extent is {extent} (valid: 0..{extent - 1}); the access "
            "was not made (checked mode: HETERO_BOUNDS_CHECK=1 or debug=True)")


def _signed(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _touches_arrays(fn: ir.Function) -> bool:
    """Whether device function ``fn`` can access an array (only its own or those it is given)."""
    return bool(fn.array_params() or fn.local_arrays)


def _fail_function(loc: ir.Loc) -> ir.Function:
    """``_hetero_bounds_fail(flags, site, axis, index, extent) -> 0``: the first failure writes its
    record (a compare-and-swap on the flag elects it; the launch reads the rest after the kernel)."""
    flags = FLAGS

    def slot(k: int) -> tuple[ir.Expr, ...]:
        return (ir.Const(i64, k),)

    def halves(name: str) -> tuple[ir.Expr, ir.Expr]:
        value = ir.Cast(u64, ir.Var(i64, name))
        return ir.Cast(u32, value), ir.Cast(u32, ir.BinOp(u64, ">>", value, ir.Const(u64, 32)))

    elected = ir.Compare(bool_t, "==", ir.Atomic(u32, "cas", flags, slot(0), (ir.Const(u32, 0), ir.Const(u32, 1))),
                         ir.Const(u32, 0))
    record = [ir.Store(loc, flags, slot(1), ir.Var(u32, "site")), ir.Store(loc, flags, slot(2), ir.Var(u32, "axis"))]
    for k, part in enumerate((*halves("index"), *halves("extent"))):
        record.append(ir.Store(loc, flags, slot(3 + k), part))
    params = (ir.Param(flags, ArrayType(u32, 1)), ir.Param("site", u32), ir.Param("axis", u32),
              ir.Param("index", i64), ir.Param("extent", i64))
    body = (ir.If(loc, elected, tuple(record)), ir.Return(loc, ir.Const(u32, 0)))
    return ir.Function(FAIL, params, u32, {}, (), body, False, loc)


class _Instrument:
    def __init__(self, fn: ir.Function) -> None:
        self.fn = fn
        self.local_shapes = {a.name: a.shape for a in fn.local_arrays}
        self.sites: list[Site] = []
        self.loc = fn.loc

    # -- statements ------------------------------------------------------------------
    def block(self, body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
        out: list[ir.Stmt] = []
        for s in body:
            out += self.statement(s)
        return tuple(out)

    def statement(self, s: ir.Stmt) -> list[ir.Stmt]:
        self.loc = loc = s.loc
        changes: dict[str, object] = {}
        for field in dataclasses.fields(s):
            value = getattr(s, field.name)
            if isinstance(value, ir.Expr):
                changes[field.name] = self.expr(value)
            elif isinstance(value, tuple) and value and isinstance(value[0], ir.Expr):
                changes[field.name] = tuple(self.expr(v) for v in value)
            elif isinstance(value, tuple) and value and isinstance(value[0], ir.Stmt):
                changes[field.name] = self.block(value)
        checked = dataclasses.replace(s, **changes) if changes else s  # type: ignore[arg-type]
        if isinstance(checked, ir.Store) and self.checks(checked.array):
            assert isinstance(s, ir.Store)
            self.loc = loc
            return [self.guarded_store(checked, s.indices)]
        return [checked]

    def guarded_store(self, s: ir.Store, original: tuple[ir.Expr, ...]) -> ir.Stmt:
        self.refuse_effects(s.array, original)
        site = self.site("write", s.array)
        stmt: ir.Stmt = s
        for axis in reversed(range(len(s.indices))):
            index = s.indices[axis]
            fail = ir.ExprStmt(s.loc, self.fail(site, axis, index, self.extent(s.array, axis)))
            stmt = ir.If(s.loc, self.inside(index, self.extent(s.array, axis)), (stmt,), (fail,))
        return stmt

    # -- expressions -----------------------------------------------------------------
    def expr(self, e: ir.Expr) -> ir.Expr:
        original = e
        e = map_children(e, self.expr)
        if isinstance(e, (ir.Load, ir.Atomic)) and self.checks(e.array):
            assert isinstance(original, (ir.Load, ir.Atomic))
            self.refuse_effects(e.array, original.indices)
            site = self.site("read" if isinstance(e, ir.Load) else "atomic", e.array)
            value: ir.Expr = e
            for axis in reversed(range(len(e.indices))):
                index, extent = e.indices[axis], self.extent(e.array, axis)
                value = ir.Select(e.type, self.inside(index, extent), value,
                                  ir.Cast(e.type, self.fail(site, axis, index, extent)))
            return value
        return e

    # -- parts -------------------------------------------------------------------------
    def checks(self, array: str) -> bool:
        return array != FLAGS and not array.startswith(_OWN_ARRAYS)

    def site(self, kind: str, array: str) -> int:
        self.sites.append(Site(kind, array, self.loc))
        return len(self.sites) - 1

    def extent(self, array: str, axis: int) -> ir.Expr:
        shape = self.local_shapes.get(array)
        return ir.Const(i64, shape[axis]) if shape is not None else ir.Shape(i64, array, axis)

    @staticmethod
    def inside(index: ir.Expr, extent: ir.Expr) -> ir.Expr:
        """``0 <= index < extent`` in one unsigned comparison (a negative index is a huge one)."""
        return ir.Compare(bool_t, "<", ir.Cast(u64, index), ir.Cast(u64, extent))

    @staticmethod
    def fail(site: int, axis: int, index: ir.Expr, extent: ir.Expr) -> ir.Expr:
        return ir.Call(u32, FAIL, (ir.Var(u32, FLAGS), ir.Const(u32, site), ir.Const(u32, axis),
                                   ir.Cast(i64, index), extent))

    def refuse_effects(self, array: str, indices: tuple[ir.Expr, ...]) -> None:
        """The check evaluates an index twice (the test, then the access): one with an effect of its
        own (an atomic) would take effect twice, so it is refused with how to write it instead."""
        if any(isinstance(x, ir.Atomic) for index in indices for x in subexpressions(index)):
            raise CompileError(f"kernel {self.fn.name!r}: checked mode (bounds checks) cannot check an index of "
                               f"{array!r} computed by an atomic; assign the atomic's result to a variable first",
                               self.loc.file, self.loc.line, self.loc.col)


__all__ = ["FAIL", "FLAGS", "SLOTS", "Site", "describe", "instrument"]
