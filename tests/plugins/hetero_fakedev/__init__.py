"""An out-of-tree backend plugin kept in the test tree: a *test tool*, not a device.

It registers through entry-point metadata (``hetero_fakedev-0.1.dist-info``) exactly
as a third-party package would, and stores its "device memory" in host RAM behind
the runtime interface (not marked as host memory, so copies to and from it take the
same staging path as a real GPU). Two more entry points show that a plugin which
raises during discovery, or cannot even be imported, is reported and not fatal.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core.device import DeviceInfo, Health, HealthState, Kind
from hetero.core.plugin import Backend, BackendRegistration, DeviceRuntime


class FakeRuntime(DeviceRuntime):
    def __init__(self, index: int) -> None:
        self.info = DeviceInfo(
            name=f"fake:{index}", backend="fake", index=index, vendor="Test", kind=Kind.ACCELERATOR,
            model="hetero test double", memory=1 << 30, compute_units=1, max_work_group_size=64,
            fp64=True, driver_version="0.1", stable_id=f"fake-{index}",
        )

    def allocate(self, nbytes: int) -> Any:
        return bytearray(nbytes)

    def upload(self, dst: Any, src: np.ndarray, offset: int = 0) -> None:
        data = src.reshape(-1).view(np.uint8).tobytes()
        dst[offset:offset + len(data)] = data

    def download(self, dst: np.ndarray, src: Any, offset: int = 0) -> None:
        flat = dst.reshape(-1).view(np.uint8)
        flat[:] = np.frombuffer(src, dtype=np.uint8)[offset:offset + flat.size]

    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        dst[:nbytes] = src[:nbytes]

    def health(self) -> Health:
        return Health(HealthState.OK)


class FakeBackend(Backend):
    name = "fake"

    def devices(self) -> list[DeviceRuntime]:
        return [FakeRuntime(0), FakeRuntime(1)]


def _broken() -> Backend:
    raise RuntimeError("simulated driver crash during discovery")


registration = BackendRegistration("fake", FakeBackend, priority=5, description="test double")
broken_registration = BackendRegistration("fakebroken", _broken, description="raises during discovery")
