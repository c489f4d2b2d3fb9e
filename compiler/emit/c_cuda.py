"""How CUDA C++ and HIP spell what hetero's IR says: ``extern "C" __global__`` kernels,
``blockIdx``/``threadIdx`` index math in 64 bits, ``__shared__`` arrays, ``__syncthreads()``,
``atomicAdd`` and friends (compare-and-swap loops where no native atomic exists), math
functions by type (``sqrtf``/``sqrt``) and f16 as ``__half`` from the vendor's fp16 header.

HIP is CUDA with other headers and a few differences, so :class:`HipDialect` is a
subclass: one implementation, two spellings.
"""

from __future__ import annotations

import math
import re

from hetero.core.types import ScalarType, f16, f32, f64, i64, u32, u64

from hetero.compiler.ir import nodes as ir
from hetero.compiler.emit.c_dialect import (
    C_RESERVED, MATH_FUNCTIONS, ArrayInfo, CDialect, ProgramContext, WriterContext, newer_atomic_updates,
    ordered_min_max, top,
)
from hetero.core.target import Target

CUDA_TYPES = {"bool": "bool", "i8": "signed char", "i16": "short", "i32": "int", "i64": "long long",
              "u8": "unsigned char", "u16": "unsigned short", "u32": "unsigned int", "u64": "unsigned long long",
              "f16": "__half", "f32": "float", "f64": "double"}
# A bool array element is one byte, as NumPy stores it (C++ leaves sizeof(bool) open).
STORAGE = {**CUDA_TYPES, "bool": "unsigned char"}
ULL = "unsigned long long"

_AXES = "xyz"
_CPP_KEYWORDS = [
    "alignas", "alignof", "and", "and_eq", "asm", "bitand", "bitor", "catch", "char8_t", "char16_t", "char32_t",
    "class", "compl", "concept", "consteval", "constexpr", "constinit", "const_cast", "co_await", "co_return",
    "co_yield", "decltype", "delete", "dynamic_cast", "explicit", "export", "friend", "mutable", "namespace", "new",
    "noexcept", "not", "not_eq", "nullptr", "operator", "or", "or_eq", "private", "protected", "public",
    "reinterpret_cast", "requires", "static_assert", "static_cast", "template", "this", "thread_local", "throw",
    "try", "typeid", "typename", "using", "virtual", "wchar_t", "xor", "xor_eq"
]
# Names generated code uses, and macros the vendor headers or the host compiler define.
_BUILT_INS = [
    "threadIdx", "blockIdx", "blockDim", "gridDim", "warpSize", "dim3", "half", "half2", "atomicAdd", "atomicSub",
    "atomicMin", "atomicMax", "atomicCAS", "atomicExch", "min", "max", "abs", "llabs", "printf", "assert", "errno",
    "EOF", "RAND_MAX", "HUGE_VAL", "HUGE_VALF", "MAXFLOAT", "isnan", "isinf", "isfinite", "signbit", "offsetof",
    "linux", "unix", "major", "minor", "uchar", "ushort", "uint", "ulong"
]
_VECTOR_BASES = ("char", "uchar", "short", "ushort", "int", "uint", "long", "ulong", "longlong", "ulonglong", "float",
                 "double")
RESERVED = C_RESERVED | frozenset(
    _CPP_KEYWORDS + _BUILT_INS + list(MATH_FUNCTIONS) + [f"{name}f" for name in MATH_FUNCTIONS]
    + [f"{base}{n}" for base in _VECTOR_BASES for n in (1, 2, 3, 4)])
_LITERAL_SUFFIX = {"i32": "", "i64": "LL", "u32": "u", "u64": "ULL"}
_WORK_ITEMS = {"local_id": "threadIdx", "group_id": "blockIdx", "local_size": "blockDim", "num_groups": "gridDim"}
#: Atomics the vendor provides for each element type; the others are built from atomicCAS.
_NATIVE = {"add": ("i32", "u32", "u64", "f32"), "sub": ("i32", "u32"), "min": ("i32", "u32", "u64"),
           "max": ("i32", "u32", "u64"), "exch": ("i32", "u32", "u64", "f32"), "and": ("i32", "u32", "u64"),
           "or": ("i32", "u32", "u64"), "xor": ("i32", "u32", "u64"), "inc": ("u32",), "dec": ("u32",),
           "nanmin": (), "nanmax": ()}


class CudaDialect(CDialect):
    name = "cuda"
    title = "CUDA"
    types = CUDA_TYPES
    storage = STORAGE
    local_storage = STORAGE
    literal_suffix = _LITERAL_SUFFIX
    kernel_head = 'extern "C" __global__ void'
    function_head = "static __device__"
    helper_head = "static __device__ __forceinline__"
    restrict = "__restrict__ "
    local_qualifier = "__shared__"
    barrier = "__syncthreads();"
    reserved = RESERVED
    reserved_prefix = re.compile(
        r"^(_|v_|hetero_|cuda[A-Z]|hip[A-Z]|"
        r"(FLT|DBL|HALF|M|CUDA|CUDART|HIP|CHAR|SCHAR|UCHAR|SHRT|USHRT|INT|UINT|LONG|ULONG|LLONG|ULLONG|FP|EXIT)_)")
    fp16_header = "cuda_fp16.h"
    native_warps = True
    fences = {"block": "__threadfence_block();", "device": "__threadfence();", "system": "__threadfence_system();"}
    #: Types the shuffles take as they are; narrower integers and bool go through int.
    _SHUFFLED = ("i32", "u32", "i64", "u64", "f16", "f32", "f64")

    def warp(self, w: WriterContext, e: ir.Warp) -> str:
        args = [top(w.expr(a)) for a in e.args]
        if e.op == "sync":
            return f"__syncwarp({args[0]})"
        if e.op == "activemask":
            return "__activemask()"
        if e.op in ("all", "any"):
            return f"(__{e.op}_sync({args[0]}, {args[1]}) != 0)"
        if e.op == "ballot":
            return f"__ballot_sync({args[0]}, {args[1]})"
        mask, value, lane, width = args
        if e.type.name in self._SHUFFLED:
            return f"__{e.op}_sync({mask}, {value}, {lane}, {width})"
        text = f"__{e.op}_sync({mask}, (int)({value}), {lane}, {width})"
        return f"({text} != 0)" if e.type.kind == "b" else f"({self.c_type(e.type)})({text})"

    def special_float(self, real: float, double: bool) -> str:
        # Built from bits: NVRTC and hipRTC programs include no math.h, so no INFINITY or NAN.
        if double:
            bits = "0x7ff8000000000000LL" if math.isnan(real) else "0x7ff0000000000000LL"
            text = f"__longlong_as_double({bits})"
        else:
            text = f"__int_as_float({'0x7fc00000' if math.isnan(real) else '0x7f800000'})"
        return f"(-{text})" if real < 0 else text

    def half_literal(self, float_text: str) -> str:
        return f"__float2half({float_text})"

    def zero(self, t: ScalarType) -> str:
        return self.literal(t, 0) if t == f16 else super().zero(t)

    def work_item(self, name: str, axis: int) -> str:
        a = _AXES[axis]
        if name == "global_id":
            return f"((long long)blockIdx.{a} * blockDim.{a} + threadIdx.{a})"
        if name == "global_size":
            return f"((long long)gridDim.{a} * blockDim.{a})"
        return f"(long long){_WORK_ITEMS[name]}.{a}"

    def math(self, name: str, t: ScalarType) -> str:
        return f"{name}f" if t == f32 else name

    def integer_abs(self, t: ScalarType, operand: str) -> str:
        if t.kind != "i":
            return operand
        if t.bits == 64:
            return f"llabs({top(operand)})"
        return f"abs({top(operand)})" if t.bits == 32 else f"({self.c_type(t)})(abs({top(operand)}))"

    def includes(self, program: ProgramContext) -> list[str]:
        return [f"#include <{self.fp16_header}>"] if program.uses_half else []

    # Same kernel, same answer: nvcc and NVRTC contract a * b + c into a fused multiply-add by
    # default, which the CPU backend does not; hetero.math.fma asks for one rounding explicitly.
    options: tuple[str, ...] = ("--fmad=false",)

    def preamble(self, program: ProgramContext) -> list[str]:
        includes = self.includes(program)
        return ["\n".join(includes)] if includes else []

    # -- f16 values are __half: converted through float ------------------------------------
    def cast(self, w: WriterContext, e: ir.Cast) -> str:
        source = e.value.type
        if e.type == f16 and source == f16:
            return w.expr(e.value)
        if e.type == f16 and isinstance(e.value, ir.Cast) and e.value.value.type == f16 and source.is_float:
            return w.expr(e.value.value)  # an f16 widened and narrowed again is the same f16
        inner = top(w.expr(e.value))
        if e.type == f16:
            if source == f64:
                return self.double_to_half(w, inner)
            return f"__float2half({inner if source == f32 else f'(float)({inner})'})"
        if source == f16:
            as_float = f"__half2float({inner})"
            return as_float if e.type == f32 else f"({self.c_type(e.type)})({as_float})"
        return f"({self.c_type(e.type)})({inner})"

    def double_to_half(self, w: WriterContext, inner: str) -> str:
        return f"__double2half({inner})"

    # -- atomics -----------------------------------------------------------------------
    def native_double_add(self, target: Target) -> bool:
        """atomicAdd on double: compute capability 6.0 and newer."""
        match = re.fullmatch(r"sm_(\d+)\w*", target.arch)
        return match is None or int(match.group(1)) >= 60

    def atomic(self, w: WriterContext, info: ArrayInfo, op: str, address: str, args: list[str], used: bool) -> str:
        t = info.dtype
        if op == "cas":
            return self._compare_and_swap(t, address, top(args[0]), top(args[1]), used)
        value = args[0]
        if op == "sub" and t.is_float:  # negating a float is exact: subtracting is adding the negation
            op, value = "add", f"(-{value})"
        if t.is_int and t.bits == 64 and op in ("add", "sub"):
            # Two's complement: adding (or subtracting) is the same on the unsigned 64-bit word.
            amount = value if t == u64 else f"({ULL})({top(value)})"
            amount = amount if op == "add" else f"0ULL - {amount}"
            old = f"atomicAdd({address if t == u64 else f'({ULL}*){address}'}, {top(amount)})"
            return old if t == u64 or not used else f"(long long){old}"
        if t.name in _NATIVE[op] or (t == f64 and op == "add" and self.native_double_add(w.program.target)):
            return f"atomic{op.capitalize()}({address}, {top(value)})"
        return f"{w.program.helper('atomic_' + op, t)}({address}, {top(value)})"

    def _compare_and_swap(self, t: ScalarType, address: str, compare: str, value: str, used: bool) -> str:
        # Floats compare bit patterns: -0.0 differs from 0.0, and a NaN can match.
        if t == f32:
            old = f"atomicCAS((int*){address}, __float_as_int({compare}), __float_as_int({value}))"
            return f"__int_as_float({old})" if used else old
        if t == f64:
            old = (f"atomicCAS(({ULL}*){address}, ({ULL})__double_as_longlong({compare}), "
                   f"({ULL})__double_as_longlong({value}))")
            return f"__longlong_as_double((long long){old})" if used else old
        if t == i64:
            old = f"atomicCAS(({ULL}*){address}, ({ULL})({compare}), ({ULL})({value}))"
            return f"(long long){old}" if used else old
        return f"atomicCAS({address}, {compare}, {value})"

    def helper_text(self, kind: str, name: str, t: ScalarType, space: str) -> str:
        if kind.startswith("atomic_"):
            return self._atomic_update(name, t, kind.removeprefix("atomic_"))
        return super().helper_text(kind, name, t, space)

    def _atomic_update(self, name: str, t: ScalarType, op: str) -> str:
        """Atomic ``add sub min max`` as a compare-and-swap loop on the value's bits; returns the
        old value (floats' min/max, 64-bit signed min/max, double add before sm_60)."""
        ctype = self.c_type(t)
        bits, to_bits, from_bits = {
            "f32": ("int", "__float_as_int({})", "__int_as_float({})"),
            "f64": (ULL, f"({ULL})__double_as_longlong({{}})", "__longlong_as_double((long long){})"),
            "i32": ("int", "(int)({})", "(int)({})"), "u32": ("unsigned int", "(unsigned int)({})", "(unsigned int)({})"),
        }.get(t.name, (ULL, f"({ULL})({{}})", f"({ctype})({{}})"))
        current = from_bits.format("assumed")
        update = {"add": f"{current} + v", "sub": f"{current} - v",
                  "min": f"{current} < v ? {current} : v", "max": f"{current} > v ? {current} : v",
                  **(ordered_min_max(current) if t.is_float else {}),
                  "nanmin": f"{self.min_max('min', t)}({current}, v)", "nanmax": f"{self.min_max('max', t)}({current}, v)",
                  **newer_atomic_updates(current, "unsigned int" if t.bits == 32 else ULL)}[op]
        return f"""{self.helper_head} {ctype} {name}({ctype}* p, {ctype} v) {{
    {bits}* word = ({bits}*)p;
    {bits} old = *word;
    {bits} assumed;
    do {{
        assumed = old;
        old = atomicCAS(word, assumed, {to_bits.format(update)});
    }} while (old != assumed);
    return {from_bits.format("old")};
}}"""


class HipDialect(CudaDialect):
    name = "hip"
    title = "HIP"
    fp16_header = "hip/hip_fp16.h"
    options: tuple[str, ...] = ()  # clang's option differs from nvcc's: the preamble's pragma says it

    def preamble(self, program: ProgramContext) -> list[str]:
        # clang (hipcc, hipRTC) contracts a * b + c by default, which the CPU backend does not.
        return [*super().preamble(program), "#pragma clang fp contract(off)"]

    def includes(self, program: ProgramContext) -> list[str]:
        # hipRTC has both built in, and including its fp16 header again redefines __half.
        headers = ["#include <hip/hip_runtime.h>", *super().includes(program)]
        return ["#ifndef __HIPCC_RTC__", *headers, "#endif"]

    def native_double_add(self, target: Target) -> bool:
        return True  # every AMD GPU: in hardware, or a loop inside the HIP header

    # A wavefront has 64 lanes on most AMD GPUs: HIP's shuffles take CUDA's width of 32, which
    # cuts it into two warps of consecutive ids, and a vote takes this lane's half of the ballot.
    fences = {"block": "__threadfence_block();", "device": "__threadfence();", "system": "__threadfence_system();"}

    def warp(self, w: WriterContext, e: ir.Warp) -> str:
        args = [top(w.expr(a)) for a in e.args]
        if e.op == "sync":
            return "__builtin_amdgcn_wave_barrier()"  # the wavefront runs in lock step: order its memory
        if e.op.startswith("shfl"):
            return self._hip_shuffle(e, args)
        ballot = w.program.helper("ballot32", u32)
        if e.op == "activemask":
            return f"{ballot}(0xffffffffu, true)"
        if e.op == "ballot":
            return f"{ballot}({args[0]}, {args[1]})"
        if e.op == "any":
            return f"({ballot}({args[0]}, {args[1]}) != 0u)"
        if e.op == "all":
            return f"({ballot}({args[0]}, {args[1]}) == {ballot}({args[0]}, true))"
        raise ValueError(f"internal: warp operation {e.op!r}")

    def _hip_shuffle(self, e: ir.Warp, args: list[str]) -> str:
        _, value, lane, width = args
        name = {"shfl": "__shfl", "shfl_up": "__shfl_up", "shfl_down": "__shfl_down", "shfl_xor": "__shfl_xor"}[e.op]
        if e.type.name in self._SHUFFLED and e.type != f16:
            return f"{name}({value}, {lane}, {width})"
        text = f"{name}((int)({value}), {lane}, {width})"
        return f"({text} != 0)" if e.type.kind == "b" else f"({self.c_type(e.type)})({text})"

    def double_to_half(self, w: WriterContext, inner: str) -> str:
        return f"{w.program.helper('half_from', f64)}({inner})"

    def helper_text(self, kind: str, name: str, t: ScalarType, space: str) -> str:
        if kind == "ballot32":
            return f"""{self.helper_head} unsigned int {name}(unsigned int mask, bool predicate) {{
    unsigned long long lanes = __ballot(predicate);
    return (unsigned int)(lanes >> (__lane_id() & 32u)) & mask;
}}"""
        if kind != "half_from":
            return super().helper_text(kind, name, t, space)
        # HIP has no __double2half: round to float towards zero, keeping the lost bits as a
        # sticky last bit (round-to-odd), so that rounding that float to half rounds once.
        return f"""{self.helper_head} __half {name}(double x) {{
    float rounded = (float)x;
    if ((double)rounded != x && x == x) {{
        int bits = __float_as_int(rounded);
        if (fabs((double)rounded) > fabs(x)) {{
            bits -= 1;
        }}
        rounded = __int_as_float(bits | 1);
    }}
    return __float2half(rounded);
}}"""


CUDA = CudaDialect()
HIP = HipDialect()
