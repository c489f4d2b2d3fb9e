"""What a model takes and gives: a name, a NumPy dtype and a shape whose unknown dimensions are None.

An output may also be a value that is not a numeric tensor: a sequence of maps (skl2onnx's
``ZipMap``, one ``{label: probability}`` per row), a map, a sequence, a string tensor. Its spec keeps
ONNX Runtime's type string in ``onnx_type``; the session returns what ONNX Runtime gives for it (a
list of dicts, a dict, a list, an array of str). Inputs must be numeric tensors: hetero feeds those.
"""

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
    """One model input or output. ``shape``: an int per fixed dimension, None per free one (batch).
    ``onnx_type``: ONNX Runtime's type string of an output that is not a numeric tensor
    (``seq(map(int64,tensor(float)))``; its dtype is then ``object`` and its shape ``()``), else None."""

    name: str
    dtype: np.dtype
    shape: tuple[int | None, ...]
    onnx_type: str | None = None

    @property
    def is_tensor(self) -> bool:
        """Whether the value is a numeric tensor (the kind hetero feeds and KServe sends as numbers)."""
        return self.onnx_type is None

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
        if self.onnx_type is not None:
            return f"{self.name}: {self.onnx_type}"
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name}: {self.dtype.name}[{dims}]"


def from_node_arg(arg: object, output: bool = False) -> TensorSpec:
    """A TensorSpec of an ONNX Runtime ``NodeArg`` (symbolic and unknown dimensions become None).
    An ``output`` may be any type (a non-numeric one keeps its type string); an input must be a
    numeric tensor."""
    type_name = str(getattr(arg, "type"))
    dtype = ORT_TYPES.get(type_name)
    if dtype is None and output:
        return TensorSpec(str(getattr(arg, "name")), np.dtype(object), (), type_name)
    if dtype is None:
        raise TypeError(f"model input {getattr(arg, 'name')!r} has type {type_name}, which hetero.onnx cannot feed "
                        f"(supported: {', '.join(sorted(ORT_TYPES))})")
    shape = tuple(d if isinstance(d, int) and d >= 0 else None for d in getattr(arg, "shape") or ())
    return TensorSpec(str(getattr(arg, "name")), dtype, shape)


__all__ = ["ORT_TYPES", "TensorSpec", "from_node_arg"]
