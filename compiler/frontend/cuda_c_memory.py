"""The CUDA C front end's pointers and vector types, as hetero's IR has neither.

A pointer is an array and an offset into it: a kernel's ``uint4 *d_Src`` parameter, a variable
``uchar *s_ThreadBase = s_Hist + threadPos`` into a ``__shared__`` array, ``s_WarpHist + data``
as an atomic's address, ``(uint *)s_Hist`` read or written in wider pieces than its elements.
Offsets count the array's own elements; an access through a pointer to a wider integer type
than the array's (``((uint *)s_Hist)[i] = 0`` on a ``uchar`` array) reads or writes that many
consecutive elements, least significant first, as the little-endian devices CUDA runs on do.

A vector value (``uint4``, ``float2``: CUDA's ``x y z w`` structs) is one scalar local per
component; an array of vectors is the flat array of their components, so ``d_Src[pos]`` of a
``uint4 *`` reads elements ``4 * pos`` to ``4 * pos + 3``, as the memory CUDA sees holds them.
"""

from __future__ import annotations

import dataclasses
import re
from typing import TYPE_CHECKING, Any

from hetero.core.types import ScalarType, f32, f64, i8, i16, i32, i64, u8, u16, u32, u64

from hetero.compiler.ir import nodes as ir

_VECTOR = re.compile(r"^(char|uchar|short|ushort|int|uint|long|ulong|longlong|ulonglong|float|double)([1-4])$")
_VECTOR_SCALARS = {"char": i8, "uchar": u8, "short": i16, "ushort": u16, "int": i32, "uint": u32, "long": i64,
                   "ulong": u64, "longlong": i64, "ulonglong": u64, "float": f32, "double": f64}
COMPONENTS = ("x", "y", "z", "w")
#: CUDA's cache-hinted loads, each a plain load here (cuda_c_math declares and lowers them).
LOADS = ("__ldg", "__ldca", "__ldcg", "__ldcs", "__ldcv", "__ldlu")
_QUALIFIERS = re.compile(r"\b(const|volatile|struct)\s+")
#: Declarations of CUDA's vector types and their make_ functions, for the front end's prelude.
VECTOR_PRELUDE = "\n".join(
    f"struct {name}{n} {{ {ctype} {', '.join(COMPONENTS[:n])}; }};\n"
    f"__device__ {name}{n} make_{name}{n}({', '.join(f'{ctype} {c}' for c in COMPONENTS[:n])});"
    for name, ctype in (("char", "signed char"), ("uchar", "unsigned char"), ("short", "short"),
                        ("ushort", "unsigned short"), ("int", "int"), ("uint", "unsigned int"), ("long", "long"),
                        ("ulong", "unsigned long"), ("longlong", "long long"), ("ulonglong", "unsigned long long"),
                        ("float", "float"), ("double", "double"))
    for n in (1, 2, 3, 4))


@dataclasses.dataclass(frozen=True)
class Pointer:
    """Where a pointer points: ``array``'s element ``offset`` (i64), seen as ``pointee`` values of
    ``lanes`` components each (1 for a scalar, 2-4 for a vector type)."""

    array: str
    offset: ir.Expr
    pointee: ScalarType
    lanes: int = 1


def vector_type(ctype: Any) -> tuple[ScalarType, int] | None:
    """The component type and count of a CUDA vector type (``uint4``), else None."""
    canonical = ctype.get_canonical()
    if canonical.kind.name != "RECORD":
        return None
    match = _VECTOR.match(_QUALIFIERS.sub("", canonical.spelling).rsplit("::", 1)[-1])
    return (_VECTOR_SCALARS[match.group(1)], int(match.group(2))) if match else None


def _add(a: ir.Expr, b: ir.Expr) -> ir.Expr:
    if isinstance(b, ir.Const) and b.value == 0:
        return a
    if isinstance(a, ir.Const) and a.value == 0:
        return b
    return ir.BinOp(i64, "+", a, b)


def _times(a: ir.Expr, k: int) -> ir.Expr:
    return a if k == 1 else ir.BinOp(i64, "*", a, ir.Const(i64, k))


class MemoryAccess:
    """Pointers and vectors for :class:`hetero.compiler.frontend.cuda_c._Lowering` (its helpers and state)."""

    cindex: Any
    arrays: dict[str, Any]
    offsets: dict[str, str]
    locals: dict[str, ScalarType]
    names: dict[Any, str]
    #: A pointer variable's declaration -> the array it points into and its i64 offset local.
    pointers: dict[Any, tuple[str, str, ScalarType, int]]
    #: A vector variable's declaration -> its component locals.
    vectors: dict[Any, tuple[str, ...]]
    #: Array parameters of a vector type -> its component count.
    lanes: dict[str, int]

    if TYPE_CHECKING:  # the lowering's own, which this mixin uses
        def kids(self, cursor: Any) -> list[Any]: ...
        def fail(self, cursor: Any, message: str) -> Any: ...
        def fresh(self, wanted: str) -> str: ...
        def expr(self, c: Any) -> ir.Expr: ...
        def cast(self, e: ir.Expr, t: ScalarType) -> ir.Expr: ...
        def scalar(self, cursor: Any, ctype: Any = None) -> ScalarType: ...
        def operator(self, c: Any) -> str: ...
        def element(self, c: Any) -> tuple[str, tuple[ir.Expr, ...]]: ...
        def call_vector(self, c: Any) -> list[ir.Expr]: ...
        def hinted_vector_load(self, c: Any, lanes: int) -> list[ir.Expr]: ...

    def _unwrap(self, c: Any) -> Any:
        """``c`` without parentheses, implicit conversions and copy constructions of a struct."""
        K = self.cindex.CursorKind  # noqa: N806
        while (c.kind in (K.PAREN_EXPR, K.UNEXPOSED_EXPR) or (c.kind == K.CALL_EXPR and c.type.get_canonical().kind.name
                                                               == "RECORD")) and len(self.kids(c)) == 1:
            c = self.kids(c)[0]
        return c

    def pointee(self, c: Any, ctype: Any) -> tuple[ScalarType, int]:
        """What a pointer type points to: a scalar, or a vector's components."""
        target = ctype.get_canonical().get_pointee()
        vector = vector_type(target)
        return vector if vector is not None else (self.scalar(c, target), 1)

    # -- pointers ------------------------------------------------------------------------
    def pointer_expr(self, c: Any) -> Pointer | None:
        """Where pointer expression ``c`` points, or None for a pointer this front end does not follow."""
        K = self.cindex.CursorKind  # noqa: N806
        c = self._unwrap(c)
        kind = c.kind
        if kind in (K.CSTYLE_CAST_EXPR, K.CXX_STATIC_CAST_EXPR, K.CXX_REINTERPRET_CAST_EXPR):
            inner = self.pointer_expr(self.kids(c)[-1])
            if inner is None:
                return None
            pointee, lanes = self.pointee(c, c.type)
            return dataclasses.replace(inner, pointee=pointee, lanes=lanes)
        if kind == K.DECL_REF_EXPR:
            known = self.pointers.get(c.referenced.hash)
            if known is not None:
                into, offset_local, pointee, lanes = known
                return Pointer(into, ir.Var(i64, offset_local), pointee, lanes)
            name = self.names.get(c.referenced.hash)
            if name not in self.arrays:
                return None
            array = self.arrays[name]
            if isinstance(array, ir.LocalArray):
                if len(array.shape) != 1:
                    return None  # a 2-D array decays to a pointer to rows: index it instead
                return Pointer(name, ir.Const(i64, 0), array.dtype)
            offset = ir.Var(i64, self.offsets[name]) if name in self.offsets else ir.Const(i64, 0)
            return Pointer(name, offset, array.dtype, self.lanes.get(name, 1))
        if kind == K.BINARY_OPERATOR and self.operator(c) in ("+", "-"):
            left, right = self.kids(c)
            if left.type.get_canonical().kind.name not in ("POINTER", "CONSTANTARRAY"):
                if self.operator(c) == "-":
                    return None
                left, right = right, left
            base = self.pointer_expr(left)
            if base is None:
                return None
            step = self.cast(self.expr(right), i64)
            if self.operator(c) == "-":
                step = ir.UnaryOp(i64, "-", step)
            return dataclasses.replace(base, offset=_add(base.offset, _times(step, self.ratio(c, base))))
        if kind == K.UNARY_OPERATOR and self.operator(c) == "&":
            target = self._unwrap(self.kids(c)[0])
            if target.kind == K.ARRAY_SUBSCRIPT_EXPR:
                base = self.subscript(target)
                if base is not None:
                    return base
                array, indices = self.element(target)
                if len(indices) == 1:
                    return Pointer(array, indices[0], self.arrays[array].dtype)
        return None

    def ratio(self, c: Any, p: Pointer) -> int:
        """The array elements one of ``p``'s pointees spans."""
        element = self.arrays[p.array].dtype
        wide, narrow = p.pointee.bits * p.lanes, element.bits
        if wide % narrow or (p.pointee != element and not (p.pointee.is_int and element.is_int)):
            raise self.fail(c, f"a {p.pointee} pointer into {p.array}, an array of {element}, is not supported "
                               "(integers of a wider type, or vectors of the element type, only)")
        return wide // narrow

    def subscript(self, c: Any) -> Pointer | None:
        """``p[i]`` through a pointer hetero follows (a variable, a cast, ``a + k``): where it reads."""
        K = self.cindex.CursorKind  # noqa: N806
        c = self._unwrap(c)
        if c.kind == K.UNARY_OPERATOR and self.operator(c) == "*":
            base_c, index = self.kids(c)[0], None
        elif c.kind == K.ARRAY_SUBSCRIPT_EXPR:
            base_c, index_c = self.kids(c)
            index = self.cast(self.expr(index_c), i64)
        else:
            return None
        base_node = self._unwrap(base_c)
        plain = base_node.kind == K.DECL_REF_EXPR and base_node.referenced.hash not in self.pointers \
            and self.lanes.get(self.names.get(base_node.referenced.hash, ""), 1) == 1
        if plain:
            return None  # a plain array or pointer parameter: element() handles it, offsets included
        base = self.pointer_expr(base_c)
        if base is None:
            return None
        step = self.ratio(c, base)
        offset = base.offset if index is None else _add(base.offset, _times(index, step))
        return dataclasses.replace(base, offset=offset)

    def load_through(self, p: Pointer, lane: int = 0) -> ir.Expr:
        """The value ``p`` points at (component ``lane`` of a vector)."""
        element = self.arrays[p.array].dtype
        if p.pointee == element:
            return ir.Load(element, p.array, (_add(p.offset, ir.Const(i64, lane)),))
        pieces = p.pointee.bits // element.bits
        wide = ScalarType(f"u{p.pointee.bits}", "u", p.pointee.bits)
        narrow = ScalarType(f"u{element.bits}", "u", element.bits)
        value: ir.Expr | None = None
        for j in range(pieces):
            piece = ir.Load(element, p.array, (_add(p.offset, ir.Const(i64, lane * pieces + j)),))
            bits: ir.Expr = ir.Cast(wide, piece if element.kind == "u" else ir.Cast(narrow, piece))
            if j:
                bits = ir.BinOp(wide, "<<", bits, ir.Const(wide, element.bits * j))
            value = bits if value is None else ir.BinOp(wide, "|", value, bits)
        assert value is not None
        return value if wide == p.pointee else ir.Cast(p.pointee, value)

    def store_through(self, p: Pointer, value: ir.Expr, loc: ir.Loc, lane: int = 0) -> list[ir.Stmt]:
        element = self.arrays[p.array].dtype
        if p.pointee == element:
            return [ir.Store(loc, p.array, (_add(p.offset, ir.Const(i64, lane)),), self.cast(value, element))]
        pieces = p.pointee.bits // element.bits
        wide = ScalarType(f"u{p.pointee.bits}", "u", p.pointee.bits)
        bits = self.cast(self.cast(value, p.pointee), wide)
        out: list[ir.Stmt] = []
        for j in range(pieces):
            part = bits if not j else ir.BinOp(wide, ">>", bits, ir.Const(wide, element.bits * j))
            out.append(ir.Store(loc, p.array, (_add(p.offset, ir.Const(i64, lane * pieces + j)),), ir.Cast(element, part)))
        return out

    def pointer_var(self, var: Any, init: Any | None, loc: ir.Loc) -> list[ir.Stmt] | None:
        """``T *p = <pointer>``: a name for an array and a movable offset; None if not followed."""
        target = self.pointer_expr(init) if init is not None else None
        if target is None:
            return None
        pointee, lanes = self.pointee(var, var.type)
        offset = self.fresh(f"{var.spelling}_offset")
        self.locals[offset] = i64
        self.pointers[var.hash] = (target.array, offset, pointee, lanes)
        self.ratio(var, Pointer(target.array, target.offset, pointee, lanes))  # refuses what it cannot access
        return [ir.Assign(loc, offset, target.offset)]

    # -- vectors -------------------------------------------------------------------------
    def vector_var(self, var: Any, info: tuple[ScalarType, int], init: Any | None, loc: ir.Loc) -> list[ir.Stmt]:
        t, n = info
        names = tuple(self.fresh(f"{var.spelling}_{c}") for c in COMPONENTS[:n])
        for name in names:
            self.locals[name] = t
        self.vectors[var.hash] = names
        values = self.vector_value(init) if init is not None else [ir.Const(t, 0)] * n
        return [ir.Assign(loc, name, self.cast(v, t)) for name, v in zip(names, values, strict=True)]

    def vector_value(self, c: Any) -> list[ir.Expr]:
        """The components of vector expression ``c``."""
        K = self.cindex.CursorKind  # noqa: N806
        info = vector_type(c.type)
        c = self._unwrap(c)
        if c.kind == K.CALL_EXPR and vector_type(c.type) is not None and len(self.kids(c)) == 1 \
                and c.spelling == _QUALIFIERS.sub("", c.type.get_canonical().spelling).rsplit("::", 1)[-1]:
            return self.vector_value(self.kids(c)[0])  # the implicit copy constructor
        if info is None:
            raise self.fail(c, "a vector value was expected here")
        t, n = info
        if c.kind == K.DECL_REF_EXPR and c.referenced.hash in self.vectors:
            return [ir.Var(t, name) for name in self.vectors[c.referenced.hash]]
        if c.kind in (K.ARRAY_SUBSCRIPT_EXPR, K.UNARY_OPERATOR):
            p = self.subscript(c)
            if p is not None and p.lanes == n:
                return [self.load_through(dataclasses.replace(p, lanes=1), lane) for lane in range(n)]
        if c.kind == K.CALL_EXPR and c.spelling in LOADS:
            return self.hinted_vector_load(c, n)
        if c.kind == K.CALL_EXPR and not list(c.get_arguments()) and not self.kids(c) \
                and c.spelling == _QUALIFIERS.sub("", c.type.get_canonical().spelling).rsplit("::", 1)[-1]:
            return [ir.Const(t, 0)] * n  # uint4 x;: CUDA leaves it undefined, zero is one of its values
        if c.kind == K.CALL_EXPR and c.spelling.startswith("make_"):
            return [self.cast(self.expr(a), t) for a in c.get_arguments()]
        if c.kind == K.CALL_EXPR:
            return self.call_vector(c)
        raise self.fail(c, f"this {t}x{n} vector expression is not supported")

    def store_vector(self, target: Any, values: list[ir.Expr], loc: ir.Loc) -> list[ir.Stmt]:
        K = self.cindex.CursorKind  # noqa: N806
        target = self._unwrap(target)
        if target.kind == K.DECL_REF_EXPR and target.referenced.hash in self.vectors:
            names = self.vectors[target.referenced.hash]
            temps = [self.fresh(f"{name}_new") for name in names]  # v = f(v): every component read first
            for temp, name in zip(temps, names, strict=True):
                self.locals[temp] = self.locals[name]
            return [*(ir.Assign(loc, temp, self.cast(v, self.locals[temp])) for temp, v in zip(temps, values, strict=True)),
                    *(ir.Assign(loc, name, ir.Var(self.locals[temp], temp)) for name, temp in zip(names, temps, strict=True))]
        p = self.subscript(target)
        if p is None:
            raise self.fail(target, "cannot store a vector here")
        single = dataclasses.replace(p, lanes=1)
        return [s for lane, v in enumerate(values) for s in self.store_through(single, v, loc, lane)]

    def component(self, c: Any) -> tuple[Any, int] | None:
        """``v.x``: the vector expression and the component's index, else None."""
        K = self.cindex.CursorKind  # noqa: N806
        if c.kind != K.MEMBER_REF_EXPR or c.spelling not in COMPONENTS:
            return None
        base = self.kids(c)[0]
        info = vector_type(base.type)
        if info is None or COMPONENTS.index(c.spelling) >= info[1]:
            return None
        return base, COMPONENTS.index(c.spelling)

    def read_component(self, c: Any) -> ir.Expr | None:
        found = self.component(c)
        if found is None:
            return None
        base, k = found
        return self.vector_value(base)[k]

    def store_component(self, c: Any, value: ir.Expr, loc: ir.Loc) -> list[ir.Stmt] | None:
        K = self.cindex.CursorKind  # noqa: N806
        found = self.component(c)
        if found is None:
            return None
        base, k = found
        base = self._unwrap(base)
        if base.kind == K.DECL_REF_EXPR and base.referenced.hash in self.vectors:
            name = self.vectors[base.referenced.hash][k]
            return [ir.Assign(loc, name, self.cast(value, self.locals[name]))]
        p = self.subscript(base)
        if p is None:
            raise self.fail(c, "cannot store into this vector component")
        return self.store_through(dataclasses.replace(p, lanes=1), value, loc, k)
