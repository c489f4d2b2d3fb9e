"""Kernel types: the scalar types (``hetero.f32``, ``hetero.i64``…) and array types
(``hetero.Array[f32]``) that kernel signatures are written in.

Inside a kernel a scalar type is also a cast: ``f32(i)``. Vocabulary: imports
nothing of the project but :mod:`hetero.core.dtypes`.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from hetero.core.dtypes import as_dtype
from hetero.core.errors import UnsupportedDtypeError


@dataclasses.dataclass(frozen=True)
class ScalarType:
    """A scalar type: ``kind`` is ``b`` (bool), ``i`` (signed), ``u`` (unsigned), ``f`` (float) or
    ``c`` (complex: ``bits`` counts both parts, as NumPy's complex64 does)."""

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
    def is_complex(self) -> bool:
        return self.kind == "c"

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
#: Complex scalars (NumPy's complex64 and complex128). Kernels compute with them through
#: :mod:`hetero.compiler.ir.complex_lowering`, which turns each into its two float parts, so no
#: emitter or device ever sees a complex type.
c64 = ScalarType("c64", "c", 64)
c128 = ScalarType("c128", "c", 128)

SCALARS: tuple[ScalarType, ...] = (bool_t, i8, i16, i32, i64, u8, u16, u32, u64, f16, f32, f64, c64, c128)
_NUMPY_NAMES = {
    "bool": "bool", "i8": "int8", "i16": "int16", "i32": "int32", "i64": "int64",
    "u8": "uint8", "u16": "uint16", "u32": "uint32", "u64": "uint64",
    "f16": "float16", "f32": "float32", "f64": "float64", "c64": "complex64", "c128": "complex128",
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
    if spec is complex:
        return c128
    dtype = as_dtype(spec)
    found = _BY_DTYPE.get(dtype)
    if found is None:
        raise UnsupportedDtypeError(f"{dtype} is not a kernel scalar type (kernels take bool, integers, floats and "
                                    "complex64/complex128)")
    return found


def part_type(t: ScalarType) -> ScalarType:
    """The float type of each part of complex ``t``: f32 for c64, f64 for c128."""
    return f32 if t == c64 else f64


def complex_of(t: ScalarType) -> ScalarType:
    """The complex type whose parts hold float ``t`` (c64 for f16 and f32, c128 for f64)."""
    return c128 if t == f64 else c64
