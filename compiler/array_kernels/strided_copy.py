"""The strided copy kernel, built directly as IR: ``dst[view] = src[view]`` over 1-D buffers.

One definition serves every dialect (OpenCL C, CUDA C, HIP, the CPU emitter): the kernel
takes the two buffers whole, as 1-D arrays of their elements, and the layout as i64
scalar parameters, so one compiled kernel per (rank, element type) serves every shape,
stride and offset::

    copy_r{rank}_{type}(dst, src, n, shape_0.., dst_offset, dst_stride_0.., src_offset, src_stride_0..)

Work-item ``i < n`` (``n`` = the product of the shape) takes the C-order multi-index of
``i`` and copies ``src[src_offset + sum(index_k * src_stride_k)]`` to
``dst[dst_offset + sum(index_k * dst_stride_k)]``. Strides and offsets count elements and
may be negative (flipped views) or zero (broadcast sources). The element type is the bits
moved (hetero copies same-dtype data as unsigned integers of its width), so no value is
ever converted.
"""

from __future__ import annotations

from hetero.core.types import ArrayType, ScalarType, bool_t, i64, u8, u16, u32, u64

from hetero.compiler.ir import nodes as ir

#: The kernels move bits: one unsigned type per element width in bytes.
ELEMENT_BY_WIDTH: dict[int, ScalarType] = {1: u8, 2: u16, 4: u32, 8: u64}
_LOC = ir.Loc("hetero strided copy", 1)


def kernel_name(rank: int, element: ScalarType) -> str:
    return f"copy_r{rank}_{element.name}"


def param_names(rank: int) -> list[str]:
    """The kernel's parameters in order (the launch passes values in this order)."""
    return (["dst", "src", "n"] + [f"shape_{k}" for k in range(rank)]
            + ["dst_offset"] + [f"dst_stride_{k}" for k in range(rank)]
            + ["src_offset"] + [f"src_stride_{k}" for k in range(rank)])


def build(rank: int, element: ScalarType) -> ir.Function:
    """The copy kernel for views of ``rank`` dimensions (0 and up) of ``element``-sized data."""
    if rank < 0:
        raise ValueError(f"strided copy: rank must be >= 0, got {rank}")
    names = param_names(rank)
    params = tuple(ir.Param(name, ArrayType(element, 1) if name in ("dst", "src") else i64) for name in names)

    def var(name: str) -> ir.Var:
        return ir.Var(i64, name)

    def add(left: ir.Expr, right: ir.Expr) -> ir.Expr:
        return ir.BinOp(i64, "+", left, right)

    def mul(left: ir.Expr, right: ir.Expr) -> ir.Expr:
        return ir.BinOp(i64, "*", left, right)

    body: list[ir.Stmt] = []
    locals_: dict[str, ScalarType] = {"i": i64, "rest": i64, "d": i64, "s": i64}
    body.append(ir.Assign(_LOC, "rest", var("i")))
    body.append(ir.Assign(_LOC, "d", var("dst_offset")))
    body.append(ir.Assign(_LOC, "s", var("src_offset")))
    for k in reversed(range(rank)):  # the last axis varies fastest (C order)
        index = f"index_{k}"
        locals_[index] = i64
        if k:
            body.append(ir.Assign(_LOC, index, ir.BinOp(i64, "%", var("rest"), var(f"shape_{k}"))))
            body.append(ir.Assign(_LOC, "rest", ir.BinOp(i64, "//", var("rest"), var(f"shape_{k}"))))
        else:
            body.append(ir.Assign(_LOC, index, var("rest")))
        body.append(ir.Assign(_LOC, "d", add(var("d"), mul(var(index), var(f"dst_stride_{k}")))))
        body.append(ir.Assign(_LOC, "s", add(var("s"), mul(var(index), var(f"src_stride_{k}")))))
    body.append(ir.Store(_LOC, "dst", (var("d"),), ir.Load(element, "src", (var("s"),))))
    kernel_body = (
        ir.Assign(_LOC, "i", ir.WorkItem(i64, "global_id", 0)),
        ir.If(_LOC, ir.Compare(bool_t, "<", var("i"), var("n")), tuple(body)),
    )
    return ir.Function(kernel_name(rank, element), params, ir.VOID, locals_, (), kernel_body, True, _LOC)
