"""sort and argsort on every device (hetero.arraylib.sort), against NumPy's stable sort, exactly.

Descending is checked against ``flip(argsort(flip(x)))`` (equal elements in input order, NaN
first); sorted values are compared bit for bit, so the order of -0.0 and +0.0 (equal keys,
kept in input order) is checked too.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetero
from hetero.arraylib import sort as array_sort
from hetero.arraylib.sort import argsort, sort

SETTINGS = settings(max_examples=20, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
DTYPES = ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "int64", "uint64",
          "float16", "float32", "float64"]


def values(shape: int | tuple[int, ...], dtype: str, seed: int = 0) -> np.ndarray:
    """Random data with many duplicates and, for floats, NaN, +-0.0 and +-inf."""
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    kind = np.dtype(dtype)
    if kind.kind in "iu":
        info = np.iinfo(kind)
        picks = np.array([info.min, info.max, 0, 1, 2, 3], dtype=kind)
        out = rng.integers(0, 7, shape).astype(kind)
        special = rng.random(shape) < 0.1
        return np.where(special, picks[rng.integers(0, len(picks), shape)], out).astype(kind)
    out = rng.integers(-8, 8, shape).astype(kind) / kind.type(4)
    specials = np.array([np.nan, -np.nan, 0.0, -0.0, np.inf, -np.inf], dtype=kind)
    special = rng.random(shape) < 0.15
    return np.where(special, specials[rng.integers(0, len(specials), shape)], out).astype(kind)


def expected_argsort(a: np.ndarray, axis: int = -1, descending: bool = False) -> np.ndarray:
    if not descending:
        return np.argsort(a, axis=axis, kind="stable")
    n = a.shape[axis]
    return n - 1 - np.flip(np.argsort(np.flip(a, axis), axis=axis, kind="stable"), axis)


def bits(a: np.ndarray) -> np.ndarray:
    return a.view(f"u{a.dtype.itemsize}") if a.dtype.kind == "f" else a


def check(a: np.ndarray, device: hetero.Device, axis: int = -1, descending: bool = False) -> None:
    x = hetero.asarray(a, device=device)
    order = expected_argsort(a, axis, descending)
    got_order = argsort(x, axis=axis, descending=descending).numpy()
    assert got_order.dtype == np.int64
    np.testing.assert_array_equal(got_order, order)
    got = sort(x, axis=axis, descending=descending).numpy()
    assert got.dtype == a.dtype and got.shape == a.shape
    np.testing.assert_array_equal(bits(got), bits(np.take_along_axis(a, order, axis)))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("descending", [False, True])
def test_every_dtype_matches_numpys_stable_sort(device: hetero.Device, dtype: str, descending: bool) -> None:
    check(values(1500, dtype, seed=len(dtype)), device, descending=descending)


@pytest.mark.parametrize("axis", [0, 1, 2, -1, -2])
def test_any_axis_of_a_3d_array(device: hetero.Device, axis: int) -> None:
    a = values((6, 7, 9), "float32", seed=axis + 5)
    check(a, device, axis=axis)
    check(a, device, axis=axis, descending=True)


def test_views_sort_as_their_values(device: hetero.Device) -> None:
    a = values((40, 30), "int32", seed=3)
    x = hetero.asarray(a, device=device)
    for view, host in ((x[::-1, ::2], a[::-1, ::2]), (x.mT if hasattr(x, "mT") else x.permute_dims((1, 0)), a.T),
                       (x[3:17, 5:], a[3:17, 5:])):
        np.testing.assert_array_equal(argsort(view).numpy(), np.argsort(host, kind="stable"))
        np.testing.assert_array_equal(sort(view, axis=0).numpy(), np.sort(host, axis=0, kind="stable"))


@pytest.mark.parametrize("n", [100_000, 70_001])
def test_rows_longer_than_a_work_group(device: hetero.Device, n: int) -> None:
    a = values(n, "float32", seed=n)
    check(a, device)
    check(a, device, descending=True)


def test_long_rows_of_int64_with_few_distinct_values_stay_stable(device: hetero.Device) -> None:
    a = np.random.default_rng(1).integers(0, 3, (2, 9000)).astype(np.int64)
    check(a, device)
    check(a, device, descending=True)


def test_many_short_rows(device: hetero.Device) -> None:
    for shape in ((1000, 3), (300, 2), (50, 17), (7, 1)):
        check(values(shape, "float64", seed=shape[1]), device)
        check(values(shape, "int16", seed=shape[1]), device, descending=True)


def test_empty_and_0d(device: hetero.Device) -> None:
    for shape in ((0,), (3, 0), (0, 4)):
        a = np.zeros(shape, np.float32)
        x = hetero.asarray(a, device=device)
        assert sort(x).shape == shape and argsort(x).numpy().dtype == np.int64
        assert sort(x, axis=0).shape == shape
    x = hetero.asarray(np.float32(2.5), device=device)
    assert sort(x).numpy() == np.float32(2.5) and sort(x).shape == ()
    assert argsort(x).numpy() == 0 and argsort(x).numpy().dtype == np.int64


def test_stable_false_gives_the_same_order(device: hetero.Device) -> None:
    a = values(3000, "uint8", seed=9)
    x = hetero.asarray(a, device=device)
    np.testing.assert_array_equal(argsort(x, stable=False).numpy(), np.argsort(a, kind="stable"))


def test_nan_is_last_ascending_and_first_descending(device: hetero.Device) -> None:
    a = np.array([1.0, np.nan, -np.inf, 0.0, -0.0, np.nan, np.inf], np.float32)
    x = hetero.asarray(a, device=device)
    np.testing.assert_array_equal(argsort(x).numpy(), [2, 3, 4, 0, 6, 1, 5])
    np.testing.assert_array_equal(argsort(x, descending=True).numpy(), [1, 5, 6, 0, 3, 4, 2])


@SETTINGS
@given(st.lists(st.integers(-4, 4), min_size=0, max_size=700), st.booleans())
def test_random_lists_with_duplicates(device: hetero.Device, items: list[int], descending: bool) -> None:
    a = np.array(items, dtype=np.int32)
    check(a, device, descending=descending)


def test_bad_input_says_what_to_do(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(6, dtype=np.float32).reshape(2, 3), device=device)
    with pytest.raises(IndexError, match="out of bounds"):
        sort(x, axis=2)
    with pytest.raises(IndexError, match="out of bounds"):
        argsort(x, axis=-3)
    with pytest.raises(TypeError, match="hetero.asarray"):
        sort(np.arange(3))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="axis"):
        sort(x, axis=1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("dtype", DTYPES)
def test_cpu_runs_numpys_sort_and_its_generated_kernels_give_the_same_order(
        dtype: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``cpu`` sorts with NumPy (HOST_LIBRARY); the generated kernels, still what every other
    device runs, must order it identically there too."""
    cpu = hetero.device("cpu")
    a = values((3, 700), dtype, seed=5)
    for host_library in (True, False):
        monkeypatch.setattr(array_sort, "HOST_LIBRARY", host_library)
        for descending in (False, True):
            check(a, cpu, axis=0, descending=descending)
            check(a, cpu, axis=1, descending=descending)
