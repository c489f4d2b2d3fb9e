"""What a model takes and gives: a name, a NumPy dtype and a shape whose unknown dimensions are None."""

from __future__ import annotations

import dataclasses
import functools

import numpy as np

#: ONNX Runtime's type strings (``NodeArg.type``) -> NumPy dtypes; the tensor types a feed can carry.
ORT_TYPES: dict[str, np.dtype] = {
    f"tensor({name})": np.dtype(dtype) for name, dtype in (
        ("float", "float32"), ("double", "float64"), ("float16", "float16"), ("int8", "int8"), ("int16", "int16"),
        ("int32", "int32"), ("int64", "int64"), ("uint8", "uint8"), ("uint16", "uint16"), ("uint32", "uint32"),
        ("uint64", "uint64"), ("bool", "bool"))
}


@dataclasses.dataclass(frozen=True)
class TensorSpec:
    """One model input or output. ``shape``: an int per fixed dimension, None per free one (batch)."""

    name: str
    dtype: np.dtype
    shape: tuple[int | None, ...]

    @functools.cached_property
    def _fixed(self) -> tuple[tuple[int, int], ...]:
        return tuple((axis, size) for axis, size in enumerate(self.shape) if size is not None)

    def accepts(self, shape: tuple[int, ...]) -> bool:
        """Whether an array of ``shape`` fits (same rank, each fixed dimension equal)."""
        if len(shape) != len(self.shape):
            return False
        for axis, size in self._fixed:
            if shape[axis] != size:
                return False
        return True

    def describe(self) -> str:
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {self.dtype.name}[{dims}]"


def from_node_arg(arg: object) -> TensorSpec:
    """A TensorSpec of an ONNX Runtime ``NodeArg`` (symbolic and unknown dimensions become None)."""
    type_name = str(getattr(arg, "type"))
    dtype = ORT_TYPES.get(type_name)
    if dtype is None:
        raise TypeError(f"model tensor {getattr(arg, 'name')!r} has type {type_name}, which hetero.onnx cannot feed "
                        f"(supported: {', '.join(sorted(ORT_TYPES))})")
    shape = tuple(d if isinstance(d, int) and d >= 0 else None for d in getattr(arg, "shape") or ())
    return TensorSpec(str(getattr(arg, "name")), dtype, shape)


__all__ = ["ORT_TYPES", "TensorSpec", "from_node_arg"]
