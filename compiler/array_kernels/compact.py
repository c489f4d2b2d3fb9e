"""The stream-compaction kernel behind ``nonzero`` (and mask indexing), built directly as IR.

Its input is the inclusive running count ``pos`` of an array's nonzero elements in C order (a
generated scan, :mod:`hetero.compiler.array_kernels.scan`, of the flags ``x != 0``). Work-item ``i < n`` is a
nonzero element where ``pos[i]`` differs from the count before it, and then writes its
multi-index over ``shape`` into column ``pos[i] - 1`` of ``out``, one row of ``count`` int64s
per axis::

    compact_r{rank}(out, pos, n, count, shape_0..)

So the indices come out in C order, as NumPy's ``nonzero`` gives them, with no atomics.
"""

from __future__ import annotations

from hetero.core.types import ArrayType, ScalarType, bool_t, i64

from hetero.compiler.ir import nodes as ir

_LOC = ir.Loc("hetero compact", 1)


def kernel_name(rank: int) -> str:
    return f"compact_r{rank}"


def param_names(rank: int) -> list[str]:
    return ["out", "pos", "n", "count"] + [f"shape_{j}" for j in range(rank)]


def build(rank: int) -> ir.Function:
    """The compaction kernel for arrays of ``rank`` (at least 1) dimensions."""
    if rank < 1:
        raise ValueError(f"compact: rank must be >= 1, got {rank}")
    params = tuple(ir.Param(name, ArrayType(i64, 1) if name in ("out", "pos") else i64) for name in param_names(rank))

    def var(name: str) -> ir.Var:
        return ir.Var(i64, name)

    def const(value: int) -> ir.Const:
        return ir.Const(i64, value)

    locals_: dict[str, ScalarType] = {"i": i64, "prev": i64, "here": i64, "rest": i64, "c": i64}
    found: list[ir.Stmt] = [ir.Assign(_LOC, "rest", var("i"))]
    for j in reversed(range(rank)):  # the last axis varies fastest (C order)
        if j:
            found.append(ir.Assign(_LOC, "c", ir.BinOp(i64, "%", var("rest"), var(f"shape_{j}"))))
            found.append(ir.Assign(_LOC, "rest", ir.BinOp(i64, "//", var("rest"), var(f"shape_{j}"))))
        else:
            found.append(ir.Assign(_LOC, "c", var("rest")))
        column = ir.BinOp(i64, "+", ir.BinOp(i64, "*", const(j), var("count")), ir.BinOp(i64, "-", var("here"), const(1)))
        found.append(ir.Store(_LOC, "out", (column,), var("c")))
    body: list[ir.Stmt] = [
        ir.Assign(_LOC, "prev", const(0)),
        ir.If(_LOC, ir.Compare(bool_t, ">", var("i"), const(0)),
              (ir.Assign(_LOC, "prev", ir.Load(i64, "pos", (ir.BinOp(i64, "-", var("i"), const(1)),))),)),
        ir.Assign(_LOC, "here", ir.Load(i64, "pos", (var("i"),))),
        ir.If(_LOC, ir.Compare(bool_t, "!=", var("here"), var("prev")), tuple(found)),
    ]
    kernel_body = (
        ir.Assign(_LOC, "i", ir.WorkItem(i64, "global_id", 0)),
        ir.If(_LOC, ir.Compare(bool_t, "<", var("i"), var("n")), tuple(body)),
    )
    return ir.Function(kernel_name(rank), params, ir.VOID, locals_, (), kernel_body, True, _LOC)


__all__ = ["build", "kernel_name", "param_names"]
