"""diff on every device (hetero.arraylib.diff) against NumPy: orders, axes, prepend/append,
bool and integer dtypes, views, and the argument errors."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.arraylib.diff import diff


@pytest.mark.parametrize("kwargs", [{}, {"n": 2}, {"axis": 0}, {"n": 0}, {"n": 9}, {"axis": -2, "n": 1}])
def test_diff_matches_numpy(device: hetero.Device, kwargs: dict[str, int]) -> None:
    host = (np.arange(15, dtype="int32").reshape(3, 5) ** 2).astype("float32")
    got = diff(hetero.asarray(host, device=device), **kwargs)
    want = np.diff(host, **kwargs)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)


def test_diff_of_views_bools_and_integers(device: hetero.Device) -> None:
    host = np.arange(24, dtype="int16").reshape(4, 6) ** 2
    x = hetero.asarray(host, device=device)
    np.testing.assert_array_equal(diff(x[::-1, 1::2], axis=0, n=2).numpy(), np.diff(host[::-1, 1::2], axis=0, n=2))
    flags = np.array([True, True, False, True, False, False])
    got = diff(hetero.asarray(flags, device=device))
    assert got.dtype == np.bool_
    np.testing.assert_array_equal(got.numpy(), np.diff(flags))


def test_prepend_and_append(device: hetero.Device) -> None:
    host = np.arange(6.0, dtype="float32").reshape(2, 3) ** 2
    x = hetero.asarray(host, device=device)
    edge = np.full((2, 2), 7.0, dtype="float32")
    got = diff(x, prepend=hetero.asarray(edge, device=device), append=hetero.asarray(edge[:, :1], device=device))
    np.testing.assert_array_equal(got.numpy(), np.diff(host, prepend=edge, append=edge[:, :1]))
    np.testing.assert_array_equal(diff(x, axis=0, prepend=1.0).numpy(), np.diff(host, axis=0, prepend=1.0))


def test_bad_arguments(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(6.0, dtype="float32").reshape(2, 3), device=device)
    with pytest.raises(IndexError, match="axis 2 is out of bounds"):
        diff(x, axis=2)
    with pytest.raises(ValueError, match="n must be >= 0"):
        diff(x, n=-1)
    with pytest.raises(ValueError, match="0-d"):
        diff(hetero.asarray(1.0, device=device))
    with pytest.raises(ValueError, match="prepend has 1 dimension"):
        diff(x, prepend=hetero.asarray([1.0], device=device))
