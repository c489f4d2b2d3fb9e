"""The ``searchsorted`` kernel, built directly as IR: one work-item per searched value, a binary search.

::

    searchsorted_{side}_{sorted}_{values}_{key}[_{sorter}](dst, x1, [sorter,] x2, n, count)

Work-item ``i < count`` finds where ``x2[i]`` goes in the ascending ``x1`` of ``n`` elements (read
as ``x1[sorter[m]]`` when a sorter is given): ``left``, the number of elements strictly before
it; ``right``, the number not after it. Both sides compare as the sort does
(:func:`hetero.compiler.array_kernels.sort.key_before`, in the ``key`` type both operands are converted to):
NaN above every number, -0.0 equal to +0.0, so inserting at the result keeps ``sort``'s order.
"""

from __future__ import annotations

import dataclasses

from hetero.core.types import ArrayType, ScalarType, bool_t, i64

from hetero.compiler.ir import nodes as ir
from hetero.compiler.array_kernels.sort import key_before

SIDES = ("left", "right")
_LOC = ir.Loc("hetero searchsorted", 1)


@dataclasses.dataclass(frozen=True)
class Search:
    """One search kernel: ``sorted`` elements of x1, ``values`` of x2, compared as ``key``; ``sorter``
    the element type of the sorter (None: x1 is sorted itself)."""

    side: str
    sorted: ScalarType
    values: ScalarType
    key: ScalarType
    sorter: ScalarType | None = None

    @property
    def name(self) -> str:
        tail = f"_{self.sorter.name}" if self.sorter is not None else ""
        return f"searchsorted_{self.side}_{self.sorted.name}_{self.values.name}_{self.key.name}{tail}"

    def params(self) -> tuple[ir.Param, ...]:
        arrays = [ir.Param("dst", ArrayType(i64, 1)), ir.Param("x1", ArrayType(self.sorted, 1))]
        if self.sorter is not None:
            arrays.append(ir.Param("sorter", ArrayType(self.sorter, 1)))
        arrays.append(ir.Param("x2", ArrayType(self.values, 1)))
        return (*arrays, ir.Param("n", i64), ir.Param("count", i64))


def _v(name: str, t: ScalarType = i64) -> ir.Var:
    return ir.Var(t, name)


def _as(t: ScalarType, value: ir.Expr) -> ir.Expr:
    return value if value.type == t else ir.Cast(t, value)


def build(spec: Search) -> ir.Function:
    """The kernel of ``spec`` (see the module docstring)."""
    if spec.side not in SIDES or (spec.sorter is not None and spec.sorter.kind not in "iu"):
        raise ValueError(f"searchsorted: no kernel for {spec}")
    K = spec.key
    i, lo, hi, mid = _v("i"), _v("lo"), _v("hi"), _v("mid")
    at: ir.Expr = mid if spec.sorter is None else _as(i64, ir.Load(spec.sorter, "sorter", (mid,)))
    element, target = _v("element", K), _v("target", K)
    if spec.side == "left":  # go right past every element strictly before the target
        go_right, _ = key_before(K, False, element, target)
    else:  # go right past every element the target is not before
        before, _ = key_before(K, False, target, element)
        go_right = ir.UnaryOp(bool_t, "not", before)
    search = ir.While(_LOC, ir.Compare(bool_t, "<", lo, hi), (
        ir.Assign(_LOC, "mid", ir.BinOp(i64, ">>", ir.BinOp(i64, "+", lo, hi), ir.Const(i64, 1))),
        ir.Assign(_LOC, "element", _as(K, ir.Load(spec.sorted, "x1", (at,)))),
        ir.If(_LOC, go_right, (ir.Assign(_LOC, "lo", ir.BinOp(i64, "+", mid, ir.Const(i64, 1))),),
              (ir.Assign(_LOC, "hi", mid),)),
    ))
    body: list[ir.Stmt] = [
        ir.Assign(_LOC, "i", ir.WorkItem(i64, "global_id", 0)),
        ir.If(_LOC, ir.Compare(bool_t, "<", i, _v("count")), (
            ir.Assign(_LOC, "target", _as(K, ir.Load(spec.values, "x2", (i,)))),
            ir.Assign(_LOC, "lo", ir.Const(i64, 0)),
            ir.Assign(_LOC, "hi", _v("n")),
            search,
            ir.Store(_LOC, "dst", (i,), lo))),
    ]
    locals_: dict[str, ScalarType] = {"i": i64, "lo": i64, "hi": i64, "mid": i64, "element": K, "target": K}
    return ir.Function(spec.name, spec.params(), ir.VOID, locals_, (), tuple(body), True, _LOC)


__all__ = ["SIDES", "Search", "build"]
