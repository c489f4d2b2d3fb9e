"""torch tensors in, torch tensors out: a graph's inputs become hetero arrays on the backend's
device, its outputs become CPU tensors again.

Inputs are copied to the device at each call (``hetero.asarray(..., copy=True)``: the graph's
arrays never share torch's memory, so fusion and launch plans stay on). Parameters and buffers
(a model's tensors that are not activations) are the exception: :class:`ParameterCache` keeps each
one's device copy and uploads it again only when torch's *version counter* says it changed
(every in-place update in torch bumps it: ``opt.step()``, ``load_state_dict``, ``p.add_`` under
``no_grad``) or its storage moved. A write through ``p.data`` is the one change torch does not
count; after one, call :meth:`ParameterCache.clear` (``hetero.torch.refresh(model)``) or
compile with ``options={"cache_parameters": False}``.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np
import torch

import hetero
from hetero.core.device import Device
from hetero.core.errors import ArrayError

#: torch dtypes a graph's tensors may have on a hetero device, and their NumPy dtypes.
DTYPES: dict[torch.dtype, np.dtype[Any]] = {
    torch.float32: np.dtype(np.float32), torch.float64: np.dtype(np.float64), torch.float16: np.dtype(np.float16),
    torch.int64: np.dtype(np.int64), torch.int32: np.dtype(np.int32), torch.int16: np.dtype(np.int16),
    torch.int8: np.dtype(np.int8), torch.uint8: np.dtype(np.uint8), torch.bool: np.dtype(np.bool_),
    torch.complex64: np.dtype(np.complex64), torch.complex128: np.dtype(np.complex128),
}


class TransferError(ArrayError):
    """A tensor cannot travel to a hetero device (its dtype has no hetero equivalent)."""


def host_view(tensor: torch.Tensor) -> np.ndarray:
    """The tensor's values as a NumPy array on the host (a view for a CPU tensor)."""
    if tensor.dtype not in DTYPES:
        raise TransferError(f"a {tensor.dtype} tensor of shape {tuple(tensor.shape)} has no hetero dtype "
                            f"(hetero takes {', '.join(str(d) for d in DTYPES)}); cast it first, e.g. x.float()")
    return tensor.detach().cpu().resolve_conj().resolve_neg().numpy()


def to_device(tensor: torch.Tensor, device: Device) -> hetero.Array:
    """A copy of ``tensor`` on ``device``."""
    values = host_view(tensor)  # not np.ascontiguousarray: it makes a 0-d tensor 1-d
    return hetero.asarray(values if values.flags.c_contiguous else values.copy(order="C"), device=device, copy=True)


def to_torch(array: hetero.Array) -> torch.Tensor:
    """``array``'s values as a new CPU tensor of the same dtype and shape."""
    return torch.from_numpy(np.array(array.numpy(), order="C", copy=True))


class ParameterCache:
    """Device copies of a model's parameters and buffers, refreshed by torch's version counter."""

    def __init__(self, device: Device) -> None:
        self.device = device
        self._lock = threading.Lock()
        #: id(tensor) -> (a weak reference to it, its version and address then, the device copy)
        self._copies: dict[int, tuple[weakref.ref[torch.Tensor], int, int, hetero.Array]] = {}
        self.uploads = 0

    def get(self, tensor: torch.Tensor) -> hetero.Array:
        """The device copy of ``tensor``, uploaded now if it is new or changed since."""
        version, address = tensor._version, tensor.data_ptr()
        with self._lock:
            kept = self._copies.get(id(tensor))
            if kept is not None and kept[0]() is tensor and kept[1] == version and kept[2] == address:
                return kept[3]
        made = to_device(tensor, self.device)
        with self._lock:
            if len(self._copies) > 4096:  # tensors freed since: their entries go (ids are reused)
                self._copies = {k: v for k, v in self._copies.items() if v[0]() is not None}
            self._copies[id(tensor)] = (weakref.ref(tensor), version, address, made)
            self.uploads += 1
        return made

    def clear(self) -> None:
        """Forget every copy: the next call uploads each parameter again."""
        with self._lock:
            self._copies.clear()


class ParameterCaches:
    """One :class:`ParameterCache` per device (a model that follows the guard has copies where it ran)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._caches: dict[str, ParameterCache] = {}

    def on(self, device: Device) -> ParameterCache:
        with self._lock:
            cache = self._caches.get(device.name)
            if cache is None or cache.device is not device:
                cache = self._caches[device.name] = ParameterCache(device)
            return cache

    def clear(self) -> None:
        with self._lock:
            self._caches.clear()


def is_parameter(tensor: Any) -> bool:
    """Whether ``tensor`` is a model's own tensor (a parameter, or a leaf that needs no grad but
    lives in a module: torch.compile passes buffers as plain tensors, so any leaf counts)."""
    return isinstance(tensor, torch.nn.Parameter)


__all__ = ["DTYPES", "ParameterCache", "ParameterCaches", "TransferError", "host_view", "is_parameter", "to_device", "to_torch"]
