"""The backend plugin interface: what a backend package implements and registers.

A backend is found through the entry-point group ``hetero.backends``. The entry
point names a :class:`BackendRegistration` (a record: name, factory, priority).
hetero calls the factory only when devices are listed; the factory imports the
vendor library, and raises :class:`~hetero.errors.BackendUnavailableError` (with
a reason and a remedy) when the library, driver or device is missing. The
built-in backends register exactly this way (see ``pyproject.toml``)::

    [project.entry-points."hetero.backends"]
    mydev = "mypackage.hetero_backend:registration"

Buffers are opaque to hetero: whatever object the runtime's ``allocate`` returns
is handed back to its ``upload``/``download``/``copy``. Zero-byte arrays never
reach a runtime.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from hetero.device import DeviceInfo, Health, HealthState
from hetero.target import Target


class DeviceRuntime(abc.ABC):
    """One device's runtime: memory and queue operations, implemented by a backend."""

    info: DeviceInfo
    #: ``(device_type, device_id)`` per the DLPack spec, or None when the device
    #: has no DLPack device type consumers understand.
    dlpack_device: tuple[int, int] | None = None
    #: True when buffers are host-addressable flat ``uint8`` NumPy arrays, so other
    #: devices can copy to and from them directly, without staging.
    host_memory: bool = False

    @abc.abstractmethod
    def allocate(self, nbytes: int) -> Any:
        """Allocate ``nbytes`` (> 0) of device memory and return the buffer."""

    @abc.abstractmethod
    def upload(self, dst: Any, src: np.ndarray, offset: int = 0) -> None:
        """Copy the C-contiguous host array ``src`` into ``dst`` at byte ``offset``; return
        when ``src`` may be reused."""

    @abc.abstractmethod
    def download(self, dst: np.ndarray, src: Any, offset: int = 0) -> None:
        """Copy ``dst.nbytes`` bytes of ``src`` from byte ``offset`` into the C-contiguous host
        array ``dst``; return when ``dst`` holds the data."""

    @abc.abstractmethod
    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        """Copy ``nbytes`` between two buffers of this device (may return before it finishes)."""

    def synchronize(self) -> None:
        """Wait for every queued operation on this device."""

    def health(self) -> Health:
        return Health(HealthState.UNKNOWN, "this backend reports no health")

    def memory_used(self) -> int | None:
        """Bytes of this device's memory in use now by everyone (this process, others, the
        driver), as the device reports it; None when the backend cannot tell. The placement
        policies count it, so memory allocated outside hetero's scheduler tasks is seen."""
        return None

    def native_view(self, buffer: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any | None:
        """A zero-copy array object of the vendor's library over ``buffer`` (NumPy on the
        host, CuPy on CUDA), used for DLPack and torch interop; None when there is none."""
        return None

    def adopt(self, native: Any) -> Any | None:
        """The buffer behind a vendor array object (the inverse of :meth:`native_view`),
        without copying; None when ``native`` is not one this device can adopt."""
        return None

    # -- kernels (a runtime without them returns None from kernel_target) ----------------
    def kernel_target(self) -> Target | None:
        """What this device's kernels are compiled for; None when it runs no hetero kernels."""
        return None

    def build_kernel(self, source: Any, artifact: bytes | None, path: Path) -> tuple[Any, bytes | None]:
        """Load a kernel. ``source`` has ``text``, ``entry`` and ``options`` (generated code);
        ``artifact`` is what this method returned before for the same source and device (from
        the cache), or None: then compile ``source`` with the vendor's compiler. ``path`` is a
        file path in the cache the runtime may use. Returns the loaded kernel and the artifact
        to cache (None when there is nothing new to cache). Raises KernelBuildError.

        On ``cuda`` and ``hip`` targets ``artifact`` may also be a prebuilt module image from a
        kernel bundle, built by nvcc or hipcc for this device's arch: a CUDA fatbin (cubin plus
        PTX), cubin or PTX, or an AMD code object (see
        :data:`hetero.compiler.toolchains.BINARY_KINDS`). The driver's module loader
        (``cuModuleLoadData``, ``hipModuleLoadData``) takes each of them as is."""
        raise NotImplementedError(f"{type(self).__name__} runs no kernels")

    def kernel_arg(self, buffer: Any, shape: tuple[int, ...], dtype: Any) -> Any:
        """What a kernel launch passes for an array: the buffer itself unless a runtime says otherwise."""
        return buffer

    def launch(self, kernel: Any, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
               args: Sequence[Any]) -> None:
        """Enqueue ``kernel`` over ``global_size`` work-items in groups of ``local_size``
        (None: the runtime chooses); ``args`` follow the kernel's ABI. May return before it finishes."""
        raise NotImplementedError(f"{type(self).__name__} runs no kernels")

    # -- faults -------------------------------------------------------------------------
    def fault_error(self, kind: str, code: int | None = None, doing: str = "launch") -> BaseException:
        """The exception this backend's real path raises for a fault, built the same way (fault
        injection raises it, so classification and recovery run unchanged). ``kind`` is one of
        ``lost``, ``sticky``, ``oom``, ``degraded``, or ``code`` for an explicit vendor ``code``
        (``cuda:700``, ``opencl:-5``); ``doing`` names the operation. Backends override this to
        go through their own vendor-error translation."""
        from hetero.errors import ContextCorruptedError, DeviceDegradedError, DeviceError, DeviceLostError, DeviceOutOfMemoryError

        classes: dict[str, type[DeviceError]] = {
            "lost": DeviceLostError, "sticky": ContextCorruptedError, "oom": DeviceOutOfMemoryError,
            "degraded": DeviceDegradedError, "code": DeviceError,
        }
        if kind not in classes:
            raise ValueError(f"unknown fault kind {kind!r}; valid kinds: {', '.join(classes)}")
        return classes[kind](f"{doing} failed: {kind} fault", backend=self.info.backend, device=self.info.name,
                             code=code, code_name=None)

    def drain_health_events(self) -> list[dict[str, Any]]:
        """Health events the backend saw since the last call (e.g. NVML Xid events: ``{"kind": "xid",
        "xid": 79, "time": <epoch seconds>, ...}``), oldest first; empty when it has no event source."""
        return []

    def wrap(self, native: Any) -> Any:
        """The buffer (as :meth:`allocate` returns) over a C-contiguous native array from :meth:`adopt`."""
        raise NotImplementedError(f"{type(self).__name__} cannot wrap vendor arrays")


class Backend(abc.ABC):
    """A vendor stack, opened: the devices it found."""

    name: str

    @abc.abstractmethod
    def devices(self) -> Sequence[DeviceRuntime]:
        """The devices of this backend, in index order (may be empty)."""

    def diagnostics(self) -> dict[str, Any]:
        """Details for ``hetero devices --all --json`` (versions, libraries found…)."""
        return {}


@dataclasses.dataclass(frozen=True)
class BackendRegistration:
    """How a plugin announces a backend.

    ``factory`` opens the backend (importing its vendor library); it raises
    :class:`~hetero.errors.BackendUnavailableError` when the backend cannot be used.
    ``priority`` orders devices of the same kind when picking one automatically
    (higher first). ``install_hint`` says how to get the backend's requirements.
    """

    name: str
    factory: Callable[[], Backend]
    priority: int = 0
    description: str = ""
    install_hint: str = ""
