"""Recorded (fused) elementwise work and threads: a value another thread is computing is read only
once its kernel is queued, and waiting for one device computes only the work recorded on it (the
guard's standby thread waits for its failover device while the guarded thread records steps)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.arraylib import fusion as array_fusion
from hetero.recovery import reserve as guard_reserve
from tests.conftest import DEVICE_NAMES

RNG = np.random.default_rng(11)


def _made(host: np.ndarray, device: hetero.Device) -> hetero.Array:
    return hetero.asarray(host, device=device, copy=True)


def _other(device: hetero.Device) -> hetero.Device:
    names = [name for name in DEVICE_NAMES if name != device.name]
    if not names:
        pytest.skip("needs a second device")
    return hetero.device(names[0])


def test_a_value_another_thread_is_computing_is_read_once_its_kernel_is_queued(
        device: hetero.Device, monkeypatch: pytest.MonkeyPatch) -> None:
    host = RNG.standard_normal(4096).astype(np.float32)
    y = _made(host, device) * 3.0 + 1.0  # recorded
    started, go = threading.Event(), threading.Event()
    real = array_fusion._run

    def paused(node: Any, out: hetero.Array, fresh: bool) -> None:
        if threading.current_thread() is computing:  # its buffer given, its kernel not yet queued
            started.set()
            go.wait(10)
        real(node, out, fresh)

    monkeypatch.setattr(array_fusion, "_run", paused)
    computing = threading.Thread(target=lambda: y._buffer)
    computing.start()
    assert started.wait(10)
    read: dict[str, np.ndarray] = {}
    reader = threading.Thread(target=lambda: read.setdefault("y", np.array(y._host())))
    reader.start()
    reader.join(0.3)  # with the value's kernel not queued yet, the reader must still be waiting
    go.set()
    computing.join(10)
    reader.join(10)
    np.testing.assert_array_equal(read["y"], host * np.float32(3) + np.float32(1))


def test_waiting_for_a_device_leaves_the_work_recorded_on_another(device: hetero.Device) -> None:
    other = _other(device)
    y = _made(RNG.standard_normal(64).astype(np.float32), device) + 2.0
    other.synchronize()
    assert y._pending is not None
    device.synchronize()
    assert y._pending is None


def test_the_standby_reserving_memory_computes_nothing_the_guarded_thread_recorded(device: hetero.Device) -> None:
    other = _other(device)
    y = _made(RNG.standard_normal(64).astype(np.float32), device) * 2.0
    reserve = guard_reserve.Reserve.fill(other, [np.zeros((16, 4), np.float32)])
    assert reserve is not None and y._pending is not None
