"""Where a kernel's Python source comes from, and how names in it resolve at compile time.

Gives the AST of a function with positions in the user's file, and builds
:class:`~hetero.core.errors.CompileError` that names file, line and column and shows the line.
:func:`source_fingerprint` hashes what a kernel's code depends on, every resolved global and
closure value by identity, for the compile cache's records, kernel bundles and the cost model.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses
import functools
import hashlib
import inspect
import linecache
import os
import sys
import textwrap
import types
from collections.abc import Callable
from typing import Any

import numpy as np

from hetero.core.errors import CompileError
from hetero.language import DeviceFunction, Intrinsic, dynamic_shared_of, tuple_args_of, typing_of
from hetero.core.types import ArrayType, ScalarType

from hetero.compiler.ir import nodes as ir
from hetero.compiler.frontend import exec_sources, source_index, tuple_args

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
def source_lines(py_func: Callable[..., Any]) -> tuple[list[str], int]:
    """``inspect.getsourcelines(py_func)``, read once per function object (the parse and the
    fingerprint both need it). Where its block ends in its file is kept in the source index
    (:mod:`hetero.compiler.frontend.source_index`, keyed by the file's text), so a later process reads it
    instead of tokenizing the file again (~1 ms a kernel on a cache hit)."""
    code = getattr(py_func, "__code__", None)
    if code is not None and not os.path.exists(code.co_filename):
        return _unfiled_lines(py_func, code)
    file = inspect.getsourcefile(py_func) if code is not None else None
    if code is None or not file:
        return inspect.getsourcelines(py_func)
    linecache.checkcache(file)  # as inspect does: a file edited since it was read is read again
    lines = linecache.getlines(file, getattr(py_func, "__globals__", None))
    if not lines:
        return inspect.getsourcelines(py_func)
    key = (file, source_index.file_digest(lines), code.co_firstlineno, py_func.__qualname__)
    found = source_index.lookup("block", *key)
    if isinstance(found, list) and len(found) == 2 and all(type(v) is int for v in found) \
            and 1 <= found[0] and found[1] >= 1 and found[0] - 1 + found[1] <= len(lines):
        first, count = found
        return lines[first - 1:first - 1 + count], first
    block, first = inspect.getsourcelines(py_func)
    source_index.store("block", [first, len(block)], *key)
    return block, first


def _unfiled_lines(py_func: Callable[..., Any], code: types.CodeType) -> tuple[list[str], int]:
    """The block of a function whose file is not on disk (``exec`` of text, a prompt), read from
    ``linecache`` as Numba reads it: IPython and Python's prompt register what is typed there.
    The entry is read before any ``checkcache``, which drops one whose mtime names no file."""
    entry = linecache.cache.get(code.co_filename)
    lines = list(entry[2]) if entry is not None and len(entry) > 2 else []
    if not lines:  # a module whose loader can give its source (linecache's lazy entries)
        lines = linecache.getlines(code.co_filename, getattr(py_func, "__globals__", None))
    if not lines:  # text given to exec(), as hetero.compat.cuda's audit hook saw it
        lines = exec_sources.lines_of(code) or []
    first = code.co_firstlineno
    if not lines or first > len(lines):
        raise OSError(f"no source of {py_func.__qualname__}: {code.co_filename} is not a file and linecache holds no "
                      "text for it (a function made by exec() of a string before hetero.compat.cuda was imported, "
                      "or typed at a prompt that keeps none)")
    block = inspect.getblock(lines[first - 1:])
    return list(block), first


@functools.lru_cache(maxsize=512)
def _parse(py_func: Callable[..., Any]) -> tuple[ast.FunctionDef, str, int, int]:
    """The function's AST, file, first line and indent: parsed once per function object."""
    code = getattr(py_func, "__code__", None)
    try:
        lines, first_line = source_lines(py_func)
        file = inspect.getsourcefile(py_func) or (code.co_filename if code is not None else "<unknown>")
    except (OSError, TypeError) as exc:
        raise CompileError(
            f"cannot read the source of {getattr(py_func, '__qualname__', py_func)!r}: {exc}; hetero compiles kernels "
            "from their source: define the function in a file, or compile its text under a name registered in "
            "linecache (linecache.cache[name] = (len(text), None, text.splitlines(True), name))",
            code.co_filename if code is not None else "<unknown>", code.co_firstlineno if code is not None else 0,
        ) from exc
    text = "".join(lines)
    dedented = textwrap.dedent(text)
    indent = len(text.splitlines()[0]) - len(dedented.splitlines()[0]) if text.strip() else 0
    if py_func.__name__ == "<lambda>":
        return _parse_lambda(py_func, dedented, file, first_line, indent)
    module = ast.parse(dedented)
    tree = next((node for node in module.body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))), None)
    if not isinstance(tree, ast.FunctionDef):
        raise CompileError(f"{py_func.__qualname__} is not a plain function (async functions cannot be kernels)", file, first_line)
    if tree.name != py_func.__code__.co_name:  # text of another function under the same pseudo-file name
        raise CompileError(f"the source found for {py_func.__qualname__} at {file}:{first_line} defines {tree.name!r}: "
                           "the text under that name has changed since the function was made; compile each text under "
                           "a name of its own", file, first_line)
    if tuple_args_of(py_func):  # a variant taking a tuple argument's items as parameters of their own
        tree = tuple_args.flatten(tree, tuple_args_of(py_func), file, first_line)
    return tree, file, first_line, indent


def _parse_lambda(py_func: Callable[..., Any], text: str, file: str, first_line: int,
                  indent: int) -> tuple[ast.FunctionDef, str, int, int]:
    """A lambda's AST as a function returning its expression (``cuda.reduce(lambda a, b: a + b)``)."""
    try:
        module = ast.parse(text)
    except SyntaxError:
        module = None
    names = list(py_func.__code__.co_varnames[: py_func.__code__.co_argcount])
    found = [node for node in ast.walk(module) if isinstance(node, ast.Lambda)
             and [a.arg for a in node.args.args] == names] if module is not None else []
    if len(found) != 1:
        raise CompileError(f"cannot find the source of this lambda{' (several alike on its line)' if found else ''}; "
                           "define it with def", file, first_line)
    node = found[0]
    body: list[ast.stmt] = [ast.copy_location(ast.Return(node.body), node.body)]
    tree = ast.FunctionDef(name=f"anonymous{node.lineno}", args=node.args, body=body, decorator_list=[], returns=None)
    ast.copy_location(tree, node)
    ast.fix_missing_locations(tree)
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


@dataclasses.dataclass(frozen=True)
class Fingerprint:
    """What a kernel's generated code depends on in Python, hashed (see :func:`source_fingerprint`).

    ``unkeyed`` names the free names whose values have no identity that outlives this
    process (an arbitrary object, a function defined inside another); while it is not
    empty, ``digest`` holds a per-process token, so nothing recorded elsewhere ever matches.
    """

    digest: str
    unkeyed: tuple[str, ...] = ()

    @property
    def keyed(self) -> bool:
        """Whether every resolved value is keyed by identity (records keyed by it may be trusted)."""
        return not self.unkeyed


#: Enters the digest in place of a value that cannot be keyed: unique to this process.
_PROCESS_TOKEN = os.urandom(16).hex()


def fingerprint(py_func: Callable[..., Any]) -> str:
    """The digest of :func:`source_fingerprint`: what bundles and the cost model match kernels by."""
    return source_fingerprint(py_func).digest


def source_fingerprint(py_func: Callable[..., Any]) -> Fingerprint:
    """sha256 of what a kernel's generated code depends on in Python: its source text and the
    identity of every value a free name (or a ``name.attr`` chain) in it resolves to, as the
    frontend resolves them: plain constants by type and value, hetero types by what they are,
    intrinsics by name, modules, functions and classes by their qualified name (only when
    that name leads back to the same object), ``@hetero.func`` functions by their own
    fingerprint. The compile cache's specialization records, kernel bundles and the cost
    model are keyed by it, so a kernel whose closure, template type or module global differs
    is compiled afresh, never served another's code."""
    return _function_fingerprint(py_func, {}, set())


def _function_fingerprint(func: Callable[..., Any], memo: dict[int, Fingerprint], active: set[int]) -> Fingerprint:
    if id(func) in memo:
        return memo[id(func)]
    active.add(id(func))
    digest = hashlib.sha256()
    unkeyed: list[str] = []
    try:
        if typing_of(func) != "hetero":
            digest.update(f"typing:{typing_of(func)}\0".encode())
        if dynamic_shared_of(func):  # the variant compiled for that many bytes of dynamic shared memory
            digest.update(f"dynamic_shared:{dynamic_shared_of(func)}\0".encode())
        if tuple_args_of(func):  # the variant for that layout of tuple arguments
            digest.update(f"tuple_args:{tuple_args_of(func)!r}\0".encode())
        try:
            digest.update("".join(source_lines(func)[0]).encode("utf-8"))
            chains = _free_chains(func)
        except (OSError, TypeError, SyntaxError, CompileError):  # no source: the frontend cannot run either
            digest.update(func.__code__.co_code)
            chains = {(name,) for name in _names_read(func.__code__)}
        namespace = dict(func.__globals__)
        for name, cell in zip(func.__code__.co_freevars, func.__closure__ or (), strict=True):
            try:
                namespace[name] = cell.cell_contents
            except ValueError:
                continue
        for chain in sorted(chains):
            text = ".".join(chain)
            value = _resolve_chain(namespace, chain)
            if _is_host_jit(value):  # @numba.jit: the frontend lowers its Python function
                value = DeviceFunction(value.py_func, typing="numba")
            if isinstance(value, DeviceFunction):
                if id(value.py_func) in active:
                    part = f"func {text}=recursive"  # the frontend refuses recursion; any stable part does
                else:
                    callee = _function_fingerprint(value.py_func, memo, active)
                    unkeyed.extend(f"{text}.{inner}" for inner in callee.unkeyed)
                    part = f"func {text}={callee.digest}"
            else:
                identity = _identity(value)
                if identity is None:
                    unkeyed.append(text)
                    part = f"unkeyed {text}={_PROCESS_TOKEN}:{id(value)}"
                else:
                    part = f"{text}={identity}"
            digest.update(b"\0" + part.encode("utf-8"))
    finally:
        active.discard(id(func))
    result = Fingerprint(digest.hexdigest(), tuple(unkeyed))
    memo[id(func)] = result
    return result


def _is_host_jit(value: Any) -> bool:
    return type(value).__module__.startswith("numba.") and callable(getattr(value, "py_func", None))


def _free_chains(func: Callable[..., Any]) -> set[tuple[str, ...]]:
    """Every maximal ``name`` or ``name.attr.attr`` chain in the function's parameters' annotations,
    return annotation and body whose root is not a local (a parameter or an assigned name). A
    function of the source text and the locals alone: kept in the source index, so a later process
    need not parse the function to key its cached code."""
    code = func.__code__
    key = (hashlib.sha256("".join(source_lines(func)[0]).encode("utf-8")).hexdigest(), func.__name__ == "<lambda>",
           code.co_argcount, list(code.co_varnames), list(code.co_cellvars))
    found = source_index.lookup("chains", *key)
    if isinstance(found, list) and all(isinstance(c, list) and c and all(isinstance(n, str) for n in c) for c in found):
        return {tuple(c) for c in found}
    chains = _parsed_free_chains(func)
    source_index.store("chains", sorted(list(c) for c in chains), *key)
    return chains


def _parsed_free_chains(func: Callable[..., Any]) -> set[tuple[str, ...]]:
    tree = _parse(func)[0]
    local = set(func.__code__.co_varnames) | set(func.__code__.co_cellvars)
    roots: list[ast.AST] = [*tree.body, *(a.annotation for a in tree.args.args if a.annotation is not None)]
    if tree.returns is not None:
        roots.append(tree.returns)
    chains: set[tuple[str, ...]] = set()
    pending = list(roots)
    while pending:
        node = pending.pop()
        attrs: list[str] = []
        base = node
        while isinstance(base, ast.Attribute):
            attrs.append(base.attr)
            base = base.value
        if isinstance(base, ast.Name):
            if base.id not in local:
                chains.add((base.id, *reversed(attrs)))
            continue
        pending.extend(ast.iter_child_nodes(base))
    return chains


def _resolve_chain(namespace: dict[str, Any], chain: tuple[str, ...]) -> Any:
    """What the frontend's ``static()`` sees for ``chain``: closure, globals, builtins, then attributes."""
    value = namespace.get(chain[0], _MISSING)
    if value is _MISSING:
        value = getattr(builtins, chain[0], _MISSING)
    for attr in chain[1:]:
        if value is _MISSING:
            break
        try:
            value = getattr(value, attr, _MISSING)
        except Exception:  # noqa: BLE001 (a property of user code that raises: not a value anyone could key)
            return _UNKEYABLE
    return value


_UNKEYABLE = object()  # what a chain whose lookup itself failed resolves to


def _identity(value: Any) -> str | None:
    """A text naming ``value`` that is the same in every process exactly when the value is; None if none."""
    if value is _MISSING:
        return "missing"
    if value is _UNKEYABLE:
        return None
    if isinstance(value, bool):
        return f"bool:{bool(value)}"
    if isinstance(value, int):
        return f"int:{int(value)}"
    if isinstance(value, float):
        return f"float:{float(value)!r}"
    if isinstance(value, str):
        return f"str:{str(value)!r}"
    if isinstance(value, np.generic):
        return f"numpy.{value.dtype.str}:{value.item()!r}"
    if isinstance(value, np.dtype):
        return f"numpy.dtype:{value.str}"
    if isinstance(value, ScalarType):
        return f"scalar:{value.name}:{value.kind}{value.bits}"
    if isinstance(value, ArrayType):
        return f"array:{value.dtype.name}:{value.dtype.kind}{value.dtype.bits}:{value.ndim}"
    if isinstance(value, Intrinsic):
        return f"intrinsic:{value.name}"
    if isinstance(value, types.ModuleType):
        return f"module:{value.__name__}"
    module, qualname = getattr(value, "__module__", None), getattr(value, "__qualname__", None)
    if isinstance(module, str) and isinstance(qualname, str) and "<" not in qualname:
        found: Any = sys.modules.get(module, _MISSING)
        for part in qualname.split("."):
            found = getattr(found, part, _MISSING)
        if found is value:
            return f"object:{module}.{qualname}"
    return None


def _names_read(code: types.CodeType) -> set[str]:
    names = set(code.co_names) | set(code.co_freevars)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names_read(const)
    return names


MISSING = _MISSING
