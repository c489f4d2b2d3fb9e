"""Questions emitters and launches ask of a function's IR: which expressions it holds, which
loop variables a C ``for`` may step itself, and which arrays it writes."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from typing import Any

from hetero.compiler.ir import nodes as ir


def own_expressions(node: ir.Expr | ir.Stmt) -> list[ir.Expr]:
    """The expressions directly inside ``node``, in field order (for a statement, the ones it
    evaluates itself, not those of the statements nested in it)."""
    found: list[ir.Expr] = []
    for field in dataclasses.fields(node):
        value = getattr(node, field.name)
        found += [v for v in (value if isinstance(value, tuple) else (value,)) if isinstance(v, ir.Expr)]
    return found


def map_children(e: ir.Expr, f: Callable[[ir.Expr], ir.Expr]) -> ir.Expr:
    """``e`` with ``f`` applied to each expression directly inside it (those in tuples too)."""
    changes: dict[str, Any] = {}
    for field in dataclasses.fields(e):
        value = getattr(e, field.name)
        if isinstance(value, ir.Expr):
            changes[field.name] = f(value)
        elif isinstance(value, tuple) and value and isinstance(value[0], ir.Expr):
            changes[field.name] = tuple(f(v) for v in value)
    return dataclasses.replace(e, **changes) if changes else e


def subexpressions(e: ir.Expr) -> Iterator[ir.Expr]:
    """``e`` and every expression inside it."""
    yield e
    for child in own_expressions(e):
        yield from subexpressions(child)


def all_expressions(body: tuple[ir.Stmt, ...]) -> Iterator[ir.Expr]:
    for stmt in ir.walk_stmts(body):
        for e in own_expressions(stmt):
            yield from subexpressions(e)


def direct_loop_vars(body: tuple[ir.Stmt, ...]) -> set[str]:
    """Loop variables a C ``for`` may step itself: never assigned inside their loops and never
    read outside them. The others get a hidden counter, so that Python's rules hold (the body
    cannot disturb the iteration, and after the loop the variable holds the last value)."""
    loop_vars = {s.var for s in ir.walk_stmts(body) if isinstance(s, ir.For)}
    unsafe: set[str] = set()

    def visit(stmts: tuple[ir.Stmt, ...], inside: frozenset[str]) -> None:
        for s in stmts:
            for e in own_expressions(s):
                unsafe.update(x.name for x in subexpressions(e)
                              if isinstance(x, ir.Var) and x.name in loop_vars and x.name not in inside)
            if isinstance(s, ir.Assign) and s.name in inside:
                unsafe.add(s.name)
            if isinstance(s, ir.For):
                if s.var in inside:
                    unsafe.add(s.var)
                visit(s.body, inside | {s.var})
            elif isinstance(s, ir.If):
                visit(s.then, inside)
                visit(s.orelse, inside)
            elif isinstance(s, ir.While):
                visit(s.body, inside)

    visit(body, frozenset())
    return loop_vars - unsafe


def written_arrays(function: ir.Function) -> set[str] | None:
    """The array parameters ``function`` writes (``Store`` and atomics), or None when it calls
    device functions (then any array may be written)."""
    if function.callees:
        return None
    names: set[str] = set()

    def visit(node: Any) -> None:
        if isinstance(node, (ir.Store, ir.Atomic)):
            names.add(node.array)
        if dataclasses.is_dataclass(node):
            for field in dataclasses.fields(node):
                visit(getattr(node, field.name))
        elif isinstance(node, tuple):
            for item in node:
                visit(item)

    visit(function.body)
    return names
