"""CUDA's warps on OpenCL sub-groups (``subgroups32``: Intel's runtimes): each vote is sub-group
ballots, and each shuffle a sub-group shuffle where the target's shuffles are fast
(``subgroup_shuffles32``; ``HETERO_SUBGROUPS=all`` forces them on CPU devices), taken only where
the launch's sub-groups are CUDA's warps. Intel's runtimes cut sub-groups along dimension 0, so
in a block of 16 x 4 they are not, and the kernel takes the work-group memory path: CUDA's
answer either way, on every device."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.compiler.ir import nodes as ir, warp_emulation
from hetero.compiler.emit.opencl import EMITTER
from hetero.core.target import Target, opencl_target

FULL = 0xFFFFFFFF
SUBGROUP_EXTENSIONS = "cl_intel_required_subgroup_size cl_khr_subgroup_shuffle cl_khr_subgroup_ballot"


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


@cuda.jit
def block_2d(x, down, xor, ballot, lane):
    t = cuda.threadIdx.x + cuda.blockDim.x * (cuda.threadIdx.y + cuda.blockDim.y * cuda.threadIdx.z)
    b = cuda.blockIdx.x + cuda.gridDim.x * cuda.blockIdx.y
    i = b * cuda.blockDim.x * cuda.blockDim.y * cuda.blockDim.z + t
    v = x[i]
    down[i] = cuda.shfl_down_sync(FULL, v, 1)
    xor[i] = cuda.shfl_xor_sync(FULL, v, 9)
    ballot[i] = cuda.ballot_sync(FULL, v % 3 == 0)
    lane[i] = cuda.laneid


def reference_2d(x: np.ndarray, size: int) -> tuple[np.ndarray, ...]:
    """CUDA's warps: 32 consecutive linear ids of each block; past the block's end, one's own value."""
    down, xor = np.empty_like(x), np.empty_like(x)
    ballot, lane = np.empty(x.size, np.uint32), np.empty(x.size, np.int32)
    for i in range(x.size):
        t = i % size
        start = i - t + (t // 32) * 32
        end = min(i - t + size, start + 32)
        down[i] = x[i + 1] if i + 1 < end and (t % 32) + 1 < 32 else x[i]
        partner = start + ((t % 32) ^ 9)
        xor[i] = x[partner] if partner < end else x[i]
        ballot[i] = sum(1 << (j - start) for j in range(start, end) if x[j] % 3 == 0)
        lane[i] = t % 32
    return down, xor, ballot, lane


@pytest.fixture(params=["auto", "all"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """``HETERO_SUBGROUPS``: the default, and shuffles forced onto sub-groups on CPU devices too."""
    monkeypatch.setenv("HETERO_SUBGROUPS", request.param)
    hetero.reload_config()
    yield request.param
    monkeypatch.undo()
    hetero.reload_config()


@pytest.mark.parametrize("block", [(32, 2, 1), (64, 2, 1), (48, 1, 1), (16, 4, 1), (8, 8, 1), (4, 4, 4), (24, 2, 1)],
                         ids=lambda b: "x".join(map(str, b)))
def test_warps_of_multi_dimensional_blocks_follow_cuda(on: hetero.Device, mode: str, block: tuple[int, int, int]) -> None:
    """Blocks whose rows hold whole warps (sub-groups serve) and blocks whose warps span rows."""
    size = block[0] * block[1] * block[2]
    x = (np.arange(2 * size, dtype=np.int64) * 7919) % 1000
    down, xor = np.zeros_like(x), np.zeros_like(x)
    ballot, lane = np.zeros(x.size, np.uint32), np.zeros(x.size, np.int32)
    kernel = cuda.jit(block_2d.py_func)  # a kernel of its own per mode: its builds follow the mode's target
    kernel[(2, 1), block](x, down, xor, ballot, lane)
    for name, got, want in zip(("shfl_down", "shfl_xor", "ballot", "laneid"), (down, xor, ballot, lane),
                               reference_2d(x, size)):
        np.testing.assert_array_equal(got, want, err_msg=f"{name}, block {block}")


@cuda.jit
def narrow_types(a, b, c, d):
    i = cuda.grid(1)
    a[i] = cuda.shfl_xor_sync(FULL, a[i], 3)
    b[i] = cuda.shfl_xor_sync(FULL, b[i], 3)
    c[i] = cuda.shfl_xor_sync(FULL, c[i], 3)
    d[i] = cuda.shfl_xor_sync(FULL, d[i], 3)


def test_shuffles_of_narrow_and_wide_types_are_exact(on: hetero.Device, mode: str) -> None:
    """i16 and u8 travel widened through a sub-group shuffle and come back exact; f64 as itself."""
    if not on.info.fp64:
        pytest.skip(f"{on.name} has no fp64")
    rng = np.random.default_rng(3)
    a = rng.integers(-2**15, 2**15, 64, dtype=np.int16)
    b = rng.integers(0, 256, 64, dtype=np.uint8)
    c = rng.standard_normal(64)
    d = rng.integers(-2**31, 2**31, 64, dtype=np.int32).astype(np.uint32)
    swap = np.arange(64) ^ 3
    want = [v[swap].copy() for v in (a, b, c, d)]
    cuda.jit(narrow_types.py_func)[1, 64](a, b, c, d)
    for got, expected in zip((a, b, c, d), want):
        np.testing.assert_array_equal(got, expected)


# -- what is emitted --------------------------------------------------------------------------
def _kernel_ir() -> ir.Function:
    kernel = block_2d.kernel
    return kernel._lowered(kernel._parse("i64[:], i64[:], i64[:], u32[:], i32[:]"))  # type: ignore[no-any-return]


def test_targets_with_32_wide_subgroups_get_subgroup_code() -> None:
    fn = _kernel_ir()
    with_subgroups = opencl_target(SUBGROUP_EXTENSIONS, True, "dev", "3.0", subgroup_sizes=(8, 16, 32))
    assert "subgroups32" in with_subgroups.features
    text = EMITTER.emit(fn, with_subgroups).text
    assert "__attribute__((intel_reqd_sub_group_size(32)))" in text
    assert "sub_group_shuffle(" in text and "sub_group_ballot(" in text and "get_sub_group_id()" in text
    # the work-group memory path stays, for launches whose sub-groups are not warps
    assert "barrier(" in text


def test_targets_with_slow_subgroup_shuffles_get_subgroup_votes_only() -> None:
    target = opencl_target(SUBGROUP_EXTENSIONS, True, "dev", "3.0", subgroup_sizes=(32,), subgroup_shuffles=False)
    assert "subgroups32" in target.features and "subgroup_shuffles32" not in target.features
    text = EMITTER.emit(_kernel_ir(), target).text
    assert "sub_group_ballot(" in text and "sub_group_shuffle(" not in text
    # a kernel with shuffles only keeps the device's own sub-group size and no sub-group code
    shuffles_only = narrow_types.kernel._lowered(narrow_types.kernel._parse("i16[:], u8[:], f64[:], u32[:]"))
    text = EMITTER.emit(shuffles_only, target).text
    assert "sub_group" not in text and "intel_reqd_sub_group_size" not in text


@pytest.mark.parametrize("target", [
    opencl_target(SUBGROUP_EXTENSIONS, True, "dev", "3.0", subgroup_sizes=(8, 16)),  # no 32
    opencl_target("cl_khr_subgroup_shuffle cl_khr_subgroup_ballot", True, "dev", "3.0", subgroup_sizes=(32,)),
    Target("opencl", "dev", frozenset({"fp64"}), "3.0"),
], ids=["sizes-without-32", "no-required-size-extension", "plain"])
def test_other_targets_get_the_work_group_memory_form(target: Target) -> None:
    assert "subgroups32" not in target.features
    text = EMITTER.emit(_kernel_ir(), target).text
    assert "sub_group" not in text and "intel_reqd_sub_group_size" not in text


def test_the_cpu_target_never_sees_subgroup_operations() -> None:
    emulated = warp_emulation.emulate(_kernel_ir())
    assert not warp_emulation.uses_subgroups(emulated)
    assert warp_emulation.uses_subgroups(warp_emulation.emulate(_kernel_ir(), subgroups=True))


def test_the_opencl_runtimes_report_their_subgroup_sizes() -> None:
    """Intel's runtime (oneapi) offers 32-wide sub-groups; PoCL none. Read from the devices here."""
    seen = []
    for device in hetero.devices():
        target = device.runtime.kernel_target()
        if target is None or target.dialect != "opencl":
            continue
        extensions = set(device.runtime.cl_device.extensions.split())  # type: ignore[attr-defined]
        if "cl_intel_required_subgroup_size" in extensions and {"cl_khr_subgroup_shuffle", "cl_khr_subgroup_ballot"} <= extensions:
            assert "subgroups32" in target.features, device.name
            # shuffles on sub-groups only off CPU devices (Intel's CPU runtime: ten times slower)
            assert ("subgroup_shuffles32" in target.features) == (device.kind != "cpu"), device.name
            seen.append(device.name)
        else:
            assert "subgroups32" not in target.features, device.name
    if not seen:
        pytest.skip("no OpenCL device here has Intel's required sub-group sizes")


def test_explain_names_the_subgroup_path() -> None:
    import hetero.compat

    text = hetero.compat.explain(block_2d, "void(int64[:], int64[:], int64[:], uint32[:], int32[:])")
    for device in hetero.devices():
        target = device.runtime.kernel_target()
        if target is not None and "subgroups32" in target.features:
            what = "votes and shuffles" if "subgroup_shuffles32" in target.features else "votes (shuffles through work-group memory)"
            assert f"{device.name}: runs (warps: {what} on 32-wide sub-groups where" in text
            return
    pytest.skip("no device here has 32-wide sub-groups")


def test_the_configuration_turns_subgroups_off(monkeypatch: pytest.MonkeyPatch) -> None:
    """``HETERO_SUBGROUPS=off`` (a driver whose sub-groups misbehave): no target offers them;
    ``all``: shuffles too, on CPU devices as well; anything else is refused, naming the modes."""
    devices = [d for d in hetero.devices() if (t := d.runtime.kernel_target()) is not None and "subgroups32" in t.features]
    if not devices:
        pytest.skip("no OpenCL device here has Intel's required sub-group sizes")
    runtime = devices[0].runtime
    try:
        monkeypatch.setenv("HETERO_SUBGROUPS", "off")
        hetero.reload_config()
        target = runtime.kernel_target()
        assert target is not None and not {"subgroups32", "subgroup_shuffles32"} & target.features
        monkeypatch.setenv("HETERO_SUBGROUPS", "all")
        hetero.reload_config()
        target = runtime.kernel_target()
        assert target is not None and {"subgroups32", "subgroup_shuffles32"} <= target.features
        monkeypatch.setenv("HETERO_SUBGROUPS", "sometimes")
        with pytest.raises(hetero.ConfigError, match="'subgroups' is 'sometimes'; valid modes: auto, off, all"):
            hetero.reload_config()
    finally:
        monkeypatch.undo()
        hetero.reload_config()
