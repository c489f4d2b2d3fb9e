"""How :mod:`hetero.checkpoint.store` turns a state tree into a JSON manifest plus binary payloads,
and back.

Each value becomes a manifest node ``{"type": ..., ...}``:

- ``hetero.Array`` -> ``"array"``: host bytes in a payload, with dtype, shape and the device
  (name, backend, kind) it came from; restored onto the device ``load`` is given.
- ``numpy.ndarray`` / NumPy scalar -> ``"numpy"``: host bytes, restored as NumPy (structured
  and sub-array dtypes as their ``descr``, as ``.npy`` headers keep them, fields and padding).
- ``torch.Tensor`` (strided; ``nn.Parameter`` too) -> ``"torch"``: CPU bytes, torch dtype,
  shape, ``requires_grad``; restored as CPU tensors (or onto ``map_location``).
- ``bytes``/``bytearray`` -> ``"bytes"`` payload.
- ``dict``/``OrderedDict`` (module and optimizer ``state_dict()``\\ s included) -> ``"dict"``
  with keys kept as JSON scalars (``str``, ``int``, ``float``, ``bool``, ``None``), so
  optimizer state keyed by int survives; ``list``/``tuple`` -> ``"list"``/``"tuple"``.
- ``None``, ``bool``, ``int``, ``float``, ``str`` -> ``"json"``, inline in the manifest.
- anything else -> ``"pickle"`` payload (``pickle.dumps``). Unpickling runs whatever code
  the file names, and checksums catch corruption, not tampering: ``load`` refuses pickled
  values unless it is given ``allow_pickle=True`` (as ``torch.load(weights_only=True)``
  and ``numpy.load`` do), for checkpoints you trust.

Modules and optimizers themselves are refused: save their ``state_dict()``.
"""

from __future__ import annotations

import collections
import pickle
import reprlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from hetero.core.errors import HeteroError

#: Writes one payload (bytes-like) and returns the file name it went to.
PayloadWriter = Callable[[str, Any], str]
#: Returns the verified bytes of a payload file (a writable buffer).
PayloadReader = Callable[[str], memoryview]

_JSON_SCALARS = (type(None), bool, int, float, str)
#: The deepest state tree a checkpoint may hold: deeper ones are refused by ``save`` and are
#: corrupt to ``load`` (whose decoder recurses, as ``save``'s encoder does).
MAX_DEPTH = 200


class CheckpointError(HeteroError, OSError):
    """A checkpoint could not be written or read (bad value, unwritable directory, corrupt files)."""


class PickleRefusedError(CheckpointError):
    """A valid checkpoint holds pickled values and ``load`` was not given ``allow_pickle=True``."""


def numpy_dtype(node: Mapping[str, Any]) -> np.dtype[Any]:
    """The NumPy dtype of a ``"numpy"``/``"array"`` node (its ``dtype`` string, or the ``descr`` of a
    structured dtype); :class:`CheckpointError` for a dtype that is not plain data."""
    try:
        descr = node.get("descr")
        dtype = _descr_dtype(descr) if descr is not None else np.dtype(node["dtype"])
    except CheckpointError:
        raise
    except (KeyError, TypeError, ValueError, RecursionError) as exc:
        raise CheckpointError(f"not a NumPy dtype: {reprlib.repr(node.get('descr', node.get('dtype')))} "
                              f"({type(exc).__name__})") from None
    if dtype.hasobject:
        raise CheckpointError(f"dtype {dtype} holds Python objects")
    return dtype


def _descr_dtype(descr: Any) -> np.dtype[Any]:
    # JSON turned the descr's tuples into lists: np.lib.format.descr_to_dtype wants them back.
    def fields(value: Any) -> Any:
        if isinstance(value, str):
            return value
        if not isinstance(value, list):
            raise TypeError(f"{value!r} is not a descr")
        out = []
        for field in value:
            if not isinstance(field, list) or len(field) not in (2, 3):
                raise TypeError(f"{field!r} is not a descr field")
            name = tuple(field[0]) if isinstance(field[0], list) else field[0]
            rest = [fields(field[1])] + ([tuple(field[2])] if len(field) == 3 else [])
            out.append((name, *rest))
        return out

    return np.dtype(np.lib.format.descr_to_dtype(fields(descr)))


def encode(state: Mapping[str, Any], write: PayloadWriter) -> dict[str, Any]:
    """The manifest tree of ``state`` (a mapping with str keys); payloads go through ``write``."""
    if not isinstance(state, Mapping):
        raise CheckpointError(
            f"hetero.checkpoint.store.save: state must be a mapping of names to values (e.g. "
            f"{{'model': model.state_dict(), 'step': 3}}), got {type(state).__name__}")
    for key in state:
        if not isinstance(key, str):
            raise CheckpointError(f"hetero.checkpoint.store.save: top-level key {key!r} is a {type(key).__name__}; "
                                  f"use str names at the top level of the state")
    return _encode(state, "state", write)


def _encode(value: Any, where: str, write: PayloadWriter, depth: int = 1) -> dict[str, Any]:
    from hetero.array.ndarray import Array

    if depth > MAX_DEPTH:
        raise CheckpointError(f"hetero.checkpoint.store.save: {where} is nested deeper than {MAX_DEPTH} levels; "
                              f"flatten the state (or save that part as bytes)")
    torch = sys.modules.get("torch")
    if isinstance(value, _JSON_SCALARS):
        return {"type": "json", "value": value}
    if isinstance(value, Array):
        host = _contiguous(value._host())  # hetero's own read: on cpu it must not mark the array shared with NumPy
        info = value.device.info
        return {"type": "array", "file": write(where, host), "dtype": host.dtype.str, "shape": list(host.shape),
                "device": info.name, "backend": info.backend, "kind": str(info.kind)}
    if isinstance(value, (np.ndarray, np.generic)):
        host = _contiguous(value)
        if host.dtype.hasobject:
            raise CheckpointError(f"hetero.checkpoint.store.save: {where} is a NumPy array of Python objects; "
                                  f"convert it to a numeric dtype, or to a list, before saving")
        if host.dtype.fields is None and host.dtype.subdtype is None:
            return {"type": "numpy", "file": write(where, host), "dtype": host.dtype.str, "shape": list(host.shape),
                    "scalar": isinstance(value, np.generic)}
        # Structured and sub-array dtypes do not survive dtype.str: their descr does, as in .npy headers.
        return {"type": "numpy", "file": write(where, host), "descr": np.lib.format.dtype_to_descr(host.dtype),
                "shape": list(host.shape), "scalar": isinstance(value, np.generic)}
    if torch is not None and isinstance(value, torch.Tensor):
        return _encode_tensor(torch, value, where, write)
    if isinstance(value, (bytes, bytearray)):
        return {"type": "bytes", "file": write(where, bytes(value))}
    if isinstance(value, Mapping):
        keys, values = [], []
        for key, item in value.items():
            if not isinstance(key, _JSON_SCALARS):
                raise CheckpointError(f"hetero.checkpoint.store.save: {where} has key {key!r} of type {type(key).__name__}; "
                                      f"use str, int, float, bool or None keys")
            keys.append(key)
            values.append(_encode(item, f"{where}[{key!r}]", write, depth + 1))
        return {"type": "dict", "ordered": isinstance(value, collections.OrderedDict), "keys": keys, "values": values}
    if isinstance(value, (list, tuple)) and type(value) in (list, tuple):
        return {"type": type(value).__name__, "items": [_encode(item, f"{where}[{i}]", write, depth + 1)
                                              for i, item in enumerate(value)]}
    if torch is not None and isinstance(value, (torch.nn.Module, torch.optim.Optimizer)):
        raise CheckpointError(f"hetero.checkpoint.store.save: {where} is a {type(value).__name__}; "
                              f"save its state_dict() instead and load it back with load_state_dict()")
    try:
        blob = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception as exc:
        raise CheckpointError(
            f"hetero.checkpoint.store.save: {where} is a {type(value).__name__}, which is neither an array, a tensor, "
            f"a container nor a plain value, and cannot be pickled ({exc}); convert it to one of those, "
            f"or leave it out of the state") from exc
    return {"type": "pickle", "file": write(where, blob), "class": f"{type(value).__module__}.{type(value).__qualname__}"}


def _contiguous(value: Any) -> np.ndarray:
    # np.ascontiguousarray would turn a 0-d array into shape (1,).
    host = np.asarray(value)
    return host if host.flags.c_contiguous else host.copy(order="C")


def _encode_tensor(torch: Any, value: Any, where: str, write: PayloadWriter) -> dict[str, Any]:
    if value.layout != torch.strided or value.is_quantized:
        raise CheckpointError(f"hetero.checkpoint.store.save: {where} is a {value.layout} tensor; "
                              f"convert it with .to_dense() (or dequantize()) before saving")
    host = value.detach().to("cpu").contiguous()
    raw = host.reshape(-1).view(torch.uint8).numpy() if host.numel() else b""
    return {"type": "torch", "file": write(where, raw), "dtype": str(host.dtype).removeprefix("torch."),
            "shape": list(host.shape), "device": str(value.device), "requires_grad": bool(value.requires_grad),
            "parameter": isinstance(value, torch.nn.Parameter)}


class Decoder:
    """Rebuilds values from manifest nodes. The target device is resolved on the first
    hetero array only, so checkpoints without one open no backend."""

    def __init__(self, read: PayloadReader, device: Any = None, map_location: Any = None,
                 allow_pickle: bool = False, source: str = "the checkpoint") -> None:
        self._read = read
        self._allow_pickle = allow_pickle
        self._source = source
        self._device_spec = device
        self._device: Any = None
        self._map_location = map_location

    def decode(self, node: Mapping[str, Any], where: str = "state") -> Any:
        kind = node.get("type")
        if kind == "json":
            return node["value"]
        if kind == "dict":
            keys, values = node["keys"], node["values"]
            if len(keys) != len(values):
                raise CheckpointError(f"{where}: {len(keys)} keys but {len(values)} values")
            pairs = [(key, self.decode(item, f"{where}[{key!r}]")) for key, item in zip(keys, values)]
            return collections.OrderedDict(pairs) if node.get("ordered") else dict(pairs)
        if kind in ("list", "tuple"):
            items = [self.decode(item, f"{where}[{i}]") for i, item in enumerate(node["items"])]
            return items if kind == "list" else tuple(items)
        if kind == "numpy":
            host = self._host(node, where)
            return host[()] if node.get("scalar") else host
        if kind == "array":
            return self._array(node, where)
        if kind == "torch":
            return self._tensor(node)
        if kind == "bytes":
            return bytes(self._read(node["file"]))
        if kind == "pickle":
            if not self._allow_pickle:
                raise PickleRefusedError(
                    f"{self._source}: {where} was saved pickled (a {str(node.get('class') or 'Python object')[:200]}); "
                    f"unpickling runs whatever code the file names, so hetero.checkpoint.store.load refuses it. "
                    f"If you trust this checkpoint, load it with allow_pickle=True; or save that value as "
                    f"arrays, bytes or plain values instead")
            return pickle.loads(self._read(node["file"]))
        raise CheckpointError(f"{where}: unknown value type {kind!r} (written by a newer hetero? upgrade hetero)")

    def _host(self, node: Mapping[str, Any], where: str) -> np.ndarray:
        data = self._read(node["file"])
        dtype, shape = numpy_dtype(node), tuple(node["shape"])
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if len(data) != expected:
            raise CheckpointError(f"{where}: payload {node['file']} has {len(data)} bytes, "
                                  f"but a {dtype} array of shape {shape} needs {expected}")
        return np.frombuffer(data, dtype=dtype).reshape(shape) if expected else np.empty(shape, dtype)

    def _array(self, node: Mapping[str, Any], where: str) -> Any:
        from hetero.array.ndarray import asarray  # the codec reads plain checkpoints without loading devices
        from hetero.core.named_device import device  # a name the user gave load(): refused while quarantined

        if self._device is None:
            self._device = device(self._device_spec)
        return asarray(self._host(node, where), device=self._device)

    def _tensor(self, node: Mapping[str, Any]) -> Any:
        from hetero.core.optional import require

        torch = require("torch", extra="torch", feature="loading a checkpoint that holds torch tensors")

        dtype = getattr(torch, str(node["dtype"]), None)
        if not isinstance(dtype, torch.dtype):
            raise CheckpointError(f"{node['dtype']!r} is not a torch dtype (written by a newer torch? upgrade torch)")
        data = self._read(node["file"])
        shape = tuple(node["shape"])
        expected = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if len(data) != expected:
            raise CheckpointError(f"payload {node['file']} has {len(data)} bytes, but a {dtype} tensor of "
                                  f"shape {shape} needs {expected}")
        if len(data):
            tensor = torch.frombuffer(data, dtype=torch.uint8).view(dtype).reshape(shape)
        else:
            tensor = torch.empty(shape, dtype=dtype)
        if self._map_location is not None:
            tensor = tensor.to(self._map_location)
        if node.get("parameter"):
            return torch.nn.Parameter(tensor, requires_grad=bool(node.get("requires_grad")))
        if node.get("requires_grad") and tensor.is_floating_point():
            tensor.requires_grad_(True)
        return tensor
