"""NVIDIA (``cuda``) and AMD (``rocm``) GPUs through CuPy, which is built for one or the
other: one implementation, two registrations.

Memory is CuPy's (``cupy.cuda.MemoryPointer``, from CuPy's pool); copies go
through the device's current stream.
"""

from __future__ import annotations

import uuid as uuid_module
from collections.abc import Sequence
from types import ModuleType
from typing import Any

import numpy as np

from hetero.device import DeviceInfo, Kind
from hetero.errors import BackendUnavailableError
from hetero.plugin import Backend, DeviceRuntime

# DLPack device types (dlpack.h): kDLCUDA = 2, kDLROCM = 10.
_DLPACK_TYPE = {"cuda": 2, "rocm": 10}
_STACK = {"cuda": "CUDA", "rocm": "ROCm/HIP"}


def import_cupy(backend: str, hint: str) -> ModuleType:
    try:
        import cupy
    except ImportError as exc:
        raise BackendUnavailableError(backend, f"CuPy is not installed ({exc})", hint) from exc
    except Exception as exc:  # a broken CuPy install raises other errors at import
        raise BackendUnavailableError(backend, f"CuPy failed to import: {type(exc).__name__}: {exc}", hint) from exc
    return cupy


class CuPyRuntime(DeviceRuntime):
    def __init__(self, cupy: ModuleType, info: DeviceInfo) -> None:
        self.info = info
        self.cupy = cupy
        self.dlpack_device = (_DLPACK_TYPE[info.backend], info.index)
        self._device = cupy.cuda.Device(info.index)

    def allocate(self, nbytes: int) -> Any:
        with self._device:
            return self.cupy.cuda.alloc(nbytes)

    def upload(self, dst: Any, src: np.ndarray, offset: int = 0) -> None:
        with self._device:
            (dst + offset).copy_from_host(src.ctypes.data, src.nbytes)

    def download(self, dst: np.ndarray, src: Any, offset: int = 0) -> None:
        with self._device:
            (src + offset).copy_to_host(dst.ctypes.data, dst.nbytes)

    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        with self._device:
            dst.copy_from_device_async(src, nbytes)

    def synchronize(self) -> None:
        self._device.synchronize()

    def native_view(self, buffer: Any, shape: tuple[int, ...], dtype: np.dtype[Any]) -> Any:
        return self.cupy.ndarray(shape, dtype=dtype, memptr=buffer)

    def adopt(self, native: Any) -> Any | None:
        if isinstance(native, self.cupy.ndarray):
            return native
        if hasattr(native, "__dlpack__"):
            return self.cupy.from_dlpack(native)
        return None

    def wrap(self, native: Any) -> Any:
        return native.data


class CuPyBackend(Backend):
    def __init__(self, name: str, hint: str) -> None:
        self.name = name
        cupy = import_cupy(name, hint)
        runtime = cupy.cuda.runtime
        if bool(runtime.is_hip) != (name == "rocm"):
            built = "ROCm" if runtime.is_hip else "CUDA"
            raise BackendUnavailableError(name, f"the installed CuPy {cupy.__version__} is built for {built}", hint)
        self.versions = {"cupy": cupy.__version__}
        try:
            self.versions["runtime"] = _version(runtime.runtimeGetVersion())
            self.versions["driver"] = _version(runtime.driverGetVersion())
            count = runtime.getDeviceCount()
        except runtime.CUDARuntimeError as exc:
            raise BackendUnavailableError(
                name,
                f"CuPy {cupy.__version__} ({_STACK[name]} runtime {self.versions.get('runtime', '?')}) "
                f"cannot use a GPU: {exc}",
                _driver_hint(name, str(exc), hint),
            ) from exc
        self._devices = [CuPyRuntime(cupy, self._info(cupy, index)) for index in range(count)]

    def _info(self, cupy: ModuleType, index: int) -> DeviceInfo:
        props = cupy.cuda.runtime.getDeviceProperties(index)
        model = props["name"].decode(errors="replace") if isinstance(props["name"], bytes) else str(props["name"])
        raw_uuid = props.get("uuid")
        stable = str(uuid_module.UUID(bytes=bytes(raw_uuid)[:16])) if raw_uuid else f"{self.name}-pci-{props.get('pciBusID')}"
        arch = props.get("gcnArchName", b"")
        arch_name = arch.decode(errors="replace") if isinstance(arch, bytes) else str(arch)
        return DeviceInfo(
            name=f"{self.name}:{index}",
            backend=self.name,
            index=index,
            vendor="AMD" if self.name == "rocm" else "NVIDIA",
            kind=Kind.GPU,
            model=model,
            memory=int(props["totalGlobalMem"]),
            compute_units=int(props["multiProcessorCount"]),
            max_work_group_size=int(props["maxThreadsPerBlock"]),
            fp64=True,
            driver_version=self.versions.get("driver", ""),
            stable_id=stable,
            extra={"arch": arch_name or f"sm_{props['major']}{props['minor']}",
                   "pci_bus_id": str(props.get("pciBusID", ""))},
        )

    def devices(self) -> Sequence[DeviceRuntime]:
        return self._devices

    def diagnostics(self) -> dict[str, Any]:
        return dict(self.versions)


def _version(number: int) -> str:
    """CUDA/HIP encode versions as major*1000 + minor*10 (13020 -> "13.2"); 0 means no driver."""
    return f"{number // 1000}.{(number % 1000) // 10}" if number else "none"


def _driver_hint(backend: str, error: str, hint: str) -> str:
    if "InsufficientDriver" in error:
        return "install or update the GPU driver, or install a CuPy built for an older runtime (e.g. cupy-cuda12x)"
    if "NoDevice" in error:
        return "no GPU is visible: check CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES and the driver"
    return hint
