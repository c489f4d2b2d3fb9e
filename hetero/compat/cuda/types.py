"""Numba's type objects for ``hetero.compat.cuda`` (``numba.cuda.float32``, ``types.void(...)``,
``int32[:, ::1]``), standing for hetero's scalar and array types.

A scalar type casts inside kernels (``float32(0.0)``), names a dtype (``cuda.shared.array(16,
float32)``), is subscripted into an array type (``float32[:]``, ``int32[:, ::1]``) and called
with types into a signature (``void(float32[:], int32)``). Called with a value on the host it
gives the NumPy scalar, as Numba's do.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.core import types as ht
from hetero.core.errors import CompileError


class Type:
    """The base of the type objects here, as ``numba.types.Type`` is Numba's (``isinstance(t, types.Type)``);
    hetero does not take new subclasses of it (Numba's type-extension API)."""


class NumbaType(Type):
    """A Numba scalar type: ``hetero_type`` is the hetero type it stands for."""

    def __init__(self, name: str, hetero_type: ht.ScalarType | None) -> None:
        self.name = name
        self.hetero_type = hetero_type

    @property
    def dtype(self) -> np.dtype[Any]:
        if self.hetero_type is None:
            raise TypeError(f"{self.name} has no dtype")
        return np.dtype(np.bool_) if self.hetero_type == ht.bool_t else self.hetero_type.dtype

    def __getitem__(self, index: Any) -> ArrayT:
        parts = index if isinstance(index, tuple) else (index,)
        if self.hetero_type is None or not all(isinstance(p, slice) for p in parts):
            raise TypeError(f"an array type is written {self.name}[:] or {self.name}[:, ::1]")
        return ArrayT(self, len(parts))

    def __call__(self, *args: Any) -> Any:
        if all(isinstance(a, (NumbaType, ArrayT, CPointerT)) for a in args) and (args or self.hetero_type is None):
            return Signature(self, tuple(args))
        if self.hetero_type is None or len(args) != 1:
            raise TypeError(f"{self.name}(…) takes one value, or argument types to make a signature")
        return self.dtype.type(args[0])

    @property
    def underlying_float(self) -> NumbaType:
        """A complex type's part type (``complex64.underlying_float`` is ``float32``), as Numba's."""
        if self.hetero_type is None or not self.hetero_type.is_complex:
            raise AttributeError(f"{self.name} is not a complex type: it has no underlying_float")
        return float32 if self.name == "complex64" else float64

    def __str__(self) -> str:
        return self.name

    __repr__ = __str__


@dataclasses.dataclass(frozen=True)
class ArrayT(Type):
    """``float32[:, :]``: an array of ``dtype`` with ``ndim`` dimensions (any layout: hetero
    passes contiguous arrays, and copies a strided view into a contiguous one)."""

    element: NumbaType
    ndim: int

    @property
    def hetero_type(self) -> ht.ArrayType:
        assert self.element.hetero_type is not None
        return ht.ArrayType(self.element.hetero_type, self.ndim)

    def __str__(self) -> str:
        return f"array({self.element}, {self.ndim}d)"


@dataclasses.dataclass(frozen=True)
class CPointerT:
    """``types.CPointer(uint8)``: a raw pointer; refused at compile time (see :func:`CPointer`)."""

    element: NumbaType


def CPointer(element: NumbaType) -> CPointerT:
    return CPointerT(element)


@dataclasses.dataclass(frozen=True)
class Signature:
    """``void(float32[:], int32)``: a return type and argument types (``written=False``: the
    argument types alone, as ``"(float32[:], int32)"`` gives them; a kernel returns nothing)."""

    return_type: NumbaType
    args: tuple[Any, ...]
    written: bool = True

    def hetero_types(self, name: str) -> tuple[ht.ScalarType | ht.ArrayType | None, ...]:
        out: list[ht.ScalarType | ht.ArrayType | None] = []
        for arg in self.args:
            if isinstance(arg, CPointerT):
                raise CompileError(f"{name}: raw pointer arguments (CPointer({arg.element})) exist only in CUDA's "
                                   "address space; hetero runs kernels on devices without one. Pass the array itself")
            out.append(arg.hetero_type)
        return tuple(out)


def _scalar(name: str, hetero_name: str) -> NumbaType:
    return NumbaType(name, ht.scalar_type(hetero_name))


boolean = b1 = _scalar("bool", "bool")
int8 = _scalar("int8", "i8")
int16 = _scalar("int16", "i16")
int32 = _scalar("int32", "i32")
int64 = _scalar("int64", "i64")
uint8 = _scalar("uint8", "u8")
uint16 = _scalar("uint16", "u16")
uint32 = _scalar("uint32", "u32")
uint64 = _scalar("uint64", "u64")
float16 = _scalar("float16", "f16")
float32 = _scalar("float32", "f32")
float64 = _scalar("float64", "f64")
complex64 = _scalar("complex64", "c64")
complex128 = _scalar("complex128", "c128")
intp, uintp = int64, uint64
f2, f4, f8 = float16, float32, float64
i1, i2, i4, i8 = int8, int16, int32, int64
u1, u2, u4, u8 = uint8, uint16, uint32, uint64
c8, c16 = complex64, complex128
double = float64
void = none = NumbaType("void", None)

#: Every name ``numba.core.types`` gives a number or a bool (Numba 0.68 on a 64-bit Linux or macOS,
#: where a C ``long`` has 64 bits), so a signature string Numba reads reads the same here;
#: ``tests/test_compat_cuda_signatures.py`` compares each with Numba's own parser.
_NUMBA_NAMES: dict[NumbaType, tuple[str, ...]] = {
    boolean: ("b1", "bool", "bool_", "boolean", "c_bool", "np_bool_", "py_bool"),
    int8: ("c_int8", "char", "i1", "int8", "np_char", "np_int8"),
    int16: ("c_int16", "i2", "int16", "np_int16", "np_short", "short"),
    int32: ("c_int32", "i4", "int32", "intc", "np_int32", "np_intc"),
    int64: ("c_int64", "c_intp", "i8", "int64", "int_", "intp", "long_", "longlong", "np_int64", "np_int_",
            "np_intp", "np_long", "np_longlong", "py_int", "ssize_t"),
    uint8: ("byte", "c_uint8", "np_uchar", "np_uint8", "u1", "uchar", "uint8"),
    uint16: ("c_uint16", "np_uint16", "np_ushort", "u2", "uint16", "ushort"),
    uint32: ("c_uint32", "np_uint32", "np_uintc", "u4", "uint32", "uintc"),
    uint64: ("c_uint64", "c_uintp", "np_uint", "np_uint64", "np_uintp", "np_ulong", "np_ulonglong", "size_t", "u8",
             "uint", "uint64", "uintp", "ulong", "ulonglong"),
    float16: ("c_float16", "f2", "float16", "np_float16"),
    float32: ("c_float32", "f4", "float32", "np_float32", "np_float_"),
    float64: ("c_float64", "double", "f8", "float64", "np_double", "np_float64", "py_float"),
    complex64: ("c8", "complex64", "np_complex64"),
    complex128: ("c16", "complex128", "np_complex128", "py_complex"),
    void: ("none", "void"),
}


class _ArrayMeta(type):
    def __instancecheck__(cls, instance: Any) -> bool:
        return isinstance(instance, ArrayT)

    def __call__(cls, dtype: NumbaType, ndim: int, layout: str = "A") -> ArrayT:  # type: ignore[override]
        if not isinstance(dtype, NumbaType) or dtype.hetero_type is None or not isinstance(ndim, int) or ndim < 1:
            raise TypeError(f"Array(dtype, ndim, layout) takes a scalar type and a number of dimensions, got {dtype}, "
                            f"{ndim}")
        return ArrayT(dtype, ndim)


class Array(metaclass=_ArrayMeta):  # Numba's name: a class, for isinstance(t, types.Array), and its constructor
    """``types.Array(float32, 2, "C")``: an array type (any layout, as :class:`ArrayT`); ``isinstance(t,
    types.Array)`` holds for every array type (``float32[:, :]`` too)."""


BY_NAME: dict[str, Any] = {name: t for t, names in _NUMBA_NAMES.items() for name in names}
BY_NAME.update({"CPointer": CPointer, "Array": Array})


def parse(signature: str | Signature | Sequence[Any], name: str) -> Signature:
    """A signature from Numba's spellings: ``"void(float32[:], int32)"``, ``void(float32[:])``, the
    argument types alone (``"(float32[::1], intp)"``, ``"float32[:], int32"``, a tuple
    ``(int32[:, ::1],)``: a kernel returns nothing), with any type name Numba's signatures take."""
    if isinstance(signature, Signature):
        return signature
    if isinstance(signature, (tuple, list)):
        return Signature(void, tuple(signature), written=False)
    if isinstance(signature, str):
        try:
            value = eval(signature.strip(), {"__builtins__": {}}, dict(BY_NAME))  # names of types only, no builtins
        except Exception as exc:  # noqa: BLE001 - any failure of the text is the user's to fix
            raise CompileError(f"{name}: cannot read the signature {signature!r}: {exc}; write it as Numba does, "
                               "e.g. 'void(float32[:], int32)'") from None
        if isinstance(value, (NumbaType, ArrayT, CPointerT)) and not (isinstance(value, NumbaType)
                                                                      and value.hetero_type is None):
            value = (value,)  # "float32[:]": one argument
        if isinstance(value, tuple) and all(isinstance(v, (NumbaType, ArrayT, CPointerT)) for v in value):
            return Signature(void, value, written=False)
        if isinstance(value, Signature):
            return value
    raise CompileError(f"{name}: {signature!r} is not a signature; write it as Numba does, e.g. 'void(float32[:], int32)'")
