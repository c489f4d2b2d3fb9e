"""What a launch passes to the compiled kernel, made by one generated function per specialization.

A specialization's plan (:class:`hetero.kernels.kernel.Specialization`) says, per kernel parameter,
which argument it comes from and how: an array's buffer, one of its shape's extents, or a
scalar through its checking converter. Walking that plan on every launch cost a loop, a tuple
unpack and a branch per parameter; :func:`values_builder` writes the walk out once as straight
code (hetero's own text, from the plan alone: nothing a user or a file supplies is executed),
so a launch makes its list of values in one call. :func:`key_builder` does the same for a
launch's dispatch key (the kernel's parameter count known, the loop over the arguments is
written out).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

#: One plan entry: (kind, argument position, shape axis, NumPy dtype of an array or a scalar's converter).
PlanEntry = tuple[str, int, int, Any]


def array_value(array: Any, dtype: np.dtype[Any], host: bool) -> Any:
    """An array's launch value the long way: its buffer, or for an empty array a stand-in
    (an empty NumPy array on host-memory devices, where the kernel reads its shape; else None)."""
    if array.nbytes:
        return array._kernel_arg()
    return np.empty(array.shape, dtype) if host else None


def _value_items(plan: Sequence[PlanEntry], host: bool, scope: dict[str, Any]) -> tuple[dict[int, str], list[str]]:
    """The argument names used and one expression per kernel parameter (names bound in ``scope``)."""
    scope.update(_array_value=array_value, _host=host)
    used: dict[int, str] = {}
    items: list[str] = []
    for number, (kind, position, axis, how) in enumerate(plan):
        name = used.setdefault(position, f"a{position}")
        if kind == "array":
            scope[f"t{number}"] = how
            # a launched array's value is made once (Array._kernel_arg) and kept: read it directly
            items.append(f"({name}._karg if {name}._karg is not None and {name}.nbytes "
                         f"else _array_value({name}, t{number}, _host))")
        elif kind == "shape":
            items.append(f"{name}.shape[{int(axis)}]")
        else:
            scope[f"c{number}"] = how
            own = getattr(how, "own", None)  # a value of the parameter's own NumPy type passes as it is
            if own is not None:
                scope[f"o{number}"] = own
                items.append(f"({name} if type({name}) is o{number} else c{number}({name}))")
            else:
                items.append(f"c{number}({name})")
    return used, items


def _compiled(lines: list[str], scope: dict[str, Any], name: str) -> Any:
    exec(compile("\n".join(lines), f"<hetero launch {name}>", "exec"), scope)  # noqa: S102 - hetero's own text
    return scope[name]


def values_builder(plan: Sequence[PlanEntry], host: bool,
                   fixed: dict[int, Any] | None = None) -> Callable[[Sequence[Any]], list[Any]]:
    """A function ``args -> [value per kernel parameter]`` doing what the plan says. ``fixed``:
    scalar arguments (by position) that are the same at every call, converted once here and
    passed as constants (``args`` still holds a placeholder at their positions)."""
    scope: dict[str, Any] = {}
    used, items = _value_items(plan, host, scope)
    for number, (kind, position, _, how) in enumerate(plan):
        if fixed is not None and position in fixed and kind == "scalar":
            scope[f"f{number}"] = how(fixed[position])
            items[number] = f"f{number}"
    read = set(re.findall(r"\ba\d+\b", " ".join(items)))  # the arguments still read (not all fixed)
    used = {position: name for position, name in used.items() if name in read}
    lines = ["def values(args):"]
    lines += [f"    {name} = args[{position}]" for position, name in used.items()]
    lines.append(f"    return [{', '.join(items)}]")
    return _compiled(lines, scope, "values")  # type: ignore[no-any-return]


def matcher_builder(key: tuple[Any, ...], plan: Sequence[PlanEntry], host: bool,
                    array_type: type) -> Callable[[Sequence[Any]], list[Any] | None]:
    """A function ``args -> values`` for launches whose dispatch key is ``key`` (the values as
    :func:`values_builder` makes them), and None for any other arguments: the check and the
    values of a launcher's usual specialization in one call, without building the key. An
    array matches by its ``_key`` (the same object, or an equal one); any other argument by its type."""
    scope: dict[str, Any] = {"_Array": array_type}
    _, items = _value_items(plan, host, scope)
    names = [f"a{i}" for i in range(len(key))]
    tests: list[str] = []
    for i, part in enumerate(key):
        scope[f"k{i}"] = part
        if type(part) is tuple:  # an array's key
            tests.append(f"type(a{i}) is _Array and (a{i}._key is k{i} or a{i}._key == k{i})")
        else:
            tests.append(f"type(a{i}) is k{i}")
    lines = ["def match(args):",
             f"    if len(args) != {len(key)}:",
             "        return None"]
    if names:
        lines.append(f"    {', '.join(names)}, = args")
        lines.append(f"    if not ({' and '.join(tests)}):")
        lines.append("        return None")
    lines.append(f"    return [{', '.join(items)}]")
    return _compiled(lines, scope, "match")  # type: ignore[no-any-return]


def generic_key(args: Sequence[Any], array_type: type) -> tuple[Any, ...]:
    """A launch's dispatch key: each array's ``_key`` (dtype, layout, device), each other argument's type."""
    return tuple([a._key if type(a) is array_type else type(a) for a in args])


def key_builder(count: int, array_type: type) -> Callable[[Sequence[Any]], tuple[Any, ...]]:
    """A function ``args -> dispatch key`` (:func:`generic_key`) written out for ``count``
    arguments; other counts take the generic loop (and meet the kernel's own arity error)."""
    if not 0 < count <= 32:
        return lambda args: generic_key(args, array_type)
    names = [f"a{i}" for i in range(count)]
    lines = ["def key(args):",
             f"    if len(args) != {count}:",
             "        return _generic(args, _Array)",
             f"    {', '.join(names)}, = args",
             "    return (" + " ".join(f"{n}._key if type({n}) is _Array else type({n})," for n in names) + ")"]
    scope: dict[str, Any] = {"_Array": array_type, "_generic": generic_key}
    return _compiled(lines, scope, "key")  # type: ignore[no-any-return]
