"""Feeds: what a caller passes to ``run`` (NumPy arrays, hetero arrays, torch tensors, Python
numbers), checked against the model's inputs before anything runs, and made ready for ONNX Runtime.

No dtype is converted silently: a float64 array for a float32 input is an :class:`InputError`
naming the input and the remedy (``.astype``), because a silent cast changes the answer. Python
lists and scalars carry no dtype and take the input's. Host data stays where it is: a C-contiguous
NumPy array (or a CPU torch tensor's or cpu hetero array's view of its memory) is handed over as
it is, no copy.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from hetero.onnx.errors import InputError
from hetero.onnx.spec import TensorSpec


def is_device_tensor(value: Any) -> bool:
    """Whether ``value`` is a torch tensor in GPU memory (fed through IOBinding, not the host)."""
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor) and value.device.type != "cpu"


def host_array(name: str, value: Any, spec: TensorSpec) -> np.ndarray:
    """``value`` as a NumPy array of ``spec``'s dtype (no conversion of a typed array's dtype)."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(value, torch.Tensor):
        array = value.detach().cpu().numpy()  # on the CPU: a view of the tensor's memory
    elif isinstance(value, np.ndarray):
        array = value
    elif hasattr(value, "__array_namespace__") or hasattr(value, "__array__"):
        array = np.asarray(value)  # a hetero array: a view on cpu, one download from a device
    elif isinstance(value, (list, tuple, int, float, bool)):
        try:
            array = np.asarray(value, dtype=spec.dtype)
        except (TypeError, ValueError, OverflowError) as error:
            raise InputError(f"input {name!r}: cannot make a {spec.dtype.name} array of the given values ({error})",
                             name) from None
    else:
        raise InputError(f"input {name!r} is a {type(value).__name__}; pass a NumPy array, a hetero array, a torch "
                         "tensor or a list", name)
    return array


def check(name: str, dtype: np.dtype, shape: tuple[int, ...], spec: TensorSpec) -> None:
    """Raise InputError when an input of ``dtype`` and ``shape`` does not fit ``spec``."""
    if dtype != spec.dtype:
        raise InputError(f"input {name!r} must be {spec.dtype.name}, got {dtype.name} (convert it: "
                         f"x.astype(numpy.{spec.dtype.name}); hetero.onnx does not cast silently)", name)
    if not spec.accepts(shape):
        raise InputError(f"input {name!r} has shape {list(shape)}, the model takes {spec.describe()} "
                         f"(? is any size)", name)


class Feeds(dict):  # type: ignore[type-arg]
    """Checked feeds (input name -> value); ``on_device``: some value is a GPU tensor (IOBinding)."""

    on_device = False


def prepare(feeds: Mapping[str, Any], inputs: Sequence[TensorSpec]) -> Feeds:
    """Check ``feeds`` against the model's ``inputs``: every name known, none missing, each dtype
    and shape fits. Host values become NumPy arrays; device tensors stay as they are."""
    if type(feeds) is dict and len(feeds) == len(inputs):  # the usual request: C-contiguous arrays that fit
        for spec in inputs:
            value = feeds.get(spec.name)
            if (type(value) is not np.ndarray or value.dtype != spec.dtype or not value.flags.c_contiguous
                    or not spec.accepts(value.shape)):
                break
        else:
            return Feeds(feeds)
    return _prepare(feeds, inputs)


def _prepare(feeds: Mapping[str, Any], inputs: Sequence[TensorSpec]) -> Feeds:
    if not isinstance(feeds, Mapping):
        raise InputError(f"feeds must be a mapping of input name to array, got {type(feeds).__name__} "
                         f"(the model's inputs: {', '.join(s.describe() for s in inputs)})")
    specs = {spec.name: spec for spec in inputs}
    unknown = [name for name in feeds if name not in specs]
    if unknown:
        from hetero.core.errors import did_you_mean

        raise InputError(f"the model has no input {unknown[0]!r}; its inputs: {', '.join(specs)}"
                         + did_you_mean(str(unknown[0]), specs), str(unknown[0]))
    missing = [name for name in specs if name not in feeds]
    if missing:
        raise InputError(f"input {missing[0]!r} is missing; the model takes {', '.join(s.describe() for s in inputs)}",
                         missing[0])
    ready = Feeds()
    for name, value in feeds.items():
        spec = specs[name]
        if is_device_tensor(value):
            torch_dtype = str(value.dtype).removeprefix("torch.")
            try:
                dtype = np.dtype(torch_dtype)
            except TypeError:
                raise InputError(f"input {name!r} is a torch {torch_dtype} tensor, which ONNX Runtime's NumPy "
                                 f"interface cannot describe; the model takes {spec.describe()}", name) from None
            check(name, dtype, tuple(value.shape), spec)
            ready[name] = value
            ready.on_device = True
            continue
        array = host_array(name, value, spec)
        check(name, array.dtype, array.shape, spec)
        ready[name] = np.ascontiguousarray(array)
    return ready


__all__ = ["Feeds", "check", "host_array", "is_device_tensor", "prepare"]
