"""hetero.compat.cuda.random: Numba's xoroshiro128+ generators, created on the host and drawn
from in kernels on every device; checked against a plain-Python xoroshiro128+ written here and,
where Numba is installed, against Numba's own host implementation bit for bit."""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.compat.cuda import random as rng
from hetero.compat.cuda.arrays import DeviceNDArray
from hetero.compat.cuda.random import (
    create_xoroshiro128p_states, host_states, init_xoroshiro128p_states, xoroshiro128p_jump, xoroshiro128p_next,
    xoroshiro128p_normal_float32, xoroshiro128p_normal_float64, xoroshiro128p_uniform_float32,
    xoroshiro128p_uniform_float64,
)

# -- a plain-Python xoroshiro128+ (2016: a=55, b=14, c=36), the reference ------------------------
M64 = (1 << 64) - 1
JUMP = (0xBEAC0467EBA5FACB, 0xD86B048B86AA9922)


def ref_rotl(x: int, k: int) -> int:
    return ((x << k) | (x >> (64 - k))) & M64


def ref_next(state: tuple[int, int]) -> tuple[int, tuple[int, int]]:
    s0, s1 = state
    result = (s0 + s1) & M64
    s1 ^= s0
    return result, (ref_rotl(s0, 55) ^ s1 ^ ((s1 << 14) & M64), ref_rotl(s1, 36))


def ref_jump(state: tuple[int, int]) -> tuple[int, int]:
    j0 = j1 = 0
    for word in JUMP:
        for bit in range(64):
            if word >> bit & 1:
                j0 ^= state[0]
                j1 ^= state[1]
            _, state = ref_next(state)
    return j0, j1


def ref_seed(seed: int) -> tuple[int, int]:
    """splitmix64's first output for ``seed``, in both words (Numba's seeding)."""
    z = (seed + 0x9E3779B97F4A7C15) & M64
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M64
    z ^= z >> 31
    return z, z


def ref_states(n: int, seed: int, subsequence_start: int = 0) -> list[tuple[int, int]]:
    state = ref_seed(seed & M64)
    for _ in range(subsequence_start):
        state = ref_jump(state)
    out = [state]
    for _ in range(n - 1):
        out.append(ref_jump(out[-1]))
    return out


def ref_draws(state: tuple[int, int], count: int) -> tuple[list[int], tuple[int, int]]:
    values = []
    for _ in range(count):
        value, state = ref_next(state)
        values.append(value)
    return values, state


def ref_unit_float32(x: int) -> np.float32:
    return np.float32((x >> 11) * 2.0**-53)  # exact in float64, then rounded to nearest: Numba's


# -- kernels (module level: hetero reads their source) -----------------------------------------
@hetero.kernel
def draw_u64(states, out):
    i = hetero.global_id(0)
    if i < out.shape[0]:
        for j in range(out.shape[1]):
            out[i, j] = xoroshiro128p_next(states, i)


@hetero.kernel
def draw_uniform32(states, out):
    i = hetero.global_id(0)
    if i < out.shape[0]:
        for j in range(out.shape[1]):
            out[i, j] = xoroshiro128p_uniform_float32(states, i)


@hetero.kernel
def draw_uniform64(states, out):
    i = hetero.global_id(0)
    if i < out.shape[0]:
        for j in range(out.shape[1]):
            out[i, j] = xoroshiro128p_uniform_float64(states, i)


@hetero.kernel
def draw_normal32(states, out):
    i = hetero.global_id(0)
    if i < out.shape[0]:
        for j in range(out.shape[1]):
            out[i, j] = xoroshiro128p_normal_float32(states, i)


@hetero.kernel
def draw_normal64(states, out):
    i = hetero.global_id(0)
    if i < out.shape[0]:
        for j in range(out.shape[1]):
            out[i, j] = xoroshiro128p_normal_float64(states, i)


@hetero.kernel
def jump_all(states):
    i = hetero.global_id(0)
    if i < states.shape[0]:
        xoroshiro128p_jump(states, i)


@cuda.jit
def compute_pi(rng_states, iterations, out):
    """Numba's documentation example for numba.cuda.random, unchanged but for the import."""
    thread_id = cuda.grid(1)
    inside = 0
    for i in range(iterations):
        x = xoroshiro128p_uniform_float32(rng_states, thread_id)
        y = xoroshiro128p_uniform_float32(rng_states, thread_id)
        if x**2 + y**2 <= 1.0:
            inside += 1
    out[thread_id] = 4.0 * inside / iterations


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    """``device`` as hetero.device() (where create_xoroshiro128p_states puts the states); skips
    devices that run no kernels."""
    if device.runtime.kernel_target() is None:
        pytest.skip(f"{device.name} runs no hetero kernels")
    with hetero.use_device(device):
        yield device


def needs_fp64(device: hetero.Device) -> None:
    if "fp64" not in device.runtime.kernel_target().features:
        pytest.skip(f"{device.name} has no fp64")


def draw(kernel: Any, states: DeviceNDArray, count: int, dtype: type) -> np.ndarray:
    n = states.shape[0]
    out = hetero.zeros((n, count), dtype, device=states.device)
    kernel[n](states.array, out)
    return out.numpy()


def numba_random():  # type: ignore[no-untyped-def]
    """Numba's own numba.cuda.random (its host functions run without a GPU), or a skip."""
    return pytest.importorskip("numba.cuda.random")


# -- host: the states ----------------------------------------------------------------------------
def test_states_are_seeded_and_jumped_like_the_reference() -> None:
    for seed, start in [(1, 0), (0, 0), (12345, 2), (-1, 0), (2**64 - 1, 1)]:
        got = host_states(3, seed, start)
        assert got.dtype == np.uint64 and got.shape == (3, 2)
        assert [tuple(int(v) for v in row) for row in got] == ref_states(3, seed, start), (seed, start)


def test_the_jump_is_2_pow_64_steps() -> None:
    """The jump polynomial belongs to this generator: the 128x128 GF(2) matrix of one step,
    squared 64 times, moves a state where the jump does."""
    def to_bits(s0: int, s1: int) -> np.ndarray:
        return np.array([(s0 >> i) & 1 for i in range(64)] + [(s1 >> i) & 1 for i in range(64)], dtype=np.int64)

    columns = []
    for j in range(128):
        _, image = ref_next((1 << j, 0) if j < 64 else (0, 1 << (j - 64)))
        columns.append(to_bits(*image))
    power = np.array(columns).T
    for _ in range(64):
        power = power @ power % 2
    state = (0x0123456789ABCDEF, 0xFEDCBA9876543210)
    moved = power @ to_bits(*state) % 2
    assert np.array_equal(moved, to_bits(*ref_jump(state)))
    j0, j1 = rng._apply(rng._tables(rng._jump_columns()), np.array([state[0]], np.uint64),
                        np.array([state[1]], np.uint64))  # the module's jump tables
    assert (int(j0[0]), int(j1[0])) == ref_jump(state)


def test_a_large_subsequence_start_is_that_many_jumps() -> None:
    start = 2**63 + 5
    assert np.array_equal(host_states(3, 9, start), host_states(4, 9, start - 1)[1:])
    assert np.array_equal(host_states(2, 9, 300), host_states(302, 9)[300:])


def test_many_states_fill_by_doubling_like_one_jump_at_a_time() -> None:
    states = host_states(1000, 77)
    assert [tuple(int(v) for v in states[k]) for k in (0, 1, 511, 512, 999)] == \
        [s for k, s in enumerate(ref_states(1000, 77)) if k in (0, 1, 511, 512, 999)]
    assert host_states(0, 1).shape == (0, 2)


def test_the_states_are_numbas_bit_for_bit() -> None:
    nr = numba_random()
    for seed, start in [(1, 0), (987654321, 3)]:
        records = np.empty(300, dtype=nr.xoroshiro128p_dtype)
        nr.init_xoroshiro128p_states_cpu(records, seed, start)
        ours = host_states(300, seed, start)
        assert np.array_equal(ours.view(nr.xoroshiro128p_dtype).reshape(-1), records)
        assert np.array_equal(records.view(np.uint64).reshape(-1, 2), ours)


def test_bad_arguments_are_refused() -> None:
    with pytest.raises(ValueError, match="negative"):
        host_states(-1, 1)
    with pytest.raises(ValueError, match="negative"):
        host_states(2, 1, -1)
    with hetero.use_device("cpu"):
        with pytest.raises(ValueError, match=r"\(n, 2\) uint64"):
            init_xoroshiro128p_states(DeviceNDArray(hetero.zeros(4, np.uint64)), 1)
        with pytest.raises(ValueError, match=r"\(n, 2\) uint64"):
            init_xoroshiro128p_states(DeviceNDArray(hetero.zeros((4, 2), np.int64)), 1)


def test_create_and_init_give_the_same_device_states() -> None:
    with hetero.use_device("cpu"):
        created = create_xoroshiro128p_states(50, seed=5, subsequence_start=2)
        assert isinstance(created, DeviceNDArray) and created.shape == (50, 2) and created.dtype == np.uint64
        assert created.device is hetero.device("cpu")
        filled = DeviceNDArray(hetero.zeros((50, 2), np.uint64))
        init_xoroshiro128p_states(filled, 5, 2)
        assert np.array_equal(created.copy_to_host(), filled.copy_to_host())
        assert np.array_equal(created.copy_to_host(), host_states(50, 5, 2))


# -- device: the draws -------------------------------------------------------------------------
def test_uniform_float32_draws(on: hetero.Device) -> None:
    n, count = 16384, 4
    states = create_xoroshiro128p_states(n, seed=42)
    values = draw(draw_uniform32, states, count, np.float32)
    assert values.dtype == np.float32 and values.shape == (n, count)
    assert values.min() >= 0.0 and values.max() < 1.0
    assert abs(float(values.mean()) - 0.5) < 0.01
    assert abs(float(values.var()) - 1 / 12) < 0.005
    for k, start in enumerate(ref_states(2, 42)):  # states 0 and 1 (1: one jump on)
        raw, end = ref_draws(start, count)
        assert [v for v in values[k]] == [ref_unit_float32(x) for x in raw]
        assert tuple(int(v) for v in states.copy_to_host()[k]) == end  # advanced by 4 steps
    again = draw(draw_uniform32, create_xoroshiro128p_states(n, seed=42), count, np.float32)
    assert np.array_equal(values, again)  # the same seed, the same draws
    other = draw(draw_uniform32, create_xoroshiro128p_states(n, seed=43), count, np.float32)
    assert np.mean(values == other) < 0.01


def test_next_gives_the_generators_uint64s(on: hetero.Device) -> None:
    states = create_xoroshiro128p_states(8, seed=3, subsequence_start=1)
    values = draw(draw_u64, states, 5, np.uint64)
    after = states.copy_to_host()
    for k, start in enumerate(ref_states(8, 3, 1)):
        raw, end = ref_draws(start, 5)
        assert [int(v) for v in values[k]] == raw
        assert tuple(int(v) for v in after[k]) == end


def test_uniform_float64_draws(on: hetero.Device) -> None:
    needs_fp64(on)
    states = create_xoroshiro128p_states(4096, seed=7)
    values = draw(draw_uniform64, states, 4, np.float64)
    assert values.min() >= 0.0 and values.max() < 1.0 and abs(float(values.mean()) - 0.5) < 0.02
    for k, start in enumerate(ref_states(2, 7)):
        raw, _ = ref_draws(start, 4)
        assert [float(v) for v in values[k]] == [(x >> 11) * 2.0**-53 for x in raw]


def test_normal_float32_draws(on: hetero.Device) -> None:
    states = create_xoroshiro128p_states(16384, seed=11)
    values = draw(draw_normal32, states, 4, np.float32)
    assert values.dtype == np.float32 and np.isfinite(values).all()
    assert abs(float(values.mean())) < 0.02 and abs(float(values.std()) - 1.0) < 0.02
    raw, end = ref_draws(ref_states(1, 11)[0], 8)  # two steps a draw
    u = [float(ref_unit_float32(x)) for x in raw]
    want = [math.sqrt(-2.0 * math.log(u[2 * j])) * math.cos(2 * math.pi * u[2 * j + 1]) for j in range(4)]
    np.testing.assert_allclose(values[0], want, rtol=1e-5, atol=1e-5)
    assert tuple(int(v) for v in states.copy_to_host()[0]) == end


def test_normal_float64_draws(on: hetero.Device) -> None:
    needs_fp64(on)
    states = create_xoroshiro128p_states(8192, seed=12)
    values = draw(draw_normal64, states, 4, np.float64)
    assert np.isfinite(values).all()
    assert abs(float(values.mean())) < 0.03 and abs(float(values.std()) - 1.0) < 0.03


def test_jump_on_the_device_is_the_next_subsequence(on: hetero.Device) -> None:
    states = create_xoroshiro128p_states(64, seed=21)
    jump_all[64](states.array)
    assert np.array_equal(states.copy_to_host(), host_states(64, 21, 1))


def test_draws_are_numbas_bit_for_bit(on: hetero.Device) -> None:
    """The uint64, float32 and float64 draws equal those of Numba's own functions, run on the host."""
    nr = numba_random()
    checks = [(draw_u64, nr.xoroshiro128p_next, np.uint64), (draw_uniform32, nr.xoroshiro128p_uniform_float32, np.float32)]
    if "fp64" in on.runtime.kernel_target().features:
        checks.append((draw_uniform64, nr.xoroshiro128p_uniform_float64, np.float64))
    for kernel, numba_draw, dtype in checks:
        records = np.empty(6, dtype=nr.xoroshiro128p_dtype)
        nr.init_xoroshiro128p_states_cpu(records, 2024, 0)
        want = np.array([[numba_draw(records, k) for _ in range(3)] for k in range(6)], dtype=dtype)
        states = create_xoroshiro128p_states(6, seed=2024)
        assert np.array_equal(draw(kernel, states, 3, dtype), want)
        assert np.array_equal(states.copy_to_host().view(nr.xoroshiro128p_dtype).reshape(-1), records)


def test_a_numba_cuda_kernel_draws_from_the_states() -> None:
    """Numba's documentation example, written against hetero.compat.cuda, estimates pi."""
    with hetero.use_device("cpu"):
        states = create_xoroshiro128p_states(256, seed=1)
        out = np.zeros(256, dtype=np.float32)
        compute_pi[4, 64](states, 2000, out)
    assert abs(float(out.mean()) - math.pi) < 0.02
