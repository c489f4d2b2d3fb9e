"""Reduction kernels, built directly as IR: each output element's segment cut into parts of
neighbouring elements, each part folded in :data:`GROUP` lanes, then a fixed tree.

One definition serves every dialect (OpenCL C, CUDA C, HIP, the CPU emitter, whose
work-group loops run the barriers). The input is the whole buffer under a strided view, as a
1-D array; its layout travels as i64 scalar parameters (outer axes first: those kept in the
result; inner axes last: those reduced), so one compiled kernel per :class:`Reduction`
serves every shape, stride and offset::

    reduce_{op}_{source}_{acc}_{out}_o{outer}_i{inner}_{stage}[_lanes][_xL][_c](dst, [dst_index,] src, [src_index,]
        [center,] n_out, groups, seg_len, chunk, divisor, shape_0.., src_offset, src_stride_0..)

**The order** (the same bits every run on a device; no atomics). Part ``g`` of the launch
folds part ``c = g % groups`` of segment ``m = g // groups`` (the ``seg_len`` elements of
output element ``m``, numbered in C order over the inner axes): its elements
``start = c*chunk`` to ``stop = min(start + chunk, seg_len) - 1``, a contiguous range
(``chunk``, a multiple of ``W`` = :data:`GROUP`, and ``groups`` follow from ``seg_len`` alone:
:func:`hetero.arraylib.reductions.parts_of`). Lane ``t`` (``0 <= t < W``) folds, in increasing
order, the elements ``start + t, start + t + W, start + t + 2W, ...`` below ``stop``: row
``r`` of the part is the ``W`` neighbouring elements ``start + rW ..``, one per lane, so one row
is one wide load. Then the lanes combine by a binary tree: step ``W/2``, then ``W/4`` ... 1,
lane ``t < step`` taking in lane ``t + step`` when that lane holds an element
(``t + step < stop - start``; no identity value is needed, so min/max need no infinities). With
``groups > 1`` each part writes a partial and a ``merge`` stage folds each segment's partials
the same way as one part (``groups = 1``, ``chunk >= seg_len``). Devices differ only by the
rounding of their arithmetic (and not at all where it is IEEE's and no contraction applies).

The segment stage has two forms that keep this order, so they give the same bits: ``items``
(a work-group of ``W / L`` work-items per part, ``L`` = ``per_item``: item ``i`` folds lanes
``i, i + W/L, i + 2W/L ...`` in private accumulators, the tree's steps of ``W/L`` and above
within the item, the rest over local memory with barriers; ``L = 1`` on GPUs, coalesced;
``L = 8`` on Intel's OpenCL CPU runtime, which runs 16 neighbouring items as one vector, so a
row is 8 vector loads) and ``lanes`` (one work-item per part, the lanes a loop over a local
array inside the loop over rows: the CPU target's and PoCL's, whose work-group loops would
otherwise run each item's lane to its end before the next one starts, reading every ``W``-th
element).
A ``contiguous`` kernel (one inner axis of stride 1) reads ``src[base + j]``, which the
compilers vectorize; others compute each position from the shape and strides.

The ``columns`` stage serves the layout where neighbouring outputs are neighbours in memory
and the reduced axes step over them (``x.sum(axis=0)`` of a C-ordered matrix): there a
work-group per output reads one element per row of a long stride, and every output reads
every cache line again. In ``columns``, work-item ``gid`` folds, in increasing order, the
elements ``c*chunk .. (c+1)*chunk - 1`` (``chunk = ceil(seg_len / groups)``, passed by the host) of segment
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
#: Outputs one work-item of the CPU's ``columns`` stage folds at once (its inner loop).
COLUMN_LANES = 512
#: The operations; ``sumsq`` is the sum of squared deviations from ``center[m]`` (variance's second pass).
OPS = ("sum", "prod", "min", "max", "any", "all", "argmin", "argmax", "sumsq")
#: What the last stage does to the folded value before it is stored: nothing, divide by
#: ``divisor`` (mean, var), or divide and take the square root (std).
FINISHES = ("", "divide", "sqrt")
_LOC = ir.Loc("hetero reduction", 1)
_PER_ITEM = tuple(1 << k for k in range(GROUP.bit_length() - 1))  # 1, 2 ... GROUP/2: at least two items


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
    #: The axis the lanes run along is one axis of stride 1 (its stride parameter is not read):
    #: the segment's (``inner == 1``: element ``j`` of segment ``m`` at ``base + j``) or, in
    #: ``columns``, the outputs' (``outer == 1``); the compilers vectorize such reads.
    contiguous: bool = False
    #: The one-work-item form (the CPU's) of the segment stage or of ``columns`` (there only
    #: with ``contiguous``); the same order, so the same bits.
    lanes: bool = False
    #: Lanes each work-item of the ``items`` form folds (a power of two up to :data:`GROUP`; the
    #: group has ``GROUP // per_item`` items): 1 on GPUs, more where the runtime vectorizes across
    #: work-items (Intel's CPU runtime), so one item's row is several vector loads. The same order.
    per_item: int = 1

    @property
    def is_arg(self) -> bool:
        return self.op in ("argmin", "argmax")

    @property
    def name(self) -> str:
        stage = "merge" if self.merge else ("cols" if self.columns else "first")
        tail = ("_lanes" if self.lanes else "") + (f"_x{self.per_item}" if self.per_item > 1 else "") \
            + ("_c" if self.contiguous else "") + (f"_{self.finish}" if self.finish else "")
        return (f"reduce_{self.op}_{self.source.name}_{self.acc.name}_{self.out.name}"
                f"_o{self.outer}_i{self.inner}_{stage}{tail}")

    def param_names(self) -> list[str]:
        """The kernel's parameters in order (the launch passes values in this order)."""
        rank = self.outer + self.inner
        names = ["dst"] + (["dst_value"] if self.is_arg else []) + ["src"]
        names += ["src_index"] if self.is_arg and self.merge else []
        names += ["center"] if self.op == "sumsq" and not self.merge else []
        return (names + ["n_out", "groups", "seg_len", "chunk", "divisor"] + [f"shape_{k}" for k in range(rank)]
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
    # NaN is the one value unequal to itself (IEEE; no kernel is built with fast-math): a compare
    # vectorizes where PoCL's isnan() call kept the CPU lanes' argmax loop scalar (2x slower)
    return ir.Compare(bool_t, "!=", value, value)


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


def later_better(spec: Reduction, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """:func:`better` where ``b``'s index is known to be the larger (a lane folds its elements in
    increasing index order, and partials in the order of their parts): ``b`` wins only by being
    strictly beyond ``a``, or NaN where ``a`` is not. No index compares, so the lane loop vectorizes."""
    beyond: ir.Expr = ir.Compare(bool_t, ">" if spec.op == "argmax" else "<", b, a)
    if spec.acc.kind != "f":
        return beyond
    return ir.Logical(bool_t, "or", beyond, ir.Logical(bool_t, "and", _isnan(b), ir.UnaryOp(bool_t, "not", _isnan(a))))


def combine(spec: Reduction, a: ir.Expr, b: ir.Expr) -> ir.Expr:
    """``a`` folded with ``b`` (not for arg-reductions); min and max return NaN if either is NaN
    (float ``max`` is ``b`` where ``b > a`` or ``b`` is NaN, else ``a``: one compare, one select,
    which vectorizes where C's ``fmax`` and a NaN test on each side do not)."""
    op = spec.op
    if op in ("sum", "sumsq"):
        return _bin("+", a, b)
    if op == "prod":
        return _bin("*", a, b)
    if spec.acc.kind == "f":
        beyond = ir.Compare(bool_t, ">" if op == "max" else "<", b, a)
        return ir.Select(spec.acc, ir.Logical(bool_t, "or", beyond, _isnan(b)), b, a)
    return _bin("max" if op in ("any", "max") else "min", a, b)


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
            ir.If(_LOC, later_better(spec, _var(acc, "acc"), _var(acc, "b")),
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
            or (spec.columns and (spec.merge or spec.lanes != spec.contiguous)) \
            or (spec.contiguous and (spec.outer if spec.columns else spec.inner) != 1) \
            or spec.per_item not in _PER_ITEM or (spec.per_item > 1 and (spec.lanes or spec.columns)):
        raise ValueError(f"reduction: no kernel for {spec}")
    if spec.columns:
        return _build_column_lanes(spec) if spec.lanes else _build_columns(spec)
    return _build_lanes(spec) if spec.lanes else _build_items(spec)


class _Parts:
    """What both forms of the segment stage share: locals, positions, the part's bounds."""

    def __init__(self, spec: Reduction) -> None:
        self.spec = spec
        rank = spec.outer + spec.inner
        self.locals: dict[str, ScalarType] = {
            "g": i64, "m": i64, "c": i64, "t": i64, "base": i64, "start": i64, "stop": i64, "j": i64, "p": i64,
            "acc": spec.acc, "b": spec.acc, "take": bool_t,
            **offset_locals("o", range(spec.outer)), **offset_locals("q", range(spec.outer, rank))}
        if spec.is_arg:
            self.locals.update({"idx": i64, "b_idx": i64})

    def position(self, at: ir.Expr) -> list[ir.Stmt]:
        """``p`` = the buffer position of segment element ``at``."""
        spec = self.spec
        if spec.contiguous:
            return [ir.Assign(_LOC, "p", _bin("+", _i64("base"), at))]
        return [ir.Assign(_LOC, "p", _i64("base")), *offset_code("q", at, range(spec.outer, spec.outer + spec.inner), "p")]

    def index_of(self, at: ir.Expr) -> ir.Expr:
        """The segment index an element stands for: its own, or (merge) the one its partial holds."""
        return ir.Load(i64, "src_index", (_i64("p"),)) if self.spec.merge else at

    def bounds(self, part: ir.Expr) -> list[ir.Stmt]:
        """``m``, ``c``, ``base``, ``start`` and ``stop`` of the part ``part`` (``g`` of the launch)."""
        groups, chunk = _i64("groups"), _i64("chunk")
        start = _bin("*", _i64("c"), chunk)
        return [ir.Assign(_LOC, "m", _bin("//", part, groups)),
                ir.Assign(_LOC, "c", _bin("%", part, groups)),
                ir.Assign(_LOC, "base", _i64("src_offset")),
                *offset_code("o", _i64("m"), range(self.spec.outer), "base"),
                ir.Assign(_LOC, "start", start),
                ir.Assign(_LOC, "stop", _bin("min", _bin("+", start, chunk), _i64("seg_len")))]

    def write(self, value: ir.Expr, index: ir.Expr) -> tuple[ir.Stmt, ...]:
        """Store part ``g``'s folded ``value`` (and, for arg-reductions, its ``index``)."""
        g = _i64("g")
        if self.spec.is_arg:
            return (ir.Store(_LOC, "dst_value", (g,), value), ir.Store(_LOC, "dst", (g,), index))
        return (ir.Store(_LOC, "dst", (g,), finish(self.spec, value)),)


def _build_items(spec: Reduction) -> ir.Function:
    """The segment stage with a work-group of ``W / L`` items per part (``L`` =
    ``spec.per_item``): item ``i`` of group ``g`` folds lanes ``i, i + W/L, i + 2W/L ...`` of part
    ``g``, one private accumulator each, so a row is ``L`` loads of neighbouring elements across
    the items. The tree's steps of ``W/L`` and above fold within an item, the rest over local
    memory with barriers between its steps."""
    acc, W, L = spec.acc, GROUP, spec.per_item
    items = W // L
    parts = _Parts(spec)
    for k in range(L):
        parts.locals.update({f"acc_{k}": acc, **({f"idx_{k}": i64} if spec.is_arg else {})})
    parts.locals["full"] = i64
    i, j, start, stop = _i64("t"), _i64("j"), _i64("start"), _i64("stop")
    length = _bin("-", stop, start)
    lane = [_bin("+", i, _const(i64, items * k)) if k else i for k in range(L)]  # lane k's number t

    def fold(k: int, at: ir.Expr) -> list[ir.Stmt]:  # lane k folds element ``at`` (later than its own)
        mine = _var(acc, f"acc_{k}")
        stmts: list[ir.Stmt] = [*parts.position(at), ir.Assign(_LOC, "b", read(spec, _i64("p")))]
        if not spec.is_arg:
            return stmts + [ir.Assign(_LOC, mine.name, combine(spec, mine, _var(acc, "b")))]
        return stmts + [
            ir.Assign(_LOC, "take", later_better(spec, mine, _var(acc, "b"))),
            ir.Assign(_LOC, mine.name, ir.Select(acc, ir.Var(bool_t, "take"), _var(acc, "b"), mine)),
            ir.Assign(_LOC, f"idx_{k}", ir.Select(i64, ir.Var(bool_t, "take"), parts.index_of(at), _i64(f"idx_{k}")))]

    def first(k: int) -> ir.Stmt:  # lane k starts at its element of row 0, where the part has one
        at = _bin("+", start, lane[k])
        return ir.If(_LOC, ir.Compare(bool_t, "<", lane[k], length), (
            *parts.position(at), ir.Assign(_LOC, f"acc_{k}", read(spec, _i64("p"))),
            *([ir.Assign(_LOC, f"idx_{k}", parts.index_of(at))] if spec.is_arg else [])))

    rows_end = _bin("+", start, _bin("*", _i64("full"), _const(i64, W)))  # the end of the whole rows
    body: list[ir.Stmt] = [
        ir.Assign(_LOC, "g", ir.WorkItem(i64, "group_id", 0)),
        ir.Assign(_LOC, "t", ir.WorkItem(i64, "local_id", 0)),
        *parts.bounds(_i64("g")),
        ir.Assign(_LOC, "full", _bin("//", length, _const(i64, W))),
        *[ir.Assign(_LOC, f"acc_{k}", _const(acc, 0)) for k in range(L)],
        *([ir.Assign(_LOC, f"idx_{k}", _const(i64, 0)) for k in range(L)] if spec.is_arg else []),
        *[first(k) for k in range(L)],
        # rows 1 .. full-1: every lane has its element, no tests
        ir.For(_LOC, "j", _bin("+", start, _const(i64, W)), rows_end, _const(i64, W),
               tuple(s for k in range(L) for s in fold(k, _bin("+", j, lane[k])))),
        # the last row, short: only the lanes that reach into it (row 0 was done by ``first``)
        ir.If(_LOC, ir.Logical(bool_t, "and", ir.Compare(bool_t, ">", _i64("full"), _const(i64, 0)),
                               ir.Compare(bool_t, "<", rows_end, stop)), (
            ir.Assign(_LOC, "j", rows_end),
            *[ir.If(_LOC, ir.Compare(bool_t, "<", _bin("+", j, lane[k]), stop), tuple(fold(k, _bin("+", j, lane[k]))))
              for k in range(L)])),
    ]
    step = W // 2
    while step >= items and L > 1:  # within the item: lane k takes in lane k + step/items
        s = step // items
        for k in range(s):
            body.append(ir.If(_LOC, ir.Compare(bool_t, "<", _bin("+", lane[k], _const(i64, step)), length),
                              _fold_private(spec, k, k + s)))
        step //= 2
    body += [ir.Store(_LOC, "tree", (i,), _var(acc, "acc_0")),
             *([ir.Store(_LOC, "tree_index", (i,), _i64("idx_0"))] if spec.is_arg else []),
             ir.Barrier(_LOC)]
    while step:
        other = _bin("+", i, _const(i64, step))
        takes_part = ir.Logical(bool_t, "and", ir.Compare(bool_t, "<", i, _const(i64, step)),
                                ir.Compare(bool_t, "<", other, length))
        body += [ir.If(_LOC, takes_part, _fold_lanes(spec, "tree", i, other)), ir.Barrier(_LOC)]
        step //= 2
    zero = _const(i64, 0)
    total = ir.Load(acc, "tree", (zero,))
    index = ir.Load(i64, "tree_index", (zero,)) if spec.is_arg else zero
    body.append(ir.If(_LOC, ir.Compare(bool_t, "==", i, zero), parts.write(total, index)))
    return ir.Function(spec.name, _params(spec), ir.VOID, parts.locals, _lane_arrays(spec, "tree", items), tuple(body),
                       True, _LOC, features=frozenset({"barrier"}))


def _fold_private(spec: Reduction, into: int, other: int) -> tuple[ir.Stmt, ...]:
    """Private lane ``acc_{into}`` takes in ``acc_{other}`` (a step of the tree within an item)."""
    mine, theirs = _var(spec.acc, f"acc_{into}"), _var(spec.acc, f"acc_{other}")
    if not spec.is_arg:
        return (ir.Assign(_LOC, mine.name, combine(spec, mine, theirs)),)
    index, their_index = _i64(f"idx_{into}"), _i64(f"idx_{other}")
    return (ir.If(_LOC, better(spec, mine, theirs, index, their_index),
                  (ir.Assign(_LOC, mine.name, theirs), ir.Assign(_LOC, index.name, their_index))),)


def _build_lanes(spec: Reduction) -> ir.Function:
    """The segment stage with one work-item per part, its ``W`` lanes an inner loop over a local
    array (the CPU's form: the loop over lanes reads neighbouring elements, so it vectorizes).
    The same lanes, the same order and the same tree as :func:`_build_items`, so the same bits."""
    acc, W = spec.acc, GROUP
    parts = _Parts(spec)
    t, j, start, stop = _i64("t"), _i64("j"), _i64("start"), _i64("stop")
    zero, lanes = _const(i64, 0), _const(i64, W)
    lane = ir.Load(acc, "tree", (t,))

    def first(at: ir.Expr) -> list[ir.Stmt]:  # lane t starts at element ``at``
        stmts: list[ir.Stmt] = [*parts.position(at), ir.Store(_LOC, "tree", (t,), read(spec, _i64("p")))]
        if spec.is_arg:
            stmts.append(ir.Store(_LOC, "tree_index", (t,), parts.index_of(at)))
        return stmts

    def fold(at: ir.Expr) -> list[ir.Stmt]:  # lane t folds element ``at``; selects, no branches
        stmts: list[ir.Stmt] = [*parts.position(at), ir.Assign(_LOC, "b", read(spec, _i64("p")))]
        if not spec.is_arg:
            return stmts + [ir.Store(_LOC, "tree", (t,), combine(spec, lane, _var(acc, "b")))]
        mine = ir.Load(i64, "tree_index", (t,))
        return stmts + [
            ir.Assign(_LOC, "b_idx", parts.index_of(at)),
            ir.Assign(_LOC, "take", later_better(spec, lane, _var(acc, "b"))),
            ir.Store(_LOC, "tree", (t,), ir.Select(acc, ir.Var(bool_t, "take"), _var(acc, "b"), lane)),
            ir.Store(_LOC, "tree_index", (t,), ir.Select(i64, ir.Var(bool_t, "take"), _i64("b_idx"), mine))]

    length = _bin("-", stop, start)
    full = _bin("+", start, _bin("*", _bin("//", length, lanes), lanes))  # the end of the whole rows
    row_t = _bin("+", j, t)
    body: list[ir.Stmt] = [
        ir.Assign(_LOC, "g", ir.WorkItem(i64, "global_id", 0)),
        *parts.bounds(_i64("g")),
        ir.For(_LOC, "t", zero, _bin("min", length, lanes), _const(i64, 1), tuple(first(_bin("+", start, t)))),
        ir.For(_LOC, "j", _bin("+", start, lanes), full, lanes, (
            ir.For(_LOC, "t", zero, lanes, _const(i64, 1), tuple(fold(row_t))),)),
        ir.If(_LOC, ir.Compare(bool_t, ">", full, start), (
            ir.Assign(_LOC, "j", full),
            ir.For(_LOC, "t", zero, _bin("-", stop, full), _const(i64, 1), tuple(fold(row_t))),)),
    ]
    step = W // 2
    while step:
        other = _bin("+", t, _const(i64, step))
        body.append(ir.For(_LOC, "t", zero, _const(i64, step), _const(i64, 1), (
            ir.If(_LOC, ir.Compare(bool_t, "<", other, length), _fold_lanes(spec, "tree", t, other)),)))
        step //= 2
    total = ir.Load(acc, "tree", (zero,))
    index = ir.Load(i64, "tree_index", (zero,)) if spec.is_arg else zero
    body += parts.write(total, index)
    return ir.Function(spec.name, _params(spec), ir.VOID, parts.locals, _lane_arrays(spec, "tree", private=True),
                       tuple(body), True, _LOC)


def _lane_arrays(spec: Reduction, name: str, lanes: int = GROUP, private: bool = False) -> tuple[ir.LocalArray, ...]:
    """The lanes' values (and, for arg-reductions, indices): shared by the group's items, or
    (``private``: the one-work-item forms) the item's own, which the compilers keep apart from
    the global buffers (PoCL's argmax over 64 Mi float32: 52 -> 44 ms)."""
    arrays = (ir.LocalArray(name, spec.acc, (lanes,), private),)
    return arrays + ((ir.LocalArray(f"{name}_index", i64, (lanes,), private),) if spec.is_arg else ())


def _fold_lanes(spec: Reduction, name: str, into: ir.Expr, other: ir.Expr) -> tuple[ir.Stmt, ...]:
    """Lane ``into`` takes in lane ``other`` (one step of the tree)."""
    mine, theirs = ir.Load(spec.acc, name, (into,)), ir.Load(spec.acc, name, (other,))
    if not spec.is_arg:
        return (ir.Store(_LOC, name, (into,), combine(spec, mine, theirs)),)
    index, their_index = ir.Load(i64, f"{name}_index", (into,)), ir.Load(i64, f"{name}_index", (other,))
    return (ir.If(_LOC, better(spec, mine, theirs, index, their_index),
                  (ir.Store(_LOC, name, (into,), theirs), ir.Store(_LOC, f"{name}_index", (into,), their_index))),)


def _build_columns(spec: Reduction) -> ir.Function:
    """The ``columns`` stage (see the module docstring): one work-item per (output, chunk)."""
    rank = spec.outer + spec.inner
    acc = spec.acc
    locals_: dict[str, ScalarType] = {"gid": i64, "m": i64, "c": i64, "start": i64, "stop": i64,
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


def _build_column_lanes(spec: Reduction) -> ir.Function:
    """The ``columns`` stage on CPU devices (``lanes``, ``contiguous``: the one outer axis has stride
    1): work-item ``gid`` folds chunk ``c = gid // blocks`` of :data:`COLUMN_LANES` neighbouring
    outputs ``m0 = (gid % blocks) * COLUMN_LANES ..`` at once, row by row, the outputs an inner
    loop over neighbouring elements (it vectorizes). Each output still folds its chunk's
    elements in increasing order: the same order, so the same bits, as :func:`_build_columns`."""
    rank = spec.outer + spec.inner
    acc, B = spec.acc, COLUMN_LANES
    locals_: dict[str, ScalarType] = {"gid": i64, "blocks": i64, "m": i64, "m0": i64, "count": i64, "c": i64, "start": i64,
                                      "stop": i64, "row": i64, "j": i64, "k": i64, "p": i64, "b": acc, "take": bool_t,
                                      "b_idx": i64, **offset_locals("q", range(spec.outer, rank))}
    gid, k, j, c = _i64("gid"), _i64("k"), _i64("j"), _i64("c")
    n_out, groups, chunk = _i64("n_out"), _i64("groups"), _i64("chunk")
    zero, one, lanes = _const(i64, 0), _const(i64, 1), _const(i64, B)
    m = _bin("+", _i64("m0"), k)
    lane = ir.Load(acc, "tree", (k,))
    here = [ir.Assign(_LOC, "m", m), ir.Assign(_LOC, "p", _bin("+", _i64("row"), k))]  # the row's offset + the output's

    def first() -> tuple[ir.Stmt, ...]:
        stmts: list[ir.Stmt] = [*here, ir.Store(_LOC, "tree", (k,), read(spec, _i64("p")))]
        return tuple(stmts + ([ir.Store(_LOC, "tree_index", (k,), j)] if spec.is_arg else []))

    def fold() -> tuple[ir.Stmt, ...]:
        stmts: list[ir.Stmt] = [*here, ir.Assign(_LOC, "b", read(spec, _i64("p")))]
        if not spec.is_arg:
            return (*stmts, ir.Store(_LOC, "tree", (k,), combine(spec, lane, _var(acc, "b"))))
        mine = ir.Load(i64, "tree_index", (k,))
        return (*stmts, ir.Assign(_LOC, "take", later_better(spec, lane, _var(acc, "b"))),
                ir.Store(_LOC, "tree", (k,), ir.Select(acc, ir.Var(bool_t, "take"), _var(acc, "b"), lane)),
                ir.Store(_LOC, "tree_index", (k,), ir.Select(i64, ir.Var(bool_t, "take"), j, mine)))

    def row_of(at: ir.Expr) -> list[ir.Stmt]:  # ``row`` = the buffer offset of row ``at``, output 0
        return [ir.Assign(_LOC, "row", _bin("+", _i64("src_offset"), _i64("m0"))),
                *offset_code("q", at, range(spec.outer, rank), "row")]

    slot = _bin("+", _bin("*", m, groups), c)
    total = ir.Load(acc, "tree", (k,))
    if spec.is_arg:
        write: tuple[ir.Stmt, ...] = (ir.Store(_LOC, "dst_value", (slot,), total),
                                      ir.Store(_LOC, "dst", (slot,), ir.Load(i64, "tree_index", (k,))))
    else:
        write = (ir.Store(_LOC, "dst", (slot,), finish(spec, total)),)
    body: list[ir.Stmt] = [
        ir.Assign(_LOC, "gid", ir.WorkItem(i64, "global_id", 0)),
        ir.Assign(_LOC, "blocks", _bin("//", _bin("+", n_out, _const(i64, B - 1)), lanes)),
        ir.Assign(_LOC, "m0", _bin("*", _bin("%", gid, _i64("blocks")), lanes)),
        ir.Assign(_LOC, "c", _bin("//", gid, _i64("blocks"))),
        ir.Assign(_LOC, "count", _bin("min", lanes, _bin("-", n_out, _i64("m0")))),
        ir.Assign(_LOC, "start", _bin("*", c, chunk)),
        ir.Assign(_LOC, "stop", _bin("min", _bin("+", _i64("start"), chunk), _i64("seg_len"))),
        ir.If(_LOC, ir.Logical(bool_t, "and", ir.Compare(bool_t, "<", c, groups),
                               ir.Compare(bool_t, "<", _i64("start"), _i64("stop"))), (
            ir.Assign(_LOC, "j", _i64("start")),
            *row_of(j),
            ir.For(_LOC, "k", zero, _i64("count"), one, first()),
            ir.For(_LOC, "j", _bin("+", _i64("start"), one), _i64("stop"), one, (
                *row_of(j), ir.For(_LOC, "k", zero, _i64("count"), one, fold()))),
            ir.For(_LOC, "k", zero, _i64("count"), one, write),
        )),
    ]
    return ir.Function(spec.name, _params(spec), ir.VOID, locals_, _lane_arrays(spec, "tree", B, private=True),
                       tuple(body), True, _LOC)


def accumulator_of_any() -> ScalarType:
    """The accumulator type of ``any``/``all`` (0 or 1 per element, folded by max/min)."""
    return i32


__all__ = ["FINISHES", "GROUP", "OPS", "Reduction", "accumulator_of_any", "better", "build", "combine"]
