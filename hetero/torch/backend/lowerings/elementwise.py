"""Elementwise ATen operations: arithmetic, comparisons, logic, the unary math functions,
``where`` and ``clamp``; each one hetero operation (fused where they chain)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

import hetero
import hetero.xp as xp
from hetero.torch.backend.lowerings.promotion import cast, default_float, kind, operands, result_dtype
from hetero.torch.backend.lowerings.registry import NotLowered, lowers

aten = torch.ops.aten


def _binary(function: Callable[[Any, Any], Any], *ops: Any) -> None:
    def lowering(a: Any, b: Any) -> Any:
        a, b = operands(a, b)
        return function(a, b)
    lowers(*ops)(lowering)


def _multiply(a: Any, b: Any) -> Any:
    if kind(a) == 0 and kind(b) == 0:
        return xp.logical_and(a, b)  # torch multiplies bools as "and"
    return xp.multiply(a, b)


for _function, _name in ((_multiply, "mul"), (xp.maximum, "maximum"), (xp.minimum, "minimum"),
                         (xp.equal, "eq"), (xp.not_equal, "ne"), (xp.less, "lt"), (xp.less_equal, "le"),
                         (xp.greater, "gt"), (xp.greater_equal, "ge"), (xp.logical_and, "logical_and"),
                         (xp.logical_or, "logical_or"), (xp.logical_xor, "logical_xor"), (xp.atan2, "atan2"),
                         (xp.bitwise_and, "bitwise_and"), (xp.bitwise_or, "bitwise_or"),
                         (xp.bitwise_xor, "bitwise_xor")):
    _packet = getattr(aten, _name)
    _binary(_function, *(getattr(_packet, o) for o in ("Tensor", "Scalar", "default") if hasattr(_packet, o)))


def _scaled(b: Any, alpha: Any) -> Any:
    if alpha == 1:
        return b
    if kind(alpha) > kind(b) or isinstance(alpha, bool):
        raise NotLowered(f"alpha={alpha!r} of another kind than the operand")
    return b * alpha


@lowers(aten.add.Tensor, aten.add.Scalar)
def add(a: Any, b: Any, *, alpha: Any = 1) -> Any:
    a, b = operands(a, _scaled(b, alpha))
    if kind(a) == 0 and kind(b) == 0:
        return xp.logical_or(a, b)  # torch adds bools as "or"
    return xp.add(a, b)


@lowers(aten.sub.Tensor, aten.sub.Scalar)
def sub(a: Any, b: Any, *, alpha: Any = 1) -> Any:
    a, b = operands(a, _scaled(b, alpha))
    return xp.subtract(a, b)


@lowers(aten.rsub.Scalar, aten.rsub.Tensor)
def rsub(a: Any, b: Any, *, alpha: Any = 1) -> Any:
    return sub(b, a, alpha=alpha)


@lowers(aten.div.Tensor, aten.div.Scalar)
def div(a: Any, b: Any) -> Any:
    """True division: in torch's promoted dtype, its default float where that is bool or integer."""
    dtype = result_dtype(a, b)
    if dtype.kind in "biu":
        dtype = default_float()
    return xp.divide(cast(a, dtype), cast(b, dtype))


@lowers(aten.div.Tensor_mode, aten.div.Scalar_mode)
def div_mode(a: Any, b: Any, *, rounding_mode: str | None = None) -> Any:
    if rounding_mode is None:
        return div(a, b)
    a, b = operands(a, b)
    if rounding_mode == "floor":
        return xp.floor_divide(a, b)
    if rounding_mode == "trunc" and kind(a) == 2:
        return xp.trunc(xp.divide(a, b))
    raise NotLowered(f"division with rounding_mode={rounding_mode!r} on integers")


@lowers(aten.pow.Tensor_Scalar, aten.pow.Tensor_Tensor)
def pow_(a: Any, b: Any) -> Any:
    if isinstance(b, (int, float)) and not isinstance(b, bool) and kind(a) == 2:
        if b == 2:
            return xp.multiply(a, a)
        if b == 0.5:
            return xp.sqrt(a)
        return xp.pow(a, float(b))
    a, b = operands(a, b)
    if kind(a) != 2:
        raise NotLowered("pow of integers (negative exponents are an error in torch)")
    return xp.pow(a, b)


@lowers(aten.pow.Scalar)
def pow_scalar(base: Any, exponent: hetero.Array) -> Any:
    """A Python number to a tensor's power."""
    if kind(exponent) != 2 or isinstance(base, bool):
        raise NotLowered("pow of a number by an integer tensor")
    return xp.pow(float(base), exponent)


@lowers(aten.hardtanh.default)
def hardtanh(a: Any, min_val: Any = -1.0, max_val: Any = 1.0) -> Any:
    if kind(a) != 2:
        raise NotLowered("hardtanh of a non-float tensor")
    return xp.minimum(xp.maximum(a, float(min_val)), float(max_val))


@lowers(aten.remainder.Tensor, aten.remainder.Scalar)
def remainder(a: Any, b: Any) -> Any:
    a, b = operands(a, b)
    return xp.remainder(a, b)


def floating(a: Any) -> Any:
    """``a`` as torch's float math functions take it: a bool or integer tensor in torch's default
    float (which they compute and return), a float tensor as it is."""
    if kind(a) > 2:
        raise NotLowered(f"a {a.dtype} tensor")
    return a if kind(a) == 2 else cast(a, default_float())


def _unary(function: Callable[[Any], Any], *ops: Any, floats_only: bool = False) -> None:
    def lowering(a: Any) -> Any:
        return function(floating(a) if floats_only else a)
    lowers(*ops)(lowering)


for _function, _name, _floats in (
        (xp.negative, "neg", False), (xp.abs, "abs", False), (xp.logical_not, "logical_not", False),
        (xp.sign, "sign", False), (xp.bitwise_invert, "bitwise_not", False), (xp.isnan, "isnan", False),
        (xp.isinf, "isinf", False), (xp.exp, "exp", True), (xp.log, "log", True), (xp.sqrt, "sqrt", True),
        (xp.tanh, "tanh", True), (xp.sin, "sin", True), (xp.cos, "cos", True), (xp.tan, "tan", True),
        (xp.asin, "asin", True), (xp.acos, "acos", True), (xp.atan, "atan", True), (xp.sinh, "sinh", True),
        (xp.cosh, "cosh", True), (xp.asinh, "asinh", True), (xp.acosh, "acosh", True), (xp.atanh, "atanh", True),
        (xp.expm1, "expm1", True), (xp.log1p, "log1p", True), (xp.log2, "log2", True), (xp.log10, "log10", True),
        (xp.floor, "floor", False), (xp.ceil, "ceil", False), (xp.trunc, "trunc", False)):
    _unary(_function, getattr(aten, _name).default, floats_only=_floats)


@lowers(aten.relu.default)
def relu(a: Any) -> Any:
    if kind(a) == 0:
        raise NotLowered("relu of a bool tensor")
    return xp.maximum(a, 0.0 if kind(a) == 2 else 0)


@lowers(aten.sigmoid.default)
def sigmoid(a: Any) -> Any:
    a = floating(a)
    return 1.0 / (1.0 + xp.exp(-a))


@lowers(aten.rsqrt.default)
def rsqrt(a: Any) -> Any:
    a = floating(a)
    return 1.0 / xp.sqrt(a)


@lowers(aten.reciprocal.default)
def reciprocal(a: Any) -> Any:
    a = floating(a)
    return 1.0 / a


@lowers(aten.where.self)
def where(condition: hetero.Array, a: Any, b: Any) -> Any:
    a, b = operands(a, b)
    return xp.where(condition, a, b)


@lowers(aten.clamp.Tensor)
def clamp_tensor(a: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002 (ATen's argument names)
    """torch.clamp with tensor bounds: max(a, min), then min(., max) (NaN in either propagates)."""
    if min is not None:
        a = xp.maximum(*operands(a, min))
    if max is not None:
        a = xp.minimum(*operands(a, max))
    return a


@lowers(aten.clamp.default)
def clamp(a: Any, min: Any = None, max: Any = None) -> Any:  # noqa: A002 (ATen's argument names)
    for bound in (min, max):
        if bound is not None and kind(bound) > kind(a):
            raise NotLowered("a clamp bound of a wider kind than the tensor")
    if min is not None:
        a = xp.maximum(a, min)
    if max is not None:
        a = xp.minimum(a, max)
    return a


__all__: list[str] = []


@lowers(aten.round.default)
def round_(a: Any) -> Any:
    """Half to even, as torch's nearbyint; integers as they are."""
    return xp.round(a) if kind(a) == 2 else a


@lowers(aten.round.decimals)
def round_decimals(a: Any, *, decimals: int = 0) -> Any:
    """torch's formula: nearbyint(a * 10**d) / 10**d (for d < 0: nearbyint(a / 10**-d) * 10**-d),
    10**d in a's dtype."""
    if kind(a) != 2 or a.dtype.itemsize < 4:
        raise NotLowered("round with decimals of a non-float or float16 tensor (torch computes float16 in float32)")
    if decimals == 0:
        return xp.round(a)
    scale = float(10.0 ** abs(decimals))
    return xp.round(a / scale) * scale if decimals < 0 else xp.round(a * scale) / scale


@lowers(aten.fmod.Scalar, aten.fmod.Tensor)
def fmod(a: Any, b: Any) -> Any:
    """C's fmod on integers (the sign of ``a``): the array API's remainder (the sign of ``b``), less
    ``b`` where the two signs differ; exact. Float fmod stays in torch (exact in C, not as
    ``a - trunc(a / b) * b``); so does an integer tensor divisor, which may hold a zero (an error in torch)."""
    a, b = operands(a, b)
    if kind(a) != 1 or kind(b) != 1 or isinstance(b, hetero.Array):
        raise NotLowered("fmod of floats, or by an integer tensor")
    if b == 0:
        raise NotLowered("fmod by zero (an error in torch)")
    r = xp.remainder(a, b)
    return xp.where(xp.logical_and(r != 0, (a < 0) != (b < 0)), r - b, r)
