"""Reduction kernels, built directly as IR: one work-group tree per output element's segment.

One definition serves every dialect (OpenCL C, CUDA C, HIP, the CPU emitter, whose
work-group loops run the barriers). The input is the whole buffer under a strided view, as a
1-D array; its layout travels as i64 scalar parameters (outer axes first: those kept in the
result; inner axes last: those reduced), so one compiled kernel per :class:`Reduction`
serves every shape, stride and offset::

    reduce_{op}_{source}_{acc}_{out}_o{outer}_i{inner}_{stage}(dst, [dst_index,] src, [src_index,] [center,]
        n_out, groups, seg_len, divisor, shape_0.., src_offset, src_stride_0..)

Work-group ``g`` reduces part ``c = g % groups`` of segment ``m = g // groups`` (the
``seg_len`` elements of output element ``m``, numbered in C order over the inner axes).
The order is fixed: work-item ``t`` of the group folds, in increasing order, the segment
elements ``c*W + t, c*W + t + groups*W, ...`` (``W`` = :data:`GROUP` work-items), then the
group combines its work-items' values by a binary tree over local memory (step ``W/2``, then
``W/4`` ... 1: item ``t`` takes in item ``t + step``). With ``groups > 1`` the kernel writes one
partial per group and a ``merge`` stage (the same kernel over the partials, ``groups = 1``)
combines them. So the same input on the same device gives the same bits every time; devices
differ only by the rounding of their arithmetic. No atomics are used.

Only work-items that hold at least one element take part in the tree (no identity value is
needed, so min/max need no infinities); the host never launches an empty segment.

The ``columns`` stage serves the layout where neighbouring outputs are neighbours in memory
and the reduced axes step over them (``x.sum(axis=0)`` of a C-ordered matrix): there a
work-group per output reads one element per row of a long stride, and every output reads
every cache line again. In ``columns``, work-item ``gid`` folds, in increasing order, the
elements ``c*chunk .. (c+1)*chunk - 1`` (``chunk = ceil(seg_len / groups)``) of segment
``m = gid % n_out`` (``c = gid // n_out``): neighbouring items read neighbouring elements of
the same rows (coalesced on GPUs; on CPUs the rows a group reads stay in cache for its
items). It writes partial ``m*groups + c`` (or, with ``groups == 1``, the final value of
``m``), and the ``merge`` stage folds the partials as above. No barriers, no local memory.
"""

from __future__ import annotations

import dataclasses

from hetero.core.types import ArrayType, ScalarType, bool_t, i32, i64

from hetero.compiler.ir import nodes as ir

#: Work-items per group of every reduction and scan (a power of two that fits every device).
GROUP = 128
#: The operations; ``sumsq`` is the sum of squared deviations from ``center[m]`` (variance's second pass).
OPS = ("sum", "prod", "min", "max", "any", "all", "argmin", "argmax", "sumsq")
#: What the last stage does to the folded value before it is stored: nothing, divide by
#: ``divisor`` (mean, var), or divide and take the square root (std).
FINISHES = ("", "divide", "sqrt")
_LOC = ir.Loc("hetero reduction", 1)


@dataclasses.dataclass(frozen=True)
class Reduction:
    """One reduction kernel. ``source`` is the element type read, ``acc`` the type folded in,
    ``out`` the type stored; ``merge`` is the stage that folds partials (already of ``acc``,
    contiguous, with ``outer == inner == 1``); ``finish`` applies only where ``out`` is final."""

    op: str
    source: ScalarType
    acc: ScalarType
    out: ScalarType
    outer: int
    inner: int
    merge: bool = False
    finish: str = ""
    columns: bool = False

    @property
    def is_arg(self) -> bool:
        return self.op in ("argmin", "argmax")

    @property
    def name(self) -> str:
        stage = "merge" if self.merge else ("cols" if self.columns else "first")
        tail = f"_{self.finish}" if self.finish else ""
        return (f"reduce_{self.op}_{self.source.name}_{self.acc.name}_{self.out.name}"
                f"_o{self.outer}_i{self.inner}_{stage}{tail}")

    def param_names(self) -> list[str]:
        """The kernel's parameters in order (the launch passes values in this order)."""
        rank = self.outer + self.inner
        names = ["dst"] + (["dst_value"] if self.is_arg else []) + ["src"]
        names += ["src_index"] if self.is_arg and self.merge else []
        names += ["center"] if self.op == "sumsq" and not self.merge else []
        return (names + ["n_out", "groups", "seg_len", "divisor"] + [f"shape_{k}" for k in range(rank)]
                + ["src_offset"] + [f"src_stride_{k}" for k in range(rank)])


def _var(t: ScalarType, name: str) -> ir.Var:
    return ir.Var(t, name)


def _i64(name: str) -> ir.Var:
    return ir.Var(i64, name)


def _bin(op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.BinOp(left.type, op, left, right)


def _const(t: ScalarType, value: int | float) -> ir.Const:
    return ir.Const(t, float(value) if t.kind == "f" else int(value))


def _isnan(value: ir.Expr) -> ir.Expr:
    return ir.Math(bool_t, "isnan", (value,))


def offset_code(prefix: str, index: ir.Expr, axes: range, into: str) -> list[ir.Stmt]:
    """Statements adding to ``into`` the element offset of C-order position ``index`` over ``axes``
    (parameters ``shape_k`` and ``src_stride_k``); uses locals ``{prefix}_rest`` and ``{prefix}_k``."""
    body: list[ir.Stmt] = [ir.Assign(_LOC, f"{prefix}_rest", index)]
    rest = _i64(f"{prefix}_rest")
    for k in reversed(axes):  # the last axis varies fastest
        here = _i64(f"{prefix}_{k}")
        if k != axes.start:
            body.append(ir.Assign(_LOC, here.name, _bin("%", rest, _i64(f"shape_{k}"))))
            body.append(ir.Assign(_LOC, rest.name, _bin("//", rest, _i64(f"shape_{k}"))))
        else:
            body.append(ir.Assign(_LOC, here.name, rest))
        body.append(ir.Assign(_LOC, into, _bin("+", _i64(into), _bin("*", here, _i64(f"src_stride_{k}")))))
    return body


def offset_locals(prefix: str, axes: range) -> dict[str, ScalarType]:
    return {f"{prefix}_rest": i64, **{f"{prefix}_{k}": i64 for k in axes}}


def better(spec: Reduction, a: ir.Expr, b: ir.Expr, a_index: ir.Expr, b_index: ir.Expr) -> ir.Expr:
    """Whether ``b`` (at ``b_index``) replaces ``a`` in an arg-reduction: the larger (argmax) or
    smaller (argmin) value, NaN above everything, the smaller index on ties (NumPy's first occurrence)."""
    strict = ir.Compare(bool_t, ">" if spec.op == "argmax" else "<", b, a)
    tie = ir.Logical(bool_t, "and", ir.Compare(bool_t, "==", b, a), ir.Compare(bool_t, "<", b_index, a_index))
    plain = ir.Logical(bool_t, "or", strict, tie)
    if spec.acc.kind != "f":
        return plain
    a_nan, b_nan = _isnan(a), _isnan(b)
    both_nan = ir.Logical(bool_t, "and", a_nan, b_nan)
    nan_tie = ir.Logical(bool_t, "and", both_nan, ir.Compare(bool_t, "<", b_index, a_index))
    b_first_nan = ir.Logical(bool_t, "and", b_nan, ir.UnaryOp(bool_t, "not", a_nan))
    neither = ir.Logical(bool_t, "and", ir.UnaryOp(bool_t, "not", a_nan), ir.UnaryOp(bool_t, "not", b_nan))
    return ir.Logical(bool_t, "or", ir.Logical(bool_t, "or", b_first_nan, nan_tie), ir.Logical(bool_t, "and", neither, plain))


def combine(spec: Reduction, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """``a`` folded with ``b`` (not for arg-reductions); min and max return NaN if either is NaN."""
    op = spec.op
    if op in ("sum", "sumsq"):
        return _bin("+", a, b)
    if op == "prod":
        return _bin("*", a, b)
    if op in ("any", "max"):
        folded = _bin("max", a, b)
    else:  # all, min
        folded = _bin("min", a, b)
    if spec.acc.kind == "f":
        folded = ir.Select(spec.acc, _isnan(a), a, ir.Select(spec.acc, _isnan(b), b, folded))
    return folded


def read(spec: Reduction, position: ir.Expr) -> ir.Expr:
    """The value of the source element at ``position``, as the accumulator type."""
    loaded: ir.Expr = ir.Load(spec.source, "src", (position,))
    if spec.merge:
        return loaded
    if spec.op in ("any", "all"):
        zero = _const(spec.source, 0) if spec.source != bool_t else ir.Const(bool_t, False)
        return ir.Cast(spec.acc, ir.Compare(bool_t, "!=", loaded, zero))
    value = loaded if spec.source == spec.acc else ir.Cast(spec.acc, loaded)
    if spec.op == "sumsq":
        deviation = _bin("-", value, ir.Load(spec.acc, "center", (_i64("m"),)))
        return _bin("*", deviation, deviation)
    return value


def finish(spec: Reduction, value: ir.Expr) -> ir.Expr:
    """The folded ``value`` as stored in ``dst``."""
    if spec.finish in ("divide", "sqrt"):
        value = _bin("/", value, _var(spec.acc, "divisor"))
        if spec.finish == "sqrt":
            value = ir.Math(spec.acc, "sqrt", (value,))
    if spec.out == spec.acc:
        return value
    if spec.out == bool_t:
        return ir.Compare(bool_t, "!=", value, _const(spec.acc, 0))
    return ir.Cast(spec.out, value)


def _take(spec: Reduction, index: ir.Expr) -> list[ir.Stmt]:
    """Fold the source element at ``p`` (element ``index`` of its segment) into ``acc`` (and, for
    arg-reductions, ``idx``)."""
    acc = spec.acc
    value = read(spec, _i64("p"))
    if not spec.is_arg:
        return [ir.Assign(_LOC, "acc", combine(spec, _var(acc, "acc"), value))]
    return [ir.Assign(_LOC, "b", value), ir.Assign(_LOC, "b_idx", index),
            ir.If(_LOC, better(spec, _var(acc, "acc"), _var(acc, "b"), _i64("idx"), _i64("b_idx")),
                  (ir.Assign(_LOC, "acc", _var(acc, "b")), ir.Assign(_LOC, "idx", _i64("b_idx"))))]


def _params(spec: Reduction) -> tuple[ir.Param, ...]:
    arrays = {"dst": spec.out, "dst_value": spec.acc, "src": spec.source, "src_index": i64, "center": spec.acc}
    if spec.is_arg:
        arrays["dst"] = i64
    return tuple(ir.Param(name, ArrayType(arrays[name], 1) if name in arrays
                          else (spec.acc if name == "divisor" else i64)) for name in spec.param_names())


def build(spec: Reduction) -> ir.Function:
    """The kernel of ``spec`` (see the module docstring)."""
    if spec.op not in OPS or spec.finish not in FINISHES or spec.outer < 0 or spec.inner < 0 \
            or (spec.columns and spec.merge):
        raise ValueError(f"reduction: no kernel for {spec}")
    if spec.columns:
        return _build_columns(spec)
    rank = spec.outer + spec.inner
    params = _params(spec)
    acc, W = spec.acc, GROUP
    locals_: dict[str, ScalarType] = {"g": i64, "m": i64, "c": i64, "t": i64, "base": i64, "j": i64, "p": i64,
                                      "acc": acc, "b": acc, **offset_locals("o", range(spec.outer)),
                                      **offset_locals("q", range(spec.outer, rank))}
    if spec.is_arg:
        locals_.update({"idx": i64, "b_idx": i64})
    g, m, c, t, j, p = (_i64(n) for n in ("g", "m", "c", "t", "j", "p"))
    span = _bin("*", _i64("groups"), _const(i64, W))

    def position(at: ir.Expr) -> list[ir.Stmt]:  # p = the buffer position of segment element ``at``
        return [ir.Assign(_LOC, "p", _i64("base")), *offset_code("q", at, range(spec.outer, rank), "p")]

    def index_of(at: ir.Expr) -> ir.Expr:
        return ir.Load(i64, "src_index", (p,)) if spec.merge else at

    first_j = _bin("+", _bin("*", c, _const(i64, W)), t)
    body: list[ir.Stmt] = [
        ir.Assign(_LOC, "g", ir.WorkItem(i64, "group_id", 0)),
        ir.Assign(_LOC, "t", ir.WorkItem(i64, "local_id", 0)),
        ir.Assign(_LOC, "m", _bin("//", g, _i64("groups"))),
        ir.Assign(_LOC, "c", _bin("%", g, _i64("groups"))),
        ir.Assign(_LOC, "base", _i64("src_offset")),
        *offset_code("o", m, range(spec.outer), "base"),
        ir.Assign(_LOC, "acc", _const(acc, 0)),
        *([ir.Assign(_LOC, "idx", _const(i64, 0))] if spec.is_arg else []),
        ir.Assign(_LOC, "j", first_j),
        ir.If(_LOC, ir.Compare(bool_t, "<", j, _i64("seg_len")), (
            *position(j),
            ir.Assign(_LOC, "acc", read(spec, p)),
            *([ir.Assign(_LOC, "idx", index_of(j))] if spec.is_arg else []),
            ir.For(_LOC, "j", _bin("+", j, span), _i64("seg_len"), span, (*position(j), *_take(spec, index_of(j)))),
        )),
        ir.Store(_LOC, "tree", (t,), _var(acc, "acc")),
        *([ir.Store(_LOC, "tree_index", (t,), _i64("idx"))] if spec.is_arg else []),
        ir.Barrier(_LOC),
    ]
    step = W // 2
    while step:
        other = _bin("+", t, _const(i64, step))
        takes_part = ir.Logical(bool_t, "and", ir.Compare(bool_t, "<", t, _const(i64, step)),
                                ir.Compare(bool_t, "<", _bin("+", first_j, _const(i64, step)), _i64("seg_len")))
        mine = ir.Load(acc, "tree", (t,))
        theirs = ir.Load(acc, "tree", (other,))
        if spec.is_arg:
            fold: tuple[ir.Stmt, ...] = (
                ir.If(_LOC, better(spec, mine, theirs, ir.Load(i64, "tree_index", (t,)), ir.Load(i64, "tree_index", (other,))),
                      (ir.Store(_LOC, "tree", (t,), theirs),
                       ir.Store(_LOC, "tree_index", (t,), ir.Load(i64, "tree_index", (other,))))),)
        else:
            fold = (ir.Store(_LOC, "tree", (t,), combine(spec, mine, theirs)),)
        body += [ir.If(_LOC, takes_part, fold), ir.Barrier(_LOC)]
        step //= 2
    total = ir.Load(acc, "tree", (_const(i64, 0),))
    if spec.is_arg:
        write: tuple[ir.Stmt, ...] = (ir.Store(_LOC, "dst_value", (g,), total),
                                      ir.Store(_LOC, "dst", (g,), ir.Load(i64, "tree_index", (_const(i64, 0),))))
    else:
        write = (ir.Store(_LOC, "dst", (g,), finish(spec, total)),)
    body.append(ir.If(_LOC, ir.Compare(bool_t, "==", t, _const(i64, 0)), write))
    local_arrays = (ir.LocalArray("tree", acc, (W,)),) + ((ir.LocalArray("tree_index", i64, (W,)),) if spec.is_arg else ())
    return ir.Function(spec.name, params, ir.VOID, locals_, local_arrays, tuple(body), True, _LOC,
                       features=frozenset({"barrier"}))


def _build_columns(spec: Reduction) -> ir.Function:
    """The ``columns`` stage (see the module docstring): one work-item per (output, chunk)."""
    rank = spec.outer + spec.inner
    acc = spec.acc
    locals_: dict[str, ScalarType] = {"gid": i64, "m": i64, "c": i64, "chunk": i64, "start": i64, "stop": i64,
                                      "base": i64, "j": i64, "p": i64, "acc": acc, "b": acc,
                                      **offset_locals("o", range(spec.outer)), **offset_locals("q", range(spec.outer, rank))}
    if spec.is_arg:
        locals_.update({"idx": i64, "b_idx": i64})
    gid, m, c, j, p = (_i64(n) for n in ("gid", "m", "c", "j", "p"))
    n_out, groups, seg_len = _i64("n_out"), _i64("groups"), _i64("seg_len")

    def position(at: ir.Expr) -> list[ir.Stmt]:
        return [ir.Assign(_LOC, "p", _i64("base")), *offset_code("q", at, range(spec.outer, rank), "p")]

    slot = _bin("+", _bin("*", m, groups), c)
    if spec.is_arg:
        write: tuple[ir.Stmt, ...] = (ir.Store(_LOC, "dst_value", (slot,), _var(acc, "acc")),
                                      ir.Store(_LOC, "dst", (slot,), _i64("idx")))
    else:
        write = (ir.Store(_LOC, "dst", (slot,), finish(spec, _var(acc, "acc"))),)
    one = _const(i64, 1)
    body: list[ir.Stmt] = [
        ir.Assign(_LOC, "gid", ir.WorkItem(i64, "global_id", 0)),
        ir.Assign(_LOC, "m", _bin("%", gid, n_out)),
        ir.Assign(_LOC, "c", _bin("//", gid, n_out)),
        ir.Assign(_LOC, "chunk", _bin("//", _bin("-", _bin("+", seg_len, groups), one), groups)),
        ir.Assign(_LOC, "start", _bin("*", c, _i64("chunk"))),
        ir.Assign(_LOC, "stop", _bin("min", _bin("+", _i64("start"), _i64("chunk")), seg_len)),
        ir.If(_LOC, ir.Logical(bool_t, "and", ir.Compare(bool_t, "<", c, groups),
                               ir.Compare(bool_t, "<", _i64("start"), _i64("stop"))), (
            ir.Assign(_LOC, "base", _i64("src_offset")),
            *offset_code("o", m, range(spec.outer), "base"),
            *position(_i64("start")),
            ir.Assign(_LOC, "acc", read(spec, p)),
            *([ir.Assign(_LOC, "idx", _i64("start"))] if spec.is_arg else []),
            ir.For(_LOC, "j", _bin("+", _i64("start"), one), _i64("stop"), one, (*position(j), *_take(spec, j))),
            *write,
        )),
    ]
    return ir.Function(spec.name, _params(spec), ir.VOID, locals_, (), tuple(body), True, _LOC)


def accumulator_of_any() -> ScalarType:
    """The accumulator type of ``any``/``all`` (0 or 1 per element, folded by max/min)."""
    return i32


__all__ = ["FINISHES", "GROUP", "OPS", "Reduction", "accumulator_of_any", "better", "build", "combine"]
