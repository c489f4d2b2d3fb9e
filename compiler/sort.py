"""Sort kernels, built directly as IR: a bitonic sort of (key, index) pairs, rows padded to a power of two.

One definition serves every dialect (the CPU emitter runs the barriers in its work-group
loops). The host (:mod:`hetero.array_sort`) gives contiguous rows of ``n`` elements; each row
is padded to ``P = 2**log_p >= n`` slots in two work buffers, ``keys`` (the key type: the
element type, float32 for float16, uint8 for bool) and ``index`` (i32 or i64, the element's
position in its row). The launches::

    sort_block   one work-group per BLOCK slots: load the row (pad slots past n), sort the block
                 in local memory through every stage k = 2 .. min(BLOCK, P)
    sort_global  one work-item per pair: one compare-exchange step (stage k = 2**s, distance
                 j = 2**sh >= BLOCK) over the whole buffer
    sort_local   one work-group per block: the steps j = BLOCK/2 .. 1 of stage k > BLOCK in local memory
    sort_gather  dst[row, i] = src[row, index[row, i]] (sort) or the index itself (argsort)

so a row of ``P > BLOCK`` slots takes ``1 + sum over stages of (global steps + 1)`` launches,
O(log^2(P / BLOCK)). Pairs are ordered by key, then by index, so no two compare equal: the
network's result is the one stable order, ascending or descending alike (equal keys keep their
input order). NaN is above every number (last ascending, first descending, as NumPy's
``flip(sort(flip(x)))``); -0.0 and +0.0 are equal keys. Pad slots (index >= n) come after every
element. The direction of a compare-exchange is ascending when ``k == P`` (so every row ends
ascending in the pair order) or when bit ``k`` of the slot is clear.
"""

from __future__ import annotations

import dataclasses

from hetero.types import ArrayType, ScalarType, bool_t, i64

from . import ir

#: Work-items of a sort work-group; each holds two slots of its block.
GROUP = 256
#: Slots sorted in local memory by one work-group.
BLOCK = 2 * GROUP
LOG_BLOCK = BLOCK.bit_length() - 1
STAGES = ("block", "global", "local", "gather", "indices")
_LOC = ir.Loc("hetero sort", 1)


@dataclasses.dataclass(frozen=True)
class Sort:
    """One sort kernel: ``stage`` (see the module docstring) for keys of ``key`` and indices of
    ``index``; ``source`` is the element type of the rows (block and gather stages)."""

    stage: str
    key: ScalarType
    index: ScalarType
    source: ScalarType
    descending: bool = False

    @property
    def name(self) -> str:
        order = "desc" if self.descending else "asc"
        return f"sort_{self.stage}_{self.source.name}_{self.key.name}_{self.index.name}_{order}"

    def params(self) -> tuple[ir.Param, ...]:
        keys, index = ir.Param("keys", ArrayType(self.key, 1)), ir.Param("index", ArrayType(self.index, 1))
        if self.stage == "block":
            names = [keys, index, ir.Param("src", ArrayType(self.source, 1))] + _scalars("n", "total", "log_p", "stages")
        elif self.stage == "global":
            names = [keys, index] + _scalars("n", "log_p", "s", "sh")
        elif self.stage == "local":
            names = [keys, index] + _scalars("n", "total", "log_p", "s")
        elif self.stage == "gather":
            names = [ir.Param("dst", ArrayType(self.source, 1)), ir.Param("src", ArrayType(self.source, 1)), index]
            names += _scalars("n", "count", "log_p")
        else:
            names = [ir.Param("dst", ArrayType(i64, 1)), index] + _scalars("n", "count", "log_p")
        return tuple(names)


def _scalars(*names: str) -> list[ir.Param]:
    return [ir.Param(name, i64) for name in names]


# -- a few expression builders (every one typed as the IR wants) ------------------------------
def _v(name: str, t: ScalarType = i64) -> ir.Var:
    return ir.Var(t, name)


def _c(value: int, t: ScalarType = i64) -> ir.Const:
    return ir.Const(t, value)


def _op(op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.BinOp(left.type, op, left, right)


def _cmp(op: str, left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.Compare(bool_t, op, left, right)


def _and(left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.Logical(bool_t, "and", left, right)


def _or(left: ir.Expr, right: ir.Expr) -> ir.Expr:
    return ir.Logical(bool_t, "or", left, right)


def _not(value: ir.Expr) -> ir.Expr:
    return ir.UnaryOp(bool_t, "not", value)


def _set(name: str, value: ir.Expr) -> ir.Assign:
    return ir.Assign(_LOC, name, value)


def _pow2(exponent: ir.Expr) -> ir.Expr:
    return _op("<<", _c(1), exponent)


def key_before(key: ScalarType, descending: bool, a: ir.Expr, b: ir.Expr) -> tuple[ir.Expr, ir.Expr]:
    """(a strictly before b, a equal to b) for keys: NaN above every number, -0.0 == +0.0."""
    if key.kind != "f":
        return _cmp(">" if descending else "<", a, b), _cmp("==", a, b)
    a_nan, b_nan = ir.Math(bool_t, "isnan", (a,)), ir.Math(bool_t, "isnan", (b,))
    if descending:
        before = _or(_cmp(">", a, b), _and(a_nan, _not(b_nan)))
    else:
        before = _or(_cmp("<", a, b), _and(b_nan, _not(a_nan)))
    return before, _or(_cmp("==", a, b), _and(a_nan, b_nan))


def pair_before(spec: Sort, ka: ir.Expr, ia: ir.Expr, kb: ir.Expr, ib: ir.Expr) -> ir.Expr:
    """Whether pair a comes before pair b: pad slots (index >= n) last, then keys, then indices."""
    n = ir.Cast(spec.index, _v("n")) if spec.index != i64 else _v("n")
    a_pad, b_pad = _cmp(">=", ia, n), _cmp(">=", ib, n)
    before, equal = key_before(spec.key, spec.descending, ka, kb)
    real = _or(b_pad, _or(before, _and(equal, _cmp("<", ia, ib))))
    return ir.Select(bool_t, a_pad, _and(b_pad, _cmp("<", ia, ib)), real)


def _exchange(spec: Sort, keys: str, index: str, lo: ir.Expr, hi: ir.Expr, ascending: ir.Expr) -> list[ir.Stmt]:
    """Compare-exchange of slots ``lo < hi`` of arrays ``keys``/``index``: afterwards ``lo`` holds
    the pair that comes first when ``ascending``, the other one else."""
    K, Ix = spec.key, spec.index
    ka, kb, ia, ib = _v("ka", K), _v("kb", K), _v("ia", Ix), _v("ib", Ix)
    swap = ir.Select(bool_t, ascending, pair_before(spec, kb, ib, ka, ia), pair_before(spec, ka, ia, kb, ib))
    return [
        _set("ka", ir.Load(K, keys, (lo,))), _set("ia", ir.Load(Ix, index, (lo,))),
        _set("kb", ir.Load(K, keys, (hi,))), _set("ib", ir.Load(Ix, index, (hi,))),
        ir.If(_LOC, swap, (ir.Store(_LOC, keys, (lo,), kb), ir.Store(_LOC, index, (lo,), ib),
                           ir.Store(_LOC, keys, (hi,), ka), ir.Store(_LOC, index, (hi,), ia))),
    ]


def _pair_slots(t: ir.Expr, sh: ir.Expr) -> tuple[ir.Expr, ir.Expr]:
    """The two slots pair ``t`` joins at distance ``2**sh``: ``lo`` (bit sh clear) and ``lo + 2**sh``."""
    j = _pow2(sh)
    lo = _op("|", _op("<<", _op(">>", t, sh), _op("+", sh, _c(1))), _op("&", t, _op("-", j, _c(1))))
    return lo, _op("+", lo, j)


def _ascending(slot: ir.Expr) -> ir.Expr:
    """The direction at stage ``s`` for global slot ``slot``: up at the last stage or where bit k is clear."""
    return _or(_cmp("==", _v("s"), _v("log_p")), _cmp("==", _op("&", slot, _pow2(_v("s"))), _c(0)))


def _locals(spec: Sort, **extra: ScalarType) -> dict[str, ScalarType]:
    return {"ka": spec.key, "kb": spec.key, "ia": spec.index, "ib": spec.index, **extra}


def _function(spec: Sort, body: list[ir.Stmt], locals_: dict[str, ScalarType], local_arrays: tuple[ir.LocalArray, ...] = ()
              ) -> ir.Function:
    features = frozenset({"barrier"}) if local_arrays else frozenset()
    return ir.Function(spec.name, spec.params(), ir.VOID, locals_, local_arrays, tuple(body), True, _LOC,
                       features=features)


def _block_steps(spec: Sort, first_sh: ir.Expr, count: ir.Expr) -> ir.For:
    """``count`` local compare-exchange steps of stage ``s`` at distances 2**(first_sh), 2**(first_sh - 1) ..."""
    lo, hi = _pair_slots(_v("t"), _v("sh"))
    step = [_set("sh", _op("-", first_sh, _v("q"))),
            *_exchange(spec, "block_keys", "block_index", lo, hi, _ascending(_op("+", _v("base"), lo))),
            ir.Barrier(_LOC)]
    return ir.For(_LOC, "q", _c(0), count, _c(1), tuple(step))


def _load_block(spec: Sort, slots: list[tuple[ir.Expr, ir.Expr]]) -> list[ir.Stmt]:
    """Copy slots (local, global) of the work buffers into local memory, pad past ``total``."""
    body: list[ir.Stmt] = []
    for here, there in slots:
        inside = _cmp("<", there, _v("total"))
        body.append(ir.If(_LOC, inside,
                          (ir.Store(_LOC, "block_keys", (here,), ir.Load(spec.key, "keys", (there,))),
                           ir.Store(_LOC, "block_index", (here,), ir.Load(spec.index, "index", (there,)))),
                          (ir.Store(_LOC, "block_keys", (here,), _zero(spec.key)),
                           ir.Store(_LOC, "block_index", (here,), _op("+", ir.Cast(spec.index, _v("n")), _c(1, spec.index))))))
    return body


def _store_block(spec: Sort, slots: list[tuple[ir.Expr, ir.Expr]]) -> list[ir.Stmt]:
    return [ir.If(_LOC, _cmp("<", there, _v("total")),
                  (ir.Store(_LOC, "keys", (there,), ir.Load(spec.key, "block_keys", (here,))),
                   ir.Store(_LOC, "index", (there,), ir.Load(spec.index, "block_index", (here,)))))
            for here, there in slots]


def _zero(t: ScalarType) -> ir.Const:
    return ir.Const(t, 0.0 if t.kind == "f" else 0)


def _block_arrays(spec: Sort) -> tuple[ir.LocalArray, ...]:
    return ir.LocalArray("block_keys", spec.key, (BLOCK,)), ir.LocalArray("block_index", spec.index, (BLOCK,))


def _build_block(spec: Sort) -> ir.Function:
    K, Ix = spec.key, spec.index
    t, base = _v("t"), _v("base")
    body: list[ir.Stmt] = [_set("t", ir.WorkItem(i64, "local_id", 0)),
                           _set("base", _op("*", ir.WorkItem(i64, "group_id", 0), _c(BLOCK)))]
    for half in (0, GROUP):
        here = _op("+", t, _c(half))
        slot = _op("+", base, here)
        pos = _op("&", slot, _op("-", _pow2(_v("log_p")), _c(1)))
        row = _op(">>", slot, _v("log_p"))
        loaded: ir.Expr = ir.Load(spec.source, "src", (_op("+", _op("*", row, _v("n")), pos),))
        if spec.source != K:
            loaded = ir.Cast(K, loaded)
        real = _and(_cmp("<", slot, _v("total")), _cmp("<", pos, _v("n")))
        body.append(ir.If(_LOC, real, (ir.Store(_LOC, "block_keys", (here,), loaded),),
                          (ir.Store(_LOC, "block_keys", (here,), _zero(K)),)))
        body.append(ir.Store(_LOC, "block_index", (here,), ir.Cast(Ix, pos) if Ix != i64 else pos))
    body.append(ir.Barrier(_LOC))
    # stage s = 1 .. stages, each its steps at distances 2**(s-1) .. 1
    body.append(ir.For(_LOC, "s", _c(1), _op("+", _v("stages"), _c(1)), _c(1),
                       (_block_steps(spec, _op("-", _v("s"), _c(1)), _v("s")),)))
    body += _store_block(spec, _slots())
    return _function(spec, body, _locals(spec, t=i64, base=i64, s=i64, sh=i64, q=i64), _block_arrays(spec))


def _slots() -> list[tuple[ir.Expr, ir.Expr]]:
    here = [_v("t"), _op("+", _v("t"), _c(GROUP))]
    return [(h, _op("+", _v("base"), h)) for h in here]


def _build_local(spec: Sort) -> ir.Function:
    body: list[ir.Stmt] = [_set("t", ir.WorkItem(i64, "local_id", 0)),
                           _set("base", _op("*", ir.WorkItem(i64, "group_id", 0), _c(BLOCK)))]
    body += _load_block(spec, _slots())
    body.append(ir.Barrier(_LOC))
    body.append(_block_steps(spec, _c(LOG_BLOCK - 1), _c(LOG_BLOCK)))
    body += _store_block(spec, _slots())
    return _function(spec, body, _locals(spec, t=i64, base=i64, sh=i64, q=i64), _block_arrays(spec))


def _build_global(spec: Sort) -> ir.Function:
    lo, hi = _pair_slots(_v("t"), _v("sh"))
    body: list[ir.Stmt] = [_set("t", ir.WorkItem(i64, "global_id", 0)), _set("lo", lo), _set("hi", hi),
                           *_exchange(spec, "keys", "index", _v("lo"), _v("hi"), _ascending(_v("lo")))]
    return _function(spec, body, _locals(spec, t=i64, lo=i64, hi=i64))


def _build_gather(spec: Sort) -> ir.Function:
    g = _v("g")
    body: list[ir.Stmt] = [_set("g", ir.WorkItem(i64, "global_id", 0))]
    row = _op("//", g, _v("n"))
    slot = _op("+", _op("<<", _v("row"), _v("log_p")), _op("-", g, _op("*", _v("row"), _v("n"))))
    picked: ir.Expr = ir.Load(spec.index, "index", (slot,))
    if spec.index != i64:
        picked = ir.Cast(i64, picked)
    if spec.stage == "gather":
        value: ir.Expr = ir.Load(spec.source, "src", (_op("+", _op("*", _v("row"), _v("n")), picked),))
    else:
        value = picked
    body.append(ir.If(_LOC, _cmp("<", g, _v("count")), (_set("row", row), ir.Store(_LOC, "dst", (g,), value))))
    return _function(spec, body, {"g": i64, "row": i64})


def build(spec: Sort) -> ir.Function:
    """The kernel of ``spec`` (see the module docstring)."""
    if spec.stage not in STAGES or spec.index.kind != "i" or spec.index.bits < 32:
        raise ValueError(f"sort: no kernel for {spec}")
    if spec.stage == "block":
        return _build_block(spec)
    if spec.stage == "global":
        return _build_global(spec)
    if spec.stage == "local":
        return _build_local(spec)
    return _build_gather(spec)


__all__ = ["BLOCK", "GROUP", "LOG_BLOCK", "STAGES", "Sort", "build", "key_before", "pair_before"]
