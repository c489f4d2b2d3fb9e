"""torch's type promotion where it differs from the array API's, so a lowering can take a call
only where both give the same dtype.

torch lets a 0-d tensor or a Python number take the dtype of a dimensioned tensor of the same
kind (``float32_matrix * float64_scalar_tensor`` is float32), where the array API promotes both
to the wider type; across kinds (an int tensor and a float) torch promotes to its default float,
which the array API does not define. :func:`operands` casts a 0-d array of the same kind to the
dimensioned one's dtype, lets a Python number of a narrower kind join a tensor (``x * 2`` on
floats: the tensor's dtype in both), and refuses (:class:`NotLowered`) any other mix of kinds.
"""

from __future__ import annotations

from typing import Any

import hetero
import hetero.xp as xp
from hetero.torch.backend.lowerings.registry import NotLowered

_KINDS = {"b": 0, "u": 1, "i": 1, "f": 2, "c": 3}


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


def operands(a: Any, b: Any) -> tuple[Any, Any]:
    """``a`` and ``b`` ready for an array-API binary operation giving torch's dtype."""
    ka, kb = kind(a), kind(b)
    scalar_a, scalar_b = not isinstance(a, hetero.Array), not isinstance(b, hetero.Array)
    if ka != kb and (scalar_a or scalar_b) and 0 < min(ka, kb) and (kb if scalar_b else ka) < (ka if scalar_b else kb):
        return a, b  # a Python number of a narrower kind (an int with a float tensor): the tensor's dtype in both
    if ka != kb:
        raise NotLowered(f"mixes {_name(a)} and {_name(b)}: torch promotes across kinds, the array API does not")
    if isinstance(a, hetero.Array) and isinstance(b, hetero.Array) and a.dtype != b.dtype:
        if a.ndim == 0 and b.ndim > 0:
            a = xp.astype(a, b.dtype)
        elif b.ndim == 0 and a.ndim > 0:
            b = xp.astype(b, a.dtype)
    return a, b


def _name(x: Any) -> str:
    return f"a {x.dtype} tensor" if isinstance(x, hetero.Array) else f"a Python {type(x).__name__}"


__all__ = ["kind", "operands"]
