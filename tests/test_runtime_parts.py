"""The runtime interface in parts: ``DeviceRuntime`` is the allocator, kernel loader, kernel runner,
health and interop parts together; streams are a protocol a runtime declares; what a device can do
is read from the parts (a memory-only runtime runs no kernels, a runtime without streams gets the
single-queue ``hetero.Stream``)."""

from __future__ import annotations

import contextvars
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.core.device import Device, DeviceInfo, Kind
from hetero.core.plugin import DeviceRuntime
from hetero.core.runtime_parts import Allocator, HealthSource, Interop, KernelLoader, KernelRunner, StreamRuntime, runs_kernels


def _info(name: str) -> DeviceInfo:
    return DeviceInfo(name=f"{name}:0", backend=name, index=0, vendor="Test", kind=Kind.ACCELERATOR, model="test double",
                      memory=1 << 20, compute_units=1, max_work_group_size=1, fp64=True, driver_version="0",
                      stable_id=f"{name}-0")


class MemoryOnly(DeviceRuntime):
    """The least a backend writes: the four data-moving methods of the allocator part."""

    def __init__(self) -> None:
        self.info = _info("memonly")

    def allocate(self, nbytes: int) -> Any:
        return bytearray(nbytes)

    def upload(self, dst: Any, src: np.ndarray, offset: int = 0) -> None:
        data = src.reshape(-1).view(np.uint8).tobytes()
        dst[offset:offset + len(data)] = data

    def download(self, dst: np.ndarray, src: Any, offset: int = 0) -> None:
        dst.reshape(-1).view(np.uint8)[:] = np.frombuffer(src, np.uint8)[offset:offset + dst.nbytes]

    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        dst[:nbytes] = src[:nbytes]


class WithStreams(MemoryOnly, StreamRuntime):
    """A runtime declaring streams; each stream is a name, and the log says what was asked of it."""

    def __init__(self) -> None:
        super().__init__()
        self.log: list[tuple[str, Any]] = []
        self._current: contextvars.ContextVar[Any] = contextvars.ContextVar("test_stream", default=None)

    def new_stream(self) -> Any:
        self.log.append(("new", None))
        return f"s{len(self.log)}"

    def push_stream(self, stream: Any) -> contextvars.Token[Any]:
        self.log.append(("push", stream))
        return self._current.set(stream)

    def pop_stream(self, token: contextvars.Token[Any]) -> None:
        self.log.append(("pop", token.var.get()))
        self._current.reset(token)

    def sync_stream(self, stream: Any) -> None:
        self.log.append(("sync", stream))

    def stream_wait(self, waiting: Any, other: Any) -> None:
        self.log.append(("wait", (waiting, other)))


def test_a_device_runtime_is_made_of_the_five_parts() -> None:
    for part in (Allocator, KernelLoader, KernelRunner, HealthSource, Interop):
        assert issubclass(DeviceRuntime, part)
    assert DeviceRuntime.__abstractmethods__ == {"allocate", "upload", "download", "copy"}
    assert not issubclass(DeviceRuntime, StreamRuntime)  # streams are declared by the runtimes that have them


def test_a_backend_that_writes_only_memory_methods_is_a_working_device() -> None:
    runtime = MemoryOnly()
    device = Device(runtime.info, runtime)
    x = hetero.asarray(np.arange(8, dtype=np.float32), device=device)
    assert np.array_equal(x.copy().numpy(), np.arange(8, dtype=np.float32))
    assert not runs_kernels(runtime) and runtime.memory_used() is None
    assert runtime.health().state is hetero.HealthState.UNKNOWN and runtime.drain_health_events() == []
    with pytest.raises(NotImplementedError, match="MemoryOnly runs no kernels"):
        runtime.launch(None, (1,), None, ())
    with pytest.raises(NotImplementedError, match="MemoryOnly cannot wrap vendor arrays"):
        runtime.wrap(np.zeros(1))
    runtime.close()  # keeps nothing for reuse: nothing to release


def test_the_built_in_runtimes_declare_what_they_do(device: hetero.Device) -> None:
    runtime = device.runtime
    assert runs_kernels(runtime)  # every built-in device here runs kernels
    assert isinstance(runtime, StreamRuntime) is (device.backend in ("cuda", "rocm"))


def test_the_cupy_runtime_declares_streams() -> None:
    from hetero.backends.cupy.runtime import CuPyRuntime

    assert issubclass(CuPyRuntime, StreamRuntime)


def test_a_stream_uses_the_declared_stream_part() -> None:
    runtime = WithStreams()
    device = Device(runtime.info, runtime)
    first, second = hetero.Stream(device), hetero.Stream(device)
    assert first.native == "s1" and second.native == "s2"
    with first:
        assert runtime._current.get() == "s1"
    assert runtime._current.get() is None
    first.synchronize()
    first.wait_for(second)
    assert runtime.log[2:] == [("push", "s1"), ("pop", "s1"), ("sync", "s1"), ("wait", ("s1", "s2"))]


def test_a_runtime_without_streams_gets_the_single_queue_stream() -> None:
    runtime = MemoryOnly()
    stream = hetero.Stream(Device(runtime.info, runtime))
    with stream:
        pass
    stream.synchronize()
    assert stream.native is None and "in-order queue" in repr(stream)
