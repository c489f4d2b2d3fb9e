"""Where a kernel's Python source comes from, and how names in it resolve at compile time.

Gives the AST of a function with positions in the user's file, and builds
:class:`~hetero.errors.CompileError` that names file, line and column and shows the line.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import inspect
import linecache
import textwrap
from collections.abc import Callable
from typing import Any

from hetero.errors import CompileError

from . import ir

_MISSING = object()


@dataclasses.dataclass
class FunctionSource:
    """A function's AST and how to map its positions back to the user's file."""

    py_func: Callable[..., Any]
    tree: ast.FunctionDef
    file: str
    first_line: int  # line in the file of the AST's line 1
    indent: int  # columns removed by dedenting
    namespace: dict[str, Any]

    def loc(self, node: ast.AST) -> ir.Loc:
        line = getattr(node, "lineno", 1) + self.first_line - 1
        col = getattr(node, "col_offset", 0) + self.indent
        return ir.Loc(self.file, line, col)

    def error(self, node: ast.AST | None, message: str) -> CompileError:
        if node is None:
            loc = ir.Loc(self.file, self.first_line, 0)
        else:
            loc = self.loc(node)
        return CompileError(message, loc.file, loc.line, loc.col, linecache.getline(loc.file, loc.line))

    def resolve(self, name: str) -> Any:
        """The object a free name refers to (closure, then globals, then builtins); _MISSING if none."""
        if name in self.namespace:
            return self.namespace[name]
        return getattr(builtins, name, _MISSING)


def function_source(py_func: Callable[..., Any]) -> FunctionSource:
    """Parse ``py_func``'s source. Raises CompileError when the source is not available."""
    try:
        lines, first_line = inspect.getsourcelines(py_func)
        file = inspect.getsourcefile(py_func) or "<unknown>"
    except (OSError, TypeError) as exc:
        raise CompileError(
            f"cannot read the source of {getattr(py_func, '__qualname__', py_func)!r}: {exc}; "
            "kernels must be defined in a file (not typed into an interactive prompt without source)"
        ) from exc
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(text.splitlines()[0]) - len(dedented.splitlines()[0]) if text.strip() else 0
    module = ast.parse(dedented)
    tree = next((node for node in module.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if not isinstance(tree, ast.FunctionDef):
        raise CompileError(f"{py_func.__qualname__} is not a plain function (async functions cannot be kernels)", file, first_line)
    namespace = dict(py_func.__globals__)
    if py_func.__closure__:
        for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__, strict=True):
            try:
                namespace[name] = cell.cell_contents
            except ValueError:  # an empty cell: the closure variable is not assigned yet
                continue
    return FunctionSource(py_func, tree, file, first_line, indent, namespace)


MISSING = _MISSING
