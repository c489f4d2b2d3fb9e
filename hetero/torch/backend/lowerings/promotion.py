"""torch's type promotion, so a lowering computes in the dtype torch computes in.

torch lets a 0-d tensor or a Python number take the dtype of a dimensioned tensor of the same
kind (``float32_matrix * float64_scalar_tensor`` is float32), where the array API promotes both
to the wider type; across kinds (an int tensor and a float) torch promotes to its default float,
which the array API does not define. :func:`result_dtype` asks torch itself
(``torch.result_type`` on an empty stand-in of each operand: only the dtype and whether it is
0-d count), and :func:`operands` casts each array operand to that dtype first, which is what
torch's kernels do (they compute in the promoted dtype). A Python number stays a number: it is of
the result's kind or a narrower one, and the array API converts it to the array's dtype as torch
does.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np
import torch

import hetero
import hetero.xp as xp
from hetero.torch.backend.lowerings.registry import NotLowered
from hetero.torch.backend.transfer import DTYPES

_KINDS = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}
_TORCH = {v: k for k, v in DTYPES.items()}


def kind(x: Any) -> int:
    """0 bool, 1 integer, 2 float, 3 complex: of an array's dtype or a Python number."""
    if isinstance(x, hetero.Array):
        return _KINDS[x.dtype.kind]
    if isinstance(x, bool):
        return 0
    if isinstance(x, int):
        return 1
    if isinstance(x, float):
        return 2
    raise NotLowered(f"an operand of type {type(x).__name__}")


def _key(x: Any) -> tuple[Any, str]:
    """What torch's promotion sees of ``x``: its dtype and "0-d" or "n-d", or its Python type and "number"."""
    kind(x)  # refuses what is neither an array nor a bool, int or float
    if isinstance(x, hetero.Array):
        return x.dtype, "0-d" if x.ndim == 0 else "n-d"
    return type(x), "number"  # not the value: torch promotes by the type alone


@functools.lru_cache(maxsize=256)
def _result(a: tuple[Any, str], b: tuple[Any, str]) -> np.dtype[Any]:
    def stand_in(key: tuple[Any, str]) -> Any:
        what, form = key
        if form == "number":  # (np.dtype("int64") == int holds: the form, not the type, tells them apart)
            return what(0)
        if what not in _TORCH:
            raise NotLowered(f"a {what} tensor")
        return torch.empty(() if form == "0-d" else (0,), dtype=_TORCH[what])
    made = torch.result_type(stand_in(a), stand_in(b))
    if made not in DTYPES:
        raise NotLowered(f"torch promotes {a[0]} and {b[0]} to {made} (no hetero dtype)")
    return DTYPES[made]


def result_dtype(a: Any, b: Any) -> np.dtype[Any]:
    """The dtype torch computes ``a op b`` in (``torch.result_type``), as NumPy's dtype."""
    return _result(_key(a), _key(b))


def default_float() -> np.dtype[Any]:
    """torch's default float dtype (what an integer tensor's true division or ``exp`` gives)."""
    return DTYPES[torch.get_default_dtype()]


def cast(x: Any, dtype: np.dtype[Any]) -> Any:
    """An array operand in ``dtype``; a Python number as it is (the array API converts it)."""
    if isinstance(x, hetero.Array) and x.dtype != dtype:
        return xp.astype(x, dtype)
    return x


def operands(a: Any, b: Any) -> tuple[Any, Any]:
    """``a`` and ``b`` ready for an array-API binary operation giving torch's dtype."""
    dtype = result_dtype(a, b)
    return cast(a, dtype), cast(b, dtype)


__all__ = ["cast", "default_float", "kind", "operands", "result_dtype"]
