"""The bounds guard of an elementwise CPU kernel, moved into its loop's range.

Most kernels start ``i = global_id(0)`` then ``if i < n: ...`` (n a size or a shape). In the
CPU emitter's flat layout (blocks of work-items along axis 0) that guard sits inside the item
loop, so LLVM vectorizes it with masked loads and stores: fast with AVX-512's mask registers, but
on AVX2 it is ``vmaskmovps``, which AMD's Zen cores run in microcode (STREAM triad at 0.41x a
hand-written Numba ``prange`` on an EPYC host, 0.96x on a Xeon). When the guard is the kernel's
whole body after its index assignments, and its bound does not change inside the kernel, the
items it would skip are exactly those past ``bound``: the loop runs ``range(min(n0, bound -
base0))`` and the body has no branch, the loop a hand-written kernel gives.
"""

from __future__ import annotations

from collections.abc import Collection

from hetero.compiler.ir import nodes as ir

_SIGNED = frozenset({"i8", "i16", "i32", "i64"})
_PURE_OPS = frozenset({"+", "-", "*"})


def _is_global_id0(e: ir.Expr) -> bool:
    return isinstance(e, ir.WorkItem) and e.name == "global_id" and e.axis == 0


def _invariant(e: ir.Expr, fixed: Collection[str]) -> bool:
    """Whether ``e`` has one value for the whole launch: constants, shapes, parameters never assigned."""
    if isinstance(e, (ir.Const, ir.Shape)):
        return True
    if isinstance(e, ir.Var):
        return e.name in fixed
    if isinstance(e, ir.BinOp):
        return e.op in _PURE_OPS and _invariant(e.left, fixed) and _invariant(e.right, fixed)
    if isinstance(e, ir.Cast):
        return _invariant(e.value, fixed)
    return False


def _pure(e: ir.Expr) -> bool:
    """No load (it could read out of bounds for a skipped item), call, atomic or warp operation."""
    if isinstance(e, (ir.Const, ir.Shape, ir.Var, ir.WorkItem)):
        return True
    if isinstance(e, ir.BinOp):
        return _pure(e.left) and _pure(e.right)
    if isinstance(e, (ir.UnaryOp, ir.Cast)):
        return _pure(e.operand if isinstance(e, ir.UnaryOp) else e.value)
    return False


def narrowed(stmts: tuple[ir.Stmt, ...], fixed: Collection[str], assigned: Collection[str]) -> \
        tuple[ir.Expr, tuple[ir.Stmt, ...]] | None:
    """``(bound, body)`` when ``stmts`` (a flat kernel's one run of statements) is pure index
    assignments then ``if v < bound: body`` with no else, ``v = global_id(0)`` assigned once and
    ``bound`` a launch-wide signed integer; None otherwise. ``fixed``: the parameters the kernel
    never assigns; ``assigned``: every name the kernel assigns anywhere, with repeats (a list)."""
    if not stmts or not isinstance(stmts[-1], ir.If) or stmts[-1].orelse:
        return None
    guard, head = stmts[-1], stmts[:-1]
    if not all(isinstance(s, ir.Assign) and _pure(s.value) for s in head):
        return None
    index = {s.name for s in head if isinstance(s, ir.Assign) and _is_global_id0(s.value)}
    cond = guard.cond
    if not isinstance(cond, ir.Compare) or cond.op not in ("<", ">"):
        return None
    var, bound = (cond.left, cond.right) if cond.op == "<" else (cond.right, cond.left)
    if not isinstance(var, ir.Var) or var.name not in index or list(assigned).count(var.name) != 1:
        return None
    if bound.type.name not in _SIGNED or not _invariant(bound, fixed):
        return None
    return bound, (*head, *guard.then)


__all__ = ["narrowed"]
