"""A FAKE device for tests of the fault and registry layers: host memory, a health state and
pending health events the test sets, registered through the registry as a plugin's would be.
Not a backend anyone should use; it exists so tests can make a device sick on demand."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hetero.core.device import DeviceInfo, Health, HealthState, Kind
from hetero.core.plugin import Backend, BackendRegistration, DeviceRuntime


class FakeRuntime(DeviceRuntime):
    """Device ``<backend>:<index>`` (stable id ``<backend>-<index>``). ``state``/``reason`` are what
    :meth:`health` reports, ``raises`` makes it raise instead, ``pending`` is what
    :meth:`drain_health_events` hands out next."""

    def __init__(self, backend: str, index: int = 0) -> None:
        self.info = DeviceInfo(name=f"{backend}:{index}", backend=backend, index=index, vendor="Test",
                               kind=Kind.ACCELERATOR, model="test double", memory=1 << 20, compute_units=1,
                               max_work_group_size=1, fp64=True, driver_version="0", stable_id=f"{backend}-{index}")
        self.state = HealthState.OK
        self.reason = "simulated"
        self.raises: Exception | None = None
        self.pending: list[dict[str, Any]] = []

    def allocate(self, nbytes: int) -> Any:
        return np.zeros(nbytes, np.uint8)

    def upload(self, dst: Any, src: np.ndarray, offset: int = 0) -> None: ...

    def download(self, dst: np.ndarray, src: Any, offset: int = 0) -> None: ...

    def copy(self, dst: Any, src: Any, nbytes: int) -> None: ...

    def health(self) -> Health:
        if self.raises is not None:
            raise self.raises
        return Health(self.state, "" if self.state is HealthState.OK else self.reason)

    def drain_health_events(self) -> list[dict[str, Any]]:
        drained, self.pending = self.pending, []
        return drained


def fake_backend(name: str, count: int = 1, setup: Callable[[FakeRuntime], None] | None = None,
                 before_devices: Callable[[], None] | None = None) -> BackendRegistration:
    """A registration of backend ``name`` with ``count`` fake devices; ``setup`` adjusts each new
    runtime, ``before_devices`` runs when the backend is opened (e.g. to make discovery slow)."""

    class FakeBackend(Backend):
        def devices(self) -> list[DeviceRuntime]:
            if before_devices is not None:
                before_devices()
            runtimes = [FakeRuntime(name, index) for index in range(count)]
            for runtime in runtimes:
                if setup is not None:
                    setup(runtime)
            return list(runtimes)

    FakeBackend.name = name
    return BackendRegistration(name, FakeBackend)
