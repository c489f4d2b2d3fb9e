"""Device functions given compile-time arguments, as Numba-CUDA code passes them: a type, an
atomic (or another intrinsic) and a device function, on every device against NumPy."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.compat.cuda import float64, int32, uint32


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


@cuda.jit(device=True)
def as_is(x):
    return x


@cuda.jit(device=True)
def halved(x):
    return x // 2


@cuda.jit(device=True)
def histogram_in(bins, out, keys, element_type, update, key_of):
    t = cuda.threadIdx.x
    if t < 16:
        bins[t] = 0
    cuda.syncthreads()
    update(bins, key_of(keys[t]) % 16, element_type(1))
    cuda.syncthreads()
    if t < 16:
        out[t] = bins[t]


@cuda.jit
def histograms(keys, by_add, by_sub_halved):
    counts = cuda.shared.array(16, uint32)
    signed = cuda.shared.array(16, int32)
    histogram_in(counts, by_add, keys, uint32, cuda.atomic.add, as_is)
    histogram_in(signed, by_sub_halved, keys, int32, cuda.atomic.sub, halved)


def test_type_atomic_and_function_arguments(on: hetero.Device) -> None:
    keys = np.random.default_rng(3).integers(0, 1000, 64).astype(np.int64)
    by_add = np.zeros(16, np.uint32)
    by_sub = np.zeros(16, np.int32)
    histograms[1, 64](keys, by_add, by_sub)
    np.testing.assert_array_equal(by_add, np.bincount(keys % 16, minlength=16))
    np.testing.assert_array_equal(by_sub, -np.bincount((keys // 2) % 16, minlength=16))


@cuda.jit(device=True)
def converted(value, to):
    return to(value) * 2


@cuda.jit
def casts(x, out_f, out_i):
    i = cuda.grid(1)
    if i < x.size:
        out_f[i] = converted(x[i], float64)
        out_i[i] = converted(x[i], int32)


def test_a_type_as_a_cast(on: hetero.Device) -> None:
    x = np.array([1.75, -2.5, 3.0], np.float32)
    out_f = np.zeros(3, np.float64)
    out_i = np.zeros(3, np.int64)
    casts[1, 4](x, out_f, out_i)
    np.testing.assert_array_equal(out_f, x.astype(np.float64) * 2)
    np.testing.assert_array_equal(out_i, x.astype(np.int32) * 2)


@cuda.jit(device=True)
def block_histogram(out, keys, element_type, update):
    """Shared and per-thread arrays declared in a device function (inlined into the kernel, each call
    with arrays of its own)."""
    t = cuda.threadIdx.x
    bins = cuda.shared.array(16, element_type)
    mine = cuda.local.array(2, element_type)
    if t < 16:
        bins[t] = 0
    cuda.syncthreads()
    mine[0] = element_type(1)
    mine[1] = mine[0] + mine[0]
    update(bins, keys[t] % 16, mine[1] - mine[0])
    cuda.syncthreads()
    if t < 16:
        out[t] = bins[t]


@cuda.jit
def two_histograms(keys, first, second):
    block_histogram(first, keys, uint32, cuda.atomic.add)
    block_histogram(second, keys, int32, cuda.atomic.sub)


def test_arrays_declared_in_a_device_function(on: hetero.Device) -> None:
    keys = np.random.default_rng(4).integers(0, 1000, 64).astype(np.int64)
    first = np.zeros(16, np.uint32)
    second = np.zeros(16, np.int32)
    two_histograms[1, 64](keys, first, second)
    np.testing.assert_array_equal(first, np.bincount(keys % 16, minlength=16))
    np.testing.assert_array_equal(second, -np.bincount(keys % 16, minlength=16))


@cuda.jit
def constant_local_shape(a, rows, cols):
    n = 48  # a local assigned one constant: a shape, as Numba's constant propagation takes it
    scratch = cuda.shared.array(n, int32)
    m, k = a.shape  # a shape unpacked into names
    i = cuda.grid(1)
    if i < n:
        scratch[i] = i * 2
    cuda.syncthreads()
    if i == 0:
        rows[0] = m
        cols[0] = k
        for j in range(n):
            a[j % m, j % k] += scratch[j]


def test_constant_local_as_shape_and_shape_unpacking(on: hetero.Device) -> None:
    a = np.zeros((5, 7), np.int32)
    rows = np.zeros(1, np.int64)
    cols = np.zeros(1, np.int64)
    constant_local_shape[1, 64](a, rows, cols)
    expected = np.zeros((5, 7), np.int32)
    for j in range(48):
        expected[j % 5, j % 7] += 2 * j
    np.testing.assert_array_equal(a, expected)
    assert rows[0] == 5 and cols[0] == 7


@cuda.jit(device=True)
def sum_in_shared(a, out, size, element_type):
    buffer = cuda.shared.array(size, element_type)  # size: a literal the call gives
    t = cuda.threadIdx.x
    if t < size:
        buffer[t] = a[t]
    cuda.syncthreads()
    if t == 0:
        total = buffer[0]
        for j in range(1, size):
            total += buffer[j]
        out[0] = total


@cuda.jit
def sums(a, small, large):
    sum_in_shared(a, small, 8, int32)
    sum_in_shared(a, large, 32, int32)


def test_integer_literal_as_a_shape_argument(on: hetero.Device) -> None:
    a = np.arange(32, dtype=np.int32)
    small = np.zeros(1, np.int32)
    large = np.zeros(1, np.int32)
    sums[1, 32](a, small, large)
    assert small[0] == a[:8].sum() and large[0] == a.sum()


def _scaler(k: int) -> object:
    @cuda.jit(device=True)
    def scale(x):
        return x * k

    return scale


twice, thrice = _scaler(2), _scaler(3)


@cuda.jit
def two_functions_one_name(a, out):
    out[0] = twice(a[0])
    out[1] = thrice(a[0])


def test_device_functions_of_one_name_stay_apart(on: hetero.Device) -> None:
    """Two functions named alike (or one bound to two objects alike named) are two functions."""
    out = np.zeros(2, np.int64)
    two_functions_one_name[1, 1](np.array([5], np.int64), out)
    np.testing.assert_array_equal(out, [10, 15])
