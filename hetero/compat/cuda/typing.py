"""``numba.cuda.typing`` for ``hetero.compat.cuda``: ``signature(return_type, *arg_types)``, the
signature object ``@cuda.jit`` and ``declare_device`` take (as ``return_type(*arg_types)`` makes)."""

from __future__ import annotations

from typing import Any

from hetero.compat.cuda import types as nbtypes


def signature(return_type: nbtypes.NumbaType, *args: Any) -> nbtypes.Signature:
    """``signature(void, float32[:], int32)``, the same as ``void(float32[:], int32)``."""
    if not isinstance(return_type, nbtypes.NumbaType):
        raise TypeError(f"signature: the return type must be a Numba scalar type or void, got {return_type!r}")
    return nbtypes.Signature(return_type, tuple(args))
