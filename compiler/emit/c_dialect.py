"""What the C family (OpenCL C, CUDA C, HIP) shares, and :class:`CDialect`, the strategy
object that says where one member differs from the others.

:mod:`hetero.compiler.emit.c` prints statements and expressions once for every member; it
asks the dialect for type names, literals, index built-ins, math names, f16 conversions,
atomics and the text of the small helper functions where C's operators differ from
Python's (floor division, modulo, integer powers), written here once in the dialect's words.
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Mapping
from typing import Protocol

import numpy as np

from hetero import language
from hetero.core.types import ScalarType, f16

from hetero.compiler.ir import nodes as ir
from hetero.core.target import Target


class ProgramContext(Protocol):
    """What a dialect reads of the program being emitted (:class:`hetero.compiler.emit.c.Program`
    is one); declared here so that the dialects never import the printer that calls them."""

    target: Target
    #: Features the program uses and must enable (``fp64``, ``fp16`` values, ``int64_atomics``).
    enabled: set[str]
    #: Does f16 appear anywhere (arrays included)?
    uses_half: bool
    #: Does the kernel hold sub-group operations (:data:`ir.SUBGROUP_OPS`)?
    uses_subgroups: bool

    def helper(self, kind: str, t: ScalarType, space: str = "") -> str:
        """The name of a helper function of ``kind`` for type ``t``, added to the program once."""
        ...


class WriterContext(Protocol):
    """What a dialect reads of the writer printing one function (:class:`hetero.compiler.emit.c.FunctionWriter`)."""

    @property
    def program(self) -> ProgramContext: ...

    def expr(self, e: ir.Expr) -> str:
        """C text of ``e``."""
        ...


#: C99 keywords and the names C headers give types and constants: never a user variable's name.
C_RESERVED = frozenset(
    ["auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern",
     "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed",
     "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool",
     "true", "false", "size_t", "ptrdiff_t", "intptr_t", "uintptr_t", "NULL", "INFINITY", "NAN"])
#: Math functions on floats: the IR's, and those the helper functions call.
MATH_FUNCTIONS = tuple(dict.fromkeys((*language.MATH_FUNCTIONS, "fmod", "copysign")))
_MISSING = {
    "fp64": "uses f64 (double precision), but the {title} target {target} has no fp64 support; use f32",
    "fp16": "declares an f16 scalar (parameter, variable or return value), but the {title} target {target} "
            "has no fp16 support; keep f16 in arrays only and compute in f32",
    "int64_atomics": "uses atomics on 64-bit values, but the {title} target {target} has no 64-bit atomics; "
                     "use i32/u32/f32 atomics",
}
#: Element types an atomic may update.
ATOMIC_TYPES = ("i32", "u32", "f32", "i64", "u64", "f64")


@dataclasses.dataclass(frozen=True)
class ArrayInfo:
    """An array as the C code sees it."""

    name: str  # the C name
    dtype: ScalarType
    space: str  # "global" (a parameter) or "local" (work-group memory)
    dims: tuple[str, ...]  # the extent of each axis, as C text


def top(text: str) -> str:
    """``text`` without parentheses around all of it (for statements and call arguments)."""
    if not (text.startswith("(") and text.endswith(")")):
        return text
    depth = 0
    for position, char in enumerate(text):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if depth == 0:
            return text[1:-1] if position == len(text) - 1 else text
    return text


def ascii_name(name: str) -> str:
    """``name`` with each non-ASCII letter spelled out (``é`` -> ``_u00e9_``): C wants ASCII."""
    return "".join(ch if ch.isascii() else f"_u{ord(ch):04x}_" for ch in name)


class CDialect:
    """How one C-family language spells what the IR says. Subclasses set the attributes and
    override the methods whose default (plain C) does not fit."""

    name = ""  # the Target dialect
    title = ""  # as users call it, in messages
    types: Mapping[str, str] = {}  # IR scalar name -> C type
    storage: Mapping[str, str] = {}  # array elements in global memory
    local_storage: Mapping[str, str] = {}  # array elements in work-group memory
    literal_suffix: Mapping[str, str] = {}  # integer literal suffix by IR type (others are cast)
    kernel_head = ""  # what precedes the kernel's name
    function_head = ""  # what precedes a device function's return type
    helper_head = ""  # what precedes a helper function's return type
    global_qualifier = ""  # before an array parameter's type
    restrict = ""  # after the * of a kernel's array parameter
    local_qualifier = ""  # before a work-group array's declaration
    barrier = ""
    reserved: frozenset[str] = C_RESERVED
    reserved_prefix = re.compile(r"^(_|v_|hetero_)")
    #: Why each feature a kernel needs may be missing (``{title}`` and ``{target}`` are filled in).
    missing_feature: Mapping[str, str] = _MISSING
    #: Who lacks 64-bit atomics, for the message of an atomic that needs them.
    lacks_64_bit_atomics = "the {title} target {target} lacks"

    # -- names and types ---------------------------------------------------------------
    def c_type(self, t: ScalarType) -> str:
        return "void" if t == ir.VOID else self.types[t.name]

    def unsigned(self, t: ScalarType) -> str:
        """The unsigned C type as wide as integer ``t``: arithmetic in it wraps instead of overflowing."""
        return self.types["u" + t.name[1:]] if t.kind == "i" else self.types[t.name]

    def is_reserved(self, name: str) -> bool:
        return name in self.reserved or bool(self.reserved_prefix.match(name)) or not name.isascii()

    def c_identifier(self, name: str) -> str:
        """``name`` unchanged when C can use it, else ``v_`` + its ASCII spelling."""
        return "v_" + ascii_name(name) if self.is_reserved(name) else name

    # -- literals ----------------------------------------------------------------------
    def literal(self, t: ScalarType, value: float | bool) -> str:
        """``value`` as a literal of type ``t``: an operand that needs no more parentheses."""
        if t.kind == "b":
            return "true" if value else "false"
        if t.is_int:
            number = int(value) % (1 << t.bits)
            if t.is_signed and number >= 1 << (t.bits - 1):
                number -= 1 << t.bits
            if t.name not in self.literal_suffix:
                return f"({self.types[t.name]}){number}" if number >= 0 else f"({self.types[t.name]})({number})"
            suffix = self.literal_suffix[t.name]
            if number == -(1 << (t.bits - 1)):  # its magnitude does not fit the type
                return f"({number + 1}{suffix} - 1{suffix})"
            return f"{number}{suffix}" if number >= 0 else f"({number}{suffix})"
        double = t.name == "f64"
        with np.errstate(over="ignore"):  # a value beyond the type's range is an infinity, as in NumPy
            real = float(value) if double else float(np.float32(np.float16(value) if t == f16 else value))
        if math.isnan(real) or math.isinf(real):
            text = self.special_float(real, double)
        elif double:
            text = repr(real)
        else:  # f16 values are written as the float of the exact f16 value
            text = str(np.float32(real))
            text += "" if "." in text or "e" in text else ".0"
            text += "f"
        text = f"({text})" if text.startswith("-") else text
        return self.half_literal(text) if t == f16 else text

    def special_float(self, real: float, double: bool) -> str:
        """A NaN or an infinity of float (or double) type."""
        raise NotImplementedError

    def half_literal(self, float_text: str) -> str:
        """An f16 literal, given the float literal of its value."""
        return float_text

    def zero(self, t: ScalarType) -> str:
        """The value a local variable starts with."""
        return "false" if t.kind == "b" else "0"

    # -- built-ins -----------------------------------------------------------------------
    def work_item(self, name: str, axis: int) -> str:
        """An index built-in (``global_id`` …) as a 64-bit operand."""
        raise NotImplementedError

    def math(self, name: str, t: ScalarType) -> str:
        """The C function computing math function ``name`` in float type ``t``."""
        return name

    def min_max(self, op: str, t: ScalarType) -> str:
        return self.math("f" + op, t) if t.is_float else op

    def integer_abs(self, t: ScalarType, operand: str) -> str:
        raise NotImplementedError

    # -- memory, conversions, atomics (they may call back into the writer) ------------------
    def load(self, w: WriterContext, info: ArrayInfo, index: str) -> str:
        return f"{info.name}[{index}]"

    def store(self, w: WriterContext, info: ArrayInfo, index: str, value: ir.Expr) -> str:
        return f"{info.name}[{index}] = {top(w.expr(value))};"

    def cast(self, w: WriterContext, e: ir.Cast) -> str:
        return f"({self.c_type(e.type)})({top(w.expr(e.value))})"

    def atomic(self, w: WriterContext, info: ArrayInfo, op: str, address: str, args: list[str], used: bool) -> str:
        """Atomic ``op`` (validated: ``add sub min max cas`` on :data:`ATOMIC_TYPES`) at ``address``,
        with operand-safe ``args``; the old value (not ``used`` when the atomic is a statement)."""
        raise NotImplementedError

    #: Whether the target has CUDA's warps in hardware (32 lanes of consecutive linear ids); the
    #: others get :mod:`hetero.compiler.ir.warp_emulation`'s exchanges through work-group memory.
    native_warps = False
    #: A memory fence per scope (``block``, ``device``, ``system``).
    fences: Mapping[str, str] = {}

    #: Whether the dialect can print :data:`ir.SUBGROUP_OPS` for targets with ``subgroups32``.
    subgroup_warps = False

    def warp(self, w: WriterContext, e: ir.Warp) -> str:
        """Warp operation ``e`` natively (dialects with :attr:`native_warps`), or sub-group
        operation ``e`` (dialects with :attr:`subgroup_warps`)."""
        raise NotImplementedError

    def kernel_attributes(self, program: ProgramContext) -> str:
        """What goes before the kernel's head (``""``, or attributes ending in a space)."""
        return ""

    # -- the program around the functions ------------------------------------------------
    #: Options the vendor compiler gets with every kernel of this dialect.
    options: tuple[str, ...] = ()

    def preamble(self, program: ProgramContext) -> list[str]:
        """Blocks of lines between the header comment and the helper functions (includes, pragmas)."""
        return []

    def helper_text(self, kind: str, name: str, t: ScalarType, space: str) -> str:
        """The text of helper function ``name``: ``kind`` for type ``t`` (and address space)."""
        if kind == "floordiv":
            return floordiv(self, name, t)
        if kind == "mod":
            return mod(self, name, t)
        if kind == "ipow":
            return ipow(self, name, t)
        raise KeyError(kind)

    def check_target(self, target: Target) -> None:
        """Raise ValueError when ``target`` is not one this dialect emits for."""
        if target.dialect != self.name:
            raise ValueError(f"the {self.title} emitter emits for {self.name} targets, not {target}")


# -- helper functions where C's operators differ from Python's ------------------------------
def _integer_division_guard(d: CDialect, t: ScalarType, minus_one: str) -> str:
    """Like NumPy, ``x // 0`` and ``x % 0`` give 0, and the overflowing ``MIN // -1`` wraps:
    C leaves both undefined (and x86 traps on them)."""
    guard = """    if (b == 0) {
        return 0;
    }
"""
    if t.kind == "i":
        guard += f"""    if (b == -1) {{
        return {minus_one};
    }}
"""
    return guard


def _float_suffix(t: ScalarType) -> str:
    return "f" if t.name == "f32" else ""


def floordiv(d: CDialect, name: str, t: ScalarType) -> str:
    """Python's ``a // b``: integers floor (see :func:`_integer_division_guard` for a zero
    divisor); floats follow NumPy's ``npy_divmod``, except that an infinite operand over a finite one
    is ``a / b`` as the array API standard says (``inf // 2`` is inf, ``-1 // inf`` is -0)."""
    ctype, head = d.c_type(t), d.helper_head
    if t.is_float:
        f = _float_suffix(t)
        return f"""{head} {ctype} {name}({ctype} a, {ctype} b) {{
    if (b == 0.0{f} || ((a - a == 0.0{f}) != (b - b == 0.0{f}) && a == a && b == b)) {{
        return a / b;
    }}
    {ctype} mod = {d.math("fmod", t)}(a, b);
    {ctype} div = (a - mod) / b;
    if (mod != 0.0{f} && (b < 0.0{f}) != (mod < 0.0{f})) {{
        div -= 1.0{f};
    }}
    if (div == 0.0{f}) {{
        return {d.math("copysign", t)}(0.0{f}, a / b);
    }}
    {ctype} whole = {d.math("floor", t)}(div);
    return (div - whole > 0.5{f}) ? whole + 1.0{f} : whole;
}}"""
    guard = _integer_division_guard(d, t, f"({ctype})(0 - ({d.unsigned(t)})a)")
    if t.kind == "u":
        return f"{head} {ctype} {name}({ctype} a, {ctype} b) {{\n{guard}    return a / b;\n}}"
    return f"""{head} {ctype} {name}({ctype} a, {ctype} b) {{
{guard}    {ctype} q = a / b;
    return (q * b != a && (a < 0) != (b < 0)) ? q - 1 : q;
}}"""


def mod(d: CDialect, name: str, t: ScalarType) -> str:
    """Python's ``a % b``: the result takes the sign of the divisor."""
    ctype, head = d.c_type(t), d.helper_head
    if t.is_float:
        f = _float_suffix(t)
        return f"""{head} {ctype} {name}({ctype} a, {ctype} b) {{
    {ctype} m = {d.math("fmod", t)}(a, b);
    if (b == 0.0{f}) {{
        return m;
    }}
    if (m == 0.0{f}) {{
        return {d.math("copysign", t)}(0.0{f}, b);
    }}
    return ((b < 0.0{f}) != (m < 0.0{f})) ? m + b : m;
}}"""
    guard = _integer_division_guard(d, t, "0")
    if t.kind == "u":
        return f"{head} {ctype} {name}({ctype} a, {ctype} b) {{\n{guard}    return a % b;\n}}"
    return f"""{head} {ctype} {name}({ctype} a, {ctype} b) {{
{guard}    {ctype} r = a % b;
    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}}"""


def ipow(d: CDialect, name: str, t: ScalarType) -> str:
    """Integer ``base ** exponent`` by squaring, wrapping on overflow like NumPy.

    A negative exponent gives 0, except for a base of 1 (1) or -1 (+-1): the integer part of
    the true result. (Python would return a float, or raise for a base of 0.)
    """
    ctype, unsigned = d.c_type(t), d.unsigned(t)
    negative = ""
    if t.kind == "i":
        negative = """    if (exponent < 0) {
        if (base == 1 || base == -1) {
            return (exponent & 1) ? base : 1;
        }
        return 0;
    }
"""
    return f"""{d.helper_head} {ctype} {name}({ctype} base, {ctype} exponent) {{
{negative}    {unsigned} result = 1;
    {unsigned} factor = ({unsigned})base;
    while (exponent != 0) {{
        if (exponent & 1) {{
            result *= factor;
        }}
        factor *= factor;
        exponent >>= 1;
    }}
    return ({ctype})result;
}}"""


#: Atomics beyond add/sub/min/max/cas (exchange, bitwise, CUDA's wrapping inc/dec).
NEWER_ATOMICS = ("exch", "and", "or", "xor", "inc", "dec")


def ordered_min_max(current: str) -> dict[str, str]:
    """Float atomic ``min``/``max`` as numba-cuda computes them: ``v`` replaces ``current`` only when
    it compares below (above) it, so the stored value stays when either is NaN."""
    return {"min": f"(v < {current} ? v : {current})", "max": f"(v > {current} ? v : {current})"}


def newer_atomic_updates(current: str, unsigned: str) -> dict[str, str]:
    """The new value of each of :data:`NEWER_ATOMICS` from the ``current`` one and ``v`` (C syntax),
    for the compare-and-swap loops that build them where no native atomic does. ``inc``/``dec``
    compare as ``unsigned`` (the element's width), as CUDA's do, also on a signed element that a
    CUDA C kernel reached through an ``(unsigned int *)`` cast."""
    u_current, u_v = f"(({unsigned})({current}))", f"(({unsigned})v)"
    return {"exch": "v", "and": f"{current} & v", "or": f"{current} | v", "xor": f"{current} ^ v",
            "inc": f"({u_current} >= {u_v} ? 0 : {current} + 1)",
            "dec": f"(({u_current} == 0 || {u_current} > {u_v}) ? v : {current} - 1)"}
