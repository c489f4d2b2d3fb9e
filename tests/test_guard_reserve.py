"""The guard's standby holds memory on the failover device for the state's arrays, and a restore
there fills it instead of allocating (hetero.recovery.reserve)."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero import f32
from hetero.recovery import reserve as guard_reserve
from tests.conftest import DEVICE_NAMES

PAIRS = [p for p in (("oneapi:0", "cpu"), ("cpu", "opencl:0")) if set(p) <= set(DEVICE_NAMES)]


@hetero.kernel
def scale_rows(x, s: f32):
    i = hetero.global_id(0)
    if i < x.shape[0]:
        for j in range(x.shape[1]):
            x[i, j] = x[i, j] * s


@pytest.mark.parametrize("pair", PAIRS, ids="->".join)
def test_a_move_restores_into_the_memory_the_standby_reserved(pair: tuple[str, str]) -> None:
    start, failover = (hetero.device(name) for name in pair)
    w = hetero.asarray(np.arange(256 * 64, dtype=np.float32).reshape(256, 64), device=start, copy=True)
    state = {"w": w, "row": w[3], "n": 0}

    def step() -> None:
        scale_rows[256](state["w"], np.float32(2.0))
        state["n"] += 1

    with hetero.guard(state, devices=[start, failover], device=start, snapshot_every=1) as g:
        g.run(step)
        assert g.wait_standby(120) is failover
        reserve = g._standby.reserve
        assert reserve is not None and reserve.device is failover
        assert reserve.layout == (((256, 64), "<f4"),)  # the view shares its base's: one array
        held = reserve._free[((256, 64), "<f4")][0]
        with hetero.fault.inject(f"{start.name}:launch:nth=1:lost"):
            g.run(step)
        assert g.device is failover
        assert state["w"] is held, "the restore allocated instead of using the reserve"
        assert state["row"].base is state["w"]
    expected = np.arange(256 * 64, dtype=np.float32).reshape(256, 64) * 4
    np.testing.assert_array_equal(state["w"].numpy(), expected)
    np.testing.assert_array_equal(state["row"].numpy(), expected[3])
    assert state["n"] == 2


@pytest.mark.parametrize("pair", PAIRS[:1], ids="->".join)
def test_state_too_large_for_the_share_gets_no_reserve_and_still_recovers(
        pair: tuple[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    start, failover = (hetero.device(name) for name in pair)
    monkeypatch.setattr(guard_reserve, "SHARE", 1e-12)
    state = {"w": hetero.asarray(np.ones((256, 64), np.float32), device=start, copy=True)}
    with hetero.guard(state, devices=[start, failover], device=start, snapshot_every=1) as g:
        g.run(lambda: scale_rows[256](state["w"], np.float32(3.0)))
        assert g.wait_standby(120) is failover
        assert g._standby.reserve is None
        with hetero.fault.inject(f"{start.name}:launch:nth=1:lost"):
            g.run(lambda: scale_rows[256](state["w"], np.float32(3.0)))
        assert g.device is failover
    np.testing.assert_array_equal(state["w"].numpy(), np.full((256, 64), 9, np.float32))


@pytest.mark.parametrize("pair", PAIRS[:1], ids="->".join)
def test_the_reserve_follows_the_state_when_its_arrays_change(pair: tuple[str, str]) -> None:
    start, failover = (hetero.device(name) for name in pair)
    state = {"w": hetero.zeros((8, 8), device=start)}
    with hetero.guard(state, devices=[start, failover], device=start, snapshot_every=1) as g:
        g.run(lambda: None)
        g.wait_standby(120)
        assert g._standby.reserve is not None and g._standby.reserve.layout == (((8, 8), "<f4"),)
        state["w"] = hetero.zeros((16, 4), dtype="float64", device=start)
        g.snapshot()
        g.wait_standby(120)
        assert g._standby.reserve is not None and g._standby.reserve.layout == (((16, 4), "<f8"),)
