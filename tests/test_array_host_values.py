"""An array's values as Python objects, on every device: ``item()`` and ``tolist()`` give what
NumPy's give (the same Python types, the same errors)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hetero
from hetero.core import dtypes

# One value per dtype that tells the kinds apart: a bool, ints at their extremes, a float that is
# not an integer, complex numbers with both parts.
VALUES: dict[str, list[Any]] = {
    "bool": [True, False, True, False, True, True],
    "int8": [-128, 127, 0, -1, 5, 6],
    "int16": [-32768, 32767, 0, -1, 5, 6],
    "int32": [-(2**31), 2**31 - 1, 0, -1, 5, 6],
    "int64": [-(2**63), 2**63 - 1, 0, -1, 5, 6],
    "uint8": [0, 255, 1, 2, 3, 4],
    "uint16": [0, 65535, 1, 2, 3, 4],
    "uint32": [0, 2**32 - 1, 1, 2, 3, 4],
    "uint64": [0, 2**64 - 1, 1, 2, 3, 4],
    "float16": [0.5, -1.25, 65504.0, np.inf, -0.0, 3.0],
    "float32": [0.1, -1.25, 3.4e38, np.inf, -0.0, 3.0],
    "float64": [0.1, -1.25, 1.7e308, np.inf, -0.0, 3.0],
    "complex64": [0.1 + 2j, -1.25 - 0.5j, 1j, 3 + 0j, -0.0 + 1j, 2 - 2j],
    "complex128": [0.1 + 2j, -1.25 - 0.5j, 1j, 3 + 0j, -0.0 + 1j, 2 - 2j],
}


def _host(dtype: np.dtype[Any]) -> np.ndarray:
    return np.array(VALUES[dtype.name], dtype=dtype).reshape(2, 3)


def _same(got: Any, want: Any) -> None:
    """Equal, and of the same Python type all the way down (True is not 1, 1.0 is not 1)."""
    assert type(got) is type(want), (got, want)
    if isinstance(want, list):
        assert len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            _same(g, w)
    elif isinstance(want, float) and np.isnan(want):
        assert np.isnan(got)
    else:
        assert got == want and repr(got) == repr(want)  # repr: -0.0 is not 0.0


@pytest.mark.parametrize("dtype", dtypes.SUPPORTED, ids=str)
def test_item_and_tolist_match_numpy_for_every_dtype(device: hetero.Device, dtype: np.dtype[Any]) -> None:
    host = _host(dtype)
    x = hetero.asarray(host, device=device)
    _same(x.tolist(), host.tolist())
    _same(x[1].tolist(), host[1].tolist())
    _same(x[:, ::-2].tolist(), host[:, ::-2].tolist())  # a strided view
    _same(x[1, 2].tolist(), host[1, 2].tolist())  # 0-d: the scalar itself
    _same(x[1, 2].item(), host[1, 2].item())
    _same(x[1:, 2:].item(), host[1:, 2:].item())  # size 1, 2-d
    _same(x.item(4), host.item(4))  # a flat index, in C order
    _same(x.item(-1), host.item(-1))
    _same(x.item(0, 2), host.item(0, 2))
    _same(x.item((1, 0)), host.item((1, 0)))
    _same(x.T.item(3), host.T.item(3))  # a flat index into a view counts in the view's C order


def test_tolist_of_empty_and_zero_d_arrays(device: hetero.Device) -> None:
    for host in (np.empty((0,), np.float32), np.empty((2, 0, 3), np.int64), np.array(7, np.int16)):
        _same(hetero.asarray(host, device=device).tolist(), host.tolist())


def test_item_errors_are_numpys(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(6, dtype=np.int32).reshape(2, 3), device=device)
    host = x.numpy()
    cases = [(), (6,), (-7,), (0, 3), (0, 0, 0), (1.0,)]
    for args in cases:
        with pytest.raises(Exception) as want:
            host.item(*args)
        with pytest.raises(want.type) as got:
            x.item(*args)
        assert str(got.value) == str(want.value), args
    with pytest.raises(ValueError, match="can only convert an array of size 1 to a Python scalar"):
        hetero.zeros((0,), device=device).item()
    for host in (np.arange(3), np.array(5), np.zeros((2, 0))):
        with pytest.raises(IndexError) as want:
            host.item(host.size)
        with pytest.raises(IndexError, match=str(want.value)):
            hetero.asarray(host, device=device).item(host.size)
