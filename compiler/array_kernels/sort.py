"""Sort kernels, built directly as IR: a bitonic sort of (key, index) pairs, rows padded to a power of two.

One definition serves every dialect (the CPU emitter runs the barriers in its work-group
loops). The host (:mod:`hetero.arraylib.sort`) gives contiguous rows of ``n`` elements as their
bits (the unsigned type of their width: the kernels move elements unchanged). Each element
becomes an order-preserving unsigned key (:func:`ordered_key`): integers with the sign bit
flipped; floats with +-0.0 as one key, negative values' bits inverted, positives' sign bit
set and every NaN the largest key (so NaN is above every number); descending order inverts
the key (NaN then the smallest, so first). Then pairs compare as plain unsigned integers:

- *packed* (elements of up to 32 bits, rows of fewer than 2**31): one u64 slot holds
  ``key << 32 | index``, one compare orders by key and then by index;
- *pairs* (64-bit elements): a u64 key and an index (i32 or i64) in two buffers.

Each row is padded to ``P = 2**log_p >= n`` slots; pad slots hold the largest key and an
index >= n, so they come after every element. The launches::

    sort_block   one work-group per BLOCK slots: load and encode the row, sort the block in
                 local memory through every stage k = 2 .. min(BLOCK, P), one step at a time
    sort_global  up to MAX_FUSED compare-exchange steps of stage k = 2**s at distances
                 j = 2**sh, 2**(sh-1) .. >= BLOCK over the whole buffer, each work-item holding the
                 2**fused slots those steps mix in registers (fewer passes over memory)
    sort_local   one work-group per block: the steps j = BLOCK/2 .. 1 of stage k > BLOCK in local
                 memory, MAX_FUSED steps between barriers (each a register network, as sort_global's)
    sort_gather  dst[row, i] = src[row, index of slot i] (sort) or the index itself (argsort)

so a row of ``P > BLOCK`` slots takes ``1 + sum over stages of (global launches + 1)`` launches,
O(log^2(P / BLOCK) / MAX_FUSED). Pairs are ordered by key, then by index, so no two compare equal: the
network's result is the one stable order, ascending or descending alike (equal keys keep their
input order). The direction of a compare-exchange is ascending when ``k == P`` (so every row
ends ascending in the pair order) or when bit ``k`` of the slot is clear.
"""

from __future__ import annotations

import dataclasses

from hetero.core.types import ArrayType, ScalarType, bool_t, i64, u32, u64

from hetero.compiler.ir import nodes as ir

#: Work-items of a sort work-group.
GROUP = 128
#: Slots sorted in local memory by one work-group (8 a work-item: one register network of MAX_FUSED steps).
BLOCK = 8 * GROUP
LOG_BLOCK = BLOCK.bit_length() - 1
STAGES = ("block", "global", "local", "gather", "indices")
#: The most global steps one launch makes (each work-item holds 2**MAX_FUSED slots in registers).
MAX_FUSED = 3
#: The bits of an index in a packed slot.
INDEX_BITS = 32
_LOC = ir.Loc("hetero sort", 1)


@dataclasses.dataclass(frozen=True)
class Sort:
    """One sort kernel: ``stage`` (see the module docstring). ``source`` is the unsigned type the
    elements travel as, ``kind`` their dtype's kind (``b i u f``); ``index`` the index type of
    the pairs layout, None for the packed one."""

    stage: str
    source: ScalarType
    kind: str
    index: ScalarType | None
    descending: bool = False
    fused: int = 1  # global stage: steps per launch (1 .. MAX_FUSED)

    @property
    def packed(self) -> bool:
        return self.index is None

    @property
    def name(self) -> str:
        order = "desc" if self.descending else "asc"
        layout = "packed" if self.index is None else f"pairs_{self.index.name}"
        fused = f"_x{self.fused}" if self.stage == "global" else ""
        return f"sort_{self.stage}{fused}_{self.kind}{self.source.bits}_{layout}_{order}"

    def params(self) -> tuple[ir.Param, ...]:
        work = [ir.Param("keys", ArrayType(u64, 1))]
        if self.index is not None:
            work.append(ir.Param("index", ArrayType(self.index, 1)))
        if self.stage == "block":
            names = [*work, ir.Param("src", ArrayType(self.source, 1))] + _scalars("n", "total", "log_p", "stages")
        elif self.stage == "global":
            names = [*work] + _scalars("n", "log_p", "s", "sh")
        elif self.stage == "local":
            names = [*work] + _scalars("n", "total", "log_p", "s")
        elif self.stage == "gather":
            names = [ir.Param("dst", ArrayType(self.source, 1)), ir.Param("src", ArrayType(self.source, 1)), *work]
            names += _scalars("n", "count", "log_p")
        else:
            names = [ir.Param("dst", ArrayType(i64, 1)), *work] + _scalars("n", "count", "log_p")
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


def _u(value: int, t: ScalarType = u64) -> ir.Const:
    return ir.Const(t, value)


def _widen(t: ScalarType, value: ir.Expr) -> ir.Expr:
    return value if value.type == t else ir.Cast(t, value)


def ordered_key(spec: Sort, bits: ir.Expr, wide: ScalarType) -> ir.Expr:
    """The order-preserving unsigned key (of type ``wide``) of an element given as its ``bits``
    (see the module docstring); inverted for a descending sort."""
    U, w = spec.source, spec.source.bits
    sign = _u(1 << (w - 1), U)
    if spec.kind == "i":
        key: ir.Expr = _widen(wide, _op("^", bits, sign))
    elif spec.kind == "f":
        exponent = {16: 0x7C00, 32: 0x7F800000, 64: 0x7FF0000000000000}[w]
        magnitude = _op("&", bits, _u((1 << (w - 1)) - 1, U))
        ordered = ir.Select(U, _cmp("==", magnitude, _u(0, U)), sign,
                            ir.Select(U, _cmp("!=", _op("&", bits, sign), _u(0, U)), ir.UnaryOp(U, "~", bits),
                                      _op("|", bits, sign)))
        nan = _cmp(">", magnitude, _u(exponent, U))
        largest = _u((1 << wide.bits) - 1, wide)
        if spec.descending:  # NaN the smallest key: first
            return ir.Select(wide, nan, _u(0, wide), ir.UnaryOp(wide, "~", _widen(wide, ordered)))
        return ir.Select(wide, nan, largest, _widen(wide, ordered))
    else:
        key = _widen(wide, bits)
    return ir.UnaryOp(wide, "~", key) if spec.descending else key


def _index_of(spec: Sort, keys: str, slot: ir.Expr) -> ir.Expr:
    """The element index (i64) held in ``slot``."""
    if spec.index is None:
        return ir.Cast(i64, _op("&", ir.Load(u64, keys, (slot,)), _u((1 << INDEX_BITS) - 1)))
    return _widen(i64, ir.Load(spec.index, "index" if keys == "keys" else "block_index", (slot,)))


def _network(spec: Sort, keys: str, index: str, t: ir.Expr, sh: ir.Expr, r: int, s: ir.Expr,
             base: ir.Expr | None = None) -> list[ir.Stmt]:
    """``r`` compare-exchange steps of stage ``s`` at distances 2**sh, 2**(sh-1) .. 2**(sh-r+1),
    done in registers on the 2**r slots of ``keys`` (and ``index``) that network ``t`` owns:
    those whose bits sh-r+1 .. sh vary (the steps mix only these). ``base`` is added to a slot
    to get its global number, which decides the direction."""
    low = _op("+", _op("-", sh, _c(r)), _c(1))
    lo = _op("|", _op("<<", _op(">>", t, low), _op("+", low, _c(r))), _op("&", t, _op("-", _pow2(low), _c(1))))
    count = 1 << r

    def slot(m: int) -> ir.Expr:
        offset: ir.Expr = _v("lo")
        for b in range(r):
            if m >> b & 1:
                offset = _op("+", offset, _pow2(_op("+", low, _c(b))))
        return offset

    where = _v("lo") if base is None else _op("+", base, _v("lo"))
    body: list[ir.Stmt] = [_set("lo", lo), _set("up", _ascending(where, s))]
    idx = spec.index
    for m in range(count):
        body.append(_set(f"k{m}", ir.Load(u64, keys, (slot(m),))))
        if idx is not None:
            body.append(_set(f"i{m}", ir.Load(idx, index, (slot(m),))))
    for level in range(r):
        bit = 1 << (r - 1 - level)
        for a in range(count):
            if a & bit:
                continue
            b = a | bit
            ka, kb = _v(f"k{a}", u64), _v(f"k{b}", u64)
            b_first = _cmp("<", kb, ka)
            swap: list[ir.Stmt] = [_set("kt", ka), _set(f"k{a}", kb), _set(f"k{b}", _v("kt", u64))]
            if idx is not None:
                ia, ib = _v(f"i{a}", idx), _v(f"i{b}", idx)
                b_first = _or(b_first, _and(_cmp("==", kb, ka), _cmp("<", ib, ia)))
                swap += [_set("it", ia), _set(f"i{a}", ib), _set(f"i{b}", _v("it", idx))]
            # no two pairs are equal: swap when the pair that should come first is the second
            body.append(ir.If(_LOC, _cmp("==", _v("up", bool_t), b_first), tuple(swap)))
    for m in range(count):
        body.append(ir.Store(_LOC, keys, (slot(m),), _v(f"k{m}", u64)))
        if idx is not None:
            body.append(ir.Store(_LOC, index, (slot(m),), _v(f"i{m}", idx)))
    return body


def _ascending(slot: ir.Expr, s: ir.Expr) -> ir.Expr:
    """The direction at stage ``s`` for global slot ``slot``: up at the last stage or where bit k is clear."""
    return _or(_cmp("==", s, _v("log_p")), _cmp("==", _op("&", slot, _pow2(s)), _c(0)))


def _locals(spec: Sort, **extra: ScalarType) -> dict[str, ScalarType]:
    names: dict[str, ScalarType] = {"lo": i64, "up": bool_t, "kt": u64, **{f"k{m}": u64 for m in range(1 << MAX_FUSED)}}
    if spec.index is not None:
        names.update({"it": spec.index, **{f"i{m}": spec.index for m in range(1 << MAX_FUSED)}})
    return {**names, **extra}


def _function(spec: Sort, body: list[ir.Stmt], locals_: dict[str, ScalarType], local_arrays: tuple[ir.LocalArray, ...] = ()
              ) -> ir.Function:
    features = frozenset({"barrier"}) if local_arrays else frozenset()
    return ir.Function(spec.name, spec.params(), ir.VOID, locals_, local_arrays, tuple(body), True, _LOC,
                       features=features)


def _block_steps(spec: Sort, s: ir.Expr, first_sh: int) -> list[ir.Stmt]:
    """The local steps of stage ``s`` at distances 2**first_sh .. 1, in groups of up to MAX_FUSED
    steps done in registers, a barrier after each group; every work-item does BLOCK / 2**r / GROUP networks."""
    body: list[ir.Stmt] = []
    sh = first_sh
    while sh >= 0:
        r = min(MAX_FUSED, sh + 1)
        networks = BLOCK >> r
        each = _network(spec, "block_keys", "block_index", _op("+", _v("t"), _op("*", _v("c"), _c(GROUP))), _c(sh), r, s,
                        base=_v("base"))
        body.append(ir.For(_LOC, "c", _c(0), _c(networks // GROUP), _c(1), tuple(each)))
        body.append(ir.Barrier(_LOC))
        sh -= r
    return body


def _block_arrays(spec: Sort) -> tuple[ir.LocalArray, ...]:
    keys = ir.LocalArray("block_keys", u64, (BLOCK,))
    return (keys,) if spec.index is None else (keys, ir.LocalArray("block_index", spec.index, (BLOCK,)))


def _slots() -> list[tuple[ir.Expr, ir.Expr]]:
    here = [_op("+", _v("t"), _c(GROUP * m)) for m in range(BLOCK // GROUP)]
    return [(h, _op("+", _v("base"), h)) for h in here]


def _start() -> list[ir.Stmt]:
    return [_set("t", ir.WorkItem(i64, "local_id", 0)), _set("base", _op("*", ir.WorkItem(i64, "group_id", 0), _c(BLOCK)))]


def _copy(spec: Sort, into: str, source: str, slots: list[tuple[ir.Expr, ir.Expr]], to_local: bool) -> list[ir.Stmt]:
    """Copy the work buffers' slots to local memory (``to_local``) or back, for slots below ``total``."""
    body: list[ir.Stmt] = []
    for here, there in slots:
        dst, src = (here, there) if to_local else (there, here)
        moves: list[ir.Stmt] = [ir.Store(_LOC, into, (dst,), ir.Load(u64, source, (src,)))]
        if spec.index is not None:
            into_index, source_index = ("block_index", "index") if to_local else ("index", "block_index")
            moves.append(ir.Store(_LOC, into_index, (dst,), ir.Load(spec.index, source_index, (src,))))
        body.append(ir.If(_LOC, _cmp("<", there, _v("total")), tuple(moves)))
    return body


def _build_block(spec: Sort) -> ir.Function:
    body = _start()
    for here, slot in _slots():
        pos = _op("&", slot, _op("-", _pow2(_v("log_p")), _c(1)))
        row = _op(">>", slot, _v("log_p"))
        bits = ir.Load(spec.source, "src", (_op("+", _op("*", row, _v("n")), _v("pos")),))
        real = _and(_cmp("<", slot, _v("total")), _cmp("<", _v("pos"), _v("n")))
        if spec.index is None:
            wide = ir.Cast(u64, _v("pos"))
            key = _op("|", _op("<<", _widen(u64, ordered_key(spec, bits, u32)), _u(INDEX_BITS)), wide)
            pad = _op("|", _u(((1 << INDEX_BITS) - 1) << INDEX_BITS), wide)
            body += [_set("pos", pos), ir.If(_LOC, real, (ir.Store(_LOC, "block_keys", (here,), key),),
                                             (ir.Store(_LOC, "block_keys", (here,), pad),))]
        else:
            body += [_set("pos", pos),
                     ir.If(_LOC, real, (ir.Store(_LOC, "block_keys", (here,), ordered_key(spec, bits, u64)),),
                           (ir.Store(_LOC, "block_keys", (here,), _u((1 << 64) - 1)),)),
                     ir.Store(_LOC, "block_index", (here,), _widen(spec.index, _v("pos")))]
    body.append(ir.Barrier(_LOC))
    # stage s = 1 .. stages, each its steps at distances 2**(s-1) .. 1 one at a time (a loop, not
    # unrolled groups: the unrolled kernel took PoCL and Numba minutes to compile)
    step = _network(spec, "block_keys", "block_index", _op("+", _v("t"), _op("*", _v("c"), _c(GROUP))), _v("sh"), 1,
                    _v("s"), base=_v("base"))
    each = (_set("sh", _op("-", _op("-", _v("s"), _c(1)), _v("q"))),
            ir.For(_LOC, "c", _c(0), _c(BLOCK // 2 // GROUP), _c(1), tuple(step)),
            ir.Barrier(_LOC))
    body.append(ir.For(_LOC, "s", _c(1), _op("+", _v("stages"), _c(1)), _c(1),
                       (ir.For(_LOC, "q", _c(0), _v("s"), _c(1), each),)))
    body += _copy(spec, "keys", "block_keys", _slots(), to_local=False)
    return _function(spec, body, _locals(spec, t=i64, base=i64, c=i64, pos=i64, s=i64, q=i64, sh=i64), _block_arrays(spec))


def _build_local(spec: Sort) -> ir.Function:
    body = _start() + _copy(spec, "block_keys", "keys", _slots(), to_local=True)
    body.append(ir.Barrier(_LOC))
    body += _block_steps(spec, _v("s"), LOG_BLOCK - 1)
    body += _copy(spec, "keys", "block_keys", _slots(), to_local=False)
    return _function(spec, body, _locals(spec, t=i64, base=i64, c=i64), _block_arrays(spec))


def _build_global(spec: Sort) -> ir.Function:
    """``spec.fused`` steps of stage ``s`` at distances 2**sh, 2**(sh - 1) ..., one network a work-item."""
    body: list[ir.Stmt] = [_set("t", ir.WorkItem(i64, "global_id", 0)),
                           *_network(spec, "keys", "index", _v("t"), _v("sh"), spec.fused, _v("s"))]
    return _function(spec, body, _locals(spec, t=i64))


def _build_gather(spec: Sort) -> ir.Function:
    g = _v("g")
    body: list[ir.Stmt] = [_set("g", ir.WorkItem(i64, "global_id", 0))]
    row = _op("//", g, _v("n"))
    slot = _op("+", _op("<<", _v("row"), _v("log_p")), _op("-", g, _op("*", _v("row"), _v("n"))))
    picked = _index_of(spec, "keys", slot)
    if spec.stage == "gather":
        value: ir.Expr = ir.Load(spec.source, "src", (_op("+", _op("*", _v("row"), _v("n")), picked),))
    else:
        value = picked
    body.append(ir.If(_LOC, _cmp("<", g, _v("count")), (_set("row", row), ir.Store(_LOC, "dst", (g,), value))))
    return _function(spec, body, {"g": i64, "row": i64})


def build(spec: Sort) -> ir.Function:
    """The kernel of ``spec`` (see the module docstring)."""
    if (spec.stage not in STAGES or spec.source.kind != "u" or spec.kind not in "biuf"
            or (spec.index is not None and (spec.index.kind != "i" or spec.index.bits < 32))
            or (spec.index is None and spec.source.bits > 32) or not 1 <= spec.fused <= MAX_FUSED):
        raise ValueError(f"sort: no kernel for {spec}")
    if spec.stage == "block":
        return _build_block(spec)
    if spec.stage == "global":
        return _build_global(spec)
    if spec.stage == "local":
        return _build_local(spec)
    return _build_gather(spec)


__all__ = ["BLOCK", "GROUP", "INDEX_BITS", "LOG_BLOCK", "MAX_FUSED", "STAGES", "Sort", "build", "key_before", "ordered_key"]
