"""NVIDIA (``cuda``) and AMD (``rocm``) GPUs through CuPy, which is built for one or the
other: one implementation, two registrations.

Memory is CuPy's (``cupy.cuda.MemoryPointer``, from CuPy's pool); copies go
through the device's current stream. Kernels are compiled with NVRTC (hipRTC on ROCm)
through ``cupy.RawModule``, or loaded from a prebuilt module image (a CUDA fatbin, cubin
or PTX; an AMD code object) with ``cupy.cuda.function.Module.load``: the loading hook
that kernel bundles use.
"""

from __future__ import annotations

import contextlib
import logging
import uuid as uuid_module
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from hetero.device import DeviceInfo, Kind
from hetero.errors import BackendUnavailableError, KernelBuildError
from hetero.plugin import Backend, DeviceRuntime
from hetero.target import FEATURES, Target

from . import cuda_errors

logger = logging.getLogger("hetero.backends.cupy")

# DLPack device types (dlpack.h): kDLCUDA = 2, kDLROCM = 10.
_DLPACK_TYPE = {"cuda": 2, "rocm": 10}
_STACK = {"cuda": "CUDA", "rocm": "ROCm/HIP"}
#: Largest work-group extent per dimension when a launch leaves the local size to the runtime.
_DEFAULT_BLOCK = {1: (256,), 2: (16, 16), 3: (8, 8, 4)}


def import_cupy(backend: str, hint: str) -> ModuleType:
    try:
        import cupy
    except ImportError as exc:
        raise BackendUnavailableError(backend, f"CuPy is not installed ({exc})", hint) from exc
    except Exception as exc:  # a broken CuPy install raises other errors at import
        raise BackendUnavailableError(backend, f"CuPy failed to import: {type(exc).__name__}: {exc}", hint) from exc
    return cupy


class CuPyRuntime(DeviceRuntime):
    def __init__(self, cupy: ModuleType, info: DeviceInfo, toolchain: str = "") -> None:
        self.info = info
        self.cupy = cupy
        self.dlpack_device = (_DLPACK_TYPE[info.backend], info.index)
        self._device = cupy.cuda.Device(info.index)
        self._errors = (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError,
                        cupy.cuda.memory.OutOfMemoryError)
        # gcnArchName carries target features ("gfx90a:sramecc+:xnack-"); code objects are named by the processor.
        arch = str(info.extra.get("arch", "")).split(":")[0]
        self._target = Target("hip" if info.backend == "rocm" else "cuda", arch, frozenset(FEATURES), toolchain)

    @contextlib.contextmanager
    def _on_device(self, doing: str) -> Iterator[None]:
        """Run CuPy calls on this device; a failure becomes a hetero DeviceError (see cuda_errors)."""
        try:
            with self._device:
                yield
        except self._errors as exc:
            raise cuda_errors.translate(exc, self.info.backend, self.info.name, doing) from exc

    def allocate(self, nbytes: int) -> Any:
        with self._on_device(f"allocating {nbytes} bytes"):
            return self.cupy.cuda.alloc(nbytes)

    def upload(self, dst: Any, src: np.ndarray, offset: int = 0) -> None:
        with self._on_device(f"copying {src.nbytes} bytes host->device"):
            (dst + offset).copy_from_host(src.ctypes.data, src.nbytes)

    def download(self, dst: np.ndarray, src: Any, offset: int = 0) -> None:
        with self._on_device(f"copying {dst.nbytes} bytes device->host"):
            (src + offset).copy_to_host(dst.ctypes.data, dst.nbytes)

    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        with self._on_device(f"copying {nbytes} bytes on the device"):
            dst.copy_from_device_async(src, nbytes)

    def synchronize(self) -> None:
        with self._on_device("waiting for the device"):
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

    # -- kernels (untested on hardware: this project's CI has no GPU) --------------------------
    def kernel_target(self) -> Target:
        return self._target

    def build_kernel(self, source: Any, artifact: bytes | None, path: Path) -> tuple[Any, bytes | None]:
        """Load ``artifact`` (a fatbin, cubin, PTX or code object) when given; otherwise, or when
        the driver refuses the image, compile ``source.text`` with NVRTC/hipRTC (CuPy caches that)."""
        cupy = self.cupy
        with self._device:
            if artifact is not None:
                try:
                    module = cupy.cuda.function.Module()
                    module.load(bytes(artifact))
                    return module.get_function(source.entry), None
                except cupy.cuda.driver.CUDADriverError as exc:  # no image for this GPU, or PTX newer than the driver
                    logger.info("%s: prebuilt image for %s not loadable (%s); compiling from source",
                                self.info.name, source.entry, exc)
            compile_error = getattr(cupy.cuda.compiler, "CompileException", RuntimeError)
            try:
                module = cupy.RawModule(code=source.text, options=tuple(source.options), backend="nvrtc")
                return module.get_function(source.entry), None
            except compile_error as exc:
                log = exc.get_message() if hasattr(exc, "get_message") else str(exc)
                compiler = "hipRTC" if self._target.dialect == "hip" else "NVRTC"
                raise KernelBuildError(f"{compiler} rejected the generated kernel", source=source.text,
                                       options=tuple(source.options), target=self.info.name, log=log) from exc

    def kernel_arg(self, buffer: Any, shape: tuple[int, ...], dtype: Any) -> Any:
        # A pointer-sized value: CuPy passes NumPy scalars by value, which is what a T* parameter takes.
        return np.uint64(buffer.ptr)

    def launch(self, kernel: Any, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
               args: Sequence[Any]) -> None:
        # CUDA grids count blocks; hetero's global size counts work-items, and kernels read
        # global_size as gridDim * blockDim, so the block must divide the global size exactly.
        block = local_size if local_size is not None else tuple(
            _largest_divisor(g, cap) for g, cap in zip(global_size, _DEFAULT_BLOCK[len(global_size)], strict=True))
        grid = tuple(g // b for g, b in zip(global_size, block, strict=True))
        with self._on_device(f"launching {getattr(kernel, 'name', 'a kernel')} (grid {grid}, block {block})"):
            kernel(grid, block, tuple(args))


def _largest_divisor(n: int, cap: int) -> int:
    """The largest divisor of ``n`` that is at most ``cap`` (1 for a prime above ``cap``)."""
    for size in range(min(n, cap), 0, -1):
        if n % size == 0:
            return size
    return 1


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
        compiler = "hiprtc" if name == "rocm" else "nvrtc"
        self.versions[compiler] = _rtc_version(cupy)
        toolchain = ", ".join(f"{part} {version}" for part, version in self.versions.items())
        self._devices = [CuPyRuntime(cupy, self._info(cupy, index), toolchain) for index in range(count)]

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


def _rtc_version(cupy: ModuleType) -> str:
    """NVRTC's (hipRTC's) version: a cache-key part of every kernel compiled at run time."""
    try:
        major, minor = cupy.cuda.nvrtc.getVersion()
    except Exception as exc:  # a missing or broken NVRTC shows up when the first kernel compiles
        return f"unknown ({type(exc).__name__})"
    return f"{major}.{minor}"


def _version(number: int) -> str:
    """CUDA/HIP encode versions as major*1000 + minor*10 (13020 -> "13.2"); 0 means no driver."""
    return f"{number // 1000}.{(number % 1000) // 10}" if number else "none"


def _driver_hint(backend: str, error: str, hint: str) -> str:
    if "InsufficientDriver" in error:
        return "install or update the GPU driver, or install a CuPy built for an older runtime (e.g. cupy-cuda12x)"
    if "NoDevice" in error:
        return "no GPU is visible: check CUDA_VISIBLE_DEVICES / HIP_VISIBLE_DEVICES and the driver"
    return hint
