"""One launch, one meaning on every device: sizes and scalar arguments are checked before any backend.

``kernel[(global,), (local,)]`` counts work-items (OpenCL's NDRange, not CUDA's grid of blocks); a
local size that does not divide the global size is a KernelLaunchError on every device, naming
both sizes and the rounded-up launch. Float sizes, sizes past 2**63 - 1, keyword arguments and
scalars that do not fit their parameter are KernelLaunchErrors naming the parameter, never
NumPy's or the driver's raw errors, and never a silently truncated value.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import hetero
from kernels import corpus


@hetero.kernel
def fill_i32(n: hetero.i32, out: hetero.Array[hetero.i32]):
    i = hetero.global_id(0)
    if i < out.shape[0]:
        out[i] = n


@hetero.kernel
def fill_u32(n: hetero.u32, out: hetero.Array[hetero.u32]):
    i = hetero.global_id(0)
    if i < out.shape[0]:
        out[i] = n


@hetero.kernel
def fill_any(n, out: hetero.Array[hetero.i64]):
    i = hetero.global_id(0)
    if i < out.shape[0]:
        out[i] = n


@hetero.kernel
def fill_2d(out: hetero.Array[hetero.f32]):
    i = hetero.global_id(0)
    j = hetero.global_id(1)
    if i < out.shape[0] and j < out.shape[1]:
        out[i, j] = 1.0


@hetero.kernel
def count_items(out: hetero.Array[hetero.i64]):
    i = hetero.global_id(0)
    if i < out.shape[0]:
        out[i] = hetero.global_size(0)


def test_a_local_size_that_does_not_divide_the_global_size_fails_on_every_device(device: hetero.Device) -> None:
    x = hetero.zeros(100, device=device)
    y = hetero.zeros(100, device=device)
    with pytest.raises(hetero.KernelLaunchError) as info:
        corpus.saxpy[(100,), (64,)](2.0, x, y)
    message = str(info.value)
    assert "saxpy" in message and "(100,)" in message and "(64,)" in message
    assert "saxpy[(128,), (64,)]" in message and "if i < n:" in message  # the remedy
    grid = hetero.zeros((48, 12), device=device)
    with pytest.raises(hetero.KernelLaunchError, match=r"\(48, 12\) is not a multiple of local size \(16, 8\).*"
                                                       r"fill_2d\[\(48, 16\), \(16, 8\)\]"):
        fill_2d[(48, 12), (16, 8)](grid)
    assert not grid.numpy().any()


def test_the_global_size_counts_work_items_on_every_device(device: hetero.Device) -> None:
    out = hetero.zeros(128, dtype="int64", device=device)
    count_items[(128,), (64,)](out)
    np.testing.assert_array_equal(out.numpy(), np.full(128, 128))
    out = hetero.zeros(100, dtype="int64", device=device)
    count_items[100](out)  # without a local size, any global size: the backend picks a group size
    np.testing.assert_array_equal(out.numpy(), np.full(100, 100))


@pytest.mark.parametrize("config", [100.0, 2.5, (100.0,), ((128.0,), (64,)), ((128,), (64.0,)), 1 << 64,
                                    (1 << 32, 1 << 32), True, "8", None])
def test_sizes_that_are_not_work_item_counts_are_refused(config: object) -> None:
    x = hetero.zeros(128, device="cpu")
    corpus.saxpy[128](1.0, x, x)  # an equal int launch seen first must not let a float through
    corpus.saxpy[(128,), (64,)](1.0, x, x)
    with pytest.raises(hetero.KernelLaunchError, match="saxpy: (global|local) size"):
        corpus.saxpy[config](1.0, x, x)


def test_keyword_arguments_name_the_parameter(device: hetero.Device) -> None:
    x = hetero.zeros(4, device=device)
    with pytest.raises(hetero.KernelLaunchError, match="parameter 'y' was passed by keyword"):
        corpus.saxpy[4](1.0, x, y=x)
    with pytest.raises(hetero.KernelLaunchError, match="'a', 'x', 'y'.*saxpy\\[n\\]\\(a, x, y\\)"):
        corpus.saxpy[4](a=1.0, x=x, y=x)
    with pytest.raises(hetero.KernelLaunchError, match="'z' is not a parameter"):
        corpus.saxpy[4](1.0, x, x, z=3)


@pytest.mark.parametrize(("kernel", "value", "why"), [
    (fill_i32, 1 << 31, "outside -2147483648..2147483647"),
    (fill_i32, -(1 << 31) - 1, "outside"),
    (fill_i32, np.int64(1 << 40), "outside"),
    (fill_i32, 2.5, "not an integer"),
    (fill_i32, np.float64(3.0), "not an integer"),
    (fill_u32, -1, "outside 0..4294967295"),
    (fill_any, 1 << 70, "outside"),  # an unannotated int is i64
])
def test_integer_scalars_that_do_not_fit_name_the_parameter(device: hetero.Device, kernel: object,
                                                            value: object, why: str) -> None:
    dtype = "uint32" if kernel is fill_u32 else "int64" if kernel is fill_any else "int32"
    out = hetero.zeros(4, dtype=dtype, device=device)
    name = kernel.name  # type: ignore[attr-defined]
    with pytest.raises(hetero.KernelLaunchError, match=f"{name}: parameter 'n' is .*{why}"):
        kernel[4](value, out)  # type: ignore[index]
    assert not out.numpy().any()  # nothing ran


def test_float_scalars_that_overflow_name_the_parameter(device: hetero.Device) -> None:
    x = hetero.zeros(4, device=device)
    for value in (1e39, -1e39, np.float64(1e300), 1 << 200):
        with pytest.raises(hetero.KernelLaunchError, match="saxpy: parameter 'a' is f32, .*overflows f32"):
            corpus.saxpy[4](value, x, x)
    y = hetero.zeros(4, device=device)
    corpus.saxpy[4](float("inf"), hetero.ones(4, device=device), y)  # infinity itself is a value, not an overflow
    assert np.isinf(y.numpy()).all()


def test_scalars_that_fit_still_run(device: hetero.Device) -> None:
    out = hetero.zeros(4, dtype="int32", device=device)
    for value in (-(1 << 31), (1 << 31) - 1, np.int64(-5), True):
        fill_i32[4](value, out)
        np.testing.assert_array_equal(out.numpy(), np.full(4, int(value), np.int32))
    big = hetero.zeros(4, dtype="int64", device=device)
    fill_any[4]((1 << 63) - 1, big)
    np.testing.assert_array_equal(big.numpy(), np.full(4, (1 << 63) - 1, np.int64))


def test_numpy_float_scalars_of_any_width_pass_without_a_warning(device: hetero.Device) -> None:
    # The overflow check compared an np.float32 with the f32 limit, which NumPy cast to float32:
    # "overflow encountered in cast" on every such launch (the digits example passes np.float32).
    x, y = hetero.ones(4, device=device), hetero.zeros(4, device=device)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for value in (np.float16(2.0), np.float32(2.0), np.float64(2.0), np.float32("inf")):
            corpus.saxpy[4](value, x, y)
    assert np.isinf(y.numpy()).all()


def test_a_split_launch_follows_the_same_rule() -> None:
    x = hetero.zeros(100, device="cpu")
    y = hetero.zeros(100, device="cpu")
    with pytest.raises(hetero.KernelLaunchError, match=r"saxpy: global size \(100,\) is not a multiple of local size"):
        corpus.saxpy.split(["cpu"])[(100,), (64,)](2.0, x, y)
