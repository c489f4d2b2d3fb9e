"""The table of lowerings and the decorator that fills it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch._ops import OpOverload

Lowering = Callable[..., Any]

#: ATen operation -> the hetero function that computes it (see the package docstring).
LOWERINGS: dict[OpOverload, Lowering] = {}


class NotLowered(Exception):
    """This call of an ATen operation is not one hetero runs itself (the reason is the message):
    the interpreter runs it in torch on the host."""


def lowers(*ops: OpOverload) -> Callable[[Lowering], Lowering]:
    """Register the decorated function as the lowering of each of ``ops``."""
    def register(function: Lowering) -> Lowering:
        for op in ops:
            LOWERINGS[op] = function
        return function
    return register


__all__ = ["LOWERINGS", "Lowering", "NotLowered", "lowers"]
