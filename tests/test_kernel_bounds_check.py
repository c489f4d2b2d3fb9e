"""Checked mode (``HETERO_BOUNDS_CHECK=1``, ``@hetero.kernel(debug=True)``, ``cuda.jit(debug=True)``):
every out-of-bounds array access, on every device, is an error naming the kernel, the array and
the index, and the access is not made; in-bounds kernels compute what they compute unchecked.

Out-of-bounds accesses run here only with checks on (the point of the mode), and the arrays the
kernels reach past are prefixes of larger allocations, so that a missing check would be seen as a
changed element of the allocation, never as a corrupted heap. Unchecked, by default, hetero trusts
the indices, as CUDA does (see docs/kernels.md)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.compiler.build import pipeline
from hetero.core.errors import CompileError, KernelIndexError, KernelLaunchError
from hetero.core.types import f32, i64


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


def padded(values: np.ndarray, device: hetero.Device, pad: int = 64) -> tuple[hetero.Array, hetero.Array]:
    """``(whole, view)``: the values as the first elements of a larger allocation, and the view of them."""
    whole = hetero.asarray(np.concatenate([values, np.full(pad, -7, values.dtype)]), device=device)
    return whole, whole[:values.size]


# -- in bounds: the same answers, checked or not ------------------------------------------------
@hetero.func
def twice(a: hetero.Array[f32], i: i64) -> f32:
    return a[i] * 2


def mixed(x: hetero.Array[f32], grid: hetero.Array[f32], count: hetero.Array[hetero.i32], out: hetero.Array[f32]):
    i = hetero.global_id(0)
    tile = hetero.local_array((64,), f32)
    lid = hetero.local_id(0)
    tile[lid] = x[i]
    hetero.barrier()
    if i < x.shape[0]:
        out[i] = twice(x, i) + tile[63 - lid] + grid[i % grid.shape[0], i // grid.shape[0]]
        hetero.atomic_add(count, 0, 1)


plain_mixed = hetero.kernel(mixed)
checked_mixed = hetero.kernel(debug=True)(mixed)


def test_in_bounds_kernels_compute_the_same_with_checks(on: hetero.Device) -> None:
    rng = np.random.default_rng(7)
    x = rng.standard_normal(128).astype(np.float32)
    grid = rng.standard_normal((32, 4)).astype(np.float32)
    results = []
    for kernel in (plain_mixed, checked_mixed):
        out, count = hetero.zeros(128, np.float32, device=on), hetero.zeros(1, np.int32, device=on)
        kernel[(128,), (64,)](hetero.asarray(x, device=on), hetero.asarray(grid, device=on), count, out)
        results.append((out.numpy(), count.numpy()))
    np.testing.assert_array_equal(results[0][0], results[1][0])
    assert results[0][1][0] == results[1][1][0] == 128
    assert "_hetero_bounds" in checked_mixed.source(on) and "_hetero_bounds" not in plain_mixed.source(on)


# -- out of bounds: an error naming kernel, array and index; the access not made ------------------
@hetero.kernel(debug=True)
def store_past_end(out: hetero.Array[f32], n: i64):
    i = hetero.global_id(0)
    if i < n:
        out[i] = 1.0
    if i == n - 1:
        out[i + 16] = 5.0  # 16 past the end: "double free or corruption" on cpu, unchecked


@hetero.kernel(debug=True)
def read_past_end(x: hetero.Array[f32], out: hetero.Array[f32]):
    i = hetero.global_id(0)
    if i == 0:
        out[0] = x[x.shape[0] + 3]


@hetero.kernel(debug=True)
def read_before_start(x: hetero.Array[f32], out: hetero.Array[f32]):
    i = hetero.global_id(0)
    out[i] = x[i - 1]  # work-item 0 reads index -1


@hetero.kernel(debug=True)
def atomic_past_end(count: hetero.Array[hetero.i32]):
    i = hetero.global_id(0)
    hetero.atomic_add(count, i, 1)


@hetero.kernel(debug=True)
def second_axis(m: hetero.Array[f32]):
    i = hetero.global_id(0)
    if i == 1:
        m[0, i + 4] = 3.0


@hetero.kernel(debug=True)
def local_past_end(out: hetero.Array[f32]):
    tile = hetero.local_array((8,), f32)
    lid = hetero.local_id(0)
    tile[lid % 8] = 1.0
    hetero.barrier()
    out[lid] = tile[lid]  # 9 work-items, 8 slots: a read past the end


def _says(error: pytest.ExceptionInfo[KernelIndexError], kernel: str, array: str, index: int, extent: int) -> None:
    text = str(error.value)
    assert f"{kernel}:" in text and repr(array) in text, text
    assert f"index {index} " in text and f"extent is {extent}" in text, text
    assert isinstance(error.value, IndexError) and isinstance(error.value, KernelLaunchError)


def test_a_store_past_the_end_is_refused_and_not_made(on: hetero.Device) -> None:
    whole, out = padded(np.zeros(10, np.float32), on)
    with pytest.raises(KernelIndexError) as error:
        store_past_end[10](out, 10)
    _says(error, "store_past_end", "out", 25, 10)
    assert "a write to" in str(error.value) and "test_kernel_bounds_check.py:" in str(error.value)
    got = whole.numpy()
    np.testing.assert_array_equal(got[:10], 1.0)  # the in-bounds stores were made
    np.testing.assert_array_equal(got[10:], -7.0)  # the one past the end was not


def test_reads_past_the_end_and_before_the_start_are_refused(on: hetero.Device) -> None:
    _, x = padded(np.arange(10, dtype=np.float32), on)
    out = hetero.zeros(10, np.float32, device=on)
    with pytest.raises(KernelIndexError) as error:
        read_past_end[4](x, out)
    _says(error, "read_past_end", "x", 13, 10)
    assert "a read of" in str(error.value)
    with pytest.raises(KernelIndexError) as error:
        read_before_start[10](x, out)
    _says(error, "read_before_start", "x", -1, 10)
    np.testing.assert_array_equal(out.numpy()[1:], np.arange(9))  # the others read what is there


def test_atomics_second_axes_and_local_arrays_are_checked(on: hetero.Device) -> None:
    whole, count = padded(np.zeros(4, np.int32), on)
    with pytest.raises(KernelIndexError) as error:
        atomic_past_end[5](count)
    _says(error, "atomic_past_end", "count", 4, 4)
    assert whole.numpy()[4] == -7
    m = hetero.zeros((2, 3), np.float32, device=on)
    with pytest.raises(KernelIndexError) as error:
        second_axis[4](m)
    _says(error, "second_axis", "m", 5, 3)
    assert "on axis 1" in str(error.value)
    with pytest.raises(KernelIndexError) as error:
        local_past_end[(9,), (9,)](hetero.zeros(9, np.float32, device=on))
    _says(error, "local_past_end", "tile", 8, 8)


def test_after_an_error_the_next_launch_starts_clean(on: hetero.Device) -> None:
    _, out = padded(np.zeros(10, np.float32), on)
    with pytest.raises(KernelIndexError):
        store_past_end[10](out, 10)
    store_past_end[9](out, 10)  # work-item 9 never runs: nothing out of bounds


@cuda.jit(debug=True)
def numba_store(a, n):
    i = cuda.grid(1)
    if i <= n:  # one too many
        a[i] = i


def test_numba_cuda_debug_true_checks_indices(on: hetero.Device) -> None:
    whole, a = padded(np.zeros(64, np.int64), on)
    with pytest.raises(IndexError) as error:
        numba_store[2, 64](a, 64)
    assert "numba_store:" in str(error.value) and "'a'" in str(error.value) and "index 64 " in str(error.value)
    np.testing.assert_array_equal(whole.numpy()[:65], [*range(64), -7])


def test_hetero_bounds_check_checks_every_kernel(on: hetero.Device, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HETERO_BOUNDS_CHECK", "1")
    hetero.reload_config()
    try:
        def reads_one_past(x: hetero.Array[f32], out: hetero.Array[f32]):
            i = hetero.global_id(0)
            out[i] = x[i + 1]

        kernel = hetero.kernel(reads_one_past)
        _, x = padded(np.arange(8, dtype=np.float32), on)
        with pytest.raises(KernelIndexError) as error:
            kernel[8](x, hetero.zeros(8, np.float32, device=on))
        _says(error, "reads_one_past", "x", 8, 8)
    finally:
        monkeypatch.undo()
        hetero.reload_config()


def test_checked_code_is_cached_apart_from_unchecked_code() -> None:
    """Same source, same signature, same device: the checked and the plain kernel never share a record."""
    parts = {"dialect": "opencl", "arch": "a", "toolchain": "t", "signature": "k(f32[:])"}
    assert pipeline.compile_key(pipeline.RECORD, "f" * 64, **parts).digest != \
        pipeline.compile_key(pipeline.RECORD, "f" * 64, checks="bounds", **parts).digest

    def copy_one(x: hetero.Array[f32], out: hetero.Array[f32]):
        out[hetero.global_id(0)] = x[hetero.global_id(0)]

    checked, plain = hetero.kernel(debug=True)(copy_one), hetero.kernel(copy_one)
    x, out = hetero.ones(4, device="cpu"), hetero.zeros(4, device="cpu")
    checked[4](x, out)  # built first: a plain kernel keyed alike would be served its record
    plain[4](x, out)
    assert "_hetero_bounds" not in plain.source("cpu") and "_hetero_bounds" in checked.source("cpu")


def test_an_index_computed_by_an_atomic_is_refused_in_checked_mode() -> None:
    @hetero.kernel(debug=True)
    def claim(slots: hetero.Array[hetero.i32], out: hetero.Array[f32]):
        out[hetero.atomic_add(slots, 0, 1)] = 1.0

    with pytest.raises(CompileError, match="assign the atomic's result to a variable"):
        claim[4](hetero.zeros(1, np.int32, device="cpu"), hetero.zeros(4, device="cpu"))


@hetero.kernel(debug=True)
def add_into(a: hetero.Array[f32], b: hetero.Array[f32], out: hetero.Array[f32]):
    i = hetero.global_id(0)
    out[i] = a[i] + b[i]


def test_checked_kernels_take_shared_memory_and_views(on: hetero.Device) -> None:
    """The launches that compile a variant (arrays sharing memory) or stage views run checked too."""
    a = hetero.asarray(np.arange(8, dtype=np.float32), device=on)
    add_into[8](a, a, a)  # one array three times: the variant that makes no no-alias promise
    np.testing.assert_array_equal(a.numpy(), np.arange(8) * 2)
    strided = hetero.asarray(np.arange(16, dtype=np.float32), device=on)[::2]
    out = hetero.zeros(8, np.float32, device=on)
    add_into[8](strided, strided, out)  # a view: run on a contiguous copy
    np.testing.assert_array_equal(out.numpy(), np.arange(0, 16, 2) * 2)
    with pytest.raises(KernelIndexError, match="'a'"):
        add_into[9](strided, strided, hetero.zeros(9, np.float32, device=on))
