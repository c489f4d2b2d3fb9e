"""Fusion (hetero.arraylib.fusion): chains of elementwise operations recorded and run as one kernel,
with results identical to fusion off, and recorded work never seeing a later write."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.arraylib import fusion as array_fusion
from hetero import f32
from hetero.core import fusion_state
from hetero.core.errors import ArrayError
from hetero.fault.injection import inject
from hetero.core.launch_counts import launch_counts


def _made(host: np.ndarray, device: hetero.Device) -> hetero.Array:
    """An array hetero owns (asarray of NumPy data shares it on cpu, which turns fusion off for it)."""
    return hetero.asarray(host, device=device, copy=True)


def _launches(device: hetero.Device) -> int:
    return launch_counts().get(device.name, 0)


def _bits(x: hetero.Array) -> np.ndarray:
    host = np.array(x._host())
    return host.view(f"u{host.dtype.itemsize}") if host.dtype.kind == "f" else host


RNG = np.random.default_rng(7)
A = RNG.standard_normal((6, 5)).astype(np.float32)
B = RNG.standard_normal((5,)).astype(np.float32)
C = RNG.standard_normal((6, 1)).astype(np.float32)
A[0, 0], A[1, 1], A[2, 2] = np.nan, -0.0, np.inf
INTS = RNG.integers(-50, 50, (6, 5)).astype(np.int32)
H = (A * 7).astype(np.float16)

#: Chains over (a, b, c, i, h): broadcasting, strided views, scalars, mixed dtypes, comparisons,
#: the same array used twice, float16 rounding between nodes.
CHAINS: dict[str, Callable[..., hetero.Array]] = {
    "triad": lambda a, b, c, i, h: a * b + c * 2.5,
    "nested": lambda a, b, c, i, h: hetero.sqrt(hetero.abs(a - b)) / (c * c + 1.0),
    "views": lambda a, b, c, i, h: a[::-1, 1:] * a[:, :4] - b[1:],
    "mixed": lambda a, b, c, i, h: (i // 3 + 1) * a - (i % 7),
    "compare": lambda a, b, c, i, h: hetero.logical_and(a > b, hetero.isfinite(a * c)),
    "half": lambda a, b, c, i, h: h * 3.0 + h * h,
}


@pytest.mark.parametrize("chain", sorted(CHAINS))
def test_a_fused_chain_gives_the_bits_fusion_off_gives(device: hetero.Device, chain: str) -> None:
    arrays = [_made(x, device) for x in (A, B, C, INTS, H)]
    with hetero.fusion(False):
        expected = CHAINS[chain](*arrays)
        assert expected._pending is None
    got = CHAINS[chain](*arrays)
    before = _launches(device)
    assert np.array_equal(_bits(got), _bits(expected)), chain
    assert _launches(device) - before == 1, "the chain ran as one kernel"


def test_nothing_runs_until_a_value_is_needed_and_dropped_values_never_run(device: hetero.Device) -> None:
    a, b = _made(A, device), _made(A * 2, device)
    before = _launches(device)
    unused = a * b + 1.0
    kept = (a - b) * 0.5
    del unused
    assert _launches(device) == before
    np.testing.assert_array_equal(kept._host(), (A - A * 2) * np.float32(0.5))
    assert _launches(device) == before + 1


def test_a_training_loop_reuses_its_fused_kernels(device: hetero.Device) -> None:
    w, g = _made(A, device), _made(B * np.ones((6, 1), np.float32), device)
    w_host = A.copy()
    for step in range(4):
        if step == 1:
            plans = len(array_fusion._fused)
            kernels = sum(len(p.kernels) for p in array_fusion._fused.values())
        w -= 0.1 * (g * g + 0.01 * w)  # one fused kernel into w each step
        w_host -= np.float32(0.1) * (B * B + np.float32(0.01) * w_host)
    assert len(array_fusion._fused) == plans
    assert sum(len(p.kernels) for p in array_fusion._fused.values()) == kernels
    np.testing.assert_array_equal(w._host(), w_host)


# -- recorded work never sees a later write ------------------------------------------------
@hetero.kernel
def _overwrite(x: hetero.Array[f32], value: f32) -> None:
    x[hetero.global_id(0)] = value


def _writes(device: hetero.Device) -> dict[str, Callable[[hetero.Array], None]]:
    return {
        "setitem": lambda a: a.__setitem__(slice(None), 5.0),
        "setitem_view": lambda a: a.__setitem__((slice(None), slice(1, 3)), a[:, :2] * 0),
        "in_place": lambda a: a.__imul__(0.0),
        "copyto": lambda a: hetero.copyto(a, np.zeros_like(A)),
        "kernel": lambda a: _overwrite[a.size](a.reshape(a.size), 9.0),
        "guard_restore_like": lambda a: hetero.copyto(a, _made(np.ones_like(A), device)),
    }


@pytest.mark.parametrize("write", ["setitem", "setitem_view", "in_place", "copyto", "kernel", "guard_restore_like"])
def test_a_write_after_recording_is_not_seen(device: hetero.Device, write: str) -> None:
    a = _made(A, device)
    recorded = a * 2.0 + 1.0
    _writes(device)[write](a)
    np.testing.assert_array_equal(recorded._host(), A * np.float32(2) + np.float32(1))


def test_memory_shared_with_numpy_turns_recording_off(device: hetero.Device) -> None:
    if not device.runtime.host_memory:
        pytest.skip(f"{device.name}: numpy() copies, nothing is shared")
    host = A.copy()
    shared = hetero.asarray(host, device=device)  # zero-copy on a host-memory device
    y = shared * 2.0
    assert y._pending is None, "an operand NumPy can write at any time is computed at once"
    host[:] = 0
    np.testing.assert_array_equal(y._host(), A * np.float32(2))
    a = _made(A, device)
    recorded = a + 1.0
    view = a.numpy()  # escapes now: the recorded value is computed before anyone can write
    view[:] = 0
    np.testing.assert_array_equal(recorded._host(), A + np.float32(1))
    assert (a + 1.0)._pending is None


def test_memory_shared_with_torch_turns_recording_off(device: hetero.Device) -> None:
    torch = pytest.importorskip("torch")
    if not device.runtime.host_memory:
        pytest.skip(f"{device.name}: torch shares memory with host-memory devices only here")
    a = _made(A, device)
    recorded = a * 3.0
    tensor = torch.from_dlpack(a)
    tensor.zero_()
    np.testing.assert_array_equal(recorded._host(), A * np.float32(3))


@pytest.mark.parametrize("reader", ["guard_snapshot", "checkpoint_save"])
def test_hetero_reading_an_array_for_the_host_leaves_fusion_on(device: hetero.Device, reader: str,
                                                                tmp_path: Any) -> None:
    """A guard snapshot or a checkpoint of an array copies it to the host; on cpu that must not
    count as sharing its memory with NumPy, or every step after the first snapshot would stop
    fusing (one more launch per chain that reads a weight, and fault rules' nth= counts off)."""
    from hetero.recovery import snapshot

    a = _made(A, device)
    if reader == "guard_snapshot":
        snapshot.take({"a": a}, 0)
    else:
        hetero.checkpoint.store.save({"a": a}, 1, directory=tmp_path)
    before = _launches(device)
    recorded = a * 2.0 + 1.0
    assert recorded._pending is not None and _launches(device) == before
    np.testing.assert_array_equal(recorded._host(), A * np.float32(2) + np.float32(1))


# -- bounds, errors, switches --------------------------------------------------------------
def test_a_long_chain_is_cut_into_bounded_kernels(device: hetero.Device) -> None:
    a = _made(A[:2, :2], device)
    expected = A[:2, :2].copy()
    y = a
    for k in range(3 * array_fusion.MAX_OPS):
        y = y * 0.5 + 1.0
        expected = expected * np.float32(0.5) + np.float32(1)
    assert y._pending is not None and y._pending.ops <= array_fusion.MAX_OPS
    np.testing.assert_array_equal(_bits(y), expected.view(np.uint32))


def test_errors_come_at_the_operation_not_when_computed(device: hetero.Device) -> None:
    a = _made(A, device) * 1.0
    with pytest.raises(ArrayError, match="do not broadcast"):
        a + _made(np.ones(4, np.float32), device)
    others = [d for d in hetero.devices() if d is not device]
    if others:
        with pytest.raises(ArrayError, match="different devices"):
            a + _made(A, others[0])


def test_a_failed_launch_leaves_the_value_recorded_and_a_later_read_computes_it(device: hetero.Device) -> None:
    a = _made(A, device)
    y = a * 4.0
    with inject(f"{device.name}:launch:nth=1:oom"):
        with pytest.raises(hetero.HeteroError):
            y._host()
    assert y._pending is not None
    np.testing.assert_array_equal(y._host(), A * np.float32(4))


def test_fusion_off_and_on_again() -> None:
    assert hetero.fusion is array_fusion.fusion
    assert fusion_state.ENABLED
    with hetero.fusion(False):
        assert not array_fusion.enabled()
        with hetero.fusion(True):
            assert array_fusion.enabled()
        assert not array_fusion.enabled()
    assert array_fusion.enabled()


def test_synchronize_computes_everything_recorded(device: hetero.Device) -> None:
    a = _made(A, device)
    y: Any = a + 2.0
    device.synchronize()
    assert y._pending is None
