"""Elementwise kernels built directly as IR from an expression tree.

A tree's leaves are the operands (:class:`Input`, an array read through its own layout;
:class:`Scalar`, a value passed as a kernel parameter) and its nodes are operations
(:class:`Apply`, lowered by :mod:`hetero.compiler.array_kernels.elementwise_ops`). One kernel computes the
whole tree per element and stores the root, so a chain of operations (fusion, later) is one
launch. As in :mod:`hetero.compiler.array_kernels.strided_copy`, the layout travels as i64 parameters, so
one compiled kernel per (tree, rank) serves every shape, stride and offset::

    ew_<name>(out, in_0.., s_0.., n, shape_0.., out_offset, out_stride_0..,
              in_0_offset, in_0_stride_0.., ...)

Each array is passed whole, as the 1-D buffer of its base; strides and offsets count
elements and may be negative (flipped views) or zero (broadcast operands).

A flat launch finds an element's index on each axis by dividing its number by the extents
(``i % shape_k``, ``i // shape_k``): two 64-bit divisions per element and axis past the first,
which cost more than the arithmetic of a small tree. A *rows* kernel (``rows=True``, rank >= 2)
is launched over two dimensions instead, ``(shape_last, rows)``: global id 0 is the index on the
last axis and global id 1 the row (the leading axes flattened), so a rank-2 layout (a matrix
minus a broadcast row, ``x - x.mean(axis=0)``) indexes with no division at all.

Values compute in each node's ``compute`` type (f16 computes in f32, as NumPy's f16 loops
do) and are rounded to the node's result type between nodes, so a fused chain gives what
the same operations one at a time give.
"""

from __future__ import annotations

import dataclasses
from typing import Union

from hetero.core.types import ArrayType, ScalarType, bool_t, f16, f32, i64, u8

from hetero.compiler.array_kernels import elementwise_ops
from hetero.compiler.ir import nodes as ir

_LOC = ir.Loc("hetero elementwise", 1)


@dataclasses.dataclass(frozen=True)
class Input:
    """Array operand ``slot`` (the order of ``in_k`` parameters), of element type ``dtype``."""

    slot: int
    dtype: ScalarType


@dataclasses.dataclass(frozen=True)
class Scalar:
    """Scalar operand ``slot`` (a kernel parameter ``s_k``) of type ``dtype``."""

    slot: int
    dtype: ScalarType


@dataclasses.dataclass(frozen=True)
class Apply:
    """Operation ``op`` on ``args``, computed in ``compute`` (the operands' promoted type) with
    result type ``dtype``."""

    op: str
    args: tuple[Node, ...]
    compute: ScalarType
    dtype: ScalarType


Node = Union[Input, Scalar, Apply]


def scalar_param_type(t: ScalarType) -> ScalarType:
    """How a scalar of type ``t`` is passed: f16 as the f32 holding it exactly (an f16
    parameter would need fp16 on the device), bool as one byte."""
    return f32 if t == f16 else u8 if t == bool_t else t


def leaves(tree: Node) -> tuple[list[Input], list[Scalar]]:
    """The distinct array and scalar leaves of ``tree``, each list ordered by slot."""
    inputs: dict[int, Input] = {}
    scalars: dict[int, Scalar] = {}

    def visit(node: Node) -> None:
        if isinstance(node, Input):
            inputs[node.slot] = node
        elif isinstance(node, Scalar):
            scalars[node.slot] = node
        else:
            for arg in node.args:
                visit(arg)

    visit(tree)
    return [inputs[k] for k in sorted(inputs)], [scalars[k] for k in sorted(scalars)]


def param_names(inputs: int, scalars: int, rank: int) -> list[str]:
    """The kernel's parameters in order (the launch passes values in this order)."""
    names = ["out"] + [f"in_{j}" for j in range(inputs)] + [f"s_{j}" for j in range(scalars)]
    names += ["n"] + [f"shape_{k}" for k in range(rank)]
    for array in ["out"] + [f"in_{j}" for j in range(inputs)]:
        names += [f"{array}_offset"] + [f"{array}_stride_{k}" for k in range(rank)]
    return names


def build(tree: Node, out: ScalarType, rank: int, name: str, unit: bool = False, rows: bool = False) -> ir.Function:
    """The kernel computing ``tree`` into an ``out`` array, for views of ``rank`` dimensions.
    Array leaves must have slots 0..k-1 and scalar leaves 0..m-1. ``unit``: every array steps
    by one element along the last axis (rank 1, or a rows kernel; those stride parameters stay,
    unread), so loads and stores are unit-stride and a vendor compiler vectorises them.
    ``rows``: launched over ``(shape_last, rows)`` (see the module docstring), not ``(n,)``."""
    if rank < 0:
        raise ValueError(f"elementwise kernel: rank must be >= 0, got {rank}")
    if unit and rank != 1 and not rows:
        raise ValueError(f"elementwise kernel: a unit-stride kernel has rank 1 or is a rows kernel, got rank {rank}")
    if rows and rank < 2:
        raise ValueError(f"elementwise kernel: a rows kernel has rank 2 or more, got {rank}")
    inputs, scalars = leaves(tree)
    if [leaf.slot for leaf in inputs] != list(range(len(inputs))) or \
            [leaf.slot for leaf in scalars] != list(range(len(scalars))):
        raise ValueError("elementwise kernel: leaf slots must be numbered from 0 without gaps")
    params = [ir.Param("out", ArrayType(out, 1))]
    params += [ir.Param(f"in_{leaf.slot}", ArrayType(leaf.dtype, 1)) for leaf in inputs]
    params += [ir.Param(f"s_{leaf.slot}", scalar_param_type(leaf.dtype)) for leaf in scalars]
    params += [ir.Param(p, i64) for p in param_names(len(inputs), len(scalars), rank)[1 + len(inputs) + len(scalars):]]

    def var(v: str) -> ir.Var:
        return ir.Var(i64, v)

    arrays = ["out"] + [f"in_{leaf.slot}" for leaf in inputs]
    locals_: dict[str, ScalarType] = {"i": i64, "rest": i64}
    body: list[ir.Stmt] = [ir.Assign(_LOC, "rest", var("i"))]
    for array in arrays:
        locals_[f"at_{array}"] = i64
        body.append(ir.Assign(_LOC, f"at_{array}", var(f"{array}_offset")))
    for k in reversed(range(rank)):  # the last axis varies fastest (C order)
        index = f"index_{k}"
        locals_[index] = i64
        if rows and k == rank - 1:  # a rows kernel: the last axis is global id 0, ``rest`` the row
            body.append(ir.Assign(_LOC, index, var("i")))
            body.append(ir.Assign(_LOC, "rest", ir.WorkItem(i64, "global_id", 1)))
        elif k:
            body.append(ir.Assign(_LOC, index, ir.BinOp(i64, "%", var("rest"), var(f"shape_{k}"))))
            body.append(ir.Assign(_LOC, "rest", ir.BinOp(i64, "//", var("rest"), var(f"shape_{k}"))))
        else:
            body.append(ir.Assign(_LOC, index, var("rest")))
        for array in arrays:
            unit_step = unit and k == rank - 1  # unit: the last axis steps by one element in every array
            step = var(index) if unit_step else ir.BinOp(i64, "*", var(index), var(f"{array}_stride_{k}"))
            body.append(ir.Assign(_LOC, f"at_{array}", ir.BinOp(i64, "+", var(f"at_{array}"), step)))
    value = _lower(tree)
    if isinstance(tree, Apply) and tree.dtype == f16 and out != f16:  # a cast of an f16 result: rounded first,
        value = ir.Cast(f32, ir.Cast(f16, value))  # as the stored f16 the cast alone would read
    body.append(ir.Store(_LOC, "out", (var("at_out"),), _convert(value, out, exact=True)))
    # a rows kernel's global id 0 stops at the last axis's extent; the launch covers the rows exactly
    limit = var(f"shape_{rank - 1}") if rows else var("n")
    kernel_body = (
        ir.Assign(_LOC, "i", ir.WorkItem(i64, "global_id", 0)),
        ir.If(_LOC, ir.Compare(bool_t, "<", var("i"), limit), tuple(body)),
    )
    return ir.Function(name, tuple(params), ir.VOID, locals_, (), kernel_body, True, _LOC)


def arith(t: ScalarType) -> ScalarType:
    """The type values of ``t`` compute in (f16 in f32)."""
    return f32 if t == f16 else t


def _lower(node: Node) -> ir.Expr:
    """``node`` as an expression of type ``arith(node.dtype)``."""
    if isinstance(node, Input):
        return _convert(ir.Load(node.dtype, f"in_{node.slot}", (ir.Var(i64, f"at_in_{node.slot}"),)), arith(node.dtype))
    if isinstance(node, Scalar):
        passed = scalar_param_type(node.dtype)
        value: ir.Expr = ir.Var(passed, f"s_{node.slot}")
        return _convert(value, bool_t) if node.dtype == bool_t else value
    compute = arith(node.compute)
    args = []
    as_bool = elementwise_ops.BOOL_OPERANDS.get(node.op, ())  # a condition stays bool
    for position, arg in enumerate(node.args):
        value = _lower(arg)
        if isinstance(arg, Apply) and arg.dtype == f16:  # rounded to f16 between nodes, as eager ops do
            value = ir.Cast(f32, ir.Cast(f16, value))
        args.append(_convert(value, bool_t if position in as_bool else compute))
    return elementwise_ops.lower(node.op, args, compute, arith(node.dtype))


def _convert(e: ir.Expr, t: ScalarType, exact: bool = False) -> ir.Expr:
    """``e`` as type ``t``; ``exact`` keeps an f16 target (else f16 means its compute type)."""
    t = t if exact else arith(t)
    if e.type == t:
        return e
    if t == bool_t:
        zero: ir.Expr = ir.Const(e.type, 0)
        return ir.Compare(bool_t, "!=", e, zero)
    return ir.Cast(t, e)


__all__ = ["Apply", "Input", "Node", "Scalar", "arith", "build", "leaves", "param_names", "scalar_param_type"]
