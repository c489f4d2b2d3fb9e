"""How OpenCL C spells what hetero's IR says: type names, literals, the names a user's
variable must not take, and the small ``static inline`` functions generated kernels call
where C's operators differ from Python's (floor division, integer powers, float atomics).

Each helper-function maker returns one C function for one type; the emitter includes only
those a kernel uses, once each.
"""

from __future__ import annotations

import math
import re

import numpy as np

from hetero.types import ScalarType, f16

from . import ir

C_TYPES = {"bool": "bool", "i8": "char", "i16": "short", "i32": "int", "i64": "long", "u8": "uchar",
           "u16": "ushort", "u32": "uint", "u64": "ulong", "f16": "half", "f32": "float", "f64": "double"}
# Array elements as stored: a bool is one byte (OpenCL's bool has no defined size); a local
# f16 array is ushort, as OpenCL has no half arrays without cl_khr_fp16 (vload_half reads it).
STORAGE = {**C_TYPES, "bool": "uchar"}
LOCAL_STORAGE = {**STORAGE, "f16": "ushort"}
_LITERAL_SUFFIX = {"i32": "", "i64": "L", "u32": "u", "u64": "UL"}


def c_type(t: ScalarType) -> str:
    return "void" if t == ir.VOID else C_TYPES[t.name]


def c_literal(t: ScalarType, value: float | bool) -> str:
    """``value`` as a C literal of type ``t``: an operand that needs no more parentheses."""
    if t.kind == "b":
        return "true" if value else "false"
    if t.is_int:
        number = int(value) % (1 << t.bits)
        if t.is_signed and number >= 1 << (t.bits - 1):
            number -= 1 << t.bits
        if t.name not in _LITERAL_SUFFIX:
            return f"({C_TYPES[t.name]}){number}" if number >= 0 else f"({C_TYPES[t.name]})({number})"
        suffix = _LITERAL_SUFFIX[t.name]
        if number == -(1 << (t.bits - 1)):  # its magnitude does not fit the type
            return f"({number + 1}{suffix} - 1{suffix})"
        return f"{number}{suffix}" if number >= 0 else f"({number}{suffix})"
    double = t.name == "f64"
    with np.errstate(over="ignore"):  # a value beyond the type's range is an infinity, as in NumPy
        real = float(value) if double else float(np.float32(np.float16(value) if t == f16 else value))
    if math.isnan(real) or math.isinf(real):
        text = "NAN" if math.isnan(real) else "INFINITY" if real > 0 else "(-INFINITY)"
        return f"((double){text})" if double else text
    if double:
        text = repr(real)
    else:  # f16 values are held in a float: print the exact f16 value as one
        text = str(np.float32(real))
        text += "" if "." in text or "e" in text else ".0"
        text += "f"
    return f"({text})" if text.startswith("-") else text


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


#: Unsigned type with the same width, for integer arithmetic that must wrap instead of overflowing.
UNSIGNED = {"char": "uchar", "short": "ushort", "int": "uint", "long": "ulong",
            "uchar": "uchar", "ushort": "ushort", "uint": "uint", "ulong": "ulong"}

_VECTOR_BASES = ("char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half", "float", "double")

#: C99 and OpenCL C keywords, type names, and every built-in or macro generated code refers
#: to: a user variable with one of these names is renamed (``int`` -> ``v_int``).
RESERVED = frozenset(
    ["auto", "break", "case", "char", "const", "continue", "default", "do", "double", "else", "enum", "extern", "float", "for", "goto", "if", "inline", "int", "long", "register", "restrict", "return", "short", "signed", "sizeof", "static", "struct", "switch", "typedef", "union", "unsigned", "void", "volatile", "while", "bool", "true", "false", "half", "uchar", "ushort", "uint", "ulong", "size_t", "ptrdiff_t", "intptr_t", "uintptr_t", "NULL", "global", "local", "constant", "private", "kernel", "read_only", "write_only", "read_write", "uniform", "pipe", "image1d_t", "image2d_t", "image3d_t", "image1d_array_t", "image2d_array_t", "image1d_buffer_t", "sampler_t", "event_t", "queue_t", "ndrange_t", "clk_event_t", "reserve_id_t", "cl_mem_fence_flags", "quad", "complex", "imaginary", "get_global_id", "get_local_id", "get_group_id", "get_local_size", "get_global_size", "get_num_groups", "get_work_dim", "get_global_offset", "barrier", "mem_fence", "read_mem_fence", "write_mem_fence", "atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_cmpxchg", "atomic_xchg", "atomic_inc", "atomic_dec", "atomic_and", "atomic_or", "atomic_xor", "atom_add", "atom_sub", "atom_min", "atom_max", "atom_cmpxchg", "atom_xchg", "as_int", "as_uint", "as_long", "as_ulong", "as_float", "as_double", "vload_half", "vstore_half", "abs", "min", "max", "fmin", "fmax", "fabs", "floor", "ceil", "sqrt", "rsqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "asin", "acos", "atan", "atan2", "sinh", "cosh", "pow", "pown", "powr", "fma", "fmod", "copysign", "isnan", "isinf", "isfinite", "clamp", "select", "mad", "trunc", "round", "rint", "MAXFLOAT", "HUGE_VALF", "HUGE_VAL", "INFINITY", "NAN"]
    + [f"{base}{n}" for base in _VECTOR_BASES for n in (2, 3, 4, 8, 16)]
)
# Names that start like a C or OpenCL macro family (FLT_MAX, M_PI, CLK_LOCAL_MEM_FENCE, ...),
# are reserved to the implementation (a leading underscore), or start like generated names.
_RESERVED_PREFIX = re.compile(
    r"^(_|v_|hetero_|(FLT|DBL|HALF|M|CL|CLK|CHAR|SCHAR|UCHAR|SHRT|USHRT|INT|UINT|LONG|ULONG|FP)_)")


def is_reserved(name: str) -> bool:
    return name in RESERVED or bool(_RESERVED_PREFIX.match(name)) or not name.isascii()


def ascii_name(name: str) -> str:
    """``name`` with each non-ASCII letter spelled out (``é`` -> ``_u00e9_``): C wants ASCII."""
    return "".join(ch if ch.isascii() else f"_u{ord(ch):04x}_" for ch in name)


def c_identifier(name: str) -> str:
    """``name`` unchanged when C can use it, else ``v_`` + its ASCII spelling."""
    return "v_" + ascii_name(name) if is_reserved(name) else name


def _float_suffix(ctype: str) -> str:
    return "f" if ctype == "float" else ""


def _integer_division_guard(ctype: str, minus_one: str) -> str:
    """Like NumPy, ``x // 0`` and ``x % 0`` give 0, and the overflowing ``MIN // -1`` wraps:
    C leaves both undefined (and x86 traps on them)."""
    guard = """    if (b == 0) {
        return 0;
    }
"""
    if UNSIGNED[ctype] != ctype:
        guard += f"""    if (b == -1) {{
        return {minus_one};
    }}
"""
    return guard


def floordiv(name: str, ctype: str) -> str:
    """Python's ``a // b``: integers floor (see :func:`_integer_division_guard` for a zero
    divisor); floats follow NumPy's ``npy_divmod``."""
    if ctype in ("float", "double"):
        f = _float_suffix(ctype)
        return f"""static inline {ctype} {name}({ctype} a, {ctype} b) {{
    if (b == 0.0{f}) {{
        return a / b;
    }}
    {ctype} mod = fmod(a, b);
    {ctype} div = (a - mod) / b;
    if (mod != 0.0{f} && (b < 0.0{f}) != (mod < 0.0{f})) {{
        div -= 1.0{f};
    }}
    if (div == 0.0{f}) {{
        return copysign(0.0{f}, a / b);
    }}
    {ctype} whole = floor(div);
    return (div - whole > 0.5{f}) ? whole + 1.0{f} : whole;
}}"""
    unsigned = UNSIGNED[ctype]
    guard = _integer_division_guard(ctype, f"({ctype})(0 - ({unsigned})a)")
    if unsigned == ctype:
        return f"static inline {ctype} {name}({ctype} a, {ctype} b) {{\n{guard}    return a / b;\n}}"
    return f"""static inline {ctype} {name}({ctype} a, {ctype} b) {{
{guard}    {ctype} q = a / b;
    return (q * b != a && (a < 0) != (b < 0)) ? q - 1 : q;
}}"""


def mod(name: str, ctype: str) -> str:
    """Python's ``a % b``: the result takes the sign of the divisor."""
    if ctype in ("float", "double"):
        f = _float_suffix(ctype)
        return f"""static inline {ctype} {name}({ctype} a, {ctype} b) {{
    {ctype} m = fmod(a, b);
    if (b == 0.0{f}) {{
        return m;
    }}
    if (m == 0.0{f}) {{
        return copysign(0.0{f}, b);
    }}
    return ((b < 0.0{f}) != (m < 0.0{f})) ? m + b : m;
}}"""
    guard = _integer_division_guard(ctype, "0")
    if UNSIGNED[ctype] == ctype:
        return f"static inline {ctype} {name}({ctype} a, {ctype} b) {{\n{guard}    return a % b;\n}}"
    return f"""static inline {ctype} {name}({ctype} a, {ctype} b) {{
{guard}    {ctype} r = a % b;
    return (r != 0 && (r < 0) != (b < 0)) ? r + b : r;
}}"""


def ipow(name: str, ctype: str) -> str:
    """Integer ``base ** exponent`` by squaring, wrapping on overflow like NumPy.

    A negative exponent gives 0, except for a base of 1 (1) or -1 (+-1): the integer part of
    the true result. (Python would return a float, or raise for a base of 0.)
    """
    unsigned = UNSIGNED[ctype]
    negative = ""
    if unsigned != ctype:
        negative = """    if (exponent < 0) {
        if (base == 1 || base == -1) {
            return (exponent & 1) ? base : 1;
        }
        return 0;
    }
"""
    return f"""static inline {ctype} {name}({ctype} base, {ctype} exponent) {{
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


def atomic_update(name: str, ctype: str, space: str, op: str) -> str:
    """Atomic ``add sub min max`` built from compare-and-swap on the value's bits (floats, and
    64-bit min/max without cl_khr_int64_extended_atomics); returns the old value."""
    bits = {"float": "int", "double": "long"}.get(ctype, ctype)
    cas = "atomic_cmpxchg" if bits in ("int", "uint") else "atom_cmpxchg"
    to_bits = f"as_{bits}" if bits != ctype else ""
    from_bits = f"as_{ctype}" if bits != ctype else ""
    current = f"{from_bits}(assumed)"
    f = "f" if ctype in ("float", "double") else ""
    update = {"add": f"{current} + v", "sub": f"{current} - v", "min": f"{f}min({current}, v)",
              "max": f"{f}max({current}, v)"}[op]
    return f"""static inline {ctype} {name}(volatile {space} {ctype}* p, {ctype} v) {{
    volatile {space} {bits}* word = (volatile {space} {bits}*)p;
    {bits} old = *word;
    {bits} assumed;
    do {{
        assumed = old;
        old = {cas}(word, assumed, {to_bits}({update}));
    }} while (old != assumed);
    return {from_bits}(old);
}}"""


def round_to_half(name: str, ctype: str) -> str:
    """``x`` rounded to the nearest f16 value, without needing cl_khr_fp16 (f16 values are
    held in a float where the device has no half type)."""
    return f"""static inline float {name}({ctype} x) {{
    ushort bits;
    vstore_half(x, 0, (__private half*)&bits);
    return vload_half(0, (__private half*)&bits);
}}"""
