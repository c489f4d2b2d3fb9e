"""CUDA's warp operations (shuffles, votes, laneid, syncwarp) on every device: native on CUDA and
HIP, through work-group memory elsewhere (hetero.compiler.ir.warp_emulation), lane for lane CUDA's
answer, including under divergent control flow, loops whose trip count differs per warp,
early returns and partial last warps."""

from __future__ import annotations

import json
from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.compiler.ir import nodes as ir, warp_emulation
from hetero.core.errors import CompileError, KernelLaunchError
from hetero.compiler.frontend.signature import parse_signature

FULL = 0xFFFFFFFF


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


def lanes(n: int) -> np.ndarray:
    return np.arange(n) % 32


def warp_of(n: int) -> np.ndarray:
    return np.arange(n) // 32


# -- shuffles ---------------------------------------------------------------------------------
@cuda.jit
def shuffles(x, down, up, xor, idx):
    i = cuda.grid(1)
    v = x[i]
    down[i] = cuda.shfl_down_sync(FULL, v, 3)
    up[i] = cuda.shfl_up_sync(FULL, v, 5)
    xor[i] = cuda.shfl_xor_sync(FULL, v, 6)
    idx[i] = cuda.shfl_sync(FULL, v, 7)


def shuffle_reference(x: np.ndarray, block: int) -> tuple[np.ndarray, ...]:
    """CUDA's rules, thread by thread; a source past the block's end gives one's own value."""
    n = x.size
    down, up, xor, idx = (np.empty_like(x) for _ in range(4))
    for i in range(n):
        t = i % block
        base = i - t % 32
        lane = t % 32
        end = min(i - t + block, base + 32)  # the warp's end, or the block's where it is partial

        def get(src: int) -> float:
            return x[src] if src < end else x[i]

        down[i] = get(i + 3) if lane + 3 < 32 else x[i]
        up[i] = x[i - 5] if lane >= 5 else x[i]
        xor[i] = get(base + (lane ^ 6))
        idx[i] = get(base + 7)
    return down, up, xor, idx


@pytest.mark.parametrize("block", [64, 48])
def test_shuffles_follow_cuda_lane_for_lane(on: hetero.Device, block: int) -> None:
    """Every shuffle, in full warps and in a block of 48 (its second warp has 16 lanes)."""
    x = np.arange(2 * block, dtype=np.float32) * 1.5 - 7
    outs = [np.zeros_like(x) for _ in range(4)]
    shuffles[2, block](x, *outs)
    for name, got, want in zip(("down", "up", "xor", "idx"), outs, shuffle_reference(x, block)):
        np.testing.assert_array_equal(got, want, err_msg=f"shfl_{name}_sync, block {block}")


@cuda.jit
def shuffle_types(a, b, c, d):
    i = cuda.grid(1)
    a[i] = cuda.shfl_xor_sync(FULL, a[i], 1)
    b[i] = cuda.shfl_xor_sync(FULL, b[i], 1)
    c[i] = cuda.shfl_xor_sync(FULL, c[i], 1)
    d[i] = cuda.shfl_xor_sync(FULL, d[i] > 0, 1)


def test_shuffles_keep_every_value_type(on: hetero.Device) -> None:
    rng = np.random.default_rng(1)
    a = rng.integers(-2**62, 2**62, 64, dtype=np.int64)
    b = rng.integers(0, 2**32, 64, dtype=np.uint64).astype(np.uint32)
    c = rng.standard_normal(64).astype(np.float32)
    d = rng.integers(-1, 2, 64).astype(np.int8)
    swap = np.arange(64) ^ 1
    want = a[swap], b[swap], c[swap], (d > 0)[swap].astype(np.int8)
    shuffle_types[1, 64](a, b, c, d)
    for got, expected in zip((a, b, c, d), want):
        np.testing.assert_array_equal(got, expected)


# -- a warp reduction under a divergent condition ---------------------------------------------
@cuda.jit
def first_warp_sum(x, out):
    v = x[cuda.grid(1)]
    if cuda.threadIdx.x < 32:  # only the first warp of each block reduces
        offset = 16
        while offset > 0:
            v += cuda.shfl_down_sync(FULL, v, offset)
            offset //= 2
    if cuda.threadIdx.x % 32 == 0:
        out[cuda.grid(1) // 32] = v


def test_reduction_in_the_first_warp_only(on: hetero.Device) -> None:
    x = np.arange(256, dtype=np.float32)
    out = np.zeros(8, np.float32)
    first_warp_sum[2, 128](x, out)
    want = x.reshape(8, 32).copy()
    sums = np.where(np.arange(8) % 4 == 0, want.sum(axis=1), want[:, 0])  # other warps write their own lane 0
    np.testing.assert_array_equal(out, sums)


# -- votes ----------------------------------------------------------------------------------
@cuda.jit
def votes(x, ballot, anyv, allv, active):
    i = cuda.grid(1)
    ballot[i] = cuda.ballot_sync(FULL, x[i] > 0)
    anyv[i] = cuda.any_sync(FULL, x[i] > 6)
    allv[i] = cuda.all_sync(FULL, x[i] > -3)
    if cuda.laneid % 3 == 0:  # a third of the lanes: activemask and votes see only them
        m = cuda.activemask()
        active[i] = m ^ cuda.ballot_sync(m, x[i] > 0)


def test_votes_and_the_active_mask(on: hetero.Device) -> None:
    x = np.random.default_rng(2).integers(-3, 8, 96).astype(np.int32)
    ballot = np.zeros(96, np.uint32)
    anyv, allv = np.zeros(96, np.bool_), np.zeros(96, np.bool_)
    active = np.zeros(96, np.uint32)
    votes[1, 96](x, ballot, anyv, allv, active)
    third = sum(1 << j for j in range(0, 32, 3))
    for w in range(3):
        seg = x[32 * w:32 * w + 32]
        bits = sum(1 << j for j in range(32) if seg[j] > 0)
        np.testing.assert_array_equal(ballot[32 * w:32 * w + 32], bits)
        assert (anyv[32 * w:32 * w + 32] == (seg > 6).any()).all()
        assert (allv[32 * w:32 * w + 32] == (seg > -3).all()).all()
        want = third ^ (bits & third)
        np.testing.assert_array_equal(active[32 * w:32 * w + 32:3], want)


# -- loops whose trip count differs between warps, breaks, early returns ------------------------
@cuda.jit
def per_warp_rounds(x, out, n):
    i = cuda.grid(1)
    if i >= n:
        return  # the last warp's tail leaves early
    v = x[i]
    rounds = i // 32 + 1  # warp w runs w + 1 rounds
    for r in range(rounds):
        v += cuda.shfl_xor_sync(cuda.activemask(), v, 1)
        if v > 1000.0:
            break
    out[i] = v


def test_loops_whose_trip_count_differs_per_warp(on: hetero.Device) -> None:
    n = 120
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(128, np.float32)
    per_warp_rounds[1, 128](x, out, n)
    want = np.zeros(128, np.float32)
    v = x.copy()
    done = np.zeros(128, bool)
    for r in range(4):
        runs = (np.arange(128) // 32 >= r) & ~done & (np.arange(128) < n)
        partner = np.arange(128) ^ 1
        valid = partner < n  # lanes 120..127 returned: a shuffle from them is undefined; here none is read
        new = np.where(runs & valid, v + v[partner], v)
        v = np.where(runs, new, v)
        done |= runs & (v > 1000.0)
    want[:n] = v[:n]
    np.testing.assert_array_equal(out[:n], want[:n])
    np.testing.assert_array_equal(out[n:], 0)


# -- what the emulation makes of a kernel ---------------------------------------------------------
@cuda.jit
def no_warps(a):
    a[cuda.grid(1)] += 1


def test_a_kernel_without_warp_operations_is_unchanged() -> None:
    lowered = no_warps.kernel._lowered(parse_signature("f32[:]")[1])
    assert warp_emulation.emulate(lowered) is lowered
    with_warps = first_warp_sum.kernel._lowered(parse_signature("f32[:], f32[:]")[1])
    emulated = warp_emulation.emulate(with_warps)
    assert warp_emulation.FEATURE in emulated.features and not warp_emulation.has_warp(emulated.body)


def test_emulated_kernels_refuse_groups_larger_than_cuda_blocks(on: hetero.Device) -> None:
    if on.kind in ("cuda", "rocm"):
        pytest.skip("native warps: the device's own limit applies")
    x = np.zeros(2048, np.float32)
    with pytest.raises(KernelLaunchError, match="1024"):
        shuffles[1, 2048](x, x.copy(), x.copy(), x.copy(), x.copy())


@cuda.jit
def warp_size(out):
    out[cuda.grid(1)] = cuda.warpsize * 100 + cuda.laneid


def test_warp_size_is_32_on_every_device(on: hetero.Device) -> None:
    """CUDA's view everywhere, 64-wide AMD wavefronts included (HIP's width-32 shuffles)."""
    out = np.zeros(80, np.int32)
    warp_size[1, 80](out)
    np.testing.assert_array_equal(out, 3200 + np.arange(80) % 32)
    assert ir.WARP_SIZE == 32

# -- device functions holding warp operations: inlined where warps are emulated ----------------
@cuda.jit(device=True)
def warp_reduce(v):
    for offset in (16, 8, 4, 2, 1):
        v += cuda.shfl_xor_sync(FULL, v, offset)
    return v


@cuda.jit(device=True)
def clamped_sum(v, limit):
    if limit <= 0.0:
        return 0.0  # an early return: the inlined body leaves its one-trip loop
    s = warp_reduce(v)
    return s if s < limit else limit


@cuda.jit
def block_sums(x, out, limit):
    i = cuda.grid(1)
    total = clamped_sum(x[i], limit)
    if cuda.laneid == 0:
        out[i // 32] = total


@pytest.mark.parametrize("limit", [1e9, 500.0, -1.0])
def test_device_functions_with_warp_operations(on: hetero.Device, limit: float) -> None:
    x = np.arange(128, dtype=np.float64) % 37
    out = np.zeros(4, np.float64)
    block_sums[2, 64](x, out, limit)
    sums = x.reshape(4, 32).sum(axis=1)
    np.testing.assert_array_equal(out, 0.0 if limit <= 0 else np.minimum(sums, limit))


def test_warp_kernels_travel_in_bundles_as_checked_ir() -> None:
    """Kernel bundles carry IR as JSON: warp operations and fences load back, unknown ones are refused."""
    from hetero.compiler.ir import json_form as ir_json

    fn = block_sums.kernel._lowered(parse_signature("f64[:], f64[:], f64")[1])
    assert ir_json.load(ir_json.dump(fn)) == fn
    data = ir_json.dump(fn)
    text = json.dumps(data).replace('"shfl_xor"', '"shfl_evil"')
    with pytest.raises(ir_json.IRFormatError, match="warp operation"):
        ir_json.load(json.loads(text))


def test_explain_says_how_each_device_runs_warps() -> None:
    import hetero.compat

    text = hetero.compat.explain(first_warp_sum, "void(float32[:], float32[:])")
    assert "warp operations: yes, on warps of 32 lanes" in text and "1024" in text
    assert "cpu: runs (warps: through work-group memory and barriers)" in text
    assert "warp size: not assumed" in hetero.compat.explain(no_warps, "void(float32[:])")


# -- match ------------------------------------------------------------------------------------
@cuda.jit
def matches(x, any_out, all_mask, all_pred):
    i = cuda.grid(1)
    v = x[i]
    if cuda.laneid % 2 == 1:  # only the odd lanes take part
        any_out[i] = cuda.match_any_sync(cuda.activemask(), v)
    m, p = cuda.match_all_sync(FULL, v // 10)
    all_mask[i] = m
    all_pred[i] = p


def test_match_any_and_all_follow_cuda(on: hetero.Device) -> None:
    n = 96
    x = (np.arange(n) % 3).astype(np.int64)
    x[64:] = 7  # in the third warp every lane holds the same value
    x[5] = 40  # so v // 10 differs in the first warp
    any_out, all_mask, all_pred = np.zeros(n, np.uint32), np.zeros(n, np.uint32), np.zeros(n, np.bool_)
    matches[1, n](x, any_out, all_mask, all_pred)
    want = np.zeros(n, np.uint32)
    for i in range(1, n, 2):
        base = i - i % 32
        want[i] = sum(1 << (j - base) for j in range(base + 1, base + 32, 2) if x[j] == x[i])
    np.testing.assert_array_equal(any_out, want)
    np.testing.assert_array_equal(all_pred, warp_of(n) > 0)
    np.testing.assert_array_equal(all_mask, np.where(warp_of(n) > 0, FULL, 0))


@cuda.jit
def match_float(x, out):
    i = cuda.grid(1)
    out[i] = cuda.match_any_sync(FULL, x[i])


def test_match_of_floats_is_refused_naming_bit_patterns(on: hetero.Device) -> None:
    with pytest.raises(CompileError, match="bit patterns"):
        match_float[1, 32](np.zeros(32, np.float32), np.zeros(32, np.uint32))


# -- a block of 10 threads: lanes 10-31 do not exist, and take part in nothing -------------------
@cuda.jit
def partial_warp(x, any_out, all_mask, all_pred, ballot, anyv, allv, active, down):
    i = cuda.grid(1)
    v = x[i]
    any_out[i] = cuda.match_any_sync(FULL, v)
    m, p = cuda.match_all_sync(FULL, v // 100)
    all_mask[i] = m
    all_pred[i] = p
    ballot[i] = cuda.ballot_sync(FULL, v >= 0)
    anyv[i] = cuda.any_sync(FULL, v > 100)
    allv[i] = cuda.all_sync(FULL, v >= 0)
    active[i] = cuda.activemask()
    down[i] = cuda.shfl_down_sync(FULL, v, 4)


def test_votes_and_matches_in_a_partial_warp_follow_cuda(on: hetero.Device) -> None:
    """numba-cuda's own test_match_any_sync / test_match_all_sync (a block of 10 threads): the
    lanes past the block's end are not reported as matching, voting or active."""
    n = 10
    x = (np.arange(n) % 2).astype(np.int32)
    any_out, all_mask, ballot, active = (np.zeros(n, np.uint32) for _ in range(4))
    all_pred, anyv, allv = (np.zeros(n, np.bool_) for _ in range(3))
    down = np.zeros(n, np.int32)
    partial_warp[1, n](x, any_out, all_mask, all_pred, ballot, anyv, allv, active, down)
    np.testing.assert_array_equal(any_out, np.tile([0b0101010101, 0b1010101010], 5), err_msg="match_any_sync")
    np.testing.assert_array_equal(all_mask, 0b1111111111, err_msg="match_all_sync's mask")
    assert all_pred.all(), "match_all_sync's predicate"
    np.testing.assert_array_equal(ballot, 0b1111111111, err_msg="ballot_sync")
    assert not anyv.any(), "any_sync"
    assert allv.all(), "all_sync"
    np.testing.assert_array_equal(active, 0b1111111111, err_msg="activemask")
    np.testing.assert_array_equal(down, np.where(np.arange(n) + 4 < n, x[np.minimum(np.arange(n) + 4, n - 1)], x))
    x[1] = 400  # match_all_sync: one lane differs, so no lane matches all
    partial_warp[1, n](x, any_out, all_mask, all_pred, ballot, anyv, allv, active, down)
    np.testing.assert_array_equal(all_mask, 0)
    assert not all_pred.any()
    assert anyv.all()
