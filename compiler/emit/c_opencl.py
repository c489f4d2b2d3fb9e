"""How OpenCL C 1.2 spells what hetero's IR says: ``__kernel``, ``__global``/``__local``,
the work-item built-ins (the global id and size made in 64 bits from the group's), f16 through ``vload_half``/``vstore_half`` (no cl_khr_fp16 needed for
arrays), atomics on floats and 64-bit min/max built from compare-and-swap.
"""

from __future__ import annotations

import math
import re

from hetero.core.types import ScalarType, f16, f32

from hetero.compiler.ir import nodes as ir
from hetero.compiler.emit.c_dialect import (
    C_RESERVED, MATH_FUNCTIONS, NEWER_ATOMICS, ArrayInfo, CDialect, ProgramContext, WriterContext,
    newer_atomic_updates, ordered_min_max, top,
)

C_TYPES = {"bool": "bool", "i8": "char", "i16": "short", "i32": "int", "i64": "long", "u8": "uchar",
           "u16": "ushort", "u32": "uint", "u64": "ulong", "f16": "half", "f32": "float", "f64": "double"}
# Array elements as stored: a bool is one byte (OpenCL's bool has no defined size); a local
# f16 array is ushort, as OpenCL has no half arrays without cl_khr_fp16 (vload_half reads it).
STORAGE = {**C_TYPES, "bool": "uchar"}
LOCAL_STORAGE = {**STORAGE, "f16": "ushort"}

_WORK_ITEMS = {"global_id": "get_global_id", "local_id": "get_local_id", "group_id": "get_group_id",
               "local_size": "get_local_size", "global_size": "get_global_size", "num_groups": "get_num_groups"}
_VECTOR_BASES = ("char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "half", "float", "double")
#: OpenCL C's own keywords, type names, and every built-in or macro generated code refers to:
#: a user variable with one of these names is renamed (``global`` -> ``v_global``).
RESERVED = C_RESERVED | frozenset(
    ["half", "uchar", "ushort", "uint", "ulong", "global", "local", "constant", "private", "kernel", "read_only", "write_only", "read_write", "uniform", "pipe", "image1d_t", "image2d_t", "image3d_t", "image1d_array_t", "image2d_array_t", "image1d_buffer_t", "sampler_t", "event_t", "queue_t", "ndrange_t", "clk_event_t", "reserve_id_t", "cl_mem_fence_flags", "quad", "complex", "imaginary", "get_global_id", "get_local_id", "get_group_id", "get_local_size", "get_global_size", "get_num_groups", "get_work_dim", "get_global_offset", "barrier", "mem_fence", "read_mem_fence", "write_mem_fence", "atomic_add", "atomic_sub", "atomic_min", "atomic_max", "atomic_cmpxchg", "atomic_xchg", "atomic_inc", "atomic_dec", "atomic_and", "atomic_or", "atomic_xor", "atom_add", "atom_sub", "atom_min", "atom_max", "atom_cmpxchg", "atom_xchg", "as_int", "as_uint", "as_long", "as_ulong", "as_float", "as_double", "vload_half", "vstore_half", "abs", "min", "max", "fmin", "fmax", "fabs", "floor", "ceil", "sqrt", "rsqrt", "exp", "log", "log2", "log10", "sin", "cos", "tan", "tanh", "asin", "acos", "atan", "atan2", "sinh", "cosh", "pow", "pown", "powr", "fma", "fmod", "copysign", "isnan", "isinf", "isfinite", "clamp", "select", "mad", "trunc", "round", "rint", "MAXFLOAT", "HUGE_VALF", "HUGE_VAL"]
    + [f"{base}{n}" for base in _VECTOR_BASES for n in (2, 3, 4, 8, 16)]
    + list(MATH_FUNCTIONS)
)
_LITERAL_SUFFIX = {"i32": "", "i64": "L", "u32": "u", "u64": "UL"}
#: Why a feature a kernel needs is missing.
_MISSING = {
    "fp64": "uses f64 (double precision), but the OpenCL device {target} has no fp64 support; "
            "use f32, or run it on a device with double precision",
    "fp16": "declares an f16 scalar (parameter, variable or return value), but the OpenCL device {target} "
            "has no cl_khr_fp16; keep f16 in arrays only and compute in f32",
    "int64_atomics": "uses atomics on 64-bit values, but the OpenCL device {target} has no "
                     "cl_khr_int64_base_atomics; use i32/u32/f32 atomics or another device",
}
#: The pragma that enables each feature a kernel uses.
_EXTENSIONS = {"fp64": "cl_khr_fp64", "fp16": "cl_khr_fp16", "int64_atomics": "cl_khr_int64_base_atomics"}


class OpenCLDialect(CDialect):
    name = "opencl"
    title = "OpenCL"
    types = C_TYPES
    storage = STORAGE
    local_storage = LOCAL_STORAGE
    literal_suffix = _LITERAL_SUFFIX
    kernel_head = "__kernel void"
    helper_head = "static inline"
    global_qualifier = "__global "
    restrict = "restrict "
    local_qualifier = "__local"
    barrier = "barrier(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);"
    reserved = RESERVED
    # Names that start like a C or OpenCL macro family (FLT_MAX, M_PI, CLK_LOCAL_MEM_FENCE, ...),
    # are reserved to the implementation (a leading underscore), or start like generated names.
    reserved_prefix = re.compile(
        r"^(_|v_|hetero_|(FLT|DBL|HALF|M|CL|CLK|CHAR|SCHAR|UCHAR|SHRT|USHRT|INT|UINT|LONG|ULONG|FP)_)")
    missing_feature = _MISSING
    lacks_64_bit_atomics = "the OpenCL device {target} lacks (no cl_khr_int64_base_atomics)"
    fences = {"block": "mem_fence(CLK_LOCAL_MEM_FENCE | CLK_GLOBAL_MEM_FENCE);",
              "device": "mem_fence(CLK_GLOBAL_MEM_FENCE);", "system": "mem_fence(CLK_GLOBAL_MEM_FENCE);"}

    subgroup_warps = True

    def kernel_attributes(self, program: ProgramContext) -> str:
        return "__attribute__((intel_reqd_sub_group_size(32))) " if program.uses_subgroups else ""

    def warp(self, w: WriterContext, e: ir.Warp) -> str:
        if e.op == "sg_linear":
            return "((long)get_sub_group_id() * 32 + (long)get_sub_group_local_id())"
        if e.op == "sg_shuffle":
            value, lane = (top(w.expr(a)) for a in e.args)
            return f"sub_group_shuffle({value}, {lane})"
        if e.op == "sg_ballot":
            return f"sub_group_ballot({top(w.expr(e.args[0]))}).x"
        raise ValueError(f"internal: warp operation {e.op!r} has no OpenCL sub-group form")

    def special_float(self, real: float, double: bool) -> str:
        text = "NAN" if math.isnan(real) else "INFINITY" if real > 0 else "(-INFINITY)"
        return f"((double){text})" if double else text

    def work_item(self, name: str, axis: int) -> str:
        # A launch may hold more than 2**32 work-items (global_id is i64), but Intel's CPU runtime
        # computes get_global_id (and get_global_size) in 32 bits in kernels with a barrier: the last
        # work-item of 22121216 x 256 got 1368063999, not 5663031295. Group ids and sizes fit in 32
        # bits, so both are made in 64 bits from them, as CUDA's are (hetero launches at offset 0).
        if name == "global_id":
            return f"((long)get_group_id({axis}) * (long)get_local_size({axis}) + (long)get_local_id({axis}))"
        if name == "global_size":
            return f"((long)get_num_groups({axis}) * (long)get_local_size({axis}))"
        return f"(long){_WORK_ITEMS[name]}({axis})"

    def integer_abs(self, t: ScalarType, operand: str) -> str:
        # OpenCL's abs returns the unsigned type: cast back (abs of the minimum wraps).
        return f"({self.c_type(t)})(abs({top(operand)}))" if t.kind == "i" else operand

    def preamble(self, program: ProgramContext) -> list[str]:
        used = sorted(_EXTENSIONS[f] for f in program.enabled)
        # OpenCL C lets the compiler contract a * b + c into one rounding by default (PoCL and
        # Intel's runtime do), which the CPU backend does not: same kernel, same answer.
        return ["#pragma OPENCL FP_CONTRACT OFF", *(f"#pragma OPENCL EXTENSION {ext} : enable" for ext in used)]

    # -- f16: arrays through vload_half/vstore_half, half values only with cl_khr_fp16 ------------
    def half_pointer(self, info: ArrayInfo) -> str:
        # A local f16 array is stored as ushort: without cl_khr_fp16 OpenCL has no half array.
        return info.name if info.space == "global" else f"(__local half*){info.name}"

    def load(self, w: WriterContext, info: ArrayInfo, index: str) -> str:
        if info.dtype == f16:
            return f"vload_half({index}, {self.half_pointer(info)})"
        return f"{info.name}[{index}]"

    def store(self, w: WriterContext, info: ArrayInfo, index: str, value: ir.Expr) -> str:
        if info.dtype != f16:
            return f"{info.name}[{index}] = {top(w.expr(value))};"
        if isinstance(value, ir.Cast) and value.type == f16 and value.value.type.name in ("f32", "f64"):
            text = top(w.expr(value.value))  # vstore_half rounds float or double to f16 itself
        else:
            inner = value.value if isinstance(value, ir.Cast) and value.type == f16 else value
            text = f"(float)({top(w.expr(inner))})"
        return f"vstore_half({text}, {index}, {self.half_pointer(info)});"

    def cast(self, w: WriterContext, e: ir.Cast) -> str:
        inner = top(w.expr(e.value))
        if e.type != f16:
            return f"({self.c_type(e.type)})({inner})"
        if "fp16" in w.program.enabled:  # the kernel declares half values anyway
            return f"(half)({inner})"
        source = e.value.type if e.value.type.name == "f64" else f32
        inner = inner if e.value.type.name in ("f32", "f64") else f"(float)({inner})"
        return f"{w.program.helper('round_half', source)}({inner})"

    # -- atomics -----------------------------------------------------------------------
    def atomic(self, w: WriterContext, info: ArrayInfo, op: str, address: str, args: list[str], used: bool) -> str:
        t = info.dtype
        ctype = self.c_type(t)
        args = [top(a) for a in args]
        bits = {"f32": "int", "f64": "long"}.get(t.name, ctype)
        cas = "atomic_cmpxchg" if t.bits == 32 else "atom_cmpxchg"
        if op == "cas" and t.is_float:  # compares bit patterns: -0.0 differs from 0.0, a NaN can match
            word = f"(volatile __{info.space} {bits}*){address}"
            return f"as_{ctype}({cas}({word}, as_{bits}({args[0]}), as_{bits}({args[1]})))"
        if op == "cas":
            return f"{cas}({address}, {args[0]}, {args[1]})"
        if op in NEWER_ATOMICS:
            if op == "exch" and (t.bits == 32 or t.is_int):  # 64-bit xchg is in cl_khr_int64_base_atomics
                return f"{'atomic' if t.bits == 32 else 'atom'}_xchg({address}, {args[0]})"
            if op in ("and", "or", "xor") and t.bits == 32:
                return f"atomic_{op}({address}, {args[0]})"
            return f"{w.program.helper('atomic_' + op, t, info.space)}({address}, {args[0]})"
        if t.is_int and (t.bits == 32 or op in ("add", "sub")):
            return f"{'atomic' if t.bits == 32 else 'atom'}_{op}({address}, {args[0]})"
        return f"{w.program.helper('atomic_' + op, t, info.space)}({address}, {args[0]})"

    def helper_text(self, kind: str, name: str, t: ScalarType, space: str) -> str:
        if kind.startswith("atomic_"):
            return _atomic_update(name, self.c_type(t), f"__{space}", kind.removeprefix("atomic_"))
        if kind == "round_half":
            return _round_to_half(name, self.c_type(t))
        return super().helper_text(kind, name, t, space)


OPENCL = OpenCLDialect()


def c_literal(t: ScalarType, value: float | bool) -> str:
    """``value`` as an OpenCL C literal of type ``t``."""
    return OPENCL.literal(t, value)


def _atomic_update(name: str, ctype: str, space: str, op: str) -> str:
    """Atomic ``add sub min max`` built from compare-and-swap on the value's bits (floats, and
    64-bit min/max without cl_khr_int64_extended_atomics); returns the old value."""
    bits = {"float": "int", "double": "long"}.get(ctype, ctype)
    cas = "atomic_cmpxchg" if bits in ("int", "uint") else "atom_cmpxchg"
    to_bits = f"as_{bits}" if bits != ctype else ""
    from_bits = f"as_{ctype}" if bits != ctype else ""
    current = f"{from_bits}(assumed)"
    f = "f" if ctype in ("float", "double") else ""
    update = {"add": f"{current} + v", "sub": f"{current} - v",
              **(ordered_min_max(current) if f else {"min": f"min({current}, v)", "max": f"max({current}, v)"}),
              "nanmin": f"fmin({current}, v)", "nanmax": f"fmax({current}, v)", **newer_atomic_updates(current, "uint" if bits in ("int", "uint") else "ulong")}[op]
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


def _round_to_half(name: str, ctype: str) -> str:
    """``x`` rounded to the nearest f16 value, without needing cl_khr_fp16 (f16 values are
    held in a float where the device has no half type)."""
    return f"""static inline float {name}({ctype} x) {{
    ushort bits;
    vstore_half(x, 0, (__private half*)&bits);
    return vload_half(0, (__private half*)&bits);
}}"""
