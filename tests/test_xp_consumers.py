"""What array-API consumers (array-api-compat, and through it scikit-learn and SciPy) expect of
hetero arrays: they are recognised, name hetero.xp and their device, and exchange memory by the
standard's DLPack protocol."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
import hetero.xp as xp

compat = pytest.importorskip("array_api_compat")


def test_array_api_compat_finds_hetero_xp(device: hetero.Device) -> None:
    x = xp.asarray([1.0, 2.0], device=device)
    assert compat.is_array_api_obj(x)
    assert compat.array_namespace(x) is xp
    assert compat.array_namespace(x, xp.asarray(3, device=device)) is xp
    assert compat.device(x) is device
    assert compat.size(xp.zeros((2, 3), device=device)) == 6


def test_dlpack_follows_the_standards_signature() -> None:
    x = xp.asarray(np.arange(6, dtype=np.float32).reshape(2, 3), device="cpu")
    assert x.__dlpack_device__() == (1, 0)  # kDLCPU
    view = np.from_dlpack(x)
    np.testing.assert_array_equal(view, np.arange(6, dtype=np.float32).reshape(2, 3))
    capsule = x.__dlpack__(stream=None, max_version=(1, 0), dl_device=None, copy=None)
    assert "capsule" in repr(type(capsule)).lower() or capsule is not None
    back = xp.from_dlpack(np.arange(3, dtype=np.int64))
    np.testing.assert_array_equal(back.numpy(), [0, 1, 2])


def test_torch_exchanges_through_dlpack() -> None:
    torch = pytest.importorskip("torch")
    x = xp.asarray([1.0, 2.0, 3.0], device="cpu")
    t = torch.from_dlpack(x)
    assert t.tolist() == [1.0, 2.0, 3.0]
    y = xp.from_dlpack(torch.arange(4, dtype=torch.int32))
    assert y.dtype == xp.int32 and y.numpy().tolist() == [0, 1, 2, 3]
