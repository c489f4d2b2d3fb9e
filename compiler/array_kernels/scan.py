"""Scan kernels (cumulative sum and product), built directly as IR: one work-group per row.

One definition serves every dialect (the CPU emitter runs the barriers in its work-group
loops). As :mod:`hetero.compiler.array_kernels.reduction`, the input is the whole buffer under a strided
view as a 1-D array and the layout travels as i64 parameters (outer axes, then the scanned
axis last), so one compiled kernel per :class:`Scan` serves every shape::

    scan_{op}_{source}_{acc}_{out}_o{outer}(dst, src, n_out, seg_len, include_initial,
        shape_0.., src_offset, src_stride_0..)

Work-group ``m`` scans row ``m`` in blocks of :data:`~hetero.compiler.array_kernels.reduction.GROUP`
elements, left to right: each block is scanned in local memory by a Hillis–Steele tree
(step 1, 2, 4 ...: item ``t`` folds in item ``t - step``), then the running total of the
blocks before it (the *block offset*, ``carry``) is folded in on the left, and the block's
total is folded into ``carry``. That order is fixed, so the result is the same bits every
time on one device. ``dst`` is contiguous, rows of ``seg_len + include_initial``; with
``include_initial`` each row starts with the identity (0 or 1).
"""

from __future__ import annotations

import dataclasses

from hetero.core.types import ArrayType, ScalarType, bool_t, i64

from hetero.compiler.ir import nodes as ir
from hetero.compiler.array_kernels.reduction import GROUP, offset_code, offset_locals

OPS = ("sum", "prod")
_LOC = ir.Loc("hetero scan", 1)


@dataclasses.dataclass(frozen=True)
class Scan:
    """One scan kernel: ``source`` read, folded as ``acc``, stored as ``out``; ``outer`` kept axes."""

    op: str
    source: ScalarType
    acc: ScalarType
    out: ScalarType
    outer: int

    @property
    def name(self) -> str:
        return f"scan_{self.op}_{self.source.name}_{self.acc.name}_{self.out.name}_o{self.outer}"

    def param_names(self) -> list[str]:
        rank = self.outer + 1
        return (["dst", "src", "n_out", "seg_len", "include_initial"] + [f"shape_{k}" for k in range(rank)]
                + ["src_offset"] + [f"src_stride_{k}" for k in range(rank)])


def build(spec: Scan) -> ir.Function:
    """The kernel of ``spec`` (see the module docstring)."""
    if spec.op not in OPS or spec.outer < 0:
        raise ValueError(f"scan: no kernel for {spec}")
    acc, W, last = spec.acc, GROUP, spec.outer
    params = tuple(ir.Param(name, ArrayType(spec.out if name == "dst" else spec.source, 1) if name in ("dst", "src") else i64)
                   for name in spec.param_names())

    def v64(name: str) -> ir.Var:
        return ir.Var(i64, name)

    def vacc(name: str) -> ir.Var:
        return ir.Var(acc, name)

    def const(value: int) -> ir.Const:
        return ir.Const(i64, value)

    def fold(a: ir.Expr, b: ir.Expr) -> ir.Expr:
        return ir.BinOp(acc, "+" if spec.op == "sum" else "*", a, b)

    def stored(value: ir.Expr) -> ir.Expr:
        return value if spec.out == acc else ir.Cast(spec.out, value)

    identity = ir.Const(acc, (0.0 if spec.op == "sum" else 1.0) if acc.kind == "f" else (0 if spec.op == "sum" else 1))
    t, j = v64("t"), v64("j")
    row = v64("row")
    loaded: ir.Expr = ir.Load(spec.source, "src", (ir.BinOp(i64, "+", v64("base"), ir.BinOp(i64, "*", j, v64(f"src_stride_{last}"))),))
    if spec.source != acc:
        loaded = ir.Cast(acc, loaded)
    block: list[ir.Stmt] = [
        ir.Assign(_LOC, "j", ir.BinOp(i64, "+", v64("start"), t)),
        ir.Assign(_LOC, "value", identity),
        ir.If(_LOC, ir.Compare(bool_t, "<", j, v64("seg_len")), (ir.Assign(_LOC, "value", loaded),)),
        ir.Store(_LOC, "block", (t,), vacc("value")),
        ir.Barrier(_LOC),
    ]
    step = 1
    while step < W:
        block += [
            ir.If(_LOC, ir.Compare(bool_t, ">=", t, const(step)),
                  (ir.Assign(_LOC, "value", fold(ir.Load(acc, "block", (ir.BinOp(i64, "-", t, const(step)),)), vacc("value"))),)),
            ir.Barrier(_LOC),
            ir.Store(_LOC, "block", (t,), vacc("value")),
            ir.Barrier(_LOC),
        ]
        step *= 2
    block += [
        ir.If(_LOC, ir.Compare(bool_t, "<", j, v64("seg_len")),
              (ir.Store(_LOC, "dst", (ir.BinOp(i64, "+", row, j),), stored(fold(vacc("carry"), vacc("value")))),)),
        ir.Assign(_LOC, "carry", fold(vacc("carry"), ir.Load(acc, "block", (const(W - 1),)))),
        ir.Barrier(_LOC),  # every item has read block[W - 1] before the next block overwrites it
    ]
    body: list[ir.Stmt] = [
        ir.Assign(_LOC, "m", ir.WorkItem(i64, "group_id", 0)),
        ir.Assign(_LOC, "t", ir.WorkItem(i64, "local_id", 0)),
        ir.Assign(_LOC, "base", v64("src_offset")),
        *offset_code("o", v64("m"), range(spec.outer), "base"),
        ir.Assign(_LOC, "row", ir.BinOp(i64, "+", ir.BinOp(i64, "*", v64("m"), ir.BinOp(i64, "+", v64("seg_len"), v64("include_initial"))),
                                        v64("include_initial"))),
        ir.If(_LOC, ir.Logical(bool_t, "and", ir.Compare(bool_t, "==", t, const(0)),
                               ir.Compare(bool_t, "!=", v64("include_initial"), const(0))),
              (ir.Store(_LOC, "dst", (ir.BinOp(i64, "-", row, const(1)),), stored(identity)),)),
        ir.Assign(_LOC, "carry", identity),
        ir.For(_LOC, "start", const(0), v64("seg_len"), const(W), tuple(block)),
    ]
    locals_: dict[str, ScalarType] = {"m": i64, "t": i64, "base": i64, "row": i64, "j": i64, "start": i64,
                                      "value": acc, "carry": acc, **offset_locals("o", range(spec.outer))}
    return ir.Function(spec.name, params, ir.VOID, locals_, (ir.LocalArray("block", acc, (W,)),), tuple(body), True, _LOC,
                       features=frozenset({"barrier"}))


__all__ = ["OPS", "Scan", "build"]
