"""CUDA's math library and intrinsics for the CUDA C front end: their declarations in the prelude,
and their lowering to hetero's IR.

What CUDA's ``math_functions.h``/``device_functions.h`` declare implicitly is declared here in
float and double forms (``sqrtf``, ``sqrt(float)``, ``sqrt(double)``), with C++'s integer
overloads as ``<cmath>`` has them (``sqrt(2)`` is a double). Each is lowered to the IR's math
function, or a short composition of them (``exp10`` is ``pow(10, x)``). The fast intrinsics
(``__expf``, ``__fdividef``) compute the accurate function: a result may differ from NVIDIA's in
the last bits, never by more than CUDA documents for the intrinsic. The integer intrinsics
(``__popc``, ``__clz``, ``__ffs``, ``__brev``, ``__byte_perm``) are defined in C in the prelude
and lowered like a user's ``__device__`` function. ``__ldg``, ``__ldcs`` and their kin are plain
loads, ``__stcs`` and its kin plain stores: the cache hints have no meaning on other devices.

A function CUDA has that hetero does not lower yet (``sincosf``, ``frexp``, ``__float_as_int``,
rounding modes other than ``_rn``) is declared without a definition, so that a call is a
:class:`CompileError` naming the function, the file and the line (:data:`UNSUPPORTED_HINT`).
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING, Any

from hetero.core.types import ScalarType, bool_t, f64
from hetero.language import MATH_ARITY, MATH_PREDICATES

from hetero.compiler.ir import nodes as ir
from hetero.compiler.frontend.cuda_c_memory import LOADS, Pointer, vector_type

#: Math functions the IR has, by argument count (the predicates return bool).
_IR_MATH = ("sqrt rsqrt exp exp2 expm1 log log2 log10 log1p sin cos tan asin acos atan sinh cosh tanh asinh acosh "
            "atanh fabs floor ceil trunc round rint erf erfc cbrt lgamma tgamma").split()
_IR_MATH2 = [name for name, arity in MATH_ARITY.items() if arity == 2]
#: Functions composed of the IR's (see :meth:`MathCalls.composed`).
_COMPOSED1 = ("exp10", "nearbyint", "rcbrt", "sinpi", "cospi")
_COMPOSED2 = ("fdim", "rhypot")
#: CUDA math functions declared so that a call names them in its refusal.
_UNSUPPORTED1 = ("erfinv erfcinv erfcx normcdf normcdfinv logb j0 j1 y0 y1").split()
#: The fast and rounding-mode intrinsics that compute an IR math function.
_INTRINSIC_MATH = {"__expf": "exp", "__logf": "log", "__log2f": "log2", "__log10f": "log10", "__sinf": "sin",
                   "__cosf": "cos", "__tanf": "tan", "__powf": "pow", "__fsqrt_rn": "sqrt", "__dsqrt_rn": "sqrt",
                   "__frsqrt_rn": "rsqrt", "__fmaf_rn": "fma", "__fma_rn": "fma", "__exp10f": "exp10"}
_INTRINSIC_ARITH = {"__fdividef": "/", "__fdiv_rn": "/", "__ddiv_rn": "/", "__fadd_rn": "+", "__dadd_rn": "+",
                    "__fsub_rn": "-", "__dsub_rn": "-", "__fmul_rn": "*", "__dmul_rn": "*"}
#: ``__float2int_rn`` and its kin: the rounding before the conversion.
_ROUNDINGS = {"rn": "rint", "rz": "trunc", "rd": "floor", "ru": "ceil"}
_CONVERSIONS = {f"__{src}2{dst}_{mode}": (rounding, ctype)
                for src in ("float", "double") for dst, ctype in (("int", "int"), ("uint", "unsigned int"),
                                                                  ("ll", "long long"), ("ull", "unsigned long long"))
                for mode, rounding in _ROUNDINGS.items()}
STORES = ("__stcs", "__stcg", "__stwb", "__stwt")
_UNLOWERED = {*_UNSUPPORTED1, "ilogb", "sincos", "__sincos", "sincospi", "frexp", "modf", "remquo", "norm3d",
              "rnorm3d", "__float_as_int", "__int_as_float", "__float_as_uint", "__uint_as_float",
              "__double_as_longlong", "__longlong_as_double", "__umul64hi"}
UNSUPPORTED_HINT = ("hetero's CUDA C front end does not lower this CUDA function yet (docs/compat-cuda.md lists "
                    "what it does); compute it from the supported functions")


def _forms(name: str, arity: int, result: str = "") -> str:
    """``name``'s float (``namef``, ``name(float)``) and double forms, and C++'s integer overloads."""
    f, d = ", ".join(["float"] * arity), ", ".join(["double"] * arity)
    rf, rd = result or "float", result or "double"
    integer = ", ".join(f"T{k}" for k in range(arity))
    template = ", ".join(f"class T{k}" for k in range(arity))
    return (f"__device__ {rf} {name}f({f}); __device__ {rf} {name}({f}); __device__ {rd} {name}({d});\n"
            f"template <{template}> __device__ {rd} {name}({integer});\n")


def _prelude() -> str:
    parts = [_forms(name, 1) for name in (*_IR_MATH, *_COMPOSED1, *_UNSUPPORTED1)]
    parts += [_forms(name, 2) for name in (*_IR_MATH2, *_COMPOSED2)]
    parts += [_forms("fma", 3), *(_forms(name, 1, "bool") for name in MATH_PREDICATES)]
    parts.append("__device__ float powf(float, int); __device__ float pow(float, int); __device__ double pow(double, int);\n")
    for name in ("ldexp", "scalbn"):
        parts.append(f"__device__ float {name}f(float, int); __device__ float {name}(float, int); "
                     f"__device__ double {name}(double, int);\n")
    for name, result in (("lrint", "long"), ("llrint", "long long"), ("lround", "long"), ("llround", "long long"),
                         ("ilogb", "int")):
        parts.append(f"__device__ {result} {name}f(float); __device__ {result} {name}(float); "
                     f"__device__ {result} {name}(double);\n")
    parts += ["__device__ void sincosf(float, float*, float*); __device__ void sincos(double, double*, double*);\n",
              "__device__ void __sincosf(float, float*, float*); __device__ void sincospif(float, float*, float*);\n",
              "__device__ float frexpf(float, int*); __device__ double frexp(double, int*);\n",
              "__device__ float modff(float, float*); __device__ double modf(double, double*);\n",
              "__device__ float remquof(float, float, int*); __device__ double remquo(double, double, int*);\n",
              "__device__ float norm3df(float, float, float); __device__ float rnorm3df(float, float, float);\n",
              "__device__ int __float_as_int(float); __device__ float __int_as_float(int);\n",
              "__device__ unsigned int __float_as_uint(float); __device__ float __uint_as_float(unsigned int);\n",
              "__device__ long long __double_as_longlong(double); __device__ double __longlong_as_double(long long);\n",
              "__device__ unsigned long long __umul64hi(unsigned long long, unsigned long long);\n",
              "__device__ int abs(int); __device__ long labs(long); __device__ long long llabs(long long);\n",
              "__device__ long abs(long); __device__ long long abs(long long);\n",
              "__device__ float abs(float); __device__ double abs(double);\n",
              "__device__ float __saturatef(float);\n"]
    for name, base in _INTRINSIC_MATH.items():
        arity = MATH_ARITY.get(base, 1)
        kind = "double" if name.startswith("__d") or name == "__fma_rn" else "float"
        parts.append(f"__device__ {kind} {name}({', '.join([kind] * arity)});\n")
    for name in _INTRINSIC_ARITH:
        kind = "double" if name.startswith("__d") else "float"
        parts.append(f"__device__ {kind} {name}({kind}, {kind});\n")
    parts += ["__device__ float __frcp_rn(float); __device__ double __drcp_rn(double);\n"]
    for name, (_, ctype) in _CONVERSIONS.items():
        parts.append(f"__device__ {ctype} {name}({'float' if name.startswith('__float') else 'double'});\n")
    for src in ("int", "uint", "ll", "ull"):
        ctype = {"int": "int", "uint": "unsigned int", "ll": "long long", "ull": "unsigned long long"}[src]
        parts.append(f"__device__ float __{src}2float_rn({ctype}); __device__ double __{src}2double_rn({ctype});\n")
    parts += ["template <class T> struct __hetero_same { typedef T type; };\n",
              *(f"template <class T> __device__ T {name}(const T*);\n" for name in LOADS),
              *(f"template <class T> __device__ void {name}(T*, typename __hetero_same<T>::type);\n" for name in STORES)]
    return "".join(parts) + _BITS


#: The integer intrinsics, in C: the front end lowers them as it does a user's device functions.
_BITS = r"""
__device__ inline int __popc(unsigned int x) {
  x = x - ((x >> 1) & 0x55555555u); x = (x & 0x33333333u) + ((x >> 2) & 0x33333333u);
  x = (x + (x >> 4)) & 0x0F0F0F0Fu; return (int)((x * 0x01010101u) >> 24);
}
__device__ inline int __popcll(unsigned long long x) {
  return __popc((unsigned int)x) + __popc((unsigned int)(x >> 32));
}
__device__ inline int __clz(int v) {
  unsigned int x = (unsigned int)v; int n = 0;
  if (x == 0u) { n = 32; } else {
    if ((x & 0xFFFF0000u) == 0u) { n += 16; x <<= 16; }
    if ((x & 0xFF000000u) == 0u) { n += 8; x <<= 8; }
    if ((x & 0xF0000000u) == 0u) { n += 4; x <<= 4; }
    if ((x & 0xC0000000u) == 0u) { n += 2; x <<= 2; }
    if ((x & 0x80000000u) == 0u) { n += 1; }
  }
  return n;
}
__device__ inline int __clzll(long long v) {
  unsigned long long x = (unsigned long long)v; unsigned int high = (unsigned int)(x >> 32);
  return high != 0u ? __clz((int)high) : 32 + __clz((int)(unsigned int)x);
}
__device__ inline int __ffs(int v) {
  unsigned int x = (unsigned int)v; return x == 0u ? 0 : 32 - __clz((int)(x & (0u - x)));
}
__device__ inline int __ffsll(long long v) {
  unsigned long long x = (unsigned long long)v; return x == 0ull ? 0 : 64 - __clzll((long long)(x & (0ull - x)));
}
__device__ inline unsigned int __brev(unsigned int x) {
  x = ((x >> 1) & 0x55555555u) | ((x & 0x55555555u) << 1); x = ((x >> 2) & 0x33333333u) | ((x & 0x33333333u) << 2);
  x = ((x >> 4) & 0x0F0F0F0Fu) | ((x & 0x0F0F0F0Fu) << 4); x = ((x >> 8) & 0x00FF00FFu) | ((x & 0x00FF00FFu) << 8);
  return (x >> 16) | (x << 16);
}
__device__ inline unsigned long long __brevll(unsigned long long x) {
  return ((unsigned long long)__brev((unsigned int)x) << 32) | (unsigned long long)__brev((unsigned int)(x >> 32));
}
__device__ inline unsigned int __umulhi(unsigned int a, unsigned int b) {
  return (unsigned int)(((unsigned long long)a * (unsigned long long)b) >> 32);
}
__device__ inline int __mulhi(int a, int b) { return (int)(((long long)a * (long long)b) >> 32); }
__device__ inline unsigned int __sad(int x, int y, unsigned int z) { return (x > y ? (unsigned int)(x - y) : (unsigned int)(y - x)) + z; }
__device__ inline unsigned int __usad(unsigned int x, unsigned int y, unsigned int z) { return (x > y ? x - y : y - x) + z; }
__device__ inline int __hadd(int a, int b) { return (int)(((long long)a + (long long)b) >> 1); }
__device__ inline int __rhadd(int a, int b) { return (int)(((long long)a + (long long)b + 1ll) >> 1); }
__device__ inline unsigned int __uhadd(unsigned int a, unsigned int b) { return (unsigned int)(((unsigned long long)a + b) >> 1); }
__device__ inline unsigned int __urhadd(unsigned int a, unsigned int b) { return (unsigned int)(((unsigned long long)a + b + 1ull) >> 1); }
__device__ inline unsigned int __byte_perm(unsigned int x, unsigned int y, unsigned int s) {
  unsigned long long v = ((unsigned long long)y << 32) | (unsigned long long)x; unsigned int r = 0u;
  for (int i = 0; i < 4; ++i) { unsigned int sel = (s >> (4 * i)) & 7u; r |= (unsigned int)((v >> (8u * sel)) & 0xFFull) << (8 * i); }
  return r;
}
__device__ inline unsigned int __funnelshift_l(unsigned int lo, unsigned int hi, unsigned int shift) {
  unsigned long long v = ((unsigned long long)hi << 32) | (unsigned long long)lo; return (unsigned int)((v << (shift & 31u)) >> 32);
}
__device__ inline unsigned int __funnelshift_r(unsigned int lo, unsigned int hi, unsigned int shift) {
  unsigned long long v = ((unsigned long long)hi << 32) | (unsigned long long)lo; return (unsigned int)(v >> (shift & 31u));
}
"""

MATH_PRELUDE = _prelude()


class MathCalls:
    """CUDA's math library for :class:`hetero.compiler.frontend.cuda_c._Lowering` (its helpers)."""

    if TYPE_CHECKING:  # the lowering's own, which this mixin uses
        def expr(self, c: Any) -> ir.Expr: ...
        def cast(self, e: ir.Expr, t: ScalarType) -> ir.Expr: ...
        def scalar(self, cursor: Any, ctype: Any = None) -> ScalarType: ...
        def fail(self, cursor: Any, message: str) -> Any: ...
        def pointer_expr(self, c: Any) -> Pointer | None: ...
        def load_through(self, p: Pointer, lane: int = 0) -> ir.Expr: ...
        def store_through(self, p: Pointer, value: ir.Expr, loc: ir.Loc, lane: int = 0) -> list[ir.Stmt]: ...
        def vector_value(self, c: Any) -> list[ir.Expr]: ...

    def library_call(self, c: Any, name: str) -> ir.Expr | None:
        """A call of CUDA's math library or one of its intrinsics as IR, else None."""
        if name in _UNLOWERED or (name.endswith("f") and name[:-1] in _UNLOWERED):
            return None  # declared only: the caller's refusal names it
        args = list(c.get_arguments())
        if name in LOADS:
            return self.load_through(self.hinted_pointer(c, args[0], 1))
        if c.type.kind.name == "VOID" or c.type.get_canonical().kind.name == "RECORD":
            return None
        t = self.scalar(c)
        base = name[:-1] if name.endswith("f") and name[:-1] in _ALL_MATH else name
        base = _INTRINSIC_MATH.get(name, base)
        if base in MATH_PREDICATES:
            x = self.expr(args[0])
            return self.cast(ir.Math(bool_t, base, (x if x.type.is_float else self.cast(x, f64),)), t)
        if name in _CONVERSIONS:
            rounding, _ = _CONVERSIONS[name]
            x = self.expr(args[0])
            return self.cast(ir.Math(x.type, rounding, (x,)), t)
        if name.endswith("_rn") and name[2:].split("2")[0] in ("int", "uint", "ll", "ull"):
            return self.cast(self.expr(args[0]), t)  # __int2float_rn and its kin
        if not t.is_float:
            return self.integer_call(c, name, args, t)
        values = [self.expr(a) for a in args]
        if name in _INTRINSIC_ARITH:
            return ir.BinOp(t, _INTRINSIC_ARITH[name], *(self.cast(v, t) for v in values))
        if base in ("ldexp", "scalbn"):
            scale = ir.Math(t, "exp2", (self.cast(values[1], t),))
            return ir.BinOp(t, "*", self.cast(values[0], t), scale)
        same = [self.cast(v, t) for v in values]
        if base in _IR_MATH or base in _IR_MATH2 or base == "fma":
            return ir.Math(t, base, tuple(same))
        if base in _COMPOSED1 or base in _COMPOSED2:
            return self.composed(base, same, t)
        if name in ("__frcp_rn", "__drcp_rn"):
            return ir.BinOp(t, "/", ir.Const(t, 1.0), same[0])
        if name == "__saturatef":
            return ir.Math(t, "fmin", (ir.Math(t, "fmax", (same[0], ir.Const(t, 0.0))), ir.Const(t, 1.0)))
        if name in ("abs", "fabs") or base == "fabs":
            return ir.Math(t, "fabs", tuple(same))
        if name in ("min", "max"):
            return ir.Math(t, "f" + name, tuple(same))
        return None

    def integer_call(self, c: Any, name: str, args: list[Any], t: ScalarType) -> ir.Expr | None:
        """``abs``, ``min``/``max``, ``__mul24`` and the integer results of float functions (``lrint``)."""
        if name in ("abs", "labs", "llabs"):
            x = self.cast(self.expr(args[0]), t)
            return ir.Select(t, ir.Compare(bool_t, "<", x, ir.Const(t, 0)), ir.UnaryOp(t, "-", x), x)
        if name in ("min", "max"):
            return ir.BinOp(t, name, *(self.cast(self.expr(a), t) for a in args))
        if name in ("__umul24", "__mul24"):  # the low 32 bits of 24-bit products
            mask = ir.Const(t, 0xFFFFFF)
            a, b = (ir.BinOp(t, "&", self.cast(self.expr(x), t), mask) for x in args)
            if name == "__mul24":  # sign-extend the 24-bit operands
                a, b = (ir.BinOp(t, ">>", ir.BinOp(t, "<<", x, ir.Const(t, 8)), ir.Const(t, 8)) for x in (a, b))
            return ir.BinOp(t, "*", a, b)
        stem = name.removesuffix("f")
        if stem in ("lrint", "llrint", "lround", "llround"):
            x = self.expr(args[0])
            return self.cast(ir.Math(x.type, "rint" if "rint" in stem else "round", (x,)), t)
        return None

    def composed(self, base: str, args: list[ir.Expr], t: ScalarType) -> ir.Expr:
        """A CUDA math function the IR lacks, from those it has."""
        one = ir.Const(t, 1.0)
        if base == "exp10":
            return ir.Math(t, "pow", (ir.Const(t, 10.0), args[0]))
        if base == "nearbyint":
            return ir.Math(t, "rint", (args[0],))
        if base == "rcbrt":
            return ir.BinOp(t, "/", one, ir.Math(t, "cbrt", (args[0],)))
        if base == "rhypot":
            return ir.BinOp(t, "/", one, ir.Math(t, "hypot", tuple(args)))
        if base in ("sinpi", "cospi"):
            return ir.Math(t, base[:3], (ir.BinOp(t, "*", ir.Const(t, math.pi), args[0]),))
        # fdim: a - b where a > b, else +0 (NaN when either is: the comparison fails)
        a, b = args
        return ir.Select(t, ir.Compare(bool_t, "<=", a, b), ir.Const(t, 0.0), ir.BinOp(t, "-", a, b))

    def hinted_pointer(self, c: Any, arg: Any, lanes: int) -> Pointer:
        """Where ``__ldg(p)``/``__stcs(p, v)`` reads or writes, ``lanes`` components wide."""
        p = self.pointer_expr(arg)
        if p is None or p.lanes != lanes:
            raise self.fail(c, f"{c.spelling} takes a pointer into one of the kernel's arrays here "
                               f"({c.spelling}(&a[i]), {c.spelling}(a + i))")
        return p

    def hinted_store(self, c: Any, loc: ir.Loc) -> list[ir.Stmt]:
        """``__stcs(p, v)`` and its kin: a plain store of a scalar or a vector."""
        address, value = list(c.get_arguments())
        vector = vector_type(value.type)
        if vector is None:
            return self.store_through(self.hinted_pointer(c, address, 1), self.expr(value), loc)
        p = self.hinted_pointer(c, address, vector[1])
        single = _one_lane(p)
        return [s for lane, v in enumerate(self.vector_value(value)) for s in self.store_through(single, v, loc, lane)]

    def hinted_vector_load(self, c: Any, lanes: int) -> list[ir.Expr]:
        """``__ldg(p)`` of a vector type: its components."""
        single = _one_lane(self.hinted_pointer(c, next(iter(c.get_arguments())), lanes))
        return [self.load_through(single, lane) for lane in range(lanes)]


def _one_lane(p: Pointer) -> Pointer:
    return dataclasses.replace(p, lanes=1)


_ALL_MATH = {*_IR_MATH, *_IR_MATH2, *_COMPOSED1, *_COMPOSED2, *_UNSUPPORTED1, *MATH_PREDICATES, "fma", "ldexp",
             "scalbn", "lrint", "llrint", "lround", "llround", "ilogb", "modf", "frexp", "remquo", "sincos", "norm3d",
             "rnorm3d"}
