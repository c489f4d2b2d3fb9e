"""Every ``cuda.atomic`` operation numba-cuda has, on every dtype it takes (int32, uint32, int64,
uint64, float32, float64), in global and shared memory, on every device: the final values
against NumPy, and the old values each call returns checked as a serialisation (the values
the threads saw, with the final one, are the initial one and each thread's result)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.core.errors import CompileError

DTYPES = [np.int32, np.uint32, np.int64, np.uint64, np.float32, np.float64]
SLOTS = 4
THREADS = 64
LIMIT = 5  # the bound inc and dec wrap at


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


def _np_max(a: Any, b: Any) -> Any:
    return b if b > a else a  # numba-cuda: the old value stays when either is NaN


def _np_min(a: Any, b: Any) -> Any:
    return b if b < a else a


def _nanmax(a: Any, b: Any) -> Any:
    return np.fmax(a, b)


def _nanmin(a: Any, b: Any) -> Any:
    return np.fmin(a, b)


#: Each operation as numba-cuda computes it on (old, val).
OPS: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "max": _np_max, "min": _np_min, "nanmax": _nanmax,
    "nanmin": _nanmin, "and_": lambda a, b: a & b, "or_": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
    "exch": lambda a, b: b, "inc": lambda a, b: a.dtype.type(0) if a >= b else a + a.dtype.type(1),
    "dec": lambda a, b: b if a == 0 or a > b else a - a.dtype.type(1),
}
ALL = ("add", "sub", "max", "min", "nanmax", "nanmin")
INTEGER = ("and_", "or_", "xor", "exch")
UNSIGNED = ("inc", "dec")


@cuda.jit
def every_atomic(a, vals, olds):
    i = cuda.grid(1)
    if i < vals.size:
        s = i % 4
        olds[0, i] = cuda.atomic.add(a, (0, s), vals[i])
        olds[1, i] = cuda.atomic.sub(a, (1, s), vals[i])
        olds[2, i] = cuda.atomic.max(a, (2, s), vals[i])
        olds[3, i] = cuda.atomic.min(a, (3, s), vals[i])
        olds[4, i] = cuda.atomic.nanmax(a, (4, s), vals[i])
        olds[5, i] = cuda.atomic.nanmin(a, (5, s), vals[i])


@cuda.jit
def integer_atomics(a, vals, olds):
    i = cuda.grid(1)
    if i < vals.size:
        s = i % 4
        olds[0, i] = cuda.atomic.and_(a, (0, s), vals[i])
        olds[1, i] = cuda.atomic.or_(a, (1, s), vals[i])
        olds[2, i] = cuda.atomic.xor(a, (2, s), vals[i])
        olds[3, i] = cuda.atomic.exch(a, (3, s), vals[i])


@cuda.jit
def unsigned_atomics(a, vals, olds):
    i = cuda.grid(1)
    if i < vals.size:
        s = i % 4
        olds[0, i] = cuda.atomic.inc(a, (0, s), vals[i])
        olds[1, i] = cuda.atomic.dec(a, (1, s), vals[i])


def _shared_kernel(ops: tuple[str, ...], dtype: Any) -> Any:
    """The same operations on a shared copy of ``a`` (rows of 4), written back after."""
    first, *rest = (getattr(cuda.atomic, op) for op in ops + ("add",) * (6 - len(ops)))
    f1, f2, f3, f4, f5 = rest
    count = len(ops)

    @cuda.jit
    def shared_atomics(a, vals, olds):
        t = cuda.threadIdx.x
        s = t % 4
        sh = cuda.shared.array((6, 4), dtype)
        if t < 24:
            sh[t // 4, s] = a[t // 4, s]
        cuda.syncthreads()
        olds[0, t] = first(sh, (0, s), vals[t])
        if count > 1:
            olds[1, t] = f1(sh, (1, s), vals[t])
        if count > 2:
            olds[2, t] = f2(sh, (2, s), vals[t])
        if count > 3:
            olds[3, t] = f3(sh, (3, s), vals[t])
        if count > 4:
            olds[4, t] = f4(sh, (4, s), vals[t])
            olds[5, t] = f5(sh, (5, s), vals[t])
        cuda.syncthreads()
        if t < 24:
            a[t // 4, s] = sh[t // 4, s]

    return shared_atomics


_SHARED: dict[tuple[tuple[str, ...], Any], Any] = {}


def _values(ops: tuple[str, ...], dtype: Any) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(len(ops) + np.dtype(dtype).itemsize)
    if ops == UNSIGNED:
        start = rng.integers(0, LIMIT + 1, (len(ops), SLOTS)).astype(dtype)
        return start, np.full(THREADS, LIMIT, dtype)
    high = 1000 if ops == ALL else 2**16
    start = rng.integers(0, high, (len(ops), SLOTS)).astype(dtype)
    vals = rng.integers(0, high, THREADS).astype(dtype)
    if np.dtype(dtype).kind != "u" and ops == ALL:
        vals[::3] = -vals[::3]  # negative values too
        start[:, 0] = -start[:, 0]
    return start, vals


def _check(ops: tuple[str, ...], start: np.ndarray, vals: np.ndarray, final: np.ndarray, olds: np.ndarray) -> None:
    for row, op in enumerate(ops):
        for slot in range(SLOTS):
            mine = np.arange(slot, THREADS, SLOTS)
            if op not in ("exch", "inc", "dec"):  # order-independent: the final value is NumPy's
                expected = start[row, slot]
                for v in vals[mine]:
                    expected = OPS[op](expected, v)
                assert final[row, slot] == expected, (op, slot)
            seen = Counter([start[row, slot].item(), *(OPS[op](o, v).item() for o, v in zip(olds[row, mine], vals[mine]))])
            held = Counter([final[row, slot].item(), *(o.item() for o in olds[row, mine])])
            assert seen == held, f"{op}, slot {slot}: the old values are no serialisation"


def _run(kernel: Any, ops: tuple[str, ...], dtype: Any) -> None:
    start, vals = _values(ops, dtype)
    a = np.zeros((6, SLOTS), dtype)
    a[: len(ops)] = start
    olds = np.zeros((6, THREADS), dtype)
    with np.errstate(over="ignore"):
        kernel[1, THREADS](a, vals, olds)
        _check(ops, start, vals, a[: len(ops)], olds[: len(ops)])


@pytest.mark.parametrize("dtype", DTYPES)
def test_add_sub_max_min_nanmax_nanmin(on: hetero.Device, dtype: Any) -> None:
    _run(every_atomic, ALL, dtype)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_and_or_xor_exch(on: hetero.Device, dtype: Any) -> None:
    _run(integer_atomics, INTEGER, dtype)


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_inc_dec_wrap(on: hetero.Device, dtype: Any) -> None:
    _run(unsigned_atomics, UNSIGNED, dtype)


@pytest.mark.parametrize("ops, dtype", [(ALL, t) for t in DTYPES] + [(INTEGER, np.int32), (INTEGER, np.uint64),
                                                                     (UNSIGNED, np.uint32), (UNSIGNED, np.uint64)])
def test_in_shared_memory(on: hetero.Device, ops: tuple[str, ...], dtype: Any) -> None:
    key = (ops, dtype)
    if key not in _SHARED:
        _SHARED[key] = _shared_kernel(ops, getattr(cuda, np.dtype(dtype).name))
    _run(_SHARED[key], ops, dtype)


@cuda.jit
def nan_atomics(a, vals, olds):
    olds[0] = cuda.atomic.max(a, 0, vals[0])
    olds[1] = cuda.atomic.min(a, 1, vals[1])
    olds[2] = cuda.atomic.nanmax(a, 2, vals[2])
    olds[3] = cuda.atomic.nanmin(a, 3, vals[3])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("where", ["location", "value"])
def test_nan_as_numba_cuda_takes_it(on: hetero.Device, dtype: Any, where: str) -> None:
    """max/min keep the stored value when either is NaN; nanmax/nanmin take NaN as missing."""
    a = np.full(4, np.nan if where == "location" else 7.0, dtype)
    vals = np.full(4, 7.0 if where == "location" else np.nan, dtype)
    olds = np.zeros(4, dtype)
    nan_atomics[1, 1](a, vals, olds)
    np.testing.assert_array_equal(olds, a * 0 + (np.nan if where == "location" else 7.0))
    expected = [np.nan, np.nan, 7.0, 7.0] if where == "location" else [7.0] * 4
    np.testing.assert_array_equal(a, np.array(expected, dtype))


@cuda.jit
def swaps(a, old, new, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda.atomic.compare_and_swap(a, old[i], new[i])


@cuda.jit
def swaps_at(a, old, new, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda.atomic.cas(a, (i % 2, i % 3), old[i], new[i])


@pytest.mark.parametrize("dtype", [np.int32, np.uint32, np.int64, np.uint64])
def test_compare_and_swap(on: hetero.Device, dtype: Any) -> None:
    """Threads i swap i for i + 1: a chain 0, 1, … of them succeeds, each returning what it saw."""
    n = 32
    a = np.zeros(1, dtype)
    out = np.zeros(n, dtype)
    swaps[1, n](a, np.arange(n, dtype=dtype), np.arange(1, n + 1, dtype=dtype), out)
    k = int(a[0])  # the threads 0..k-1 swapped, in that order; the rest came too early or too late
    swapped = out == np.arange(n, dtype=dtype)
    assert 1 <= k <= n and swapped[:k].all() and not swapped[k:].any()
    assert (out[k:] <= k).all()
    grid = np.arange(6, dtype=dtype).reshape(2, 3)
    out6 = np.zeros(6, dtype)
    old = np.array([0, 4, 2, 99, 4, 5], dtype)  # element (i % 2, i % 3) is 3 * (i % 2) + i % 3
    swaps_at[1, 6](grid, old, old + dtype(10), out6)
    np.testing.assert_array_equal(out6, [0, 4, 2, 3, 1, 5])  # the old value, swapped or not
    np.testing.assert_array_equal(grid.ravel(), [10, 1, 12, 3, 14, 15])


@cuda.jit
def float_and(a, vals):
    cuda.atomic.and_(a, 0, vals[0])


@cuda.jit
def signed_inc(a, vals):
    cuda.atomic.inc(a, 0, vals[0])


def test_unsupported_dtypes_are_compile_errors(on: hetero.Device) -> None:
    with pytest.raises(CompileError, match=r"and.*integer"):
        float_and[1, 1](np.zeros(1, np.float32), np.zeros(1, np.float32))
    with pytest.raises(CompileError, match=r"inc.*u32 and u64"):
        signed_inc[1, 1](np.zeros(1, np.int32), np.zeros(1, np.int32))


@cuda.jit
def negative_indices(a, grid, shift):
    a[-1] = 5  # a constant counts from the end, as in Python and Numba
    grid[-1, 0] = 7
    cuda.atomic.add(a, -2, 3)
    cuda.atomic.add(a, shift, 1)  # numba-cuda wraps an atomic's negative index at run time
    cuda.atomic.max(grid, (0, shift), 9)


def test_negative_indices_count_from_the_end(on: hetero.Device) -> None:
    a = np.zeros(4, np.int32)
    grid = np.zeros((2, 3), np.int64)
    negative_indices[1, 1](a, grid, np.int64(-3))
    np.testing.assert_array_equal(a, [0, 1, 3, 5])
    np.testing.assert_array_equal(grid, [[9, 0, 0], [7, 0, 0]])


def _cas_on_a_view(res, old, ary, fill):  # type: ignore[no-untyped-def]
    gid = cuda.grid(1)
    if gid < res.size:
        old[gid] = cuda.atomic.compare_and_swap(res[gid:], fill, ary[gid])


def test_compare_and_swap_on_a_view_from_an_index_swaps_that_element(device: hetero.Device) -> None:
    """numba-cuda's own atomics tests call compare_and_swap(res[gid:], ...): element 0 of the view."""
    n = 32
    res = np.where(np.arange(n) % 2 == 0, 7, 3).astype(np.int32)
    ary = np.arange(100, 100 + n, dtype=np.int32)
    old = np.zeros(n, dtype=np.int32)
    with hetero.use_device(device):
        d_res, d_old = cuda.to_device(res), cuda.to_device(old)
        cuda.jit(_cas_on_a_view)[1, n](d_res, d_old, cuda.to_device(ary), np.int32(7))
        got_res, got_old = d_res.copy_to_host(), d_old.copy_to_host()
    np.testing.assert_array_equal(got_old, res)
    np.testing.assert_array_equal(got_res, np.where(res == 7, ary, res))
