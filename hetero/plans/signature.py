"""What a jitted function's call is keyed by: its arguments flattened into leaves, and each
leaf's part of the signature.

Arguments may nest in tuples, lists and dicts (a model's parameters); their leaves are hetero
arrays, Python scalars and other hashable values. A plan is recorded per *signature*:

- an array by its shape, dtype, device, layout (strides and offset of a view) and which earlier
  argument's memory it shares (so ``f(x, x)`` and ``f(x, y)`` are different plans);
- a Python scalar (bool, int, float, complex) by its type **and value**: a scalar is a constant
  of the plan, so a function called with a new scalar value is traced again (pass a 0-d array
  for a value that changes at every call, such as a learning-rate schedule);
- any other hashable value (None, a string, an enum) by its value.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from hetero.array.ndarray import Array
from hetero.plans.errors import JitError

#: How a nested argument is put back together: ("leaf",), ("tuple"|"list", [children]), ("dict", keys, [children]).
TreeDef = tuple[Any, ...]
_LEAF: TreeDef = ("leaf",)


def flatten(value: Any, leaves: list[Any]) -> TreeDef:
    """Append ``value``'s leaves to ``leaves``; return how to rebuild it (:func:`unflatten`)."""
    kind = type(value)
    if kind is tuple or kind is list:
        return (kind.__name__, tuple(flatten(item, leaves) for item in value))
    if kind is dict:
        keys = tuple(value)
        return ("dict", keys, tuple(flatten(value[key], leaves) for key in keys))
    leaves.append(value)
    return _LEAF


def unflatten(tree: TreeDef, leaves: Sequence[Any], at: int = 0) -> tuple[Any, int]:
    """The value :func:`flatten` described, its leaves taken from ``leaves[at:]``; and the next index."""
    kind = tree[0]
    if kind == "leaf":
        return leaves[at], at + 1
    if kind == "dict":
        built: dict[Any, Any] = {}
        for key, child in zip(tree[1], tree[2], strict=True):
            built[key], at = unflatten(child, leaves, at)
        return built, at
    items = []
    for child in tree[1]:
        item, at = unflatten(child, leaves, at)
        items.append(item)
    return (tuple(items) if kind == "tuple" else items), at


def root(array: Array) -> Array:
    """The array owning ``array``'s buffer (itself for an owner)."""
    return array._base if array._base is not None else array


def leaf_key(leaf: Any, position: int, owners: dict[int, int], name: str) -> Hashable:
    """``leaf``'s part of the signature (see the module docstring); ``owners`` maps each array
    buffer seen so far to the position of the first leaf holding it."""
    kind = type(leaf)
    if kind is Array or isinstance(leaf, Array):
        owner = root(leaf)
        shared = owners.setdefault(id(owner), position)
        # the runtime object too: after hetero.core.registry.reset() a device of the same name is a new one
        return ("array", leaf.shape, leaf.dtype, leaf._device.name, id(leaf._device.runtime), leaf._strides,
                leaf.offset, owner.shape, owner.dtype, shared)
    if kind is float:
        return (float, leaf.hex())  # -0.0 and 0.0 differ; every NaN is one key
    if kind is bool or kind is int or kind is complex or kind is str or leaf is None:
        return (kind, leaf)
    try:
        hash(leaf)
    except TypeError:
        hint = (" (a NumPy array: make it a hetero array first, hetero.asarray(..., device=...))"
                if type(leaf).__module__ == "numpy" else "")
        raise JitError(f"hetero.jit: {name}() got an argument of type {kind.__name__}{hint}, which is neither a "
                       f"hetero array, a Python scalar nor hashable; pass arrays and scalars (in tuples, lists "
                       f"and dicts), or close over the value") from None
    return (kind, leaf)


def signature(leaves: Sequence[Any], name: str) -> tuple[Hashable, ...]:
    """The signature of a call whose flattened arguments are ``leaves``."""
    owners: dict[int, int] = {}
    return tuple(leaf_key(leaf, position, owners, name) for position, leaf in enumerate(leaves))


__all__ = ["TreeDef", "flatten", "leaf_key", "root", "signature", "unflatten"]
