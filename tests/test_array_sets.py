"""unique_* on every device (hetero.arraylib.sets), against NumPy's ``np.unique(..., equal_nan=False)``.

Each NaN is a value of its own, -0.0 and +0.0 one value shown as the first one in the input;
values are compared bit for bit, the index arrays exactly.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetero
from hetero.arraylib.sets import unique_all, unique_counts, unique_inverse, unique_values

from test_array_sort import bits, values

SETTINGS = settings(max_examples=15, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
DTYPES = ["bool", "int8", "uint16", "int32", "uint64", "int64", "float16", "float32", "float64"]


def expected(a: np.ndarray) -> tuple[np.ndarray, ...]:
    flat = a.reshape(-1)
    order = np.argsort(flat, kind="stable")
    ordered = flat[order]
    new = np.ones(flat.size, bool)
    new[1:] = ordered[1:] != ordered[:-1]  # NaN != NaN: each NaN its own value
    ids = np.cumsum(new) - 1
    inverse = np.empty(flat.size, np.int64)
    inverse[order] = ids
    starts = np.flatnonzero(new)
    counts = np.diff(np.append(starts, flat.size))
    return flat[order[starts]], order[starts], inverse.reshape(a.shape), counts


def check(a: np.ndarray, device: hetero.Device) -> None:
    got = unique_all(hetero.asarray(a, device=device))
    want = expected(a)
    assert got.values.dtype == a.dtype
    np.testing.assert_array_equal(bits(got.values.numpy()), bits(want[0]))
    for name, ours, theirs in zip(("indices", "inverse_indices", "counts"), got[1:], want[1:]):
        assert ours.dtype == np.int64, name
        assert ours.shape == theirs.shape, name
        np.testing.assert_array_equal(ours.numpy(), theirs, err_msg=name)


def test_expected_is_numpys_unique() -> None:
    a = values((9, 11), "float32", seed=1)
    a[np.isnan(a)] = 5.0  # np.unique merges NaNs (equal_nan only off since 1.24); compare without them
    a[a == 0] = 0.0
    want = np.unique(a, return_index=True, return_inverse=True, return_counts=True)
    for ours, theirs in zip(expected(a), want):
        np.testing.assert_array_equal(ours.reshape(-1), np.asarray(theirs).reshape(-1))


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_dtype(device: hetero.Device, dtype: str) -> None:
    check(values(2000, dtype, seed=len(dtype)), device)


def test_nans_are_distinct_and_signed_zeros_one_value(device: hetero.Device) -> None:
    a = np.array([np.nan, -0.0, 1.0, np.nan, 0.0, 1.0, -np.inf], np.float32)
    result = unique_all(hetero.asarray(a, device=device))
    got = result.values.numpy()
    assert np.isnan(got[-2:]).all() and got[:3].tolist() == [-np.inf, 0.0, 1.0] and np.signbit(got[1])
    np.testing.assert_array_equal(result.counts.numpy(), [1, 2, 2, 1, 1])
    np.testing.assert_array_equal(result.indices.numpy(), [6, 1, 2, 0, 3])
    np.testing.assert_array_equal(result.inverse_indices.numpy(), [3, 1, 2, 4, 1, 2, 0])


def test_shapes_views_and_long_input(device: hetero.Device) -> None:
    check(values((30, 40, 3), "int16", seed=2), device)
    check(values(100_000, "float32", seed=3), device)
    a = values((50, 60), "float64", seed=4)
    x = hetero.asarray(a, device=device)
    got = unique_inverse(x[::-2, 3:])
    np.testing.assert_array_equal(got.inverse_indices.numpy(), expected(a[::-2, 3:])[2])


def test_empty_and_0d(device: hetero.Device) -> None:
    x = hetero.asarray(np.zeros((2, 0), np.float32), device=device)
    result = unique_all(x)
    assert result.values.shape == (0,) and result.inverse_indices.shape == (2, 0)
    assert result.counts.numpy().dtype == np.int64
    one = unique_all(hetero.asarray(np.float32(3.0), device=device))
    assert one.values.numpy().tolist() == [3.0] and one.inverse_indices.shape == () and one.counts.numpy().tolist() == [1]


def test_the_four_functions_agree(device: hetero.Device) -> None:
    a = values(500, "int32", seed=5)
    x = hetero.asarray(a, device=device)
    full = unique_all(x)
    np.testing.assert_array_equal(unique_values(x).numpy(), full.values.numpy())
    counts = unique_counts(x)
    assert counts._fields == ("values", "counts")
    np.testing.assert_array_equal(counts.counts.numpy(), full.counts.numpy())
    inverse = unique_inverse(x)
    assert inverse._fields == ("values", "inverse_indices")
    np.testing.assert_array_equal(inverse.inverse_indices.numpy(), full.inverse_indices.numpy())
    assert full._fields == ("values", "indices", "inverse_indices", "counts")


@SETTINGS
@given(st.lists(st.sampled_from([0.0, -0.0, 1.5, -2.0, float("nan"), float("inf")]), min_size=1, max_size=300))
def test_random_float_lists(device: hetero.Device, items: list[float]) -> None:
    check(np.array(items, np.float32), device)


def test_bad_input(device: hetero.Device) -> None:
    with pytest.raises(TypeError, match="hetero.asarray"):
        unique_values([1, 2])  # type: ignore[arg-type]
