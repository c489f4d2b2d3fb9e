"""Tuple and namedtuple kernel arguments, flattened at the launch boundary as Numba passes them:
each scalar or array inside the tuple becomes a parameter of its own (``x__0``, ``x__2_1``), and
the kernel's body is rewritten before lowering so that what names one item names that parameter:
``x[1]``, ``x[2][0]``, ``x.field`` and ``len(x)`` (a constant). A tuple used whole (``a, b = x``,
``arr[x]``, ``t = x``, ``for v in x``) becomes a tuple literal of its items, which the kernel
language takes as it takes any tuple (:mod:`hetero.compiler.frontend.tuple_locals`).

The layout comes from the launch (:func:`layout_of`, :func:`leaves`), and the launch passes the
leaves in the order :func:`flatten` lists the parameters; the rewritten tree keeps the user's
line numbers, so an error points at the user's line.
"""

from __future__ import annotations

import ast
from typing import Any

from hetero.core.errors import CompileError
from hetero.language import TupleLayout

#: A tuple's shape: None for a leaf (a scalar or an array), else (field names or None, children).
Node = Any


def layout_of(value: tuple[Any, ...]) -> Node:
    """The shape of a tuple argument (a namedtuple keeps its field names)."""
    fields = getattr(type(value), "_fields", None)
    children = tuple(layout_of(v) if isinstance(v, tuple) else None for v in value)
    return (tuple(fields) if fields is not None else None, children)


def leaves(value: tuple[Any, ...]) -> list[Any]:
    """The scalars and arrays inside a tuple argument, depth first: the values passed for it."""
    found: list[Any] = []
    for item in value:
        found.extend(leaves(item) if isinstance(item, tuple) else [item])
    return found


def _leaf_names(prefix: str, node: Node) -> list[str]:
    if node is None:
        return [prefix]
    sep = "" if prefix.endswith("__") else "_"
    return [name for k, child in enumerate(node[1]) for name in _leaf_names(f"{prefix}{sep}{k}", child)]


def parameters(names: list[str], layout: TupleLayout) -> list[str]:
    """A kernel's parameter names once its tuple parameters (``layout``) are flattened."""
    shapes = dict(layout)
    return [leaf for name in names for leaf in (_leaf_names(f"{name}__", shapes[name]) if name in shapes else [name])]


def flatten(tree: ast.FunctionDef, layout: TupleLayout, file: str, first_line: int) -> ast.FunctionDef:
    """``tree`` with each tuple parameter of ``layout`` replaced by its leaves' parameters and every
    use of it rewritten (see the module docstring)."""
    shapes = dict(layout)
    prefixes = {name: f"{name}__" for name in shapes}
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and any(node.id.startswith(p) for p in prefixes.values()):
            raise CompileError(f"the name {node.id!r} is the one hetero gives an item of a tuple argument; rename it",
                               file, node.lineno + first_line - 1, node.col_offset)
    args: list[ast.arg] = []
    for arg in tree.args.args:
        if arg.arg not in shapes:
            args.append(arg)
            continue
        args.extend(ast.copy_location(ast.arg(n), arg) for n in _leaf_names(prefixes[arg.arg], shapes[arg.arg]))
    rewriter = _Rewriter(shapes, prefixes, file, first_line)
    body = [rewriter.visit(statement) for statement in tree.body]
    new = ast.FunctionDef(tree.name, ast.arguments([], args, None, [], [], None, []), body, tree.decorator_list,
                          tree.returns, getattr(tree, "type_comment", None))
    return ast.fix_missing_locations(ast.copy_location(new, tree))


class _Expanded(ast.Tuple):
    """A tuple argument (or one of its inner tuples) written out as a literal of its items."""

    shape: Node = None


class _Rewriter(ast.NodeTransformer):
    def __init__(self, shapes: dict[str, Node], prefixes: dict[str, str], file: str, first_line: int) -> None:
        self.shapes = shapes
        self.prefixes = prefixes
        self.file = file
        self.first_line = first_line

    def error(self, node: ast.AST, message: str) -> CompileError:
        return CompileError(message, self.file, getattr(node, "lineno", 1) + self.first_line - 1,
                            getattr(node, "col_offset", 0))

    def expand(self, prefix: str, node: Node, at: ast.AST) -> ast.expr:
        if node is None:
            return ast.copy_location(ast.Name(prefix, ast.Load()), at)
        sep = "" if prefix.endswith("__") else "_"
        items = [self.expand(f"{prefix}{sep}{k}", child, at) for k, child in enumerate(node[1])]
        expanded = ast.copy_location(_Expanded(items, ast.Load()), at)
        expanded.shape = node
        return expanded

    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id not in self.shapes:
            return node
        if not isinstance(node.ctx, ast.Load):
            raise self.error(node, f"{node.id!r} is a tuple argument and cannot be assigned in the kernel; give the "
                                   "new value a name of its own")
        return self.expand(self.prefixes[node.id], self.shapes[node.id], node)

    def visit_Subscript(self, node: ast.Subscript) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.value, _Expanded):
            return node
        items = node.value.elts
        try:
            k = ast.literal_eval(node.slice)
        except ValueError:
            raise self.error(node, f"a tuple argument is indexed with a constant integer, not "
                                   f"{ast.unparse(node.slice)!r}; unpack it (a, b = t) or pass an array to index "
                                   "with a value computed at run time") from None
        if type(k) is not int:
            raise self.error(node, f"a tuple argument is indexed with a constant integer, not {k!r}")
        if not -len(items) <= k < len(items):
            raise self.error(node, f"tuple index {k} is out of range: the tuple argument has {len(items)} item(s)")
        return items[k]

    def visit_Attribute(self, node: ast.Attribute) -> ast.AST:
        self.generic_visit(node)
        if not isinstance(node.value, _Expanded):
            return node
        fields = node.value.shape[0]
        if fields is None or node.attr not in fields:
            have = f"its fields are {', '.join(fields)}" if fields else "it is a plain tuple"
            raise self.error(node, f"a tuple argument has no attribute {node.attr!r} ({have})")
        return node.value.elts[fields.index(node.attr)]

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "len" and len(node.args) == 1 \
                and isinstance(node.args[0], _Expanded):
            return ast.copy_location(ast.Constant(len(node.args[0].elts)), node)
        return node
