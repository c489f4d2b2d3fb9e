"""Advanced indexing on every device (hetero.arraylib.advanced_index): ``x[key]`` and
``x[key] = value`` with boolean masks and integer arrays, mixed with ints, slices, None and
``...``, exactly against NumPy; results are new arrays; fused (recorded) work sees the values
from before a scatter; bad keys raise what NumPy raises."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetero
from hetero.core.launch_counts import launch_counts

SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
DTYPES = ["bool", "int8", "uint16", "int32", "float32", "float64"]


def _host(shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    values = np.arange(int(np.prod(shape))).reshape(shape) * 3 % 17
    return (values > 8) if dtype == "bool" else values.astype(dtype)


def _on(key: Any, device: hetero.Device) -> Any:
    """``key`` with its NumPy arrays made hetero arrays (lists and scalars stay as they are)."""
    parts = key if isinstance(key, tuple) else (key,)
    moved = tuple(hetero.asarray(p, device=device) if isinstance(p, np.ndarray) else p for p in parts)
    return moved if isinstance(key, tuple) else moved[0]


def _check(host: np.ndarray, x: hetero.Array, key: Any) -> None:
    want = host[key]
    got = x[_on(key, x.device)]
    assert got.dtype == x.dtype and got.shape == want.shape, (key, got.shape, want.shape)
    np.testing.assert_array_equal(got.numpy(), want)


@pytest.mark.parametrize("dtype", DTYPES)
def test_masks_match_numpy(device: hetero.Device, dtype: str) -> None:
    host = _host((3, 4, 5), dtype)
    x = hetero.asarray(host, device=device)
    full_mask = _host((3, 4, 5), "int32") > 8
    for key in (full_mask, full_mask[:, :, 0], full_mask[:, 0, 0], np.zeros((3, 0), bool), np.array(True),
                np.array(False), True, False, (Ellipsis, full_mask[0, 0])):
        _check(host, x, key)


def test_mask_from_a_comparison_and_views(device: hetero.Device) -> None:
    host = np.arange(10.0, dtype="float32")
    x = hetero.asarray(host, device=device)
    np.testing.assert_array_equal(x[x > 3].numpy(), host[host > 3])  # the mask is a recorded (fused) array
    grid = np.arange(24.0, dtype="float32").reshape(4, 6)
    y = hetero.asarray(grid, device=device)[::-1, 1::2]
    np.testing.assert_array_equal(y[y > 10].numpy(), grid[::-1, 1::2][grid[::-1, 1::2] > 10])


def test_integer_arrays_match_numpy(device: hetero.Device) -> None:
    host = _host((3, 4, 5), "int32")
    x = hetero.asarray(host, device=device)
    for key in ([0, 2, -1], (slice(None), [1, 3]), (0, slice(None), [1, 3]), ([0, 1], slice(None), [1, 3]),
                (np.array([[0], [2]]), np.array([1, 3])), (1, [2, 3], [4, 0]), (Ellipsis, [4, 0]),
                (None, [1, 2], None, slice(1, 3)), (np.array(1), np.array(2), np.array(3)), (np.array([], "int64"),),
                (slice(None, None, -1), np.array([[1, 0], [3, 3]], "uint8")), (np.array([2, 0], "int16"), 1, -1)):
        _check(host, x, key)


@st.composite
def keys(draw: st.DrawFn, shape: tuple[int, ...]) -> tuple[Any, ...]:
    """A key of ints, slices and integer arrays (of mutually broadcastable shapes) into ``shape``."""
    key: list[Any] = []
    arrays = draw(st.lists(st.integers(1, 3), min_size=0, max_size=2))
    for size in shape:
        kind = draw(st.sampled_from(["int", "slice", "array"]))
        if kind == "int":
            key.append(draw(st.integers(-size, size - 1)))
        elif kind == "slice":
            key.append(slice(draw(st.none() | st.integers(-size, size)), None, draw(st.sampled_from([None, 1, 2, -1]))))
        else:
            shape_of = tuple(arrays)
            key.append(np.array(draw(st.lists(st.integers(-size, size - 1), min_size=int(np.prod(shape_of)),
                                              max_size=int(np.prod(shape_of))))).reshape(shape_of))
    if not any(isinstance(k, np.ndarray) for k in key):
        key[0] = np.array([0, -1])
    return tuple(key)


@SETTINGS
@given(data=st.data())
def test_random_integer_array_keys_match_numpy(device: hetero.Device, data: st.DataObject) -> None:
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3).map(tuple))
    host = _host(shape, "float32")
    _check(host, hetero.asarray(host, device=device), data.draw(keys(shape)))


@pytest.mark.parametrize("dtype", DTYPES)
def test_assignment_matches_numpy(device: hetero.Device, dtype: str) -> None:
    host = _host((3, 4, 5), dtype)
    x = hetero.asarray(host, device=device)
    mask = _host((3, 4, 5), "int32") > 8
    one = host.dtype.type(1)
    for key, value in ((mask, one), (mask[:, :, 0], host[0, 0]), ([0, 2], host[1]), ((1, [0, 3], slice(2, None)), one),
                       ((slice(None), [1, 2]), np.zeros((3, 1, 5), host.dtype)), (np.array(True), host[2])):
        host[key] = value
        x[_on(key, device)] = hetero.asarray(value, device=device) if isinstance(value, np.ndarray) else value
        np.testing.assert_array_equal(x.numpy(), host)


def test_assignment_of_matching_values_and_conversion(device: hetero.Device) -> None:
    host = np.arange(8.0, dtype="float32")
    x = hetero.asarray(host, device=device)
    x[x > 4] = hetero.asarray([50, 60, 70], device=device)  # one value per true element, int64 converted
    host[host > 4] = [50, 60, 70]
    np.testing.assert_array_equal(x.numpy(), host)
    x[[0, 1]] = x[[1, 0]]  # reading and writing one array: read first
    host[[0, 1]] = host[[1, 0]]
    np.testing.assert_array_equal(x.numpy(), host)


def test_recorded_work_sees_the_values_before_a_scatter(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(6.0, dtype="float32"), device=device)
    before = x + 1  # recorded, not yet computed
    x[[0, 5]] = -1
    np.testing.assert_array_equal(before.numpy(), np.arange(6.0) + 1)
    np.testing.assert_array_equal(x.numpy(), [-1, 1, 2, 3, 4, -1])


def test_results_are_copies(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(6.0, dtype="float32"), device=device)
    picked = x[[1, 2]]
    picked[...] = 0
    np.testing.assert_array_equal(x.numpy(), np.arange(6.0))


def test_bad_keys_raise_what_numpy_raises(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(60.0, dtype="float32").reshape(3, 4, 5), device=device)
    with pytest.raises(IndexError, match="boolean index did not match indexed array along axis 1"):
        x[hetero.ones((3, 5), dtype="bool", device=device)]
    with pytest.raises(IndexError, match="too many indices"):
        x[np.ones((3, 4, 5, 1), bool)]
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        x[[0, 3]]
    with pytest.raises(IndexError, match="index -6 is out of bounds for axis 2 with size 5"):
        x[0, 0, hetero.asarray([-6], device=device)]
    with pytest.raises(IndexError, match="integer dtype, got float"):
        x[hetero.asarray([0.0], device=device)]
    with pytest.raises(IndexError, match="could not be broadcast together"):
        x[[0, 1], [0, 1, 2]]
    with pytest.raises(ValueError, match="could not broadcast a value of shape"):
        x[[0, 1]] = hetero.zeros((3, 4, 5), device=device)
    with pytest.raises(IndexError, match="out of bounds"):
        x[[7]] = 1.0


def test_mask_assignment_of_a_scalar_is_one_kernel(device: hetero.Device) -> None:
    host = np.arange(12.0, dtype="float32").reshape(3, 4)
    x = hetero.asarray(host, device=device)
    mask = x > 5
    mask.numpy()  # computed before counting
    before = launch_counts().get(device.name, 0)
    x[mask] = 0.0  # where(mask, 0, x) into x: no compaction, no count read back
    x[mask[:, 0]] = hetero.asarray(np.float32(9), device=device)  # a row mask, a 0-d value
    x.numpy()
    assert launch_counts()[device.name] == before + 2
    host[host > 5] = 0.0
    host[(np.arange(12.0).reshape(3, 4) > 5)[:, 0]] = 9
    np.testing.assert_array_equal(x.numpy(), host)


def test_indices_read_from_the_array_written_are_read_first(device: hetero.Device) -> None:
    host = np.array([1, 0, 7, 7, 7, 7], dtype="int64")
    x = hetero.asarray(host, device=device)
    x[x[:2]] = hetero.asarray(np.array([4, 5]), device=device)  # the first write lands on the second index
    host[host[:2].copy()] = [4, 5]
    np.testing.assert_array_equal(x.numpy(), host)


@pytest.mark.parametrize("bad", [[0, 10], [-11, 1], [[1], [10]]])
def test_a_scatter_with_an_index_out_of_range_writes_nothing(device: hetero.Device, bad: list) -> None:
    # bad input loses nothing: the in-range indices of a refused scatter are not written either
    x = hetero.asarray(np.arange(10, dtype=np.float32), device=device)
    with pytest.raises(IndexError, match="out of bounds"):
        x[bad] = 7.0
    np.testing.assert_array_equal(x.numpy(), np.arange(10, dtype=np.float32))
    with pytest.raises(IndexError, match="out of bounds"):
        x[hetero.asarray(bad, device=device)] = hetero.asarray(np.full(np.shape(bad), 5.0, np.float32), device=device)
    np.testing.assert_array_equal(x.numpy(), np.arange(10, dtype=np.float32))
