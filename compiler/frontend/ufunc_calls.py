"""NumPy ufuncs called inside kernels, as Numba's CUDA target allows them.

On scalars, ``np.sin(x)`` is the math function and ``np.add(a, b)`` the operator. On arrays, the
statement ``np.sin(x, out)`` (or ``out=out``) computes every element of ``out`` in this thread, as
nested loops over ``out``'s shape; the inputs must have ``out``'s shape (hetero does not broadcast
inside kernels), and a scalar input is used for every element.
"""

from __future__ import annotations

import ast
from typing import Any

import numpy as np

from hetero.core.types import i64

from hetero.compiler.ir import nodes as ir
from hetero.compiler.frontend.expressions import Value, cast, const

#: ufunc -> (kind, name): "math" is a :data:`hetero.language.MATH_FUNCTIONS` name, "op" a BinOp.
UFUNCS: dict[Any, tuple[str, str]] = {
    np.sin: ("math", "sin"), np.cos: ("math", "cos"), np.tan: ("math", "tan"), np.arcsin: ("math", "asin"),
    np.arccos: ("math", "acos"), np.arctan: ("math", "atan"), np.arctan2: ("math", "atan2"), np.sinh: ("math", "sinh"),
    np.cosh: ("math", "cosh"), np.tanh: ("math", "tanh"), np.arcsinh: ("math", "asinh"), np.arccosh: ("math", "acosh"),
    np.arctanh: ("math", "atanh"), np.exp: ("math", "exp"), np.exp2: ("math", "exp2"), np.expm1: ("math", "expm1"),
    np.log: ("math", "log"), np.log2: ("math", "log2"), np.log10: ("math", "log10"), np.log1p: ("math", "log1p"),
    np.sqrt: ("math", "sqrt"), np.cbrt: ("math", "cbrt"), np.floor: ("math", "floor"), np.ceil: ("math", "ceil"),
    np.trunc: ("math", "trunc"), np.rint: ("math", "rint"), np.fabs: ("math", "fabs"), np.hypot: ("math", "hypot"),
    np.copysign: ("math", "copysign"), np.power: ("math", "pow"), np.fmod: ("math", "fmod"),
    np.add: ("op", "+"), np.subtract: ("op", "-"), np.multiply: ("op", "*"), np.true_divide: ("op", "/"),
    np.floor_divide: ("op", "//"), np.remainder: ("op", "%"), np.minimum: ("op", "min"), np.maximum: ("op", "max"),
}


def is_ufunc(obj: Any) -> bool:
    return isinstance(obj, np.ufunc)


def scalar_call(lowerer: Any, ufunc: np.ufunc, node: ast.Call) -> Value:
    """``np.sin(x)`` on scalars: the math function or the operator."""
    entry = UFUNCS.get(ufunc)
    if entry is None:
        raise lowerer.src.error(node, f"numpy.{ufunc.__name__} is not supported in kernels "
                                      f"(supported: {', '.join(sorted(u.__name__ for u in UFUNCS))})")
    if len(node.args) != ufunc.nin or node.keywords:
        raise lowerer.src.error(node, f"numpy.{ufunc.__name__} takes {ufunc.nin} scalar argument(s) here")
    kind, name = entry
    if kind == "math":
        return lowerer.call_math(name, node)  # type: ignore[no-any-return]
    left, right = (lowerer.expr(a) for a in node.args)
    if name in ("min", "max"):
        return lowerer.minmax(name, left, right, node)  # type: ignore[no-any-return]
    return lowerer.binop(name, left, right, node)  # type: ignore[no-any-return]


def array_statement(lowerer: Any, ufunc: np.ufunc, node: ast.Call, loc: ir.Loc) -> list[ir.Stmt]:
    """``np.sin(x, out)`` as a statement: loops over ``out`` storing the function of each element."""
    args = list(node.args)
    for keyword in node.keywords:
        if keyword.arg != "out":
            raise lowerer.src.error(keyword, f"numpy.{ufunc.__name__}() in kernels takes only out= as a keyword")
        args.append(keyword.value)
    if len(args) != ufunc.nin + 1 or not isinstance(args[-1], ast.Name) or args[-1].id not in lowerer.arrays:
        raise lowerer.src.error(node, f"numpy.{ufunc.__name__} on arrays in a kernel needs its output array: "
                                      f"numpy.{ufunc.__name__}({', '.join(['x'] * ufunc.nin)}, out)")
    out = args[-1].id
    shape = lowerer.arrays[out]
    ndim = len(shape.shape) if isinstance(shape, ir.LocalArray) else (shape.ndim or 0)
    names = [f"_ufunc{node.lineno}_{node.col_offset}_{k}" for k in range(ndim)]
    index = tuple(ir.Var(i64, n) for n in names)
    inputs: list[ast.expr] = []
    for k, arg in enumerate(args[:-1]):
        if isinstance(arg, ast.Name) and arg.id in lowerer.arrays:
            other = lowerer.arrays[arg.id]
            other_ndim = len(other.shape) if isinstance(other, ir.LocalArray) else (other.ndim or 0)
            if other_ndim != ndim:
                raise lowerer.src.error(arg, f"numpy.{ufunc.__name__}: {arg.id} has {other_ndim} dimension(s), the "
                                             f"output {ndim}; hetero does not broadcast inside kernels")
            placeholder = f"_ufunc_in{k}"
            inputs.append(ast.copy_location(ast.Name(placeholder, ast.Load()), arg))
            lowerer.ufunc_loads[placeholder] = ir.Load(lowerer.element_type(arg.id), arg.id, index)
        else:
            inputs.append(arg)
    try:
        value = scalar_call(lowerer, ufunc, ast.copy_location(ast.Call(node.func, inputs, []), node))
    finally:
        lowerer.ufunc_loads.clear()
    body: list[ir.Stmt] = [ir.Store(loc, out, index, cast(value, lowerer.element_type(out)))]
    for axis in reversed(range(ndim)):
        lowerer.assigned.add(names[axis])
        lowerer.record(names[axis], Value(ir.Var(i64, names[axis])), node)
        stop = const(shape.shape[axis], i64) if isinstance(shape, ir.LocalArray) else ir.Shape(i64, out, axis)
        body = [ir.For(loc, names[axis], const(0, i64), stop, const(1, i64), tuple(body))]
    return body
