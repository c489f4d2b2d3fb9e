"""The table of lowerings and the decorator that fills it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from torch._ops import OpOverload

Lowering = Callable[..., Any]

#: ATen operation -> the hetero function that computes it (see the package docstring).
LOWERINGS: dict[OpOverload, Lowering] = {}


#: The operations whose lowering takes complex tensors too (every other one refuses them: a
#: lowering written for real tensors would meet complex ones it was never checked against).
TAKES_COMPLEX: set[OpOverload] = set()


class NotLowered(Exception):
    """This call of an ATen operation is not one hetero runs itself (the reason is the message):
    the interpreter runs it in torch on the host."""


def lowers(*ops: OpOverload, complex_too: bool = False) -> Callable[[Lowering], Lowering]:
    """Register the decorated function as the lowering of each of ``ops`` (of complex tensors
    too with ``complex_too``)."""
    def register(function: Lowering) -> Lowering:
        for op in ops:
            LOWERINGS[op] = function
        if complex_too:
            takes_complex(*ops)
        return function
    return register


def takes_complex(*ops: OpOverload) -> None:
    """Mark the already registered lowerings of ``ops`` as right for complex tensors too."""
    for op in ops:
        if op not in LOWERINGS:
            raise KeyError(f"{op} has no lowering to mark as taking complex tensors")
        TAKES_COMPLEX.add(op)


__all__ = ["LOWERINGS", "TAKES_COMPLEX", "Lowering", "NotLowered", "lowers", "takes_complex"]
