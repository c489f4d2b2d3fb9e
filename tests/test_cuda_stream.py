"""``hetero.Stream``: on devices without streams (cpu, OpenCL) an in-order-queue alias that runs
the same code correctly; on CuPy devices, launches and copies inside the block go to the stream
(checked on a runtime whose device, stream and kernel are stand-ins: no GPU here)."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest
from kernels import corpus

import hetero
from hetero.core.device import Device


def test_a_stream_on_any_device_runs_work_in_order(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(64, dtype=np.float32), device=device)
    y = hetero.zeros(64, device=device)
    with hetero.Stream(device) as stream:
        assert hetero.device() is device  # the stream's device is the current one inside
        corpus.saxpy[64](2.0, x, y)
        corpus.saxpy[64](1.0, x, y)
    stream.synchronize()
    assert np.allclose(y.numpy(), 3 * np.arange(64))
    if device.backend not in ("cuda", "rocm"):
        assert stream.native is None and stream.handle == 0 and "in-order queue" in repr(stream)
        with pytest.raises(AttributeError):
            stream.__cuda_stream__()


def test_streams_nest_and_restore_the_current_device(device: hetero.Device) -> None:
    outer_before = hetero.device()
    first, second = hetero.Stream(device), hetero.Stream("cpu")
    with first, second:
        assert hetero.device() is second.device
    with first:
        with first:  # re-entrant
            assert hetero.device() is device
        assert hetero.device() is device
    assert hetero.device() is outer_before
    second.wait_for(first)  # no streams on these devices: waits on the host


class FakeStream:
    def __init__(self, name: str) -> None:
        self.name, self.ptr, self.synced, self.waited = name, 0xBEEF, 0, []

    def synchronize(self) -> None:
        self.synced += 1

    def wait_event(self, event: Any) -> None:
        self.waited.append(event)


class FakePointer:
    """A CuPy MemoryPointer stand-in recording which stream each copy went to."""

    def __init__(self, log: list[tuple[str, Any]]) -> None:
        self.log, self.ptr = log, 0x1000

    def __add__(self, offset: int) -> FakePointer:
        return self

    def copy_from_host_async(self, ptr: int, nbytes: int, stream: Any) -> None:
        self.log.append(("h2d", stream))

    def copy_to_host_async(self, ptr: int, nbytes: int, stream: Any) -> None:
        self.log.append(("d2h", stream))

    def copy_from_device_async(self, src: Any, nbytes: int, stream: Any) -> None:
        self.log.append(("d2d", stream))


def test_cupy_launches_and_copies_inside_a_stream_go_to_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from test_cuda_errors import make_runtime

    runtime = make_runtime()
    streams = iter([FakeStream("s1"), FakeStream("s2")])
    monkeypatch.setattr(runtime, "new_stream", lambda: next(streams))
    monkeypatch.setattr(runtime, "stream_wait", lambda waiting, other: waiting.wait_event(("after", other.name)))
    device = Device(runtime.info, runtime)
    log: list[tuple[str, Any]] = []
    launches: list[Any] = []

    def kernel(grid: Any, block: Any, args: Any, stream: Any = "default") -> None:
        launches.append(stream)

    pointer, host = FakePointer(log), np.zeros(16, np.uint8)
    runtime.launch(kernel, (256,), None, [])
    runtime.upload(pointer, host)
    s1, s2 = hetero.Stream(device), hetero.Stream(device)
    assert s1.handle == 0xBEEF and s1.__cuda_stream__() == (0, 0xBEEF)
    with s1:
        runtime.launch(kernel, (256,), None, [])
        runtime.upload(pointer, host)
        runtime.copy(pointer, pointer, 16)
        with s2:
            runtime.launch(kernel, (256,), None, [])
        runtime.launch(kernel, (256,), None, [])
    runtime.launch(kernel, (256,), None, [])
    assert [getattr(s, "name", s) for s in launches] == ["default", "s1", "s2", "s1", "default"]
    assert [(op, getattr(s, "name", s)) for op, s in log] == [("h2d", None), ("h2d", "s1"), ("d2d", "s1")]
    s2.wait_for(s1)
    assert s2.native.waited == [("after", "s1")]
    monkeypatch.setattr(runtime, "sync_stream", lambda stream: stream.synchronize())
    s1.synchronize()
    assert s1.native.synced == 1


def test_a_stream_entered_in_one_thread_does_not_leak_into_another(monkeypatch: pytest.MonkeyPatch) -> None:
    from test_cuda_errors import make_runtime

    runtime = make_runtime()
    monkeypatch.setattr(runtime, "new_stream", lambda: FakeStream("s1"))
    stream = hetero.Stream(Device(runtime.info, runtime))
    seen: list[Any] = []
    with stream:
        worker = threading.Thread(target=lambda: seen.append(runtime.current_stream()))
        worker.start()
        worker.join()
        assert runtime.current_stream() is stream.native
    assert seen == [None] and runtime.current_stream() is None
