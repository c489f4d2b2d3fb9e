"""``cuda.syncthreads_count/and/or(p)`` anywhere an expression may stand (``out[i] =
cuda.syncthreads_and(x[i])``, ``if cuda.syncthreads_or(done):``, ``n = 1 + syncthreads_count(p)``).

Each such vote is a barrier, so it is hoisted into a statement of its own just before the
statement that holds it (``_vote = cuda.syncthreads_count(p)``), which the frontend lowers as a
barrier with a work-group counter; the statement then reads the name. Every thread of the
block must reach a barrier, so a vote under ``and``/``or``/``x if c else y`` that some threads
would skip is already invalid CUDA: hoisting it makes every thread vote, which is CUDA's only
defined case. A vote in a ``while`` condition, which runs once per iteration, is refused.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Callable
from typing import Any

#: The block votes, by the names of :mod:`hetero.language.cuda`.
BLOCK_VOTES = ("cuda.syncthreads_count", "cuda.syncthreads_and", "cuda.syncthreads_or")
#: For each statement, the fields holding its own expressions (its bodies are lowered apart).
_HEADS = {ast.Assign: ("targets", "value"), ast.AugAssign: ("target", "value"), ast.AnnAssign: ("value",),
          ast.Expr: ("value",), ast.If: ("test",), ast.Return: ("value",), ast.For: ("iter",), ast.While: ("test",)}


def is_vote(call: ast.expr, static: Callable[[ast.expr], Any]) -> bool:
    return isinstance(call, ast.Call) and getattr(static(call.func), "name", None) in BLOCK_VOTES


def hoisted(node: ast.stmt, static: Callable[[ast.expr], Any], error: Callable[[ast.AST, str], Exception],
            ) -> list[ast.stmt] | None:
    """``node`` preceded by an assignment of each block vote inside its expressions to a name of its
    own, which ``node`` then reads; None when it holds no vote that needs it (a vote that is the
    whole value of a name's assignment is lowered as it stands)."""
    fields = _HEADS.get(type(node))
    if fields is None:
        return None
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name) \
            and is_vote(node.value, static):
        return None
    votes = [n for field in fields for part in _parts(getattr(node, field)) for n in ast.walk(part)
             if is_vote(n, static)]  # type: ignore[arg-type]
    if not votes:
        return None
    if isinstance(node, ast.While):
        raise error(votes[0], "a block vote (cuda.syncthreads_count/and/or) in a while condition is not supported: "
                              "vote into a name before the loop and again at the end of its body")
    rewritten = copy.deepcopy(node)
    assigns: list[ast.stmt] = []
    names = {(vote.lineno, vote.col_offset): f"_voted{vote.lineno}_{vote.col_offset}" for vote in votes}
    for vote in votes:
        target = ast.copy_location(ast.Name(names[(vote.lineno, vote.col_offset)], ast.Store()), vote)
        inner = _Replace(names, static, keep_top=True).visit(copy.deepcopy(vote))
        assigns.append(ast.copy_location(ast.Assign([target], inner), vote))
    replaced = _Replace(names, static, keep_top=False)
    for field in fields:
        value = getattr(rewritten, field)
        setattr(rewritten, field, [replaced.visit(v) for v in value] if isinstance(value, list)
                else replaced.visit(value) if value is not None else None)
    for statement in assigns:
        ast.fix_missing_locations(statement)
    return [*_inner_first(assigns), rewritten]


def _parts(value: Any) -> list[ast.AST]:
    if value is None:
        return []
    return list(value) if isinstance(value, list) else [value]


def _inner_first(assigns: list[ast.stmt]) -> list[ast.stmt]:
    """A vote nested in another's predicate is assigned first (ast.walk lists the outer one first)."""
    return list(reversed(assigns))


class _Replace(ast.NodeTransformer):
    """Each vote becomes a read of its name (with ``keep_top``, all but the node first visited:
    the vote being assigned)."""

    def __init__(self, names: dict[tuple[int, int], str], static: Callable[[ast.expr], Any], keep_top: bool) -> None:
        self.names = names
        self.static = static
        self.keep_top = keep_top
        self.top: ast.AST | None = None

    def visit(self, node: ast.AST) -> Any:
        if self.top is None and self.keep_top:
            self.top = node
        return super().visit(node)

    def visit_Call(self, node: ast.Call) -> Any:
        self.generic_visit(node)
        key = (node.lineno, node.col_offset)
        if node is not self.top and is_vote(node, self.static) and key in self.names:
            return ast.copy_location(ast.Name(self.names[key], ast.Load()), node)
        return node
