"""The CPU emitter moves an elementwise kernel's bounds guard into its loop's range (no masked
loads and stores for LLVM to make: vmaskmovps is microcoded on AMD Zen), and only where that keeps
the kernel's meaning: the same answers with the guard's bound below, at and past the launch size,
and the guard kept where moving it would not be exact."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero import f32, i32, u32, u64

pytest.importorskip("numba")


@hetero.kernel
def triad(a, b, c, s: f32):
    i = hetero.global_id(0)
    if i < a.shape[0]:
        a[i] = b[i] + s * c[i]


@hetero.kernel
def first_n(out, x, n: i32):
    i = hetero.global_id(0)
    j = i * 2
    if n > i:
        out[i] = x[j]


@hetero.kernel
def first_n_unsigned(out, x, n: u32):
    i = hetero.global_id(0)
    if i < n:
        out[i] = x[i] + 1.0


@hetero.kernel
def first_n_u64(out, x, n: u64):
    i = hetero.global_id(0)
    if i < n:
        out[i] = x[i] + 1.0


@hetero.kernel
def with_else(out, n: i32):
    i = hetero.global_id(0)
    if i < n:
        out[i] = 1.0
    else:
        out[i] = 2.0


@hetero.kernel
def bound_reassigned(out, n: i32):
    i = hetero.global_id(0)
    n = n - 1
    if i < n:
        out[i] = 1.0


def _loop_body(kernel, signature: str) -> list[str]:
    source = kernel.source("cpu", signature)
    lines = source.splitlines()
    start = next(k for k, line in enumerate(lines) if "for l0 in range(n0):" in line)
    return lines[start - 1:start + 4]


def test_the_triad_loop_has_no_branch() -> None:
    body = _loop_body(triad, "f32[:], f32[:], f32[:], f32")
    assert "n0 = min(n0, p_a.shape[0] - base0)" in body[0]
    assert not any(line.strip().startswith("if ") for line in body)


@pytest.mark.parametrize("size", [1, 4095, 4096, 4097, 3 * 4096 + 17])
def test_triad_answers_at_every_size(size: int) -> None:
    rng = np.random.default_rng(size)
    b, c = (rng.standard_normal(size).astype(np.float32) for _ in range(2))
    a = hetero.zeros(size, dtype="float32", device="cpu")
    triad[size + 100](a, hetero.asarray(b), hetero.asarray(c), np.float32(3.0))  # a launch past the arrays
    np.testing.assert_array_equal(a.numpy(), b + np.float32(3.0) * c)


@pytest.mark.parametrize("n", [-5, 0, 1, 4096, 5000, 9000])
def test_a_scalar_bound_below_at_and_past_the_launch(n: int) -> None:
    x = np.arange(20000, dtype=np.float32)
    out = hetero.zeros(9000, dtype="float32", device="cpu")
    first_n[8193](out, hetero.asarray(x), np.int32(n))
    want = np.zeros(9000, np.float32)
    k = max(0, min(n, 8193))
    want[:k] = x[: 2 * k : 2]
    np.testing.assert_array_equal(out.numpy(), want)
    assert "n0 = min(n0, np.int64(p_n) - base0)" in "\n".join(_loop_body(first_n, "f32[:], f32[:], i32"))


@pytest.mark.parametrize("kernel, signature, args, want", [
    (with_else, "f32[:], i32", (np.int32(5),), np.array([1.0] * 5 + [2.0] * 3, np.float32)),
    (bound_reassigned, "f32[:], i32", (np.int32(5),), np.array([1.0] * 4 + [0.0] * 4, np.float32)),
])
def test_the_guard_stays_where_moving_it_would_change_the_answer(kernel, signature, args, want) -> None:
    out = hetero.zeros(8, dtype="float32", device="cpu")
    kernel[8](out, *args)
    np.testing.assert_array_equal(out.numpy(), want)
    assert "n0 = min(n0," not in "\n".join(_loop_body(kernel, signature))


@pytest.mark.parametrize("kernel, t, moved", [(first_n_unsigned, "u32", True), (first_n_u64, "u64", False)])
def test_unsigned_bounds(kernel, t: str, moved: bool) -> None:
    """A u32 bound compares as i64 (C's conversions), exactly, so it moves; a u64 one compares as
    u64, which ``min`` with the signed item count would not do right: the guard stays."""
    x = np.arange(10, dtype=np.float32)
    out = hetero.zeros(10, dtype="float32", device="cpu")
    kernel[10](out, hetero.asarray(x), {"u32": np.uint32, "u64": np.uint64}[t](7))
    np.testing.assert_array_equal(out.numpy(), np.where(np.arange(10) < 7, x + 1, 0).astype(np.float32))
    assert ("n0 = min(n0," in "\n".join(_loop_body(kernel, f"f32[:], f32[:], {t}"))) is moved
