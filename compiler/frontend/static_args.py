"""Arguments a device function takes at compile time, as Numba-CUDA device functions take them:
a type (``cuda.shared.array(n, ary_dtype)``), an atomic or another intrinsic
(``binop_func(sm, i, v)`` given ``cuda.atomic.add``), an ``operator`` function (``op(a, b)``
given ``operator.add``), or another device function.

Such an argument has no value at run time: the callee is lowered once per object given, with
the parameter naming that object (as a global would), and the call passes the other arguments.
An integer literal given for a parameter the callee uses as an array's shape is bound alike, and
so is a tuple of constants (``(4, 8)``: a shape, read in the callee as a tuple from outside).
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Any

from hetero import language
from hetero.compiler.frontend import operator_calls


@dataclasses.dataclass(frozen=True)
class Bound:
    """A parameter bound to ``value`` at compile time (in a callee's list of argument types)."""

    value: Any

    def __str__(self) -> str:
        """A token for the specialised function's name (the program keeps names apart where tokens meet)."""
        if isinstance(self.value, int):
            return f"s{self.value}".replace("-", "m")
        name = getattr(self.value, "name", None) or getattr(self.value, "__name__", None) or type(self.value).__name__
        return "s" + re.sub(r"\W", "", str(name))


def shape_params(tree: ast.FunctionDef) -> set[str]:
    """The parameters a function's body uses as a dimension of ``cuda.shared.array``/``local.array``:
    an integer literal given for one is bound too, as Numba's literal dispatch binds it."""
    names = {a.arg for a in tree.args.args}
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and node.args and isinstance(node.func, ast.Attribute) \
                and node.func.attr == "array" and isinstance(node.func.value, ast.Attribute) \
                and node.func.value.attr in ("shared", "local"):
            shape = node.args[0]
            for part in shape.elts if isinstance(shape, ast.Tuple) else [shape]:
                if isinstance(part, ast.Name) and part.id in names:
                    found.add(part.id)
    return found


def bound(obj: Any, is_type: bool) -> Bound | None:
    """``obj`` as a compile-time argument if it is one (``is_type``: the frontend reads it as a cast's type)."""
    if is_type or isinstance(obj, (language.Intrinsic, language.DeviceFunction)) or hasattr(obj, "__hetero_foreign__") \
            or operator_calls.is_operator(obj):
        return Bound(obj)
    if type(obj).__module__.startswith("numba.") and callable(getattr(obj, "py_func", None)):  # @numba.jit
        return Bound(obj)
    if isinstance(obj, tuple) and obj and all(type(v) in (int, float, bool) for v in obj):  # a shape from outside
        return Bound(obj)
    return None
