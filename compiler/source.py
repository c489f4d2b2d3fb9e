"""Where a kernel's Python source comes from, and how names in it resolve at compile time.

Gives the AST of a function with positions in the user's file, and builds
:class:`~hetero.errors.CompileError` that names file, line and column and shows the line.
:func:`fingerprint` hashes what a kernel's code depends on, for matching kernel bundles.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import hashlib
import inspect
import linecache
import textwrap
import types
from collections.abc import Callable
from typing import Any

from hetero.errors import CompileError
from hetero.language import DeviceFunction

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


@functools.lru_cache(maxsize=512)
def _parse(py_func: Callable[..., Any]) -> tuple[ast.FunctionDef, str, int, int]:
    """The function's AST, file, first line and indent: parsed once per function object."""
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
    return tree, file, first_line, indent


def function_source(py_func: Callable[..., Any]) -> FunctionSource:
    """Parse ``py_func``'s source (cached) and take its globals and closure as they are now.
    Raises CompileError when the source is not available."""
    tree, file, first_line, indent = _parse(py_func)
    namespace = dict(py_func.__globals__)
    if py_func.__closure__:
        for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__, strict=True):
            try:
                namespace[name] = cell.cell_contents
            except ValueError:  # an empty cell: the closure variable is not assigned yet
                continue
    return FunctionSource(py_func, tree, file, first_line, indent, namespace)


def fingerprint(py_func: Callable[..., Any]) -> str:
    """sha256 of what a kernel's generated code depends on in Python: its source text, the
    source of every ``@hetero.func`` it calls (transitively), and the value of every plain
    constant (int, float, bool, str) it reads from globals or closures. A kernel bundle
    records it, so that a kernel edited after bundling is compiled afresh, not matched."""
    digest = hashlib.sha256()
    seen: set[int] = set()
    pending = [py_func]
    while pending:
        func = pending.pop()
        if id(func) in seen:
            continue
        seen.add(id(func))
        try:
            digest.update(inspect.getsource(func).encode("utf-8"))
        except (OSError, TypeError):
            digest.update(func.__code__.co_code)
        namespace = dict(func.__globals__)
        for name, cell in zip(func.__code__.co_freevars, func.__closure__ or (), strict=True):
            try:
                namespace[name] = cell.cell_contents
            except ValueError:
                continue
        for name in sorted(_names_read(func.__code__)):
            value = namespace.get(name, _MISSING)
            if isinstance(value, DeviceFunction):
                pending.append(value.py_func)
                part = f"func {name}"
            elif isinstance(value, (bool, int, float, str)):
                part = f"const {name}={value!r}"
            elif isinstance(value, types.ModuleType):
                part = f"module {name}={value.__name__}"
            else:
                part = f"name {name}:{type(value).__name__}"
            digest.update(b"\0" + part.encode("utf-8"))
    return digest.hexdigest()


def _names_read(code: types.CodeType) -> set[str]:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_read(const)
    return names


MISSING = _MISSING
