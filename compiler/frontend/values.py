"""Lowered values: a :class:`Value` is a lowered expression plus whether it is still a weakly
typed literal; :func:`const`, :func:`cast` and :func:`weak` make them (shared by the expression
lowering and its mixins, which import this module rather than each other)."""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from hetero.core.types import ScalarType, bool_t

from hetero.compiler.ir import nodes as ir
from hetero.compiler.frontend import typing_rules

Number = int | float | bool | complex


@dataclasses.dataclass(frozen=True)
class Value:
    expr: ir.Expr
    weak: bool = False  # an untyped literal: expr is a Const whose type may still change

    @property
    def type(self) -> ScalarType:
        return self.expr.type


def const(value: Number, t: ScalarType) -> ir.Const:
    """A literal converted to ``t`` with C conversion rules (wrapping integers to width)."""
    if t.is_complex:
        return ir.Const(t, complex(t.dtype.type(value)))
    if isinstance(value, complex):
        raise ValueError(f"cannot convert the complex {value} to {t}; take .real or abs() of it")
    if t == bool_t:
        return ir.Const(t, bool(value))
    if t.is_float:
        return ir.Const(t, float(t.dtype.type(value)))
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"cannot convert {value} to {t}")
        value = int(value)  # truncates towards zero, as C
    return ir.Const(t, int(np.array(int(value) & ((1 << t.bits) - 1), dtype=np.uint64).astype(t.dtype)))


def cast(v: Value, t: ScalarType) -> ir.Expr:
    if v.weak:
        assert isinstance(v.expr, ir.Const)
        return const(v.expr.value, t)
    if v.type == t:
        return v.expr
    if isinstance(v.expr, ir.Const):
        return const(v.expr.value, t)
    return ir.Cast(t, v.expr)


def weak(value: Number) -> Value:
    return Value(ir.Const(typing_rules.literal_type(value), value), weak=True)


