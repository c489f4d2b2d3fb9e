"""hetero's Gram kernel: a matrix product with a small output and a deep K (PCA's ``x.T @ x``,
64 x 64 from 200k rows), split over K, built directly as IR.

A product ``c = a @ b`` (``a``: M x K, ``b``: K x N) is summed in two launches:

1. :func:`build` (``gram_*``): work-group ``(g0, g1)`` takes the chunk
   ``[c * chunk, min((c + 1) * chunk, K))`` of K (``c = g1 // mtiles``; ``chunk`` is
   :func:`chunk_for` of K) and a tile of
   :data:`TILE_N` columns by ``rows * group_rows`` rows of the output, and writes that tile's
   partial sums into ``p[c, m, n]`` (a ``chunks x M x N`` array in the accumulator type). Each
   partial is summed in increasing k, as ``acc = acc + a[m, k] * b[k, n]`` (two roundings:
   the emitters turn off floating-point contraction).
2. :func:`build_merge` (``gram_merge_*``): one work-item per output element adds the chunks'
   partials in increasing chunk order and stores the sum, cast to the result type, at
   ``c_offset + row * c_rs + col * c_cs``.

So every output element is the same sequence of operations on every run, whatever the number
of cores or the order the work-groups run in: the result has the same bits every time (the
chunk follows from K alone, never from the device). The two layouts below
perform the same operations on each element, so they give the same bits too.

``a`` is read through any strides in place (``a_offset + m * a_rs + k * a_cs``; a transposed
view, as ``x.T``, has ``a_rs = 1``): within a chunk each ``a[m, k]`` is the same for every
work-item of a row of the tile, a broadcast. ``b``'s columns must be contiguous
(``b_offset + k * b_rs + n``), so neighbouring columns are neighbouring elements; the host
(:mod:`hetero.arraylib.linalg.blas`) computes ``c.T = b.T @ a.T`` where only ``a``'s rows are
contiguous, and copies ``b`` where neither is. The layouts differ in how the CPU OpenCL
compilers vectorise (:func:`hetero.arraylib.linalg.gram.layout_for` chooses per device):

- ``items``: one work-item per column (64 in dimension 0), each holding :attr:`Gram.rows`
  accumulators in registers: Intel's CPU runtime (and a GPU) vectorises across work-items, so a
  load of ``b[k, n]`` is one vector load (PCA's 64 x 64 x 200k product: 17 to 36 ms there on
  2026-12-07, against 240 to 400 ms in the ``columns`` layout).
- ``columns``: one work-item per row block, looping over the tile's 64 columns in a private
  array of accumulators: PoCL runs a work-group as a loop over its work-items and vectorises
  only innermost loops, which this makes the loop over contiguous columns (the same product:
  33 to 70 ms on PoCL 3.1, against 690 to 800 ms in the ``items`` layout).

Columns past ``N`` are not loaded: for ``N >= TILE_N`` the last tile is moved left to end at
``N`` (its columns of the previous tile are computed again, not stored); for ``N < TILE_N`` the
column index is clamped (a slower gather, correct). Rows past ``M`` are clamped likewise and not stored.
"""

from __future__ import annotations

import dataclasses

from hetero.compiler.ir import nodes as ir
from hetero.core.types import ArrayType, ScalarType, bool_t, i64

#: K summed by each work-group at most (the chunk every partial covers, with :func:`chunk_for`).
CHUNK = 4096
#: The chunks a product aims at when K is short of ``CHUNK_TARGET * CHUNK`` (work-groups enough for the cores).
CHUNK_TARGET = 16
#: The shortest chunk, and what every shorter-than-CHUNK chunk is a multiple of.
CHUNK_STEP = 256


def chunk_for(k: int) -> int:
    """The chunk of K each partial sums, from K alone (so the bits do not depend on the device):
    :data:`CHUNK`, or for a shorter K about ``K / CHUNK_TARGET`` rounded up to a multiple of
    :data:`CHUNK_STEP` (a 64 x 64 x 4096 product runs 16 work-groups, not one)."""
    wanted = -(-k // CHUNK_TARGET)
    return min(CHUNK, max(CHUNK_STEP, -(-wanted // CHUNK_STEP) * CHUNK_STEP))
#: Output columns of one work-group's tile.
TILE_N = 64
#: Work-items per merge work-group.
MERGE_GROUP = 256
LAYOUTS = ("items", "columns")
_LOC = ir.Loc("hetero gram", 1)


@dataclasses.dataclass(frozen=True)
class Gram:
    """One partial-sum kernel: element types of ``a`` and ``b``, the accumulator (the partials'
    type), and the ``layout`` (``items`` or ``columns``; see the module docstring)."""

    a: ScalarType
    b: ScalarType
    acc: ScalarType
    layout: str

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"gram: layout must be one of {LAYOUTS}, got {self.layout!r}")

    @property
    def name(self) -> str:
        return f"gram_{self.a.name}_{self.b.name}_{self.acc.name}_{self.layout}"

    @property
    def rows(self) -> int:
        """Output rows each work-item sums (its accumulators per column)."""
        return 16 if self.layout == "items" else 8

    @property
    def group(self) -> tuple[int, int]:
        """The work-group: ``(items along the tile's columns, items along its rows)``."""
        return (TILE_N, 4) if self.layout == "items" else (1, 8)

    @property
    def tile_m(self) -> int:
        """Output rows of one work-group's tile."""
        return self.rows * self.group[1]

    def param_names(self) -> list[str]:
        return ["p", "a", "b", "M", "N", "K", "chunk_k", "mtiles", "a_offset", "a_rs", "a_cs", "b_offset", "b_rs"]

    def launch(self, M: int, N: int, K: int) -> tuple[tuple[int, int], tuple[int, int], int, int]:
        """``(global size, local size, mtiles, chunks)`` of the partial launch for an M x K @ K x N product."""
        mtiles, ntiles, chunks = -(-M // self.tile_m), -(-N // TILE_N), -(-K // chunk_for(K))
        lx, ly = self.group
        return (ntiles * lx, mtiles * ly * chunks), (lx, ly), mtiles, chunks


@dataclasses.dataclass(frozen=True)
class GramMerge:
    """The merge kernel: the partials' (accumulator) type and the stored result's."""

    acc: ScalarType
    out: ScalarType

    @property
    def name(self) -> str:
        return f"gram_merge_{self.acc.name}_{self.out.name}"

    def param_names(self) -> list[str]:
        return ["c", "p", "MN", "N", "chunks", "c_offset", "c_rs", "c_cs"]


def _v(name: str) -> ir.Var:
    return ir.Var(i64, name)


def _c(value: int) -> ir.Const:
    return ir.Const(i64, value)


def _bin(op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.BinOp(left.type, op, left, right)


def _cmp(op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.Compare(bool_t, op, left, right)


def _and(left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.Logical(bool_t, "and", left, right)


def _min(left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.Select(i64, _cmp("<", left, right), left, right)


def _max(left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.Select(i64, _cmp(">", left, right), left, right)


def _set(name: str, value: ir.Expr) -> ir.Assign:
    return ir.Assign(_LOC, name, value)


def _load(spec: Gram, operand: str, position: ir.Expr) -> ir.Expr:
    element = spec.a if operand == "a" else spec.b
    loaded: ir.Expr = ir.Load(element, operand, (position,))
    return loaded if element == spec.acc else ir.Cast(spec.acc, loaded)


def _column(wide: bool, offset: ir.Expr) -> ir.Expr:
    """The column (past ``base``) a load reads at ``offset`` into the tile: ``offset`` itself when
    ``N >= TILE_N`` (``wide``: consecutive columns, a vector load), else clamped to ``N - 1``."""
    return offset if wide else _min(offset, _bin("-", _v("N"), _c(1)))


def _k_row(operand: str) -> ir.Assign:
    """``kb``: ``b``'s offset of row k at the tile's first column; ``ak``: ``a``'s of column k (rows past ``row_j``)."""
    if operand == "b":
        return _set("kb", _bin("+", _bin("+", _v("b_offset"), _bin("*", _v("k"), _v("b_rs"))), _v("base")))
    return _set("ak", _bin("*", _v("k"), _v("a_cs")))


def _items_loop(spec: Gram, wide: bool) -> list[ir.Stmt]:
    """The chunk's k loop of the ``items`` layout: :attr:`Gram.rows` register accumulators per work-item."""
    acc = spec.acc
    body: list[ir.Stmt] = [_k_row("b"), _k_row("a"), _set("bv", _load(spec, "b", _bin("+", _v("kb"), _v("col"))))]
    for j in range(spec.rows):
        product = _bin("*", _load(spec, "a", _bin("+", _v(f"row_{j}"), _v("ak"))), ir.Var(acc, "bv"))
        body.append(_set(f"acc_{j}", _bin("+", ir.Var(acc, f"acc_{j}"), product)))
    return [_set("col", _column(wide, _v("lx"))), ir.For(_LOC, "k", _v("k0"), _v("k1"), _c(1), tuple(body))]


def _columns_loop(spec: Gram, wide: bool) -> list[ir.Stmt]:
    """The chunk's k loop of the ``columns`` layout: a private ``rows x TILE_N`` array of accumulators."""
    acc = spec.acc
    w, j = _v("w"), _v("j")
    at = _bin("+", _bin("*", j, _c(TILE_N)), w)
    update = _bin("+", ir.Load(acc, "accs", (at,)),
                  _bin("*", ir.Var(acc, "av"), _load(spec, "b", _bin("+", _v("kb"), _column(wide, w)))))
    rows = ir.For(_LOC, "j", _c(0), _c(spec.rows), _c(1), (
        _set("av", _load(spec, "a", _bin("+", _a_row(j), _v("ak")))),
        ir.For(_LOC, "w", _c(0), _c(TILE_N), _c(1), (ir.Store(_LOC, "accs", (at,), update),)),
    ))
    return [ir.For(_LOC, "k", _v("k0"), _v("k1"), _c(1), (_k_row("b"), _k_row("a"), rows))]


def _a_row(j: ir.Expr) -> ir.Expr:
    """``a``'s offset of row ``m0 + j`` (clamped to ``M - 1``) at k = 0."""
    row = _min(_bin("+", _v("m0"), j), _bin("-", _v("M"), _c(1)))
    return _bin("+", _v("a_offset"), _bin("*", row, _v("a_rs")))


def _stored(row: ir.Expr, col: ir.Expr) -> ir.Expr:
    """Whether this work-item stores output ``(m0 + row, base + col)``: inside the output and this tile."""
    m, n = _bin("+", _v("m0"), row), _bin("+", _v("base"), col)
    return _and(_and(_cmp("<", m, _v("M")), _cmp("<", n, _v("N"))), _cmp(">=", n, _v("start")))


def _partial_at(row: ir.Expr, col: ir.Expr) -> ir.Expr:
    """``p``'s element of chunk ``chunk``, row ``m0 + row``, column ``base + col``."""
    m, n = _bin("+", _v("m0"), row), _bin("+", _v("base"), col)
    return _bin("+", _bin("*", _bin("+", _bin("*", _v("chunk"), _v("M")), m), _v("N")), n)


def build(spec: Gram) -> ir.Function:
    """The partial-sum kernel of ``spec`` (see the module docstring)."""
    acc = spec.acc
    arrays = {"p": acc, "a": spec.a, "b": spec.b}
    params = tuple(ir.Param(name, ArrayType(arrays[name], 1) if name in arrays else i64) for name in spec.param_names())
    scalars = ("lx", "ly", "group", "chunk", "m0", "k0", "k1", "start", "base", "col", "k", "kb", "ak", "j", "w")
    locals_: dict[str, ScalarType] = {name: i64 for name in scalars}
    ly = spec.group[1]
    wide = _cmp(">=", _v("N"), _c(TILE_N))
    body: list[ir.Stmt] = [
        _set("lx", ir.WorkItem(i64, "local_id", 0)),
        _set("ly", ir.WorkItem(i64, "local_id", 1)),
        _set("group", ir.WorkItem(i64, "group_id", 1)),
        _set("chunk", _bin("//", _v("group"), _v("mtiles"))),
        _set("m0", _bin("*", _bin("+", _bin("*", _bin("%", _v("group"), _v("mtiles")), _c(ly)), _v("ly")), _c(spec.rows))),
        _set("k0", _bin("*", _v("chunk"), _v("chunk_k"))),
        _set("k1", _min(_bin("+", _v("k0"), _v("chunk_k")), _v("K"))),
        _set("start", _bin("*", ir.WorkItem(i64, "group_id", 0), _c(TILE_N))),
        # the last tile moved left to end at N (when N >= TILE_N), so its loads stay inside the rows
        _set("base", _max(_min(_v("start"), _bin("-", _v("N"), _c(TILE_N))), _c(0))),
    ]
    local_arrays: tuple[ir.LocalArray, ...] = ()
    zero = ir.Const(acc, 0.0)
    if spec.layout == "items":
        for j in range(spec.rows):
            locals_[f"row_{j}"], locals_[f"acc_{j}"] = i64, acc
            body += [_set(f"row_{j}", _a_row(_c(j))), _set(f"acc_{j}", zero)]
        locals_["bv"] = acc
        body.append(ir.If(_LOC, wide, tuple(_items_loop(spec, True)), tuple(_items_loop(spec, False))))
        body.append(_set("col", _v("lx")))
        for j in range(spec.rows):
            body.append(ir.If(_LOC, _stored(_c(j), _v("col")),
                              (ir.Store(_LOC, "p", (_partial_at(_c(j), _v("col")),), ir.Var(acc, f"acc_{j}")),)))
    else:
        locals_["av"] = acc
        local_arrays = (ir.LocalArray("accs", acc, (spec.rows * TILE_N,), private=True),)
        w, j = _v("w"), _v("j")
        at = _bin("+", _bin("*", j, _c(TILE_N)), w)
        body.append(ir.For(_LOC, "j", _c(0), _c(spec.rows * TILE_N), _c(1), (ir.Store(_LOC, "accs", (j,), zero),)))
        body.append(ir.If(_LOC, wide, tuple(_columns_loop(spec, True)), tuple(_columns_loop(spec, False))))
        store = ir.If(_LOC, _stored(j, w), (ir.Store(_LOC, "p", (_partial_at(j, w),), ir.Load(acc, "accs", (at,))),))
        body.append(ir.For(_LOC, "j", _c(0), _c(spec.rows), _c(1), (ir.For(_LOC, "w", _c(0), _c(TILE_N), _c(1), (store,)),)))
    features = {"fp64"} if "f64" in (spec.a.name, spec.b.name, acc.name) else set()
    return ir.Function(spec.name, params, ir.VOID, locals_, local_arrays, tuple(body), True, _LOC,
                       features=frozenset(features))


def build_merge(spec: GramMerge) -> ir.Function:
    """The merge kernel of ``spec``: element ``i`` of the ``MN`` outputs is the sum of
    ``p[0, i], p[1, i], ...`` in that order, stored at row ``i // N``, column ``i % N``."""
    arrays = {"c": spec.out, "p": spec.acc}
    params = tuple(ir.Param(name, ArrayType(arrays[name], 1) if name in arrays else i64) for name in spec.param_names())
    locals_: dict[str, ScalarType] = {"i": i64, "j": i64, "sum": spec.acc}
    i = _v("i")
    total: ir.Expr = ir.Var(spec.acc, "sum")
    at = _bin("+", _v("c_offset"), _bin("+", _bin("*", _bin("//", i, _v("N")), _v("c_rs")),
                                        _bin("*", _bin("%", i, _v("N")), _v("c_cs"))))
    body: tuple[ir.Stmt, ...] = (
        _set("i", ir.WorkItem(i64, "global_id", 0)),
        ir.If(_LOC, _cmp("<", i, _v("MN")), (
            _set("sum", ir.Load(spec.acc, "p", (i,))),
            ir.For(_LOC, "j", _c(1), _v("chunks"), _c(1), (
                _set("sum", _bin("+", total, ir.Load(spec.acc, "p", (_bin("+", _bin("*", _v("j"), _v("MN")), i),)))),
            )),
            ir.Store(_LOC, "c", (at,), total if spec.out == spec.acc else ir.Cast(spec.out, total)),
        )),
    )
    features = {"fp64"} if "f64" in (spec.acc.name, spec.out.name) else set()
    return ir.Function(spec.name, params, ir.VOID, locals_, (), body, True, _LOC, features=frozenset(features))


__all__ = ["CHUNK", "CHUNK_STEP", "CHUNK_TARGET", "LAYOUTS", "MERGE_GROUP", "TILE_N", "Gram", "GramMerge", "build", "build_merge", "chunk_for"]
