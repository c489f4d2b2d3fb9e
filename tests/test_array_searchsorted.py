"""searchsorted on every device (hetero.arraylib.searchsorted), against NumPy's, NaN and signed zeros included."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.arraylib.searchsorted import searchsorted
from hetero.arraylib.sort import argsort

from test_array_sort import values


@pytest.mark.parametrize("dtype", ["int8", "uint32", "int64", "float16", "float32", "float64", "bool"])
@pytest.mark.parametrize("side", ["left", "right"])
def test_matches_numpy(device: hetero.Device, dtype: str, side: str) -> None:
    sorted_ = np.sort(values(3000, dtype, seed=1), kind="stable")
    wanted = values((7, 50), dtype, seed=2)
    got = searchsorted(hetero.asarray(sorted_, device=device), hetero.asarray(wanted, device=device), side=side)
    assert got.shape == wanted.shape and got.numpy().dtype == np.int64
    np.testing.assert_array_equal(got.numpy(), np.searchsorted(sorted_, wanted, side=side))


@pytest.mark.parametrize("side", ["left", "right"])
def test_sorter_from_argsort(device: hetero.Device, side: str) -> None:
    a = values(1000, "float32", seed=3)
    x = hetero.asarray(a, device=device)
    wanted = np.array([np.nan, 0.0, -0.0, 1.25, -100, np.inf, -np.inf], np.float32)
    order = np.argsort(a, kind="stable")
    got = searchsorted(x, hetero.asarray(wanted, device=device), side=side, sorter=argsort(x))
    np.testing.assert_array_equal(got.numpy(), np.searchsorted(a, wanted, side=side, sorter=order))
    order32 = hetero.asarray(order.astype(np.int32), device=device)
    got = searchsorted(x, hetero.asarray(wanted, device=device), side=side, sorter=order32)
    np.testing.assert_array_equal(got.numpy(), np.searchsorted(a, wanted, side=side, sorter=order))


def test_mixed_dtypes_0d_and_empty(device: hetero.Device) -> None:
    a = np.array([-3, 0, 2, 2, 7], np.int8)
    x = hetero.asarray(a, device=device)
    got = searchsorted(x, hetero.asarray(np.array([2, 300, -1000], np.int16), device=device))
    np.testing.assert_array_equal(got.numpy(), [2, 5, 0])
    assert searchsorted(x, hetero.asarray(np.int8(2), device=device), side="right").numpy() == 4
    assert searchsorted(x, hetero.asarray(np.zeros(0, np.int8), device=device)).shape == (0,)
    empty = hetero.asarray(np.zeros(0, np.float32), device=device)
    np.testing.assert_array_equal(searchsorted(empty, hetero.asarray(np.ones(3, np.float32), device=device)).numpy(), 0)


def test_bad_input(device: hetero.Device) -> None:
    x = hetero.asarray(np.zeros((2, 2), np.float32), device=device)
    y = hetero.asarray(np.zeros(2, np.float32), device=device)
    with pytest.raises(hetero.ArrayError, match="one-dimensional"):
        searchsorted(x, y)
    with pytest.raises(hetero.ArrayError, match="side"):
        searchsorted(y, y, side="middle")
    with pytest.raises(TypeError, match="sorter"):
        searchsorted(y, y, sorter=y)
