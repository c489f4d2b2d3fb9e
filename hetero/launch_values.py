"""What a launch passes to the compiled kernel, made by one generated function per specialization.

A specialization's plan (:class:`hetero.kernels.Specialization`) says, per kernel parameter,
which argument it comes from and how: an array's buffer, one of its shape's extents, or a
scalar through its checking converter. Walking that plan on every launch cost a loop, a tuple
unpack and a branch per parameter; :func:`values_builder` writes the walk out once as straight
code (hetero's own text, from the plan alone: nothing a user or a file supplies is executed),
so a launch makes its list of values in one call.
"""

from __future__ import annotations

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


def values_builder(plan: Sequence[PlanEntry], host: bool) -> Callable[[Sequence[Any]], list[Any]]:
    """A function ``args -> [value per kernel parameter]`` doing what the plan says."""
    scope: dict[str, Any] = {"_array_value": array_value, "_host": host}
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
            items.append(f"c{number}({name})")
    lines = ["def values(args):"]
    lines += [f"    {name} = args[{position}]" for position, name in used.items()]
    lines.append(f"    return [{', '.join(items)}]")
    exec(compile("\n".join(lines), "<hetero launch values>", "exec"), scope)  # noqa: S102 - hetero's own text
    return scope["values"]  # type: ignore[no-any-return]
