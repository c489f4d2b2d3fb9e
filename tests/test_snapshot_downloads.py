"""A snapshot reads all of a device's arrays with one wait (``download_many``), and still
counts each copy for fault injection."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.fault import snapshot
from tests.conftest import DEVICE_NAMES

OPENCL = [name for name in DEVICE_NAMES if name.startswith(("opencl", "oneapi"))]


def _state(device: hetero.Device) -> dict:
    w = hetero.asarray(np.arange(48, dtype=np.float32).reshape(6, 8), device=device, copy=True)
    return {"w": w, "b": hetero.asarray(np.arange(5, dtype=np.int64), device=device, copy=True),
            "row": w[2], "nested": {"v": hetero.full((3,), 7.0, device=device)}, "n": 3}


@pytest.mark.parametrize("name", OPENCL)
def test_one_wait_for_all_of_a_devices_arrays(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    device = hetero.device(name)
    state = _state(device)
    runtime = device.runtime
    batches: list[int] = []
    real = type(runtime).download_many

    def counted(self: object, copies: list, wait: bool = True) -> None:
        batches.append(len(copies))
        return real(self, copies, wait)

    monkeypatch.setattr(type(runtime), "download_many", counted)
    monkeypatch.setattr(type(runtime), "download", lambda *a, **k: pytest.fail("a copy waited on its own"))
    taken = snapshot.take(state, 0)
    assert batches == [3]  # w (with its view row), b, nested v
    values = taken.values
    np.testing.assert_array_equal(values["w"].data, np.arange(48, dtype=np.float32).reshape(6, 8))
    np.testing.assert_array_equal(values["b"].data, np.arange(5))
    np.testing.assert_array_equal(values["nested"].data["v"].data, np.full(3, 7.0, np.float32))
    assert values["row"].data[0] is values["w"].data  # the view keeps its base's copy


@pytest.mark.parametrize("name", OPENCL)
def test_injected_copy_faults_still_fire_on_a_snapshots_copies(name: str) -> None:
    device = hetero.device(name)
    state = _state(device)
    with hetero.fault.inject(f"{name}:copy:nth=3:lost"), pytest.raises(hetero.DeviceLostError):
        snapshot.take(state, 0)
    with hetero.fault.inject(f"{name}:copy:nth=4:lost"):
        snapshot.take(state, 0)  # three copies: a fourth never comes
