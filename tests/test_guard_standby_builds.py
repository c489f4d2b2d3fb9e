"""The guard's standby builds, in the background, each kernel the guarded steps compile for the
failover device, so the steps after a move to it launch kernels already built."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero import f32
from hetero.kernels.kernel import Specialization
from tests.conftest import DEVICE_NAMES


def _fresh_kernel() -> hetero.Kernel:
    """A kernel object of its own per test (its specializations start empty)."""
    def scale_by(x, s: f32):
        i = hetero.global_id(0)
        if i < x.shape[0]:
            x[i] = x[i] * s
    return hetero.kernel(scale_by)


def _built_on(kernel: hetero.Kernel, device: hetero.Device) -> int:
    return sum(1 for entry in kernel._dispatch.values() if isinstance(entry, Specialization) and entry.device is device)


@pytest.mark.parametrize("pair", [p for p in (("cpu", "oneapi:0"), ("oneapi:0", "cpu"), ("cpu", "opencl:0"))
                                  if set(p) <= set(DEVICE_NAMES)], ids="->".join)
def test_kernels_of_the_steps_are_built_for_the_failover_device_before_a_fault(pair: tuple[str, str]) -> None:
    start, failover = (hetero.device(name) for name in pair)
    scale_by = _fresh_kernel()
    state = {"x": hetero.asarray(np.arange(64, dtype=np.float32), device=start, copy=True)}

    def step(factor: float) -> None:
        scale_by[64](state["x"], np.float32(factor))

    with hetero.guard(state, devices=[start, failover], device=start, snapshot_every=1) as g:
        g.run(step, 2.0)
        assert g.wait_standby(120) is failover
        assert _built_on(scale_by, failover) == 1  # built in the background, before any fault
        assert g._standby.built >= 1  # (and any other kernel this process compiled on the start device)
        before = dict(scale_by._dispatch)
        with hetero.fault.inject(f"{start.name}:launch:nth=1:lost"):
            g.run(step, 3.0)  # fails on start, restored and run again on the failover device
        assert g.device is failover
        moved = [key for key in scale_by._dispatch if key not in before]
        assert not [k for k in moved if isinstance(scale_by._dispatch[k], Specialization)
                    and scale_by._dispatch[k].device is failover], "the move built the kernel again"
    np.testing.assert_array_equal(state["x"].numpy(), np.arange(64, dtype=np.float32) * 6)


@pytest.mark.skipif(not {"cpu", "oneapi:0"} <= set(DEVICE_NAMES), reason="needs cpu and oneapi:0")
def test_a_cpu_failover_kernel_is_compiled_by_the_standby_not_at_its_first_launch() -> None:
    """On cpu Numba compiles at a kernel's first call: the standby makes that call (one that runs
    no work-group), so the first launch after a move runs code already compiled."""
    start, failover = hetero.device("oneapi:0"), hetero.device("cpu")
    scale_by = _fresh_kernel()
    state = {"x": hetero.asarray(np.arange(64, dtype=np.float32), device=start, copy=True)}
    with hetero.guard(state, devices=[start, failover], device=start, snapshot_every=1) as g:
        g.run(lambda: scale_by[64](state["x"], np.float32(2.0)))
        assert g.wait_standby(120) is failover
        [entry] = [e for e in scale_by._dispatch.values() if isinstance(e, Specialization) and e.device is failover]
        loaded = entry.loaded
        assert any(native is not None for native in loaded.native.values()) or (
            loaded.dispatcher is not None and loaded.dispatcher.overloads), "built, but left for Numba's first call"
    np.testing.assert_array_equal(state["x"].numpy(), np.arange(64, dtype=np.float32) * 2)
