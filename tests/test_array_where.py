"""``hetero.where`` on every device: the one elementwise operation of three operands, against
NumPy (broadcasting, promotion, Python scalars, views), NaN in the branch not taken, and the errors."""

from __future__ import annotations

import numpy as np
import pytest

import hetero

X = np.array([[1.5, np.nan, -2.0, np.inf], [0.0, -0.0, 3.25, np.nan], [7.0, -1.0, np.nan, 2.0]], np.float32)
COND = np.array([[True, False, True, False], [False, True, True, False], [True, True, False, True]])


def test_where_selects_per_element_and_nan_in_the_other_branch_never_leaks(device: hetero.Device) -> None:
    x = hetero.asarray(X, device=device)
    y = hetero.asarray(X[::-1, ::-1].copy(), device=device)
    cond = hetero.asarray(COND, device=device)
    got = hetero.where(cond, x, y).numpy()
    np.testing.assert_array_equal(got, np.where(COND, X, X[::-1, ::-1]))
    assert got.dtype == np.float32
    # a NaN where the condition is false is not selected
    finite = hetero.where(hetero.isnan(x), 0.0, x).numpy()
    assert not np.isnan(finite).any()
    np.testing.assert_array_equal(finite, np.where(np.isnan(X), np.float32(0), X))


def test_where_broadcasts_and_takes_views_and_scalars(device: hetero.Device) -> None:
    x = hetero.asarray(X, device=device)
    cond = hetero.asarray(COND, device=device)
    column = cond[:, :1]  # (3, 1): broadcast along the rows
    got = hetero.where(column, x[::-1], 5.0)
    np.testing.assert_array_equal(got.numpy(), np.where(COND[:, :1], X[::-1], np.float32(5)))
    assert got.shape == (3, 4) and got.dtype == hetero.float32
    row = x[1]  # (4,) broadcast across cond's rows, a Python scalar on the other side
    np.testing.assert_array_equal(hetero.where(cond, -1.0, row).numpy(), np.where(COND, np.float32(-1), X[1]))
    empty = hetero.where(cond[:0], x[:0], x[:0])
    assert empty.shape == (0, 4)
    zero_d = hetero.where(cond[0, 0], x[0, 0], x[0, 1])
    assert zero_d.shape == () and float(zero_d) == 1.5


def test_where_promotes_x1_and_x2_as_the_standard_says(device: hetero.Device) -> None:
    ints = hetero.asarray(np.array([1, 2, 3], np.int8), device=device)
    floats = hetero.asarray(np.array([0.5, 1.5, 2.5], np.float32), device=device)
    cond = hetero.asarray([True, False, True], device=device)
    got = hetero.where(cond, ints, floats)
    assert got.dtype == np.result_type(np.int8, np.float32) == np.float32
    np.testing.assert_array_equal(got.numpy(), [1.0, 1.5, 3.0])


def test_a_condition_of_numbers_counts_nonzero_as_true(device: hetero.Device) -> None:
    x = hetero.asarray(X, device=device)
    # NaN is nonzero, so true, as bool(nan) and NumPy's where
    np.testing.assert_array_equal(hetero.where(x, 1.0, x).numpy(), np.where(X, np.float32(1), X))


def test_where_errors_name_the_function_and_the_remedy(device: hetero.Device) -> None:
    x = hetero.asarray(X, device=device)
    cond = hetero.asarray(COND, device=device)
    with pytest.raises(hetero.ArrayError, match="hetero.where.*x1 or x2 must be a hetero array"):
        hetero.where(cond, 1.0, 2.0)
    with pytest.raises(hetero.ArrayError, match="condition must be a hetero array.*asarray"):
        hetero.where(COND, x, x)  # type: ignore[arg-type]
    with pytest.raises(hetero.ArrayError, match="hetero.where: shapes .* do not broadcast"):
        hetero.where(cond, x, x[:, :2])
    others = [d for d in hetero.devices() if d is not device]
    if others:
        with pytest.raises(hetero.ArrayError, match=f"different devices, {device.name} and {others[0].name}.*to\\("):
            hetero.where(cond, x, x.to(others[0]))
