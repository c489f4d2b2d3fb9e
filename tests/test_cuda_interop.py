"""Interop of CuPy-device arrays without a GPU: ``__cuda_array_interface__`` comes from the CuPy
view of the buffer (and is absent, for ``hasattr``, on other devices); DLPack device types;
adopting a producer's array. Pointer equality with torch on a real GPU: benchmarks/gpu_check.py."""

from __future__ import annotations

import types
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.array.ndarray import Array
from hetero.core.device import Device


class View:
    """What CuPy's ndarray exposes for a buffer (the interface dict of CAI v3)."""

    def __init__(self, ptr: int, shape: tuple[int, ...], dtype: np.dtype[Any]) -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": dtype.str, "data": (ptr, False),
                                         "version": 3, "strides": None, "stream": 1}


def cupy_device(monkeypatch: pytest.MonkeyPatch, backend: str = "cuda") -> Device:
    from test_cuda_errors import make_runtime

    runtime = make_runtime(backend)
    monkeypatch.setattr(runtime, "native_view", lambda buffer, shape, dtype: View(buffer.ptr, shape, dtype))
    return Device(runtime.info, runtime)


def test_cuda_arrays_expose_the_cuda_array_interface(monkeypatch: pytest.MonkeyPatch) -> None:
    device = cupy_device(monkeypatch)
    array = Array(types.SimpleNamespace(ptr=0xDEAD0000), device, (4, 8), np.dtype(np.float32))
    interface = array.__cuda_array_interface__
    assert interface["data"] == (0xDEAD0000, False) and interface["shape"] == (4, 8)
    assert interface["typestr"] == "<f4" and interface["version"] == 3
    assert array.__dlpack_device__() == (2, 0)


def test_rocm_arrays_are_dlpack_rocm_devices(monkeypatch: pytest.MonkeyPatch) -> None:
    array = Array(types.SimpleNamespace(ptr=1), cupy_device(monkeypatch, "rocm"), (1,), np.dtype(np.int32))
    assert array.__dlpack_device__() == (10, 0)


def test_host_arrays_have_no_cuda_array_interface() -> None:
    array = hetero.zeros(3, device="cpu")
    assert not hasattr(array, "__cuda_array_interface__")
    with pytest.raises(AttributeError, match="use DLPack"):
        array.__cuda_array_interface__  # noqa: B018


def test_adopt_takes_cuda_array_interface_producers(monkeypatch: pytest.MonkeyPatch) -> None:
    from test_cuda_errors import make_runtime

    runtime = make_runtime()
    taken: list[Any] = []
    monkeypatch.setattr(runtime, "cupy", types.SimpleNamespace(ndarray=type("ndarray", (), {}),
                                                              asarray=lambda obj: taken.append(obj) or "view"))
    producer = View(0x2000, (3,), np.dtype(np.float32))  # e.g. a Numba device array: CAI, no DLPack
    assert runtime.adopt(producer) == "view" and taken == [producer]
    assert runtime.adopt(object()) is None
