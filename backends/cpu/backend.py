"""The host backend: NumPy memory on the CPU the Python process runs on (kernels: Numba).

Its buffers are flat ``uint8`` NumPy arrays, so host data is shared without
copies (DLPack, torch, ``Array.numpy()``).

The CPU has no vendor error codes: its errors carry ``code=None`` and a ``code_name`` of
hetero's own (``CPU_OUT_OF_MEMORY``, ``CPU_DEVICE_LOST``, ...), see :data:`FAULT_NAMES`.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import os
import platform
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from hetero.core.device import DeviceInfo, Health, HealthState, Kind
from hetero.core.errors import BackendUnavailableError, ContextCorruptedError, DeviceDegradedError, DeviceError, DeviceLostError, DeviceOutOfMemoryError
from hetero.core.plugin import Backend, BackendRegistration, DeviceRuntime
from hetero.core.target import Target

from hetero.backends.cpu import kernels as cpu_kernels
from hetero.backends import host

# Work-group size the CPU kernel emitter runs per group; a limit of hetero's, not of the hardware.
MAX_WORK_GROUP_SIZE = 1024
#: Work-group (shared) memory one group may hold, in bytes: hetero's limit too (each worker thread
#: allocates its groups' arrays in NumPy). 1 MiB, as PoCL gives its CPU device here: above any GPU's
#: 48-228 KiB, so kernels written for GPUs fit, and far below a size that fails to allocate.
LOCAL_MEMORY = 1 << 20

PAGE = 4096
#: Buffers of this many bytes or more start on a page (see ``CPURuntime.allocate``): one page more
#: is at most 1/16 of what they hold.
PAGE_ALIGNED_FROM = 16 * PAGE

#: Fault kind -> (error class, code name). The CPU has no vendor codes, so the names are hetero's;
#: only out-of-memory happens for real here (NumPy's MemoryError), the others come from fault injection.
FAULT_NAMES: dict[str, tuple[type[DeviceError], str]] = {
    "oom": (DeviceOutOfMemoryError, "CPU_OUT_OF_MEMORY"),
    "lost": (DeviceLostError, "CPU_DEVICE_LOST"),
    "sticky": (ContextCorruptedError, "CPU_CONTEXT_CORRUPTED"),
    "degraded": (DeviceDegradedError, "CPU_DEGRADED"),
}


class CPURuntime(DeviceRuntime):
    dlpack_device = (1, 0)  # kDLCPU
    host_memory = True

    def __init__(self, info: DeviceInfo) -> None:
        self.info = info
        # Numba compiles for the host; its version is the toolchain part of cache keys.
        self._target = Target("cpu", platform.machine(), frozenset({"fp64", "int64_atomics"}), info.driver_version)

    def allocate(self, nbytes: int) -> np.ndarray:
        """``nbytes`` of host memory; from :data:`PAGE_ALIGNED_FROM` bytes on, starting on a page, so
        that an OpenCL CPU device can work on it in place (``alias_host``; Intel's runtime needs a
        page, and vector loads a cache line at least)."""
        try:
            if nbytes < PAGE_ALIGNED_FROM:
                return np.empty(nbytes, dtype=np.uint8)
            raw = np.empty(nbytes + PAGE, dtype=np.uint8)
            start = -raw.ctypes.data % PAGE
            return raw[start:start + nbytes]
        except MemoryError as exc:
            raise self._error("oom", f"allocating {nbytes} bytes failed: {exc or 'out of host memory'}") from exc

    def _error(self, kind: str, message: str) -> DeviceError:
        cls, name = FAULT_NAMES[kind]
        return cls(message, backend=self.info.backend, device=self.info.name, code=None, code_name=name)

    def fault_error(self, kind: str, code: int | None = None, doing: str = "launch") -> BaseException:
        """The error of ``kind`` (lost, sticky, oom, degraded) as this backend raises it; the CPU has
        no vendor codes, so ``kind="code"`` is refused."""
        if kind not in FAULT_NAMES:
            raise ValueError(f"the cpu backend has no fault kind {kind!r} (it has no vendor error codes); "
                             f"valid kinds: {', '.join(FAULT_NAMES)}")
        messages = {"oom": "out of host memory", "lost": "the device is lost", "sticky": "the context is corrupted",
                    "degraded": "the device reports degraded hardware"}
        return self._error(kind, f"{doing} failed: {messages[kind]}")

    def upload(self, dst: np.ndarray, src: np.ndarray, offset: int = 0) -> None:
        flat = src.reshape(-1).view(np.uint8)
        np.copyto(dst[offset:offset + flat.size] if offset or flat.size != dst.size else dst, flat)

    def download(self, dst: np.ndarray, src: np.ndarray, offset: int = 0) -> None:
        flat = dst.reshape(-1).view(np.uint8)
        np.copyto(flat, src[offset:offset + flat.size] if offset or flat.size != src.size else src)

    def copy(self, dst: np.ndarray, src: np.ndarray, nbytes: int) -> None:
        np.copyto(dst, src) if nbytes == dst.size == src.size else np.copyto(dst[:nbytes], src[:nbytes])

    def health(self) -> Health:
        return Health(HealthState.OK)

    def kernel_target(self) -> Target:
        return self._target

    def build_kernel(self, source: Any, artifact: bytes | None, path: Path) -> tuple[Any, bytes | None]:
        return cpu_kernels.load(source, artifact, path, self.info.name)

    def kernel_arg(self, buffer: np.ndarray, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
        return cpu_kernels.kernel_arg(buffer, shape, dtype)

    def prepare_kernel(self, kernel: Any, values: Sequence[Any]) -> None:
        cpu_kernels.prepare(kernel, values)

    #: cpu_kernels' launch itself as the method (it takes the runtime first and ignores it): a
    #: launch costs one Python call less. Fault injection wraps it per instance like any method.
    launch = cpu_kernels.runtime_launch

    def native_view(self, buffer: np.ndarray, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
        return buffer.view(dtype).reshape(shape)

    def adopt(self, native: Any) -> np.ndarray | None:
        if isinstance(native, np.ndarray):
            return native
        if hasattr(native, "__dlpack__"):
            return np.from_dlpack(native)
        return None

    def wrap(self, native: np.ndarray) -> np.ndarray:
        return native.reshape(-1).view(np.uint8)


def _host_id() -> str:
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            return Path(path).read_text().strip()
        except OSError:
            continue
    return platform.node()


def _memory() -> int:
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return 0


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _versions() -> str:
    parts = [f"numpy {np.__version__}"]
    try:
        parts.append(f"numba {metadata.version('numba')}")
    except metadata.PackageNotFoundError:
        pass
    return ", ".join(parts)


def _numba_missing() -> bool:
    """Whether Numba cannot be imported here, found without importing it and without asking the
    import hooks (a process that launches only cached kernels never imports Numba at all)."""
    if "numba" in sys.modules:
        return sys.modules["numba"] is None  # imported already, or blocked (sys.modules["numba"] = None)
    return importlib.machinery.PathFinder.find_spec("numba") is None


class CPUBackend(Backend):
    name = "cpu"

    def __init__(self) -> None:
        # Numba is a base dependency; without it (--no-deps, a broken environment) the device is listed
        # as unavailable with the remedy, not as `ok` with kernels that fail at the first operation.
        if _numba_missing():
            raise BackendUnavailableError("cpu", "Numba is not installed (the cpu device compiles its kernels with it)",
                                          "pip install numba  (a dependency of hetero: pip install --force-reinstall hetero)")
        vendor, model = host.cpu_vendor_and_model()
        info = DeviceInfo(
            name="cpu",
            backend="cpu",
            index=0,
            vendor=vendor,
            kind=Kind.CPU,
            model=model,
            memory=_memory(),
            compute_units=_cores(),
            max_work_group_size=MAX_WORK_GROUP_SIZE,
            fp64=True,
            driver_version=_versions(),
            stable_id="cpu-" + hashlib.sha1(_host_id().encode()).hexdigest()[:16],
            local_memory=LOCAL_MEMORY,
        )
        self._devices = [CPURuntime(info)]

    def devices(self) -> Sequence[DeviceRuntime]:
        return self._devices


registration = BackendRegistration(
    name="cpu",
    factory=CPUBackend,
    priority=60,
    description="the host CPU: NumPy memory, Numba-compiled kernels",
)
