"""The array API's data type functions that hetero's own modules lack: ``finfo``, ``iinfo`` and
``isdtype`` (2024.12). ``result_type`` and ``can_cast`` are :mod:`hetero.array.promotion`'s.

hetero's dtype objects are NumPy's (``hetero.float32 is numpy.dtype("float32")``), so they
compare equal to NumPy's and hash; the standard's kinds are their NumPy kinds. ``finfo`` of a
complex dtype describes its real and imaginary parts (``finfo(complex64).dtype`` is float32).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.core.errors import ArrayError

#: The standard's kind names and what each holds, as NumPy dtype kinds.
KINDS: dict[str, str] = {
    "bool": "b",
    "signed integer": "i",
    "unsigned integer": "u",
    "integral": "iu",
    "real floating": "f",
    "complex floating": "c",
    "numeric": "iufc",
}


@dataclasses.dataclass(frozen=True)
class FInfo:
    """Machine limits of a floating-point dtype (the standard's ``finfo_object``); plain Python floats."""

    bits: int
    eps: float
    max: float
    min: float
    smallest_normal: float
    dtype: np.dtype[Any]


@dataclasses.dataclass(frozen=True)
class IInfo:
    """Machine limits of an integer dtype (the standard's ``iinfo_object``); plain Python ints."""

    bits: int
    max: int
    min: int
    dtype: np.dtype[Any]


def _dtype(type: Any, what: str) -> np.dtype[Any]:  # noqa: A002 (the standard's parameter name)
    found = getattr(type, "dtype", type)
    return dtypes.as_dtype(found)


def finfo(type: Any, /) -> FInfo:  # noqa: A002 (the standard's parameter name)
    """Limits of a floating-point dtype (real or complex), or of an array's dtype."""
    kind = _dtype(type, "finfo")
    if kind.kind not in "fc":
        raise ArrayError(f"finfo takes a floating-point dtype, got {kind}; for integers use iinfo")
    info = np.finfo(kind)  # of a complex dtype: its parts' (float32 for complex64), as the standard says
    return FInfo(bits=int(info.bits), eps=float(info.eps), max=float(info.max), min=float(info.min),
                 smallest_normal=float(info.smallest_normal), dtype=np.dtype(info.dtype))


def iinfo(type: Any, /) -> IInfo:  # noqa: A002 (the standard's parameter name)
    """Limits of an integer dtype, or of an array's dtype."""
    kind = _dtype(type, "iinfo")
    if kind.kind not in "iu":
        raise ArrayError(f"iinfo takes an integer dtype, got {kind}; for floating point use finfo")
    info = np.iinfo(kind)
    return IInfo(bits=int(info.bits), max=int(info.max), min=int(info.min), dtype=kind)


def isdtype(dtype: Any, kind: Any) -> bool:
    """Whether ``dtype`` is of ``kind``: a dtype, one of the standard's kind names (``"bool"``,
    ``"signed integer"``, ``"unsigned integer"``, ``"integral"``, ``"real floating"``,
    ``"complex floating"``, ``"numeric"``) or a tuple of these (any of them)."""
    if not isinstance(dtype, np.dtype):
        raise TypeError(f"isdtype takes a dtype object (such as hetero.float32), got {type(dtype).__name__}")
    if isinstance(kind, tuple):
        return any(isdtype(dtype, each) for each in kind)
    if isinstance(kind, str):
        if kind not in KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r}; the standard's kinds are {', '.join(map(repr, KINDS))}")
        return dtype.kind in KINDS[kind]
    if isinstance(kind, np.dtype):
        return dtype == kind
    raise TypeError(f"isdtype: kind must be a dtype, a kind name or a tuple of them, got {type(kind).__name__}")


__all__ = ["FInfo", "IInfo", "KINDS", "finfo", "iinfo", "isdtype"]
