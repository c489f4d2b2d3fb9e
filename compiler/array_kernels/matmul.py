"""hetero's own matrix product kernel, built directly as IR: work-group tiles in local memory.

It runs ``hetero.matmul`` where no vendor BLAS does (integer dtypes, a device without
CLBlast, or ``HETERO_BLAS=off``). One definition serves every dialect (OpenCL C, CUDA C,
HIP, the CPU emitter). Each work-group of :data:`TILE` x :data:`TILE` work-items computes a
``TILE x TILE`` block of one matrix of the batch: for each step of ``TILE`` along K it loads a
block of ``a`` and one of ``b`` into local memory (zero past the edges), waits at a barrier and
folds the block in increasing k. So an output element is summed in the order k = 0, 1, ...,
K-1, in the accumulator type (float32 for float16 operands, else the result type; integers
wrap as NumPy's do).

The operands are the whole buffers under strided views, as 1-D arrays; their layouts travel
as i64 scalar parameters, so one compiled kernel per :class:`Matmul` (dtypes, batch rank)
serves every shape, stride and offset::

    matmul_{a}_{b}_{acc}_{out}_b{rank}(c, a, b, M, N, K, mtiles, shape_0.., c_offset, c_bstride_0..,
        a_offset, a_bstride_0.., a_rs, b_offset, b_bstride_0.., b_rs)

The elements of a row are contiguous in both operands (the host copies an operand whose last
axis has another stride first, an O(MK) copy beside the O(MNK) product): then neighbouring
work-items load neighbouring elements, which the CPU runtimes' vectorisers need (PoCL ran a
strided-column variant several times slower). Rows may be any distance apart (``a_rs``, ``b_rs``).

The launch is ``(ntiles * TILE, mtiles * TILE * batch)`` work-items in groups of
``(TILE, TILE)``: ``group_id(1)`` numbers the row block ``% mtiles`` of matrix ``// mtiles``
of the batch (C order over ``shape_k``; a broadcast operand has batch stride 0). ``c`` is
written at ``c_offset + batch offset + row * N + col``.
"""

from __future__ import annotations

import dataclasses

from hetero.core.types import ArrayType, ScalarType, bool_t, i64

from hetero.compiler.ir import nodes as ir

#: Work-items along each side of a work-group (TILE * TILE = 256 items per group).
TILE = 16
_LOC = ir.Loc("hetero matmul", 1)


@dataclasses.dataclass(frozen=True)
class Matmul:
    """One matmul kernel: element types of ``a`` and ``b``, the accumulator, the stored result,
    and the rank of the (merged) batch shape (at least 1: a single matrix is a batch of one)."""

    a: ScalarType
    b: ScalarType
    acc: ScalarType
    out: ScalarType
    rank: int

    @property
    def name(self) -> str:
        return f"matmul_{self.a.name}_{self.b.name}_{self.acc.name}_{self.out.name}_b{self.rank}"

    def param_names(self) -> list[str]:
        """The kernel's parameters in order (the launch passes values in this order)."""
        ranks = range(self.rank)
        names = ["c", "a", "b", "M", "N", "K", "mtiles", *(f"shape_{k}" for k in ranks)]
        for operand in ("c", "a", "b"):
            names += [f"{operand}_offset", *(f"{operand}_bstride_{k}" for k in ranks)]
            if operand != "c":
                names.append(f"{operand}_rs")
        return names


def _i64(name: str) -> ir.Var:
    return ir.Var(i64, name)


def _bin(op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.BinOp(left.type, op, left, right)


def _less(left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.Compare(bool_t, "<", left, right)


def _both(left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.Logical(bool_t, "and", left, right)


def _const(t: ScalarType, value: int | float) -> ir.Const:
    return ir.Const(t, float(value) if t.kind == "f" else int(value))


def _batch_offsets(rank: int) -> list[ir.Stmt]:
    """Statements setting ``c_base``, ``a_base``, ``b_base`` to the offsets of matrix ``bidx``
    of the batch (C order over ``shape_k``)."""
    body: list[ir.Stmt] = [ir.Assign(_LOC, "rest", _i64("bidx"))]
    body += [ir.Assign(_LOC, f"{o}_base", _i64(f"{o}_offset")) for o in ("c", "a", "b")]
    for k in reversed(range(rank)):  # the last axis varies fastest
        body.append(ir.Assign(_LOC, "here", _bin("%", _i64("rest"), _i64(f"shape_{k}"))))
        body.append(ir.Assign(_LOC, "rest", _bin("//", _i64("rest"), _i64(f"shape_{k}"))))
        for o in ("c", "a", "b"):
            step = _bin("*", _i64("here"), _i64(f"{o}_bstride_{k}"))
            body.append(ir.Assign(_LOC, f"{o}_base", _bin("+", _i64(f"{o}_base"), step)))
    return body


def _load(spec: Matmul, operand: str, row: ir.Expr, col: ir.Expr) -> ir.Expr:
    """``operand[row, col]`` of the current batch matrix, as the accumulator type."""
    position = _bin("+", _i64(f"{operand}_base"), _bin("+", _bin("*", row, _i64(f"{operand}_rs")), col))
    element = spec.a if operand == "a" else spec.b
    loaded: ir.Expr = ir.Load(element, operand, (position,))
    return loaded if element == spec.acc else ir.Cast(spec.acc, loaded)


def build(spec: Matmul) -> ir.Function:
    """The kernel of ``spec`` (see the module docstring)."""
    if spec.rank < 1:
        raise ValueError(f"matmul: the batch rank is at least 1, got {spec}")
    arrays = {"c": spec.out, "a": spec.a, "b": spec.b}
    params = tuple(ir.Param(name, ArrayType(arrays[name], 1) if name in arrays else i64) for name in spec.param_names())
    acc, T = spec.acc, TILE
    scalars = ("lx", "ly", "col", "row", "group", "bidx", "rest", "here", "c_base", "a_base", "b_base", "t", "k", "ka",
               "kb")
    locals_: dict[str, ScalarType] = {name: i64 for name in scalars}
    locals_["sum"] = acc
    lx, ly, col, row, t, k = (_i64(n) for n in ("lx", "ly", "col", "row", "t", "k"))
    zero = _const(acc, 0)
    body: list[ir.Stmt] = [
        ir.Assign(_LOC, "lx", ir.WorkItem(i64, "local_id", 0)),
        ir.Assign(_LOC, "ly", ir.WorkItem(i64, "local_id", 1)),
        ir.Assign(_LOC, "col", ir.WorkItem(i64, "global_id", 0)),
        ir.Assign(_LOC, "group", ir.WorkItem(i64, "group_id", 1)),
        ir.Assign(_LOC, "bidx", _bin("//", _i64("group"), _i64("mtiles"))),
        ir.Assign(_LOC, "row", _bin("+", _bin("*", _bin("%", _i64("group"), _i64("mtiles")), _const(i64, T)), ly)),
        *_batch_offsets(spec.rank),
        ir.Assign(_LOC, "sum", zero),
        ir.For(_LOC, "t", _const(i64, 0), _i64("K"), _const(i64, T), (
            ir.Assign(_LOC, "ka", _bin("+", t, lx)),
            ir.Assign(_LOC, "kb", _bin("+", t, ly)),
            ir.Store(_LOC, "tile_a", (ly, lx), zero),
            ir.If(_LOC, _both(_less(row, _i64("M")), _less(_i64("ka"), _i64("K"))),
                  (ir.Store(_LOC, "tile_a", (ly, lx), _load(spec, "a", row, _i64("ka"))),)),
            ir.Store(_LOC, "tile_b", (ly, lx), zero),
            ir.If(_LOC, _both(_less(_i64("kb"), _i64("K")), _less(col, _i64("N"))),
                  (ir.Store(_LOC, "tile_b", (ly, lx), _load(spec, "b", _i64("kb"), col)),)),
            ir.Barrier(_LOC),
            ir.For(_LOC, "k", _const(i64, 0), _const(i64, T), _const(i64, 1), (
                ir.Assign(_LOC, "sum", _bin("+", ir.Var(acc, "sum"),
                                            _bin("*", ir.Load(acc, "tile_a", (ly, k)), ir.Load(acc, "tile_b", (k, lx))))),
            )),
            ir.Barrier(_LOC),
        )),
    ]
    value: ir.Expr = ir.Var(acc, "sum")
    if spec.out != acc:
        value = ir.Cast(spec.out, value)
    position = _bin("+", _i64("c_base"), _bin("+", _bin("*", row, _i64("N")), col))
    body.append(ir.If(_LOC, _both(_less(row, _i64("M")), _less(col, _i64("N"))),
                      (ir.Store(_LOC, "c", (position,), value),)))
    local_arrays = (ir.LocalArray("tile_a", acc, (T, T)), ir.LocalArray("tile_b", acc, (T, T)))
    features = {"barrier"} | ({"fp64"} if "f64" in (spec.a.name, spec.b.name, spec.acc.name, spec.out.name) else set())
    return ir.Function(spec.name, params, ir.VOID, locals_, local_arrays, tuple(body), True, _LOC,
                       features=frozenset(features))


__all__ = ["TILE", "Matmul", "build"]
