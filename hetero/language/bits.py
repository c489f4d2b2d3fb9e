"""CUDA's bit intrinsics (``popc``, ``clz``, ``ffs``, ``brev``) as device functions in hetero's
own kernel language, so that every dialect and device runs the same integer code (the vendor
compilers recognise these shapes: LLVM turns the SWAR count into a ``popcnt``/``popc``).

Each works on the 32- or 64-bit unsigned pattern of its argument; the frontend
(:meth:`hetero.compiler.frontend.expressions.ExpressionLowering.call_bits`) widens narrower integers
and gives the result Numba's type. Vocabulary: imports only the language and the types.
"""

# The annotations are hetero kernel types (hetero.u32), which the compiler reads; mypy cannot.
# mypy: disable-error-code="valid-type,operator,no-untyped-def"

from __future__ import annotations

from hetero.language import func
from hetero.core.types import u32, u64


@func
def popc32(x: u32) -> u32:
    v = x - ((x >> 1) & 0x55555555)
    v = (v & 0x33333333) + ((v >> 2) & 0x33333333)
    v = (v + (v >> 4)) & 0x0F0F0F0F
    return (v * 0x01010101) >> 24


@func
def popc64(x: u64) -> u64:
    v = x - ((x >> 1) & 0x5555555555555555)
    v = (v & 0x3333333333333333) + ((v >> 2) & 0x3333333333333333)
    v = (v + (v >> 4)) & 0x0F0F0F0F0F0F0F0F
    return (v * 0x0101010101010101) >> 56


@func
def clz32(x: u32) -> u32:
    if x == 0:
        return u32(32)
    n = u32(0)
    v = x
    if v <= 0x0000FFFF:
        n += 16
        v = v << 16
    if v <= 0x00FFFFFF:
        n += 8
        v = v << 8
    if v <= 0x0FFFFFFF:
        n += 4
        v = v << 4
    if v <= 0x3FFFFFFF:
        n += 2
        v = v << 2
    if v <= 0x7FFFFFFF:
        n += 1
    return n


@func
def clz64(x: u64) -> u64:
    high = u32(x >> 32)
    if high != 0:
        return u64(clz32(high))
    return u64(32 + clz32(u32(x & 0xFFFFFFFF)))


@func
def ffs32(x: u32) -> u32:
    if x == 0:
        return u32(0)
    return popc32((x & (~x + 1)) - 1) + 1


@func
def ffs64(x: u64) -> u32:
    if x == 0:
        return u32(0)
    return u32(popc64((x & (~x + 1)) - 1) + 1)


@func
def brev32(x: u32) -> u32:
    v = ((x >> 1) & 0x55555555) | ((x & 0x55555555) << 1)
    v = ((v >> 2) & 0x33333333) | ((v & 0x33333333) << 2)
    v = ((v >> 4) & 0x0F0F0F0F) | ((v & 0x0F0F0F0F) << 4)
    v = ((v >> 8) & 0x00FF00FF) | ((v & 0x00FF00FF) << 8)
    return (v >> 16) | (v << 16)


@func
def brev64(x: u64) -> u64:
    return (u64(brev32(u32(x & 0xFFFFFFFF))) << 32) | u64(brev32(u32(x >> 32)))


#: The functions of each intrinsic, by argument width.
FUNCTIONS = {"popc": (popc32, popc64), "clz": (clz32, clz64), "ffs": (ffs32, ffs64), "brev": (brev32, brev64)}

__all__ = ["FUNCTIONS"]
