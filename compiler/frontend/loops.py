"""``for`` loops over ``enumerate(…)`` and ``zip(…)`` of 1-D arrays and tuples in a kernel, as
Numba-CUDA kernels write them (``for i, v in enumerate(x)``, ``for a, b in zip(x, y)``, nested
either way, ``zip(T1, T2)`` of tuples from outside the kernel): rewritten before lowering into a
counted loop over ``range(n)`` whose body first assigns the targets from the arrays at the
counter, or the tuple's item chosen by the counter (``n``: the shortest length, as ``zip``
stops). A
target left whole (``for pair in zip(x, y)``) is a tuple local. Iterating anything else (an
N-D array, whose items are rows; a tuple) is refused with the remedy.
"""

from __future__ import annotations

import ast
from typing import Any

from hetero.compiler.ir import nodes as ir


class _Loop:
    """One rewrite: what the lowerer knows (its static names and arrays) and where errors point."""

    def __init__(self, lowerer: Any, node: ast.For) -> None:
        self.lowerer = lowerer
        self.node = node
        self.counter = f"_iter{node.lineno}_{node.col_offset}"

    def at(self, new: ast.AST) -> Any:
        return ast.fix_missing_locations(ast.copy_location(new, self.node))

    def index(self) -> ast.Name:
        return self.at(ast.Name(self.counter, ast.Load()))

    def items(self, iterable: ast.expr) -> tuple[ast.expr, list[ast.expr]]:
        """(the item at the counter, the arrays whose lengths bound the loop) for ``iterable``."""
        src, static = self.lowerer.src, self.lowerer.static
        if isinstance(iterable, ast.Call) and not iterable.keywords and static(iterable.func) is zip:
            parts = [self.items(arg) for arg in iterable.args]
            if not parts:
                raise src.error(iterable, "zip() in a kernel takes one or more arrays")
            return self.at(ast.Tuple([p[0] for p in parts], ast.Load())), [a for p in parts for a in p[1]]
        if isinstance(iterable, ast.Call) and static(iterable.func) is enumerate:
            start = self.start(iterable)
            item, arrays = self.items(iterable.args[0])
            count = self.index() if start is None else self.at(ast.BinOp(self.index(), ast.Add(), start))
            return self.at(ast.Tuple([count, item], ast.Load())), arrays
        length = self.lowerer.tuple_length(iterable)
        if length is not None:  # a tuple: its item at the counter chosen among its items
            count = int(length.expr.value)
            item: ast.expr = self.at(ast.Constant(0))  # (a loop over an empty tuple never runs its body)
            for k in reversed(range(count)):
                at_k = self.at(ast.Subscript(iterable, ast.Constant(k), ast.Load()))
                test = self.at(ast.Compare(self.index(), [ast.Eq()], [ast.Constant(k)]))
                item = at_k if k == count - 1 else self.at(ast.IfExp(test, at_k, item))
            return item, [self.at(ast.Constant(count))]
        if isinstance(iterable, ast.Name) and iterable.id in self.lowerer.arrays:
            array = self.lowerer.arrays[iterable.id]
            ndim = len(array.shape) if isinstance(array, ir.LocalArray) else getattr(array, "ndim", 1)
            if ndim != 1:
                raise src.error(iterable, f"{iterable.id} has {ndim} dimensions: its items would be rows (array views), "
                                          "which kernels do not have; loop over range(len(a)) and index a[i, j]")
            return self.at(ast.Subscript(ast.Name(iterable.id, ast.Load()), self.index(), ast.Load())), [iterable]
        raise src.error(iterable, f"enumerate()/zip() in a kernel take 1-D arrays and tuples, not "
                                  f"{ast.unparse(iterable)!r}; loop over range(n) and index instead")

    def start(self, call: ast.Call) -> ast.expr | None:
        args = list(call.args) + [k.value for k in call.keywords if k.arg == "start"]
        if len(args) not in (1, 2) or any(k.arg != "start" for k in call.keywords):
            raise self.lowerer.src.error(call, "usage: enumerate(array) or enumerate(array, start)")
        return args[1] if len(args) == 2 else None

    def assign(self, target: ast.expr, value: ast.expr) -> list[ast.stmt]:
        """``target = value`` statement by statement, unpacking a tuple target against a tuple value."""
        if isinstance(target, ast.Tuple):
            if not isinstance(value, ast.Tuple) or len(value.elts) != len(target.elts):
                raise self.lowerer.src.error(target, f"cannot unpack the loop's items into {ast.unparse(target)}")
            return [s for t, v in zip(target.elts, value.elts, strict=True) for s in self.assign(t, v)]
        if not isinstance(target, ast.Name):
            raise self.lowerer.src.error(target, "a loop's targets must be names")
        self.lowerer.assigned.add(target.id)
        return [self.at(ast.Assign([ast.Name(target.id, ast.Store())], value))]


def counted(lowerer: Any, node: ast.For) -> ast.For | None:
    """``node`` rewritten as a loop over ``range(n)`` if it loops over enumerate()/zip(); else None."""
    iterable = node.iter
    if not (isinstance(iterable, ast.Call) and lowerer.static(iterable.func) in (enumerate, zip)):
        return None
    loop = _Loop(lowerer, node)
    item, arrays = loop.items(iterable)
    lengths: list[ast.expr] = [a if isinstance(a, ast.Constant) else loop.at(ast.Call(ast.Name("len", ast.Load()), [a], []))
                               for a in arrays]
    bound = lengths[0] if len(lengths) == 1 else loop.at(ast.Call(ast.Name("min", ast.Load()), lengths, []))
    lowerer.assigned.add(loop.counter)
    body = [*loop.assign(node.target, item), *node.body]
    rng = loop.at(ast.Call(ast.Name("range", ast.Load()), [bound], []))
    return loop.at(ast.For(ast.Name(loop.counter, ast.Store()), rng, body, [], None))
