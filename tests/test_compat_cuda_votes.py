"""Block votes (cuda.syncthreads_count/and/or) used inside expressions, as numba-cuda's own tests
write them (``out[i] = cuda.syncthreads_and(x[i])``), and the warp vote cuda.eq_sync, on every
device against NumPy."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.core.errors import CompileError


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


@cuda.jit
def votes_in_place(x, count, every, some):
    i = cuda.grid(1)
    count[i] = cuda.syncthreads_count(x[i])
    every[i] = cuda.syncthreads_and(x[i])
    some[i] = cuda.syncthreads_or(x[i])


@pytest.mark.parametrize("dtype", [np.int16, np.int32, np.int64])
def test_votes_stored_into_elements(on: hetero.Device, dtype: type) -> None:
    x = np.zeros(64, dtype)
    x[3] = 1  # block 0: one thread holds; block 1: none
    x[32:] = np.where(np.arange(32) % 2, 5, 0)
    count, every, some = (np.zeros(64, np.int32) for _ in range(3))
    votes_in_place[2, 32](x, count, every, some)
    blocks = (x != 0).reshape(2, 32)
    np.testing.assert_array_equal(count, np.repeat(blocks.sum(axis=1), 32))
    np.testing.assert_array_equal(every, np.repeat(blocks.all(axis=1), 32))
    np.testing.assert_array_equal(some, np.repeat(blocks.any(axis=1), 32))
    ones = np.ones(64, dtype)
    votes_in_place[2, 32](ones, count, every, some)
    assert (count == 32).all() and (every == 1).all() and (some == 1).all()


@cuda.jit
def votes_in_expressions(x, out):
    i = cuda.grid(1)
    t = cuda.threadIdx.x
    n = 100 + cuda.syncthreads_count(x[i] > 2) * 2
    if cuda.syncthreads_or(x[i] == 7):
        n += 1000
    elif cuda.syncthreads_and(x[i] >= 0):
        n += 10000
    out[i] = n + cuda.syncthreads_count(t < cuda.syncthreads_count(x[i] > 2))


def test_votes_in_conditions_and_arithmetic(on: hetero.Device) -> None:
    x = np.array([[1, 3, 5, 7, 0, 0, 0, 0], [1, 3, 5, 1, 0, 0, 9, 0], [-1, 3, 4, 1, 0, 0, 0, 0]], np.int64).ravel()
    out = np.zeros(x.size, np.int64)
    votes_in_expressions[3, 8](x, out)
    blocks = x.reshape(3, 8)
    expected = []
    for row in blocks:
        above = int((row > 2).sum())
        n = 100 + above * 2
        if (row == 7).any():
            n += 1000
        elif (row >= 0).all():
            n += 10000
        expected += [n + min(above, 8)] * 8
    np.testing.assert_array_equal(out, expected)


@cuda.jit
def vote_in_while(x, out):
    i = cuda.grid(1)
    while cuda.syncthreads_or(x[i] > 0):
        x[i] -= 1
    out[i] = x[i]


def test_vote_in_while_condition_is_refused(on: hetero.Device) -> None:
    with pytest.raises(CompileError, match="while condition") as info:
        vote_in_while[1, 4](np.ones(4, np.int64), np.zeros(4, np.int64))
    assert info.value.line > 0 and info.value.file.endswith("test_compat_cuda_votes.py")


@cuda.jit
def equal_votes(x, out, typed):
    i = cuda.grid(1)
    out[i] = cuda.eq_sync(0xFFFFFFFF, x[i])
    typed[i] = cuda.eq_sync(0xFFFFFFFF, x[i] > 0) + 1  # a bool, as Numba types it: True + 1 is 2


@pytest.mark.parametrize("pattern", ["zeros", "one", "ones", "half"])
def test_eq_sync(on: hetero.Device, pattern: str) -> None:
    x = np.zeros(64, np.int32)
    if pattern == "one":
        x[1] = 1
    elif pattern == "ones":
        x[:] = 3
    elif pattern == "half":
        x[32:] = 1  # warp 0 all false, warp 1 all true: each warp agrees
    out = np.full(64, -1, np.int32)
    typed = np.zeros(64, np.int64)
    equal_votes[1, 64](x, out, typed)
    warps = (x != 0).reshape(2, 32)
    agree = np.repeat(warps.all(axis=1) | ~warps.any(axis=1), 32)
    np.testing.assert_array_equal(out, agree.astype(np.int32))
    np.testing.assert_array_equal(typed, agree + 1)
