"""The typed IR as JSON, for kernel bundles: a kernel ships as data, never as Python.

:func:`dump` writes a :class:`~hetero.compiler.ir.nodes.Function` (with its device functions)
as plain JSON. :func:`load` reads it back and checks it as untrusted input before an
emitter sees it: only IR node classes, only known operators and built-ins, every name a
plain identifier declared where it is used, and source positions free of quotes and
control characters. Generated code (the CPU module is Python) therefore cannot be
steered by a crafted bundle beyond what a kernel could express.
"""

from __future__ import annotations

import dataclasses
import keyword
import re
from typing import Any

from hetero.language import ATOMICS, INDEX_BUILTINS, MATH_FUNCTIONS
from hetero.core.types import BY_NAME, ArrayType, ScalarType

from hetero.compiler.ir import nodes as ir

#: Bumped when the encoding changes; a bundle with another version is rejected.
FORMAT = 1
_NODES: dict[str, type[Any]] = {
    cls.__name__: cls for cls in vars(ir).values()
    if isinstance(cls, type) and dataclasses.is_dataclass(cls) and cls.__module__ == ir.__name__
}
_OPERATORS = {
    "BinOp": {"+", "-", "*", "/", "//", "%", "**", "&", "|", "^", "<<", ">>", "min", "max"},
    "UnaryOp": {"-", "~", "not", "abs"},
    "Compare": {"<", "<=", ">", ">=", "==", "!="},
    "Logical": {"and", "or"},
}
_FEATURES = {"fp64", "fp16", "int64_atomics", "barrier", "warps"}
# Loc.file lands in comments and docstrings of generated code: no quotes, backslashes or control characters.
_SAFE_FILE = re.compile(r"[^\x00-\x1f\x7f\"'`\\]{0,1024}")


class IRFormatError(ValueError):
    """Serialized IR that is malformed or not something the frontend could have produced."""


def dump(fn: ir.Function) -> dict[str, Any]:
    """``fn`` as JSON-ready data (source file names made safe for :func:`load`)."""
    return {"format": FORMAT, "function": _encode(fn)}


def load(data: Any) -> ir.Function:
    """The kernel in ``data`` (from :func:`dump`), checked. Raises IRFormatError."""
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise IRFormatError(f"not hetero IR of format {FORMAT}")
    try:
        fn = _decode(data.get("function"))
        if not isinstance(fn, ir.Function) or fn.is_kernel is not True:
            raise IRFormatError("the IR does not hold a kernel")
        _check_program(fn)
    except (RecursionError, TypeError, AttributeError) as exc:
        raise IRFormatError(f"malformed IR ({type(exc).__name__}: {exc})") from None
    return fn


def _encode(value: Any) -> Any:
    if isinstance(value, ScalarType):
        return {"$scalar": value.name}
    if isinstance(value, ArrayType):
        return {"$array": value.dtype.name, "ndim": value.ndim}
    if isinstance(value, ir.Loc):
        file = value.file if _SAFE_FILE.fullmatch(value.file) else re.sub(r"[\x00-\x1f\x7f\"'`\\]", "_", value.file)[:1024]
        return {"$": "Loc", "file": file, "line": value.line, "col": value.col}
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        fields = {f.name: _encode(getattr(value, f.name)) for f in dataclasses.fields(value)}
        return {"$": type(value).__name__, **fields}
    if isinstance(value, tuple):
        return {"$tuple": [_encode(item) for item in value]}
    if isinstance(value, frozenset):
        return {"$set": sorted(value)}
    if isinstance(value, dict):
        return {"$dict": [[key, _encode(item)] for key, item in value.items()]}
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    raise TypeError(f"cannot serialize {type(value).__name__} in kernel IR")


def _decode(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if not isinstance(value, dict):
        raise IRFormatError(f"unexpected {type(value).__name__} in IR")
    if "$scalar" in value:
        name = value["$scalar"]
        if name == ir.VOID.name:
            return ir.VOID
        if name not in BY_NAME:
            raise IRFormatError(f"unknown scalar type {name!r}")
        return BY_NAME[name]
    if "$array" in value:
        dtype, ndim = value["$array"], value.get("ndim")
        if dtype not in BY_NAME or not (ndim is None or (type(ndim) is int and 1 <= ndim <= 8)):
            raise IRFormatError(f"bad array type {value!r}")
        return ArrayType(BY_NAME[dtype], ndim)
    if "$tuple" in value and isinstance(value["$tuple"], list):
        return tuple(_decode(item) for item in value["$tuple"])
    if "$set" in value and isinstance(value["$set"], list):
        if not all(isinstance(f, str) and f in _FEATURES for f in value["$set"]):
            raise IRFormatError(f"unknown features {value['$set']!r}")
        return frozenset(value["$set"])
    if "$dict" in value and isinstance(value["$dict"], list):
        pairs = value["$dict"]
        if not all(isinstance(p, list) and len(p) == 2 and isinstance(p[0], str) for p in pairs):
            raise IRFormatError("malformed mapping in IR")
        return {key: _decode(item) for key, item in pairs}
    tag = value.get("$")
    cls = _NODES.get(tag) if isinstance(tag, str) else None
    if cls is None:
        raise IRFormatError(f"unknown IR node {value.get('$')!r}")
    names = {f.name for f in dataclasses.fields(cls)}
    given = set(value) - {"$"}
    if not given <= names or any(f.name not in given for f in dataclasses.fields(cls)
                                 if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING):
        raise IRFormatError(f"IR node {cls.__name__} has fields {sorted(given)}, expected {sorted(names)}")
    return cls(**{name: _decode(value[name]) for name in given})


def _identifier(name: Any, what: str) -> str:
    if not (isinstance(name, str) and name.isidentifier() and name.isascii() and not keyword.iskeyword(name)
            and not name.startswith("__") and len(name) <= 200):
        raise IRFormatError(f"{what} {name!r} is not a plain identifier")
    return name


def _check_program(kernel: ir.Function) -> None:
    functions = {_identifier(fn.name, "function name"): fn for fn in (*kernel.callees, kernel)}
    for fn in functions.values():
        _check_function(fn, set(functions) - {fn.name})


def _check_function(fn: ir.Function, callable_names: set[str]) -> None:
    if not isinstance(fn.params, tuple) or not all(isinstance(p, ir.Param) for p in fn.params):
        raise IRFormatError(f"{fn.name}: malformed parameters")
    arrays = {_identifier(p.name, "parameter") for p in fn.params if isinstance(p.type, ArrayType)}
    scalars = {_identifier(p.name, "parameter") for p in fn.params if isinstance(p.type, ScalarType)}
    if len(arrays | scalars) != len(fn.params) or not isinstance(fn.locals, dict):
        raise IRFormatError(f"{fn.name}: parameters are not distinct typed names")
    local_arrays = {_identifier(a.name, "local array") for a in fn.local_arrays if isinstance(a, ir.LocalArray)}
    if len(local_arrays) != len(fn.local_arrays) or not all(
            isinstance(a.shape, tuple) and all(type(n) is int and n > 0 for n in a.shape) for a in fn.local_arrays):
        raise IRFormatError(f"{fn.name}: malformed local arrays")
    if not all(isinstance(t, ScalarType) for t in (*fn.locals.values(), fn.return_type)):
        raise IRFormatError(f"{fn.name}: locals and the return value must have scalar types")
    variables = scalars | {_identifier(name, "local") for name in fn.locals} | arrays
    scope = _Scope(fn.name, variables, arrays | local_arrays, arrays, callable_names)
    for node in (fn.loc, *fn.body):
        scope.visit(node)


@dataclasses.dataclass
class _Scope:
    function: str
    variables: set[str]
    arrays: set[str]
    shaped: set[str]
    callables: set[str]

    def fail(self, message: str) -> IRFormatError:
        return IRFormatError(f"{self.function}: {message}")

    def visit(self, node: Any) -> None:
        if isinstance(node, tuple):
            for item in node:
                self.visit(item)
            return
        if node is None or isinstance(node, (ScalarType, bool, int, float)):
            return
        if isinstance(node, ir.Loc):
            if not (isinstance(node.file, str) and _SAFE_FILE.fullmatch(node.file)):
                raise self.fail(f"unsafe source file name {node.file!r}")
            return
        if not isinstance(node, (ir.Expr, ir.Stmt)):
            raise self.fail(f"{type(node).__name__} where an expression or statement belongs")
        checked = self.check_names(node)
        for field in dataclasses.fields(node):
            value = getattr(node, field.name)
            if isinstance(value, str):
                if field.name not in checked:  # a text field this checker does not know: refuse it
                    raise self.fail(f"unchecked text in {type(node).__name__}.{field.name}")
            else:
                self.visit(value)

    def check_names(self, node: ir.Expr | ir.Stmt) -> set[str]:
        """Check the names and operators in ``node``; return the fields checked."""
        kind = type(node).__name__
        operator: Any = node  # BinOp, UnaryOp, Compare, Logical: each has an ``op``
        if kind in _OPERATORS and operator.op not in _OPERATORS[kind]:
            raise self.fail(f"unknown {kind} operator {operator.op!r}")
        checked = {"op"} if kind in _OPERATORS else set()
        checks: list[tuple[Any, set[str] | tuple[str, ...], str]] = []
        if isinstance(node, (ir.Var, ir.Assign)):
            checks.append((node.name, self.variables, "variable"))
            checked.add("name")
        elif isinstance(node, ir.For):
            checks.append((node.var, self.variables, "loop variable"))
            checked.add("var")
        elif isinstance(node, (ir.Load, ir.Store)):
            checks.append((node.array, self.arrays, "array"))
            checked.add("array")
        elif isinstance(node, ir.Atomic):
            checks += [(node.array, self.arrays, "array"), (node.op, ATOMICS, "atomic operation")]
            checked |= {"array", "op"}
        elif isinstance(node, ir.Shape):
            checks.append((node.array, self.shaped, "array parameter"))
            checked.add("array")
        elif isinstance(node, ir.WorkItem):
            checks.append((node.name, INDEX_BUILTINS, "work-item built-in"))
            checked.add("name")
        elif isinstance(node, ir.Math):
            checks.append((node.name, MATH_FUNCTIONS, "math function"))
            checked.add("name")
        elif isinstance(node, ir.Call):
            checks.append((node.func, self.callables, "device function"))
            checked.add("func")
        elif isinstance(node, ir.Warp):
            checks.append((node.op, tuple(ir.WARP_OPS), "warp operation"))
            checked.add("op")
        elif isinstance(node, ir.Fence):
            checks.append((node.scope, ir.FENCE_SCOPES, "fence scope"))
            checked.add("scope")
        for name, allowed, what in checks:
            if name not in allowed:
                raise self.fail(f"{what} {name!r} is not declared")
        if isinstance(node, (ir.WorkItem, ir.Shape)) and not (type(node.axis) is int and 0 <= node.axis < 8):
            raise self.fail(f"bad axis {node.axis!r}")
        if isinstance(node, ir.Const) and type(node.value) not in (bool, int, float):
            raise self.fail(f"constant {node.value!r} is not a number")
        return checked


__all__ = ["FORMAT", "IRFormatError", "dump", "load"]
