"""Calls of the ``operator`` module's functions in a kernel (``op(a, b)`` with ``op`` given as
``operator.add``, as Numba-CUDA kernels and device functions take them): each call is the
operator's expression written out (``a + b``, ``a < b``, ``-a``), lowered with the kernel's typing
rules as if the user had written it. The in-place forms (``operator.iadd``) are the plain
operators on scalars, which is all a kernel's operands are."""

from __future__ import annotations

import ast
import operator
from typing import Any

_BINARY: dict[Any, type[ast.operator]] = {
    operator.add: ast.Add, operator.sub: ast.Sub, operator.mul: ast.Mult, operator.truediv: ast.Div,
    operator.floordiv: ast.FloorDiv, operator.mod: ast.Mod, operator.pow: ast.Pow, operator.and_: ast.BitAnd,
    operator.or_: ast.BitOr, operator.xor: ast.BitXor, operator.lshift: ast.LShift, operator.rshift: ast.RShift,
    operator.iadd: ast.Add, operator.isub: ast.Sub, operator.imul: ast.Mult, operator.itruediv: ast.Div,
    operator.ifloordiv: ast.FloorDiv, operator.imod: ast.Mod, operator.ipow: ast.Pow, operator.iand: ast.BitAnd,
    operator.ior: ast.BitOr, operator.ixor: ast.BitXor, operator.ilshift: ast.LShift, operator.irshift: ast.RShift,
}
_COMPARE: dict[Any, type[ast.cmpop]] = {
    operator.lt: ast.Lt, operator.le: ast.LtE, operator.gt: ast.Gt, operator.ge: ast.GtE, operator.eq: ast.Eq,
    operator.ne: ast.NotEq,
}
_UNARY: dict[Any, type[ast.unaryop]] = {
    operator.neg: ast.USub, operator.pos: ast.UAdd, operator.not_: ast.Not, operator.invert: ast.Invert,
}
#: Every operator function a kernel may call (and a device function may be given).
FUNCTIONS = frozenset([*_BINARY, *_COMPARE, *_UNARY, operator.abs])


def is_operator(obj: Any) -> bool:
    """Whether ``obj`` is one of the ``operator`` functions a kernel may call."""
    try:
        return obj in FUNCTIONS
    except TypeError:  # an unhashable object
        return False


def written_out(callee: Any, node: ast.Call, error: Any) -> ast.expr:
    """The expression ``callee(*node.args)`` stands for; ``error(node, message)`` builds the error for a
    call with the wrong number of arguments."""
    args = node.args
    want = 1 if callee in _UNARY or callee is operator.abs else 2
    if len(args) != want or node.keywords:
        raise error(node, f"operator.{callee.__name__}() takes {want} positional argument(s), got {len(args)}")
    if callee in _BINARY:
        out: ast.expr = ast.BinOp(args[0], _BINARY[callee](), args[1])
    elif callee in _COMPARE:
        out = ast.Compare(args[0], [_COMPARE[callee]()], [args[1]])
    elif callee in _UNARY:
        out = ast.UnaryOp(_UNARY[callee](), args[0])
    else:  # operator.abs: the built-in abs()
        out = ast.Call(ast.Name("abs", ast.Load()), args, [])
    return ast.fix_missing_locations(ast.copy_location(out, node))
