"""A snapshot reads all of a device's arrays with one wait (``download_many``), and still
counts each copy for fault injection."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.recovery import snapshot
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


def test_reader_without_pyopencl_internals_goes_through_enqueue_copy() -> None:
    """The snapshot's device->host copies use PyOpenCL's own reader where it has one; a PyOpenCL
    without it (renamed internals) still copies, through the public ``enqueue_copy``."""
    from hetero.backends.opencl.runtime import _reader

    calls: list[tuple] = []

    class PublicOnly:
        @staticmethod
        def enqueue_copy(queue: object, dest: object, src: object, **options: object) -> str:
            calls.append((queue, dest, src, options))
            return "event"

    read = _reader(PublicOnly)  # type: ignore[arg-type]
    assert read("q", "mem", "host", 0, None, False) == "event"
    assert calls == [("q", "host", "mem", {"src_offset": 0, "wait_for": None, "is_blocking": False})]


@pytest.mark.parametrize("name", OPENCL)
def test_queued_snapshot_of_owners_holds_the_values_at_take(name: str) -> None:
    """take(wait=False) of arrays that own their buffers: the copies queue behind the work before
    it, and hold what the arrays held then, whatever runs on the device after."""
    device = hetero.device(name)
    w = hetero.asarray(np.arange(64, dtype=np.float32), device=device, copy=True)
    state = {"w": w, "again": w, "b": hetero.zeros((3,), dtype=np.int32, device=device)}
    w += 1.0  # queued before the snapshot: in it
    taken = snapshot.take(state, 0, wait=False)
    w *= 0.0  # after it: not in it
    assert taken.complete()
    np.testing.assert_array_equal(taken.values["w"].data, np.arange(64, dtype=np.float32) + 1)
    assert taken.values["again"].data is taken.values["w"].data  # one copy of one array
    assert taken.nbytes == 64 * 4 + 3 * 4
