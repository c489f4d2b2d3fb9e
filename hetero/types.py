"""Kernel types: the scalar types (``hetero.f32``, ``hetero.i64``…) and array types
(``hetero.Array[f32]``) that kernel signatures are written in.

Inside a kernel a scalar type is also a cast: ``f32(i)``. Vocabulary: imports
nothing of the project but :mod:`hetero.dtypes`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from hetero.dtypes import as_dtype
from hetero.errors import UnsupportedDtypeError


@dataclasses.dataclass(frozen=True)
class ScalarType:
    """A scalar type: ``kind`` is ``b`` (bool), ``i`` (signed), ``u`` (unsigned) or ``f`` (float)."""

    name: str
    kind: str
    bits: int

    @property
    def dtype(self) -> np.dtype[Any]:
        return np.dtype(_NUMPY_NAMES[self.name])

    @property
    def is_float(self) -> bool:
        return self.kind == "f"

    @property
    def is_int(self) -> bool:
        return self.kind in "iu"

    @property
    def is_signed(self) -> bool:
        return self.kind in "if"

    def __call__(self, value: Any) -> Any:
        """Outside kernels, a cast of a Python value (``f32(1)``); inside, compiled as a cast."""
        return self.dtype.type(value)

    def __repr__(self) -> str:
        return self.name

    __str__ = __repr__


@dataclasses.dataclass(frozen=True)
class ArrayType:
    """An array parameter type: element type and rank (``None``: any rank, fixed at first call)."""

    dtype: ScalarType
    ndim: int | None = None

    def __repr__(self) -> str:
        if self.ndim is None:
            return f"{self.dtype}[...]"
        return f"{self.dtype}[{', '.join([':'] * self.ndim)}]"

    __str__ = __repr__


bool_t = ScalarType("bool", "b", 8)
i8 = ScalarType("i8", "i", 8)
i16 = ScalarType("i16", "i", 16)
i32 = ScalarType("i32", "i", 32)
i64 = ScalarType("i64", "i", 64)
u8 = ScalarType("u8", "u", 8)
u16 = ScalarType("u16", "u", 16)
u32 = ScalarType("u32", "u", 32)
u64 = ScalarType("u64", "u", 64)
f16 = ScalarType("f16", "f", 16)
f32 = ScalarType("f32", "f", 32)
f64 = ScalarType("f64", "f", 64)

SCALARS: tuple[ScalarType, ...] = (bool_t, i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64)
_NUMPY_NAMES = {
    "bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "f32": "float32", "f64": "float64",
}
_BY_DTYPE = {np.dtype(numpy_name): t for t in SCALARS for name, numpy_name in _NUMPY_NAMES.items() if t.name == name}
BY_NAME = {t.name: t for t in SCALARS}


def scalar_type(spec: Any) -> ScalarType:
    """The ScalarType for a ScalarType, a NumPy dtype or type, or a name (``"f32"``, ``"float32"``)."""
    if isinstance(spec, ScalarType):
        return spec
    if isinstance(spec, str) and spec in BY_NAME:
        return BY_NAME[spec]
    if spec is bool:
        return bool_t
    dtype = as_dtype(spec)
    if dtype.kind == "c":
        raise UnsupportedDtypeError(
            f"{dtype} is not a kernel scalar type: kernels see complex arrays as float arrays of (real, imag) "
            "pairs; pass hetero.array_components.components(x) (shape x.shape + (2,)) to a kernel instead")
    return _BY_DTYPE[dtype]
