"""take and take_along_axis on every device (hetero.arraylib.take), exactly against NumPy: every
dtype width, views as inputs and as indices, negative indices, and the errors a user meets."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.arraylib.take import take, take_along_axis

DTYPES = ["bool", "int8", "uint16", "int32", "float32", "int64", "float64"]


def _data(shape: tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    values = np.random.default_rng(seed).integers(-50, 50, shape)
    return (values > 0) if dtype == "bool" else values.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_take_matches_numpy_for_every_width(device: hetero.Device, dtype: str) -> None:
    host = _data((4, 5, 3), dtype)
    x = hetero.asarray(host, device=device)
    for axis in (0, 1, 2, -1):
        indices = np.array([0, -1, 2, 2, 1])[: host.shape[axis]]
        got = take(x, hetero.asarray(indices, device=device), axis=axis)
        assert got.dtype == x.dtype
        np.testing.assert_array_equal(got.numpy(), np.take(host, indices, axis=axis))


def test_take_of_views_and_strided_indices(device: hetero.Device) -> None:
    host = np.arange(60.0, dtype="float32").reshape(5, 12)
    x = hetero.asarray(host, device=device)
    index_host = np.array([[3, 0], [1, -2], [-4, 2]])
    indices = hetero.asarray(index_host, device=device)
    got = take(x[::-1, 1::3], indices.T, axis=1)  # a flipped, strided x; transposed indices
    np.testing.assert_array_equal(got.numpy(), np.take(host[::-1, 1::3], index_host.T, axis=1))
    np.testing.assert_array_equal(take(x[2], [0, 11, -12]).numpy(), host[2][[0, 11, -12]])  # 1-D: axis optional
    assert take(x, hetero.asarray(np.zeros(0, "int64"), device=device), axis=0).shape == (0, 12)


def test_take_along_axis_matches_numpy(device: hetero.Device) -> None:
    host = _data((4, 6), "float32", seed=3)
    x = hetero.asarray(host, device=device)
    order = np.argsort(host, axis=1)
    got = take_along_axis(x, hetero.asarray(order, device=device), axis=1)
    np.testing.assert_array_equal(got.numpy(), np.take_along_axis(host, order, axis=1))
    rows = np.array([[2], [-1]])  # one column of indices broadcast along axis 1, picked along axis 0
    np.testing.assert_array_equal(take_along_axis(x, hetero.asarray(rows, device=device), axis=0).numpy(),
                                  np.take_along_axis(host, rows, axis=0))
    np.testing.assert_array_equal(take_along_axis(x, np.array([[-1], [0], [2], [5]]), axis=-1).numpy(),
                                  np.take_along_axis(host, np.array([[-1], [0], [2], [5]]), axis=-1))


def test_out_of_range_indices_raise_with_the_value(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(12, dtype="int32").reshape(3, 4), device=device)
    with pytest.raises(IndexError, match="index 4 is out of bounds for axis 1 with size 4"):
        take(x, hetero.asarray([0, 4], device=device), axis=1)
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 0 with size 3"):
        take(x, [-4], axis=0)
    with pytest.raises(IndexError, match="out of bounds for axis 1 with size 4"):
        take_along_axis(x, np.array([[9]]), axis=1)
    huge = np.array([2**64 - 1], "uint64")  # would wrap to -1 as int64: refused, not read as the last element
    with pytest.raises(IndexError, match="18446744073709551615 is out of bounds"):
        take(x, hetero.asarray(huge, device=device), axis=0)
    np.testing.assert_array_equal(take(x, np.array([2, 0], "uint64"), axis=0).numpy(), x.numpy()[[2, 0]])


def test_bad_arguments_say_what_to_do(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(12.0, dtype="float32").reshape(3, 4), device=device)
    with pytest.raises(IndexError, match="integer dtype, got float32"):
        take(x, hetero.asarray([0.0, 1.0], device=device), axis=0)
    with pytest.raises(IndexError, match="integer dtype, got bool"):
        take(x, hetero.asarray([True, False], device=device), axis=0)
    with pytest.raises(ValueError, match="needs axis="):
        take(x, [0])
    with pytest.raises(IndexError, match="axis 2 is out of bounds"):
        take(x, [0], axis=2)
    with pytest.raises(ValueError, match="same number"):
        take_along_axis(x, np.array([0, 1]), axis=0)
    with pytest.raises(ValueError, match="do not broadcast"):
        take_along_axis(x, np.zeros((2, 2), "int64"), axis=0)
    with pytest.raises(TypeError, match="takes a hetero.Array"):
        take(np.arange(3), [0])
