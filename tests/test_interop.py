"""Zero-copy interop where devices match: DLPack and torch on the cpu device; clear
errors where a device cannot export."""

from __future__ import annotations

import numpy as np
import pytest

import hetero

torch = pytest.importorskip("torch", reason="torch is not installed (pip install 'hetero[torch]')")


def test_asarray_of_a_torch_cpu_tensor_shares_memory() -> None:
    t = torch.arange(10, dtype=torch.float32)
    x = hetero.asarray(t, device="cpu")
    assert x.device.name == "cpu" and x.dtype == np.float32 and x.shape == (10,)
    t[0] = 42
    assert x.numpy()[0] == 42


def test_array_torch_shares_memory() -> None:
    x = hetero.asarray(np.arange(6, dtype=np.int64).reshape(2, 3), device="cpu")
    t = x.torch()
    assert t.shape == (2, 3) and t.dtype == torch.int64
    x.numpy()[1, 2] = -5
    assert int(t[1, 2]) == -5


def test_from_dlpack_is_zero_copy_and_round_trips_through_numpy() -> None:
    t = torch.ones(4, dtype=torch.float16)
    x = hetero.from_dlpack(t)
    t[3] = 9
    assert x.numpy()[3] == 9
    view = np.from_dlpack(x)
    view[0] = 3
    assert float(t[0]) == 3
    assert x.__dlpack_device__() == (1, 0)


def test_from_dlpack_refuses_a_non_contiguous_tensor() -> None:
    t = torch.arange(12, dtype=torch.int32).reshape(3, 4).T
    with pytest.raises(hetero.ArrayError, match="non-contiguous"):
        hetero.from_dlpack(t)
    copied = hetero.asarray(t, device="cpu")  # asarray may copy
    assert np.array_equal(copied.numpy(), t.numpy())


def test_torch_tensor_to_every_device(device: hetero.Device) -> None:
    t = torch.linspace(-3, 3, 101, dtype=torch.float64)
    x = hetero.asarray(t, device=device)
    assert x.device is device
    assert x.numpy().tobytes() == t.numpy().tobytes()
    x32 = hetero.asarray(t, dtype="float32", device=device)
    assert np.array_equal(x32.numpy(), t.numpy().astype(np.float32))


def test_torch_dtype_names_resolve() -> None:
    assert hetero.zeros(2, dtype=torch.int8, device="cpu").dtype == np.int8
    assert hetero.zeros(2, dtype=torch.bool, device="cpu").dtype == np.bool_
    with pytest.raises(hetero.UnsupportedDtypeError, match="bfloat16"):
        hetero.zeros(2, dtype=torch.bfloat16, device="cpu")


def test_device_without_dlpack_export_says_how_to_get_one(device: hetero.Device) -> None:
    x = hetero.zeros(3, device=device)
    if device.runtime.native_view(x.buffer, x.shape, x.dtype) is not None:
        pytest.skip(f"{device.name} exports DLPack")
    with pytest.raises(BufferError, match="to\\('cpu'\\)"):
        x.torch()
