"""Kernels of the set functions (``unique_*``), built directly as IR, one work-item per element.

They run on the work buffers of a sorted row (:mod:`hetero.compiler.array_kernels.sort`): ``keys`` the
sorted u64 keys (the order-preserving key in the high 32 bits and the element's position in
the low ones when packed), ``index`` the position of each sorted element in the input (the
pairs layout). Elements move as their bits (unsigned types). The host
(:mod:`hetero.arraylib.sets`) launches::

    unique_marks    flags[i] = 1 where sorted element i starts a new value: i == 0, or its key
                    differs from the one before (NaN, the largest key of a float, differs from
                    everything, NaN included, so each NaN is its own value; -0.0 equals +0.0)
    (a cumulative sum of flags: ids[i] = the 1-based number of element i's value)
    unique_scatter  for each element: inverse[index[i]] = ids[i] - 1; for each first element of
                    a value: values[g] = src[index[i]], first[g] = index[i], starts[g] = i
    unique_counts   counts[g] = starts[g + 1] - starts[g] (n - starts[g] for the last)

The sort is stable, so the first element of a value in sorted order is its first occurrence
in the input: ``first`` and ``values`` are NumPy's ``return_index`` and the element itself
(e.g. -0.0 where -0.0 comes before +0.0).
"""

from __future__ import annotations

import dataclasses

from hetero.core.types import ArrayType, ScalarType, bool_t, i64, u64

from hetero.compiler.ir import nodes as ir

STAGES = ("marks", "scatter", "counts")
_LOC = ir.Loc("hetero unique", 1)


@dataclasses.dataclass(frozen=True)
class Unique:
    """One set-function kernel: ``stage`` for elements of dtype kind ``kind`` travelling as the
    unsigned ``source``; ``index`` the index type of the pairs layout, None for the packed one."""

    stage: str
    kind: str
    source: ScalarType
    index: ScalarType | None

    @property
    def name(self) -> str:
        layout = "packed" if self.index is None else f"pairs_{self.index.name}"
        return f"unique_{self.stage}_{self.kind}{self.source.bits}_{layout}"

    def params(self) -> tuple[ir.Param, ...]:
        def array(name: str, t: ScalarType) -> ir.Param:
            return ir.Param(name, ArrayType(t, 1))

        work = [array("keys", u64)] + ([array("index", self.index)] if self.index is not None else [])
        if self.stage == "marks":
            arrays = [array("flags", i64), array("keys", u64)]
        elif self.stage == "scatter":
            arrays = [array("values", self.source), array("first", i64), array("starts", i64), array("inverse", i64),
                      array("src", self.source), *work, array("flags", i64), array("ids", i64)]
        else:
            arrays = [array("counts", i64), array("starts", i64), ir.Param("k", i64)]
        return (*arrays, ir.Param("n", i64))


def _v(name: str) -> ir.Var:
    return ir.Var(i64, name)


def _c(value: int) -> ir.Const:
    return ir.Const(i64, value)


def _op(op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.BinOp(left.type, op, left, right)


def _cmp(op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.Compare(bool_t, op, left, right)


def _marks(spec: Unique) -> tuple[list[ir.Stmt], dict[str, ScalarType]]:
    i = _v("i")

    def key(at: ir.Expr) -> ir.Expr:
        loaded = ir.Load(u64, "keys", (at,))
        return ir.BinOp(u64, ">>", loaded, ir.Const(u64, 32)) if spec.index is None else loaded

    here, before = key(i), key(_op("-", i, _c(1)))
    differs: ir.Expr = _cmp("!=", here, before)
    if spec.kind == "f":  # NaN has the largest key; each one is a value of its own
        nan = ir.Const(u64, (1 << 32) - 1 if spec.index is None else (1 << 64) - 1)
        differs = ir.Logical(bool_t, "or", _cmp("==", here, nan), differs)
    new = ir.Logical(bool_t, "or", _cmp("==", i, _c(0)), differs)
    return [ir.If(_LOC, new, (ir.Store(_LOC, "flags", (i,), _c(1)),), (ir.Store(_LOC, "flags", (i,), _c(0)),))], {}


def _scatter(spec: Unique) -> tuple[list[ir.Stmt], dict[str, ScalarType]]:
    i, g, at = _v("i"), _v("g"), _v("at")
    if spec.index is None:
        where: ir.Expr = ir.Cast(i64, ir.BinOp(u64, "&", ir.Load(u64, "keys", (i,)), ir.Const(u64, (1 << 32) - 1)))
    else:
        where = ir.Load(spec.index, "index", (i,))
        if spec.index != i64:
            where = ir.Cast(i64, where)
    body: list[ir.Stmt] = [
        ir.Assign(_LOC, "at", where),
        ir.Assign(_LOC, "g", _op("-", ir.Load(i64, "ids", (i,)), _c(1))),
        ir.Store(_LOC, "inverse", (at,), g),
        ir.If(_LOC, _cmp("!=", ir.Load(i64, "flags", (i,)), _c(0)), (
            ir.Store(_LOC, "values", (g,), ir.Load(spec.source, "src", (at,))),
            ir.Store(_LOC, "first", (g,), at),
            ir.Store(_LOC, "starts", (g,), i))),
    ]
    return body, {"g": i64, "at": i64}


def _counts(spec: Unique) -> tuple[list[ir.Stmt], dict[str, ScalarType]]:
    g = _v("i")
    last = _cmp("==", _op("+", g, _c(1)), _v("k"))
    end = ir.Select(i64, last, _v("n"), ir.Load(i64, "starts", (_op("+", g, _c(1)),)))
    return [ir.Store(_LOC, "counts", (g,), _op("-", end, ir.Load(i64, "starts", (g,))))], {}


def build(spec: Unique) -> ir.Function:
    """The kernel of ``spec`` (see the module docstring): work-item i does element (or value) i < n (k)."""
    if spec.stage not in STAGES:
        raise ValueError(f"unique: no kernel for {spec}")
    body, locals_ = {"marks": _marks, "scatter": _scatter, "counts": _counts}[spec.stage](spec)
    limit = _v("k") if spec.stage == "counts" else _v("n")
    guarded: list[ir.Stmt] = [ir.Assign(_LOC, "i", ir.WorkItem(i64, "global_id", 0)),
                              ir.If(_LOC, _cmp("<", _v("i"), limit), tuple(body))]
    return ir.Function(spec.name, spec.params(), ir.VOID, {"i": i64, **locals_}, (), tuple(guarded), True, _LOC)


__all__ = ["STAGES", "Unique", "build"]
