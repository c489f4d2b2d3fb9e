"""Gather and scatter kernels (``take``, ``take_along_axis``, integer-array and mask indexing),
built directly as IR over 1-D buffers, as :mod:`hetero.compiler.array_kernels.strided_copy` is.

Work-item ``i < n`` takes the C-order multi-index ``c`` of ``i`` over the result's shape and
moves one element between ``dst[dst_offset + sum(c_j * dst_stride_j)]`` and ``src[src_offset +
sum(c_j * src_stride_j)]``, where one side (``src`` for a gather, ``dst`` for a scatter) also
adds, for each of ``nidx`` int64 index arrays, ``v * idx{k}_step`` with ``v`` read from
``idx{k}[idx{k}_offset + sum(c_j * idx{k}_stride_j)]`` (the index arrays are broadcast over the
result's axes by zero strides). A negative ``v`` counts from the end (``v + idx{k}_dim``, as
NumPy wraps); one still outside ``[0, idx{k}_dim)`` moves nothing and records ``k + 1`` and the
value in ``err[0]``, ``err[1]``, which the host reads back once and raises as an IndexError::

    gather_r{rank}_k{nidx}_{type}(dst, src, err, idx0.., n, shape_0.., dst_offset, dst_stride_0..,
        src_offset, src_stride_0.., idx0_offset, idx0_stride_0.., idx0_dim, idx0_step, ..)

(``scatter_...`` for the other direction). Elements move as unsigned integers of their width,
so no value is converted.
"""

from __future__ import annotations

import dataclasses

from hetero.core.types import ArrayType, ScalarType, bool_t, i64

from hetero.compiler.ir import nodes as ir

_LOC = ir.Loc("hetero gather", 1)


@dataclasses.dataclass(frozen=True)
class Gather:
    """One gather (or scatter) kernel: ``rank`` result axes, ``nidx`` index arrays, ``element`` bits."""

    rank: int
    nidx: int
    element: ScalarType
    scatter: bool = False

    @property
    def name(self) -> str:
        return f"{'scatter' if self.scatter else 'gather'}_r{self.rank}_k{self.nidx}_{self.element.name}"

    def param_names(self) -> list[str]:
        """The kernel's parameters in order (the launch passes values in this order)."""
        axes = range(self.rank)
        names = ["dst", "src", "err"] + [f"idx{k}" for k in range(self.nidx)] + ["n"]
        names += [f"shape_{j}" for j in axes]
        names += ["dst_offset"] + [f"dst_stride_{j}" for j in axes]
        names += ["src_offset"] + [f"src_stride_{j}" for j in axes]
        for k in range(self.nidx):
            names += [f"idx{k}_offset"] + [f"idx{k}_stride_{j}" for j in axes] + [f"idx{k}_dim", f"idx{k}_step"]
        return names


def build(spec: Gather) -> ir.Function:
    """The kernel of ``spec`` (see the module docstring)."""
    if spec.rank < 0 or spec.nidx < 0:
        raise ValueError(f"gather: no kernel for {spec}")
    names = spec.param_names()
    arrays = {"dst": spec.element, "src": spec.element, "err": i64, **{f"idx{k}": i64 for k in range(spec.nidx)}}
    params = tuple(ir.Param(name, ArrayType(arrays[name], 1) if name in arrays else i64) for name in names)

    def var(name: str) -> ir.Var:
        return ir.Var(i64, name)

    def add(left: ir.Expr, right: ir.Expr) -> ir.Expr:
        return ir.BinOp(i64, "+", left, right)

    def mul(left: ir.Expr, right: ir.Expr) -> ir.Expr:
        return ir.BinOp(i64, "*", left, right)

    def const(value: int) -> ir.Const:
        return ir.Const(i64, value)

    indexed = "d" if spec.scatter else "s"
    body: list[ir.Stmt] = [ir.Assign(_LOC, "rest", var("i")), ir.Assign(_LOC, "d", var("dst_offset")),
                           ir.Assign(_LOC, "s", var("src_offset")), ir.Assign(_LOC, "bad", const(0))]
    locals_: dict[str, ScalarType] = {"i": i64, "rest": i64, "d": i64, "s": i64, "bad": i64, "v": i64}
    for k in range(spec.nidx):
        locals_[f"q{k}"] = i64
        body.append(ir.Assign(_LOC, f"q{k}", var(f"idx{k}_offset")))
    for j in reversed(range(spec.rank)):  # the last axis varies fastest (C order)
        index = f"c_{j}"
        locals_[index] = i64
        if j:
            body.append(ir.Assign(_LOC, index, ir.BinOp(i64, "%", var("rest"), var(f"shape_{j}"))))
            body.append(ir.Assign(_LOC, "rest", ir.BinOp(i64, "//", var("rest"), var(f"shape_{j}"))))
        else:
            body.append(ir.Assign(_LOC, index, var("rest")))
        body.append(ir.Assign(_LOC, "d", add(var("d"), mul(var(index), var(f"dst_stride_{j}")))))
        body.append(ir.Assign(_LOC, "s", add(var("s"), mul(var(index), var(f"src_stride_{j}")))))
        for k in range(spec.nidx):
            body.append(ir.Assign(_LOC, f"q{k}", add(var(f"q{k}"), mul(var(index), var(f"idx{k}_stride_{j}")))))
    for k in range(spec.nidx):
        dim = var(f"idx{k}_dim")
        raw = ir.Load(i64, f"idx{k}", (var(f"q{k}"),))
        body.append(ir.Assign(_LOC, "v", raw))
        body.append(ir.If(_LOC, ir.Compare(bool_t, "<", var("v"), const(0)), (ir.Assign(_LOC, "v", add(var("v"), dim)),)))
        outside = ir.Logical(bool_t, "or", ir.Compare(bool_t, "<", var("v"), const(0)), ir.Compare(bool_t, ">=", var("v"), dim))
        body.append(ir.If(_LOC, outside, (
            ir.Assign(_LOC, "bad", const(1)),
            ir.Store(_LOC, "err", (const(0),), const(k + 1)),
            ir.Store(_LOC, "err", (const(1),), raw),
        ), (ir.Assign(_LOC, indexed, add(var(indexed), mul(var("v"), var(f"idx{k}_step")))),)))
    body.append(ir.If(_LOC, ir.Compare(bool_t, "==", var("bad"), const(0)),
                      (ir.Store(_LOC, "dst", (var("d"),), ir.Load(spec.element, "src", (var("s"),))),)))
    kernel_body = (
        ir.Assign(_LOC, "i", ir.WorkItem(i64, "global_id", 0)),
        ir.If(_LOC, ir.Compare(bool_t, "<", var("i"), var("n")), tuple(body)),
    )
    return ir.Function(spec.name, params, ir.VOID, locals_, (), kernel_body, True, _LOC)


__all__ = ["Gather", "build"]
