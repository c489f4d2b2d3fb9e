"""Arguments a device function takes at compile time, as Numba-CUDA device functions take them:
a type (``cuda.shared.array(n, ary_dtype)``), an atomic or another intrinsic
(``binop_func(sm, i, v)`` given ``cuda.atomic.add``), or another device function.

Such an argument has no value at run time: the callee is lowered once per object given, with
the parameter naming that object (as a global would), and the call passes the other arguments.
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any

from hetero import language


@dataclasses.dataclass(frozen=True)
class Bound:
    """A parameter bound to ``value`` at compile time (in a callee's list of argument types)."""

    value: Any

    def __str__(self) -> str:
        """A token for the specialised function's name."""
        name = getattr(self.value, "name", None) or getattr(self.value, "__name__", None) or type(self.value).__name__
        return "s" + re.sub(r"\W", "", str(name))


def bound(obj: Any, is_type: bool) -> Bound | None:
    """``obj`` as a compile-time argument if it is one (``is_type``: the frontend reads it as a cast's type)."""
    if is_type or isinstance(obj, (language.Intrinsic, language.DeviceFunction)) or hasattr(obj, "__hetero_foreign__"):
        return Bound(obj)
    if type(obj).__module__.startswith("numba.") and callable(getattr(obj, "py_func", None)):  # @numba.jit
        return Bound(obj)
    return None
