"""A ``break`` out of a CUDA C loop that holds ``__syncthreads()``, as a flag the loop tests.

hetero's CPU target runs a work-group's items region by region between barriers and cannot jump
out of a loop across one, so it refuses a ``break`` there (on every device, to behave the same
everywhere). CUDA allows it where the ``break`` is uniform across the block. The front end
rewrites such a loop: ``break`` sets a flag, what follows it in the body runs under
``if (!flag)``, and the loop's condition is tested only while the flag is clear. A uniform
``break`` then meets the barrier checks as a uniform condition; a ``break`` that depends on the
thread is refused by those checks as divergent control flow around a barrier, as before.
"""

from __future__ import annotations

from hetero.core.types import bool_t

from hetero.compiler.ir import nodes as ir


def breaks_here(body: tuple[ir.Stmt, ...]) -> bool:
    """Whether ``body`` holds a ``break`` of its own loop (not of a loop inside it)."""
    for s in body:
        if isinstance(s, ir.Break):
            return True
        if isinstance(s, ir.If) and (breaks_here(s.then) or breaks_here(s.orelse)):
            return True
    return False


def flagged(loop: ir.While, flag: str) -> list[ir.Stmt]:
    """``loop`` (whose body may ``break``) with each ``break`` setting ``flag`` instead."""
    clear = ir.UnaryOp(bool_t, "not", ir.Var(bool_t, flag))
    body = _flag_breaks(loop.body, flag, loop.loc)
    return [ir.Assign(loop.loc, flag, ir.Const(bool_t, False)),
            ir.While(loop.loc, ir.Logical(bool_t, "and", clear, loop.cond), tuple(body))]


def _flag_breaks(body: tuple[ir.Stmt, ...], flag: str, loc: ir.Loc) -> list[ir.Stmt]:
    out: list[ir.Stmt] = []
    for k, s in enumerate(body):
        if isinstance(s, ir.Break):
            out.append(ir.Assign(s.loc, flag, ir.Const(bool_t, True)))
            return out  # what follows a break never runs
        if isinstance(s, ir.If) and (breaks_here(s.then) or breaks_here(s.orelse)):
            out.append(ir.If(s.loc, s.cond, tuple(_flag_breaks(s.then, flag, loc)),
                             tuple(_flag_breaks(s.orelse, flag, loc))))
            rest = _flag_breaks(body[k + 1:], flag, loc)
            if rest:
                out.append(ir.If(loc, ir.UnaryOp(bool_t, "not", ir.Var(bool_t, flag)), tuple(rest)))
            return out
        out.append(s)
    return out
