"""Tuple values inside a kernel or device function, as Numba types them: a local name holding a
tuple (``bin = (tx, ty)``, ``gid = cuda.grid(2)``, ``t = f(x)`` of a device function returning a
tuple), a tuple indexed with a constant (``bin[0]``, ``(a, b)[1]``, ``SHAPE[0]`` of a tuple
from outside the kernel), used whole as an array index (``sm[bin]``, ``cuda.atomic.add(a, bin, v)``),
unpacked (``x, y = bin``) and measured (``len(bin)``).

A tuple local has no value of its own at run time: each item lives in a scalar local of its own,
``name__k``, so the C emitters see scalars only. What stays refused says so, with the remedy: a
tuple indexed with a value computed at run time, a tuple local that is also given a scalar or a
tuple of another length, a tuple used as a whole anywhere else (arithmetic, a call's argument).
"""

from __future__ import annotations

import ast
import math
from typing import TYPE_CHECKING, Any

from hetero import language
from hetero.compiler.frontend.source import MISSING, FunctionSource, function_source
from hetero.compiler.frontend.values import Value, weak
from hetero.compiler.ir import nodes as ir

#: The intrinsics whose value is a tuple when asked for more than one axis.
_GRID = ("cuda.grid", "cuda.gridsize")


def item_name(name: str, k: int) -> str:
    """The scalar local holding item ``k`` of the tuple local ``name``."""
    return f"{name}__{k}"


def returns_tuple(tree: ast.FunctionDef) -> bool:
    """Whether a device function's body returns a tuple (``return a, b``)."""
    body = ast.Module(body=tree.body, type_ignores=[])
    return any(isinstance(n, ast.Return) and isinstance(n.value, ast.Tuple) for n in ast.walk(body))


class TupleLocals:
    """The tuple forms of the kernel language (mixed into the frontend's Lowerer)."""

    if TYPE_CHECKING:
        src: FunctionSource
        tuple_locals: dict[str, int]
        var_types: dict[str, Any]
        assigned: set[str]

        def expr(self, node: ast.expr) -> Value: ...

        def static(self, node: ast.expr) -> Any: ...

        def tuple_values(self, node: ast.expr) -> list[Value]: ...

        def var_type(self, name: str, node: ast.AST) -> Any: ...

        def constant(self, obj: Any, node: ast.AST, name: str) -> Value: ...

    def is_tuple_value(self, node: ast.expr) -> bool:
        """Whether ``node`` denotes a tuple computed in the kernel (not a constant one from outside)."""
        if isinstance(node, ast.Tuple):
            return True
        if isinstance(node, ast.Name):
            return node.id in self.tuple_locals
        if isinstance(node, ast.Call):
            callee = self.static(node.func)
            if isinstance(callee, language.Intrinsic) and callee.name in _GRID:
                arg = node.args[0] if len(node.args) == 1 and not node.keywords else None
                return isinstance(arg, ast.Constant) and type(arg.value) is int and arg.value > 1
            if isinstance(callee, language.Intrinsic) and callee.name == "cuda.match_all_sync":
                return True
            if callee is math.frexp:
                return True
            if isinstance(callee, language.DeviceFunction):
                return returns_tuple(function_source(callee.py_func).tree)
        return False

    def local_items(self, name: str, node: ast.AST) -> list[Value]:
        """The items of the tuple local ``name``, each read from its scalar local."""
        return [Value(ir.Var(self.var_type(item_name(name, k), node), item_name(name, k)))
                for k in range(self.tuple_locals[name])]

    def tuple_target(self, target: ast.Name, count: int, node: ast.stmt) -> ast.Tuple:
        """``name = <a tuple of count items>``: the names its items are assigned to, as a tuple target."""
        name = target.id
        if name in self.var_types and name not in self.tuple_locals:
            raise self.src.error(node, f"{name!r} holds a scalar elsewhere; a kernel's local holds a scalar or a "
                                       "tuple, not both: give the tuple a name of its own")
        known = self.tuple_locals.setdefault(name, count)
        if known != count:
            raise self.src.error(node, f"{name!r} holds a tuple of {known} item(s) elsewhere and {count} here; give "
                                       "each tuple a name of its own")
        names = [item_name(name, k) for k in range(count)]
        self.assigned.update(names)
        return ast.copy_location(ast.Tuple([ast.copy_location(ast.Name(n, ast.Store()), target) for n in names],
                                           ast.Store()), target)

    def tuple_item(self, node: ast.Subscript) -> Value | None:
        """``t[k]`` for a tuple ``t`` (a local, a literal, cuda.grid(n), a constant from outside); None
        when ``node.value`` is not a tuple."""
        target = node.value
        if self.is_tuple_value(target):
            items = self.local_items(target.id, node) if isinstance(target, ast.Name) else self.tuple_values(target)
            return items[self.tuple_index(node, len(items))]
        obj = self.static(target) if isinstance(target, (ast.Name, ast.Attribute)) else MISSING
        if isinstance(obj, tuple):
            if any(isinstance(item, tuple) for item in obj):
                raise self.src.error(node, f"{ast.unparse(target)} is a tuple of tuples from outside the kernel; index "
                                           "it with constants all the way down, or pass its items as arguments")
            return self.constant(obj[self.tuple_index(node, len(obj))], node, ast.unparse(node))
        return None

    def tuple_index(self, node: ast.Subscript, length: int) -> int:
        """The item a tuple's subscript names: a constant integer in range (negative counts from the end)."""
        if isinstance(node.slice, ast.Slice):
            raise self.src.error(node, "slicing a tuple is not supported in kernels: index its items one at a time")
        value = self.expr(node.slice)
        if not (isinstance(value.expr, ir.Const) and isinstance(value.expr.value, int)
                and not isinstance(value.expr.value, bool)):
            raise self.src.error(node.slice, f"a tuple in a kernel is indexed with a constant integer, not "
                                             f"{ast.unparse(node.slice)!r}; unpack it (a, b = t) or use an array "
                                             "(cuda.local.array) to index with a value computed at run time")
        k = int(value.expr.value)
        if not -length <= k < length:
            raise self.src.error(node, f"tuple index {k} is out of range: the tuple has {length} item(s)")
        return k % length

    def tuple_length(self, node: ast.expr) -> Value | None:
        """``len(t)`` of a tuple (a constant); None when ``node`` is not a tuple."""
        if isinstance(node, ast.Name) and node.id in self.tuple_locals:
            return weak(self.tuple_locals[node.id])
        if isinstance(node, ast.Tuple):
            return weak(len(node.elts))
        obj = self.static(node) if isinstance(node, (ast.Name, ast.Attribute)) else MISSING
        if isinstance(obj, tuple):
            return weak(len(obj))
        return None

    def index_items(self, index: ast.expr) -> list[Value] | None:
        """The per-axis values of an array index given as a tuple value (``sm[bin]``, ``a[cuda.grid(2)]``);
        None for any other index (a literal ``a[i, j]`` is read axis by axis)."""
        if isinstance(index, ast.Tuple) or not self.is_tuple_value(index):
            return None
        return self.local_items(index.id, index) if isinstance(index, ast.Name) else self.tuple_values(index)

    def whole_tuple_error(self, node: ast.Name) -> Exception:
        """The error for a tuple local used as a whole where a scalar is wanted."""
        return self.src.error(node, f"{node.id!r} is a tuple: index it with a constant ({node.id}[0]), unpack it "
                                    f"(a, b = {node.id}) or index an array with it; a tuple cannot be used whole here")
