"""nonzero and count_nonzero on every device (hetero.arraylib.search), exactly against NumPy:
every dtype, NaN counted as nonzero, views, empty arrays, sizes past one work-group, and the
0-d error the standard asks for."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.arraylib.search import count_nonzero, nonzero

DTYPES = ["bool", "int8", "uint16", "int32", "int64", "float32", "float64"]


def _sparse(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    values = np.random.default_rng(seed).integers(-1, 2, shape) * np.random.default_rng(seed + 1).integers(0, 2, shape)
    return (values != 0) if dtype == "bool" else values.astype(dtype)


def _same(got: tuple[hetero.Array, ...], want: tuple[np.ndarray, ...]) -> None:
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert g.dtype == np.int64 and g.ndim == 1
        np.testing.assert_array_equal(g.numpy(), w)


@pytest.mark.parametrize("dtype", DTYPES)
def test_nonzero_matches_numpy(device: hetero.Device, dtype: str) -> None:
    host = _sparse((3, 5, 4), dtype)
    x = hetero.asarray(host, device=device)
    _same(nonzero(x), np.nonzero(host))
    assert int(count_nonzero(x).numpy()) == np.count_nonzero(host)
    got = count_nonzero(x, axis=(0, 2), keepdims=True)
    assert got.dtype == np.int64
    np.testing.assert_array_equal(got.numpy(), np.count_nonzero(host, axis=(0, 2), keepdims=True))
    np.testing.assert_array_equal(count_nonzero(x, axis=1).numpy(), np.count_nonzero(host, axis=1))


def test_nan_counts_as_nonzero_and_views_work(device: hetero.Device) -> None:
    host = np.array([[0.0, np.nan, -0.0], [1.5, 0.0, np.inf]], dtype="float32")
    x = hetero.asarray(host, device=device)
    _same(nonzero(x), np.nonzero(host))
    _same(nonzero(x.T[::-1]), np.nonzero(host.T[::-1]))
    assert int(count_nonzero(x).numpy()) == 3


def test_nonzero_past_one_work_group(device: hetero.Device) -> None:
    host = np.random.default_rng(5).random(70_000) > 0.7
    _same(nonzero(hetero.asarray(host, device=device)), np.nonzero(host))


def test_empty_and_all_zero(device: hetero.Device) -> None:
    _same(nonzero(hetero.zeros((3, 0), device=device)), np.nonzero(np.zeros((3, 0))))
    _same(nonzero(hetero.zeros((2, 3), device=device)), np.nonzero(np.zeros((2, 3))))
    assert int(count_nonzero(hetero.zeros((0,), device=device)).numpy()) == 0


def test_zero_dimensional_input_is_a_value_error(device: hetero.Device) -> None:
    with pytest.raises(ValueError, match="0-d"):
        nonzero(hetero.asarray(1.0, device=device))
    with pytest.raises(TypeError, match="takes a hetero.Array"):
        nonzero(np.ones(3))
