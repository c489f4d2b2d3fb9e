"""The Python function a kernel variant taking tuple arguments item by item is compiled from: the
user's kernel under a signature of flattened parameters (:mod:`hetero.compiler.frontend.tuple_args`).

hetero's launch reads a kernel's parameters from its function's code object, and the frontend
reads the body from the source file the code object names. The variant's code object is a stub
with the flattened parameters (and the user's closure variables, so the closure's values are
shared) that names the user's file, line and function, so the source read is the user's own,
which the frontend then rewrites for the tuple layout the variant is marked with.
"""

from __future__ import annotations

import textwrap
import types
from collections.abc import Callable
from typing import Any


def flattened_function(py_func: Callable[..., Any], params: list[str]) -> Callable[..., Any]:
    """``py_func`` with ``params`` as its positional parameters (same source, globals and closure)."""
    code = py_func.__code__  # type: ignore[attr-defined]
    free = code.co_freevars
    body = f"    return ({', '.join(free)},)\n" if free else "    pass\n"
    inner = f"def {code.co_name}({', '.join(params)}):\n{body}"
    namespace: dict[str, Any] = {}
    if free:  # a closure over variables of the same names: its cells are the user's
        text = f"def _outer():\n    {' = '.join(free)} = None\n{textwrap.indent(inner, '    ')}    return {code.co_name}\n"
        exec(compile(text, "<hetero tuple arguments>", "exec"), namespace)  # noqa: S102 - a stub of names only
        stub = namespace["_outer"]()
    else:
        exec(compile(inner, "<hetero tuple arguments>", "exec"), namespace)  # noqa: S102 - a stub of names only
        stub = namespace[code.co_name]
    if stub.__code__.co_freevars != free:
        raise RuntimeError(f"{py_func.__qualname__}: the closure of the tuple-argument variant does not match the "
                           "kernel's (a bug in hetero.compat.cuda.tuple_launch)")
    names: dict[str, Any] = {"co_filename": code.co_filename, "co_firstlineno": code.co_firstlineno,
                             "co_name": code.co_name}
    if hasattr(code, "co_qualname"):  # Python 3.11+
        names["co_qualname"] = code.co_qualname
    stub_code = stub.__code__.replace(**names)
    variant = types.FunctionType(stub_code, py_func.__globals__, py_func.__name__, None,  # type: ignore[attr-defined]
                                 py_func.__closure__)  # type: ignore[attr-defined]
    variant.__dict__.update(py_func.__dict__)
    variant.__qualname__ = py_func.__qualname__
    variant.__module__ = py_func.__module__
    return variant
