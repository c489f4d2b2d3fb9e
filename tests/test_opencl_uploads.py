"""Small host->device copies on OpenCL queue without waiting (``backends/opencl/uploads.py``): the
caller's array may be reused at once, the device sees every write in order, a large upload still
waits, and a queued write that failed is raised at the next wait as the device's error."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.backends.opencl import uploads as opencl_uploads
from tests.conftest import DEVICE_NAMES

OPENCL = [name for name in DEVICE_NAMES if name.startswith(("opencl", "oneapi"))]


@pytest.mark.parametrize("name", OPENCL)
def test_the_source_may_be_reused_as_soon_as_upload_returns(name: str) -> None:
    device = hetero.device(name)
    runtime = device.runtime
    device.synchronize()
    runtime._writes_queued = True  # as after a write queued behind a kernel: the writes after it are queued too
    host = np.arange(1000, dtype=np.float32)
    arrays = []
    for step in range(3 * opencl_uploads.KEEP):  # past the point where the oldest writes are let go
        host[:] = step
        arrays.append(hetero.asarray(host, device=device, copy=True))
        host[:] = -1.0  # the caller's array, rewritten before the device has run the write
    assert runtime._writes_queued and len(runtime._uploads) > 0
    # A write is not a kernel: a call failing now does not read as a kernel's failure reported late
    assert not runtime.pending
    assert len(runtime._uploads) <= 2 * opencl_uploads.KEEP
    for step, array in enumerate(arrays):
        np.testing.assert_array_equal(array.numpy(), np.full(1000, step, np.float32))
    assert len(runtime._uploads) == 0  # the read waited for the queue: every write let go


@pytest.mark.parametrize("name", OPENCL)
def test_an_upload_to_an_idle_queue_is_a_blocking_write(name: str) -> None:
    device = hetero.device(name)
    device.synchronize()
    x = hetero.asarray(np.arange(256, dtype=np.float32), device=device, copy=True)
    # nothing to overtake: the write waited for itself alone, and nothing is kept
    assert not device.runtime._writes_queued and len(device.runtime._uploads) == 0
    np.testing.assert_array_equal(x.numpy(), np.arange(256, dtype=np.float32))


@pytest.mark.parametrize("name", OPENCL)
def test_writes_and_kernels_keep_their_order(name: str) -> None:
    device = hetero.device(name)
    runtime = device.runtime
    x = hetero.zeros((512,), dtype=hetero.f32, device=device)
    batch = np.empty(512, np.float32)
    results = []
    for step in range(40):
        batch[:] = np.arange(512, dtype=np.float32) * (step + 1)
        x = x * 1.0 + 0.0  # a kernel writing x, queued
        hetero.copyto(x, batch + 0.0)  # queued behind it, not waited for: it must land after it
        assert runtime._writes_queued
        results.append(x * 1.0 + 0.0)  # a kernel reading what the write put there
        batch[:] = np.nan  # reused at once
    for step, result in enumerate(results):
        np.testing.assert_array_equal(result.numpy(), np.arange(512, dtype=np.float32) * (step + 1))
    device.synchronize()


@pytest.mark.parametrize("name", OPENCL)
def test_an_upload_past_the_limit_still_waits(name: str) -> None:
    device = hetero.device(name)
    device.synchronize()
    count = opencl_uploads.ASYNC_UPLOAD_MAX // 4 + 1
    big = hetero.asarray(np.ones(count, np.float32), device=device, copy=True)
    assert not device.runtime.pending and not device.runtime._writes_queued  # it waited for everything before it
    assert float(big.numpy()[-1]) == 1.0


class _FinishedEvent:
    """A test double of a PyOpenCL event whose command has the status given."""

    def __init__(self, status: int) -> None:
        self.status = status
        self.waited = 0

    def get_info(self, what: Any) -> int:
        return self.status

    def wait(self) -> None:
        self.waited += 1
        self.status = 0


@pytest.mark.parametrize("name", OPENCL)
def test_a_queued_write_that_failed_is_the_devices_error_at_the_next_wait(name: str) -> None:
    device = hetero.device(name)
    runtime = device.runtime
    hetero.zeros((4,), device=device).numpy()  # the queue exists and is idle
    runtime._uploads.add(_FinishedEvent(-5), runtime._upload_failed)  # CL_OUT_OF_RESOURCES
    runtime._writes_queued = True
    with pytest.raises(hetero.DeviceError) as caught:
        device.synchronize()
    assert name in str(caught.value) and "host->device" in str(caught.value)
    assert len(runtime._uploads) == 0  # not raised again at the next wait
    device.synchronize()


def test_done_writes_are_let_go_and_the_oldest_waited_for_far_ahead() -> None:
    flushes: list[int] = []
    failures: list[int] = []
    cl = SimpleNamespace(command_execution_status=SimpleNamespace(COMPLETE=0),
                         event_info=SimpleNamespace(COMMAND_EXECUTION_STATUS="status"))
    kept = opencl_uploads.InFlight(cl, lambda: flushes.append(1))
    running = [_FinishedEvent(2) for _ in range(2 * opencl_uploads.KEEP)]  # CL_SUBMITTED
    for event in running:
        kept.add(event, failures.append)
    assert len(kept) == 2 * opencl_uploads.KEEP and not flushes  # none done: all kept
    kept.add(_FinishedEvent(2), failures.append)
    assert running[0].waited == 1 and flushes == [1]  # flushed, then the oldest waited for
    for event in running:
        event.status = 0
    kept.add(_FinishedEvent(0), failures.append)
    assert len(kept) == opencl_uploads.KEEP and not failures
    failed = _FinishedEvent(-36)
    kept.settle(failures.append)
    kept.add(failed, failures.append)
    kept.settle(failures.append)
    assert failures == [-36] and len(kept) == 0


def test_only_plain_arrays_up_to_the_limit_are_queued_without_waiting() -> None:
    small = np.arange(6, dtype=np.int64).reshape(2, 3)
    copy = opencl_uploads.private_copy(small)
    assert copy is not None and copy is not small and np.array_equal(copy, small) and copy.flags.c_contiguous
    assert opencl_uploads.private_copy(np.zeros(opencl_uploads.ASYNC_UPLOAD_MAX + 1, np.uint8)) is None
    assert opencl_uploads.private_copy(memoryview(b"abc")) is None  # type: ignore[arg-type]
