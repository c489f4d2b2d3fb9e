"""The eager fast path (hetero.arraylib.eager) on every device: a repeated operation runs through
its kept recipe, and a change of dtype, device, shape, view (strides, offset), scalar kind or
scalar value range is a new description, never a stale kernel; results are the full path's bits;
launch counters and fault injection see its launches, and a guarded loop of array operations on
it recovers from an injected fault as the full path does."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hetero
from hetero import ScalarOverflowError
from hetero.arraylib import eager
from hetero.core.errors import DeviceLostError
from hetero.core.launch_counts import launch_counts
from hetero.fault.injection import inject

RNG = np.random.default_rng(46)
A = RNG.standard_normal(1024).astype(np.float32)
B = RNG.standard_normal(1024).astype(np.float32)


def put(host: np.ndarray, device: hetero.Device) -> hetero.Array:
    return hetero.asarray(host, device=device, copy=True)


def twice(op: Callable[[], hetero.Array]) -> tuple[np.ndarray, np.ndarray]:
    """``op``'s result on the full path (its first call) and through the recipe (its second)."""
    return op().numpy(), op().numpy()


def kept(op: str, *operands: Any) -> bool:
    """Whether a recipe is kept for ``op`` on operands described as these are."""
    return eager._recipes.get((op, *[eager._describe(v) for v in operands])) is not None


@pytest.fixture(params=[True, False], ids=["fusion on", "fusion off"])
def fused(request: pytest.FixtureRequest) -> Any:
    with hetero.fusion(request.param):
        yield request.param


def test_a_repeated_operation_runs_through_its_recipe(device: hetero.Device, fused: bool) -> None:
    x, y = put(A, device), put(B, device)
    first, second = twice(lambda: x + y)
    assert kept("add", x, y)
    np.testing.assert_array_equal(first, A + B)
    np.testing.assert_array_equal(second, A + B)


@pytest.mark.parametrize("dtype", ["float32", "int32", "int8", "uint16", "float16", "bool"])
def test_a_new_dtype_is_a_new_recipe(device: hetero.Device, fused: bool, dtype: str) -> None:
    x, y = put(A, device), put(B, device)
    twice(lambda: x * y)
    hx, hy = (A * 10).astype(dtype), (B * 10).astype(dtype)
    u, v = put(hx, device), put(hy, device)
    op = np.logical_xor if dtype == "bool" else np.multiply
    name = "logical_xor" if dtype == "bool" else "multiply"
    for got in twice(lambda: getattr(hetero, name)(u, v)):
        assert got.dtype == op(hx, hy).dtype
        np.testing.assert_array_equal(got, op(hx, hy))
    assert kept(name, u, v) and kept("multiply", x, y)


def test_a_new_device_is_a_new_recipe(device: hetero.Device, fused: bool) -> None:
    other = hetero.device("cpu") if device.name != "cpu" else next(
        (d for d in hetero.devices() if d.name != "cpu"), None)
    if other is None:
        pytest.skip("needs a second device")
    for where in (device, other, device):
        x, y = put(A, where), put(B, where)
        for got in twice(lambda x=x, y=y: x - y):
            np.testing.assert_array_equal(got, A - B)
        assert (x - y).device is where


def test_a_new_shape_is_a_new_recipe(device: hetero.Device, fused: bool) -> None:
    for shape in [(1024,), (512,), (2, 512), (512, 2), (1, 1024), (4, 16, 16)]:
        size = int(np.prod(shape))
        hx, hy = A[:size].reshape(shape), B[:size].reshape(shape)
        x, y = put(hx, device), put(hy, device)
        for got in twice(lambda x=x, y=y: x + y):
            assert got.shape == shape
            np.testing.assert_array_equal(got, hx + hy)
        assert kept("add", x, y)
    x, row = put(A.reshape(16, 64), device), put(B[:64], device)  # broadcasting: the operands' shapes differ
    for got in twice(lambda: x + row):
        np.testing.assert_array_equal(got, A.reshape(16, 64) + B[:64])


def test_views_of_another_layout_are_new_recipes(device: hetero.Device, fused: bool) -> None:
    x, y = put(A, device), put(B, device)
    cases = [(lambda: x[:512] + y[:512], A[:512] + B[:512]),       # contiguous, offset 0
             (lambda: x[::2] + y[::2], A[::2] + B[::2]),          # the same shape, strided
             (lambda: x[1:513] + y[1:513], A[1:513] + B[1:513]),  # the same shape, another offset
             (lambda: x[::-2] + y[1::2], A[::-2] + B[1::2]),      # flipped
             (lambda: x[:512] + y[:512], A[:512] + B[:512])]      # the first again
    for op, want in cases:
        for got in twice(op):
            np.testing.assert_array_equal(got, want)
    assert kept("add", x[::2], y[::2]) and kept("add", x[1:513], y[1:513])
    m = put(A.reshape(32, 32), device)
    for got in twice(lambda: m.T * m):
        np.testing.assert_array_equal(got, A.reshape(32, 32).T * A.reshape(32, 32))


@pytest.mark.parametrize("dtype", ["float32", "int8", "int32", "uint8"])
def test_a_new_scalar_kind_or_range_is_not_served_a_stale_kernel(device: hetero.Device, fused: bool, dtype: str) -> None:
    host = (A * 10).astype(dtype)
    x = put(host, device)
    for value in (3, 2.5, True, 3, -1 if dtype != "uint8" else 1, 100):
        for got in twice(lambda value=value: x + value):
            want = host + value
            assert got.dtype == want.dtype, (value, got.dtype, want.dtype)
            np.testing.assert_array_equal(got, want)
        assert kept("add", x, value)
    for got in twice(lambda: x > 3):
        np.testing.assert_array_equal(got, host > 3)
    if dtype in ("int8", "uint8"):
        fresh = put(host[:100], device)  # a description seen first with a value out of its dtype's range
        for got in twice(lambda: fresh > 300):
            np.testing.assert_array_equal(got, host[:100].astype(np.int64) > 300)
        for got in twice(lambda: x > 300):  # beyond the dtype: compared as a wider integer, as NumPy 2
            np.testing.assert_array_equal(got, host.astype(np.int64) > 300)
        with pytest.raises(ScalarOverflowError):
            x + 300
    if dtype == "float32":
        for value in (1e300, float("inf"), float("nan"), -0.0):
            for got in twice(lambda value=value: x * value):
                with np.errstate(over="ignore", invalid="ignore"):
                    np.testing.assert_array_equal(got, host * np.float32(value))


def test_numpy_scalars_and_python_scalars_are_told_apart(device: hetero.Device, fused: bool) -> None:
    x = put(A, device)
    for got in twice(lambda: x + 2.0):
        np.testing.assert_array_equal(got, A + np.float32(2.0))
    if device.fp64:
        got = (x + np.float64(2.0)).numpy()  # a NumPy scalar promotes as an array: float64
        assert got.dtype == np.float64
        np.testing.assert_array_equal(got, A + np.float64(2.0))


def test_each_operation_counts_one_launch(device: hetero.Device, fused: bool) -> None:
    x, y = put(A, device), put(B, device)
    twice(lambda: x + y)
    before = launch_counts().get(device.name, 0)
    for _ in range(5):
        (x + y).numpy()
    assert launch_counts()[device.name] == before + 5


def test_a_chain_still_fuses(device: hetero.Device) -> None:
    x, y = put(A, device), put(B, device)
    twice(lambda: x * y + y * x)
    before = launch_counts().get(device.name, 0)
    got = (x * y + y * x).numpy()
    assert launch_counts()[device.name] == before + 1  # one fused kernel, the recipes never launched
    np.testing.assert_array_equal(got, A * B + B * A)


def test_injected_faults_reach_the_fast_path(device: hetero.Device, fused: bool) -> None:
    x, y = put(A, device), put(B, device)
    twice(lambda: x + y)
    with inject(f"{device.name}:launch:nth=2:lost") as injection:
        (x + y).numpy()
        with pytest.raises(DeviceLostError):
            (x + y).numpy()
        np.testing.assert_array_equal((x + y).numpy(), A + B)
    assert [(r.device, r.op, r.call) for r in injection.fired] == [(device.name, "launch", 2)]


def test_a_guarded_loop_on_the_fast_path_recovers_from_an_injected_fault(state_dir: Any) -> None:
    devices = [d.name for d in hetero.devices()]
    if len(devices) < 2:
        pytest.skip("needs two devices")
    a, b = devices[0], devices[1]

    def run(rule: str | None) -> dict[str, Any]:
        state: dict[str, Any] = {"w": put(A, hetero.device(a)), "sums": []}

        def step(k: int) -> None:
            w = state["w"]
            state["w"] = w * 0.5 + (w - 0.25)  # lone operations and a chain, fast path first
            state["sums"].append(float(hetero.sum(state["w"] * w)))

        with hetero.fault.inject(rule) if rule else contextlib.nullcontext(), \
                hetero.guard(state, snapshot_every=2, devices=[a, b]) as guard:
            for k in range(6):
                guard.run(step, k)
        return state

    faulted, clean = run(f"{a}:launch:nth=7:lost"), run(None)
    assert faulted["w"].device.name == b
    np.testing.assert_allclose(faulted["w"].numpy(), clean["w"].numpy(), rtol=1e-6)  # replayed on another device
    np.testing.assert_allclose(faulted["sums"], clean["sums"], rtol=1e-6)

