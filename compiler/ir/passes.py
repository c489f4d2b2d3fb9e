"""IR passes run before emission: constant folding and dead-code elimination.

Folding follows the IR's typed semantics (integers wrap to their width, f32
rounds to f32), so a folded kernel computes exactly what the unfolded one would.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Callable
from typing import Any

import numpy as np

from hetero.core.types import ScalarType, bool_t

from hetero.compiler.ir import nodes as ir

_ARITH: dict[str, Callable[[Any, Any], Any]] = {"+": operator.add, "-": operator.sub, "*": operator.mul, "&": operator.and_, "|": operator.or_,
          "^": operator.xor, "min": min, "max": max}
_COMPARE = {"<": operator.lt, "<=": operator.le, ">": operator.gt, ">=": operator.ge, "==": operator.eq, "!=": operator.ne}


def _typed(value: Any, t: ScalarType) -> ir.Const | None:
    """``value`` as a constant of ``t`` with the IR's overflow/rounding rules; None if not representable."""
    if t == bool_t:
        return ir.Const(t, bool(value))
    if t.is_float:
        with np.errstate(all="ignore"):
            return ir.Const(t, float(t.dtype.type(value)))
    if isinstance(value, float):
        return None
    wrapped = int(value) & ((1 << t.bits) - 1)
    if t.kind == "i" and wrapped >= 1 << (t.bits - 1):
        wrapped -= 1 << t.bits
    return ir.Const(t, wrapped)


def fold_expr(e: ir.Expr) -> ir.Expr:
    """``e`` with every constant sub-expression computed."""
    if isinstance(e, ir.BinOp):
        left, right = fold_expr(e.left), fold_expr(e.right)
        if isinstance(left, ir.Const) and isinstance(right, ir.Const) and e.op in _ARITH:
            try:
                folded = _typed(_ARITH[e.op](left.value, right.value), e.type)
            except (OverflowError, ValueError, TypeError):
                folded = None
            if folded is not None:
                return folded
        return dataclasses.replace(e, left=left, right=right)
    if isinstance(e, ir.Compare):
        left, right = fold_expr(e.left), fold_expr(e.right)
        if isinstance(left, ir.Const) and isinstance(right, ir.Const):
            return ir.Const(bool_t, bool(_COMPARE[e.op](ir.number(left), ir.number(right))))
        return dataclasses.replace(e, left=left, right=right)
    if isinstance(e, ir.Logical):
        left, right = fold_expr(e.left), fold_expr(e.right)
        if isinstance(left, ir.Const):
            if e.op == "and":
                return right if left.value else ir.Const(bool_t, False)
            return ir.Const(bool_t, True) if left.value else right
        return dataclasses.replace(e, left=left, right=right)
    if isinstance(e, ir.UnaryOp):
        operand = fold_expr(e.operand)
        if isinstance(operand, ir.Const):
            value = operand.value
            result: Any = {"-": lambda v: -v, "not": lambda v: not v, "abs": abs,
                           "~": lambda v: ~int(v) if not isinstance(v, float) else None}[e.op](value)
            folded = _typed(result, e.type) if result is not None else None
            if folded is not None:
                return folded
        return dataclasses.replace(e, operand=operand)
    if isinstance(e, ir.Cast):
        inner = fold_expr(e.value)
        if isinstance(inner, ir.Const) and not (isinstance(inner.value, float) and not math.isfinite(inner.value)
                                                and not e.type.is_float):
            folded = _typed(int(inner.value) if e.type.is_int and isinstance(inner.value, float) else inner.value, e.type)
            if folded is not None:
                return folded
        return dataclasses.replace(e, value=inner)
    if isinstance(e, ir.Select):
        cond = fold_expr(e.cond)
        if isinstance(cond, ir.Const):
            return fold_expr(e.if_true if cond.value else e.if_false)
        return dataclasses.replace(e, cond=cond, if_true=fold_expr(e.if_true), if_false=fold_expr(e.if_false))
    if isinstance(e, (ir.Load, ir.Atomic)):
        changes: dict[str, Any] = {"indices": tuple(fold_expr(i) for i in e.indices)}
        if isinstance(e, ir.Atomic):
            changes["args"] = tuple(fold_expr(a) for a in e.args)
        return dataclasses.replace(e, **changes)
    if isinstance(e, (ir.Math, ir.Call)):
        return dataclasses.replace(e, args=tuple(fold_expr(a) for a in e.args))
    return e


def _has_effect(e: ir.Expr) -> bool:
    if isinstance(e, (ir.Atomic, ir.Call)):
        return True
    return any(_has_effect(child) for child in _children(e))


def _children(e: ir.Expr) -> list[ir.Expr]:
    out: list[ir.Expr] = []
    for field in dataclasses.fields(e):
        value = getattr(e, field.name)
        if isinstance(value, ir.Expr):
            out.append(value)
        elif isinstance(value, tuple):
            out.extend(v for v in value if isinstance(v, ir.Expr))
    return out


def _reads(e: ir.Expr, names: set[str]) -> None:
    if isinstance(e, ir.Var):
        names.add(e.name)
    for child in _children(e):
        _reads(child, names)


def _stmt_exprs(s: ir.Stmt) -> list[ir.Expr]:
    return [getattr(s, f.name) for f in dataclasses.fields(s) if isinstance(getattr(s, f.name), ir.Expr)] + \
        [i for i in getattr(s, "indices", ())]


def fold_block(body: tuple[ir.Stmt, ...]) -> tuple[ir.Stmt, ...]:
    """Fold constants; drop branches that cannot run and code after a jump."""
    out: list[ir.Stmt] = []
    for s in body:
        if isinstance(s, ir.Assign):
            s = dataclasses.replace(s, value=fold_expr(s.value))
        elif isinstance(s, ir.Store):
            s = dataclasses.replace(s, indices=tuple(fold_expr(i) for i in s.indices), value=fold_expr(s.value))
        elif isinstance(s, ir.ExprStmt):
            s = dataclasses.replace(s, value=fold_expr(s.value))
        elif isinstance(s, ir.Return) and s.value is not None:
            s = dataclasses.replace(s, value=fold_expr(s.value))
        elif isinstance(s, ir.If):
            cond = fold_expr(s.cond)
            if isinstance(cond, ir.Const):
                out.extend(fold_block(s.then if cond.value else s.orelse))
                if out and isinstance(out[-1], (ir.Break, ir.Continue, ir.Return)):
                    break
                continue
            s = ir.If(s.loc, cond, fold_block(s.then), fold_block(s.orelse))
        elif isinstance(s, ir.While):
            cond = fold_expr(s.cond)
            if isinstance(cond, ir.Const) and not cond.value:
                continue
            s = ir.While(s.loc, cond, fold_block(s.body))
        elif isinstance(s, ir.For):
            s = ir.For(s.loc, s.var, fold_expr(s.start), fold_expr(s.stop), fold_expr(s.step), fold_block(s.body))
        out.append(s)
        if isinstance(s, (ir.Break, ir.Continue, ir.Return)):
            break  # the rest of the block cannot run
    return tuple(out)


def _all_reads(body: tuple[ir.Stmt, ...]) -> set[str]:
    names: set[str] = set()
    for s in ir.walk_stmts(body):
        for e in _stmt_exprs(s):
            _reads(e, names)
        if isinstance(s, ir.For):
            names.add(s.var)  # the loop itself reads its variable
    return names


def _drop_dead_assigns(body: tuple[ir.Stmt, ...], live: set[str]) -> tuple[ir.Stmt, ...]:
    out: list[ir.Stmt] = []
    for s in body:
        if isinstance(s, ir.Assign) and s.name not in live and not _has_effect(s.value):
            continue
        if isinstance(s, ir.If):
            s = ir.If(s.loc, s.cond, _drop_dead_assigns(s.then, live), _drop_dead_assigns(s.orelse, live))
            if not s.then and not s.orelse and not _has_effect(s.cond):
                continue
        elif isinstance(s, ir.For):
            s = dataclasses.replace(s, body=_drop_dead_assigns(s.body, live))
        elif isinstance(s, ir.While):
            s = dataclasses.replace(s, body=_drop_dead_assigns(s.body, live))
        out.append(s)
    return tuple(out)


def optimize(fn: ir.Function) -> ir.Function:
    """Constant folding and dead-code elimination to a fixed point; unused locals dropped."""
    body = fn.body
    for _ in range(8):
        new = fold_block(body)
        new = _drop_dead_assigns(new, _all_reads(new))
        if new == body:
            break
        body = new
    used = _all_reads(body) | {s.name for s in ir.walk_stmts(body) if isinstance(s, ir.Assign)}
    callees = tuple(optimize(c) for c in fn.callees)
    return dataclasses.replace(fn, body=body, locals={n: t for n, t in fn.locals.items() if n in used}, callees=callees)
