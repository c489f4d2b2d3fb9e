"""NVIDIA (``cuda``) and AMD (``rocm``) GPUs through CuPy, which is built for one or the
other: one implementation, two registrations.

Memory is CuPy's (``cupy.cuda.MemoryPointer``, from CuPy's pool). Work goes to the device's
default stream (CUDA's legacy default stream, which torch and CuPy also use, so their work and
hetero's stay ordered), or to the stream of an enclosing ``with hetero.Stream(device):``.
Uploads of at least :data:`~hetero.backends.cupy.staging.THRESHOLD` bytes are staged
through pinned buffers; downloads go direct (the driver's own path was twice as fast on an H200).
Kernels come from a prebuilt module image (a bundle's cubin/fatbin/PTX, an AMD code object)
loaded with ``cuModuleLoadData``, or are compiled at run time: to a cubin by NVRTC through
``cuda.bindings.nvrtc`` (:mod:`hetero.backends.cupy.nvrtc_compile`; no driver needed to compile), else
with ``cupy.RawModule`` (NVRTC through CuPy, or hipRTC on ROCm). Launches go through CuPy's
``Function`` (a ctypes call of ``cuLaunchKernel`` with packed parameters measured 0.8 us slower on
an H200's host, 2026-12-04).

Errors become hetero errors through :mod:`hetero.backends.cupy.cuda_errors`; a context-corrupting
or device-lost error makes :meth:`CuPyRuntime.health` report ``unhealthy`` for the rest of the
process (CUDA cannot recover the context in it). Health otherwise comes from NVML (``cuda``)
or amdsmi/sysfs (``rocm``).
"""

from __future__ import annotations

import contextlib
import contextvars
import logging
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np

from hetero.core.device import DeviceInfo, Health, HealthState
from hetero.core.errors import ContextCorruptedError, DeviceDegradedError, DeviceLostError, KernelBuildError
from hetero.core.plugin import Backend, DeviceRuntime, StreamRuntime
from hetero.core.target import FEATURES, Target

from hetero.backends.cupy import cuda_errors, nvrtc_compile
from hetero.backends.cupy.discovery import device_info, open_cupy, precheck
from hetero.backends.cupy.staging import DOWNLOAD_THRESHOLD, THRESHOLD, CuPyEngine, PinnedStaging

logger = logging.getLogger("hetero.backends.cupy")

# DLPack device types (dlpack.h): kDLCUDA = 2, kDLROCM = 10.
_DLPACK_TYPE = {"cuda": 2, "rocm": 10}
#: Largest work-group extent per dimension when a launch leaves the local size to the runtime.
_DEFAULT_BLOCK = {1: (256,), 2: (16, 16), 3: (8, 8, 4)}
#: The vendor code each fault kind is built from (see :meth:`CuPyRuntime.fault_error`).
FAULT_CODES = {"cuda": {"lost": 999, "sticky": 700, "oom": 2, "degraded": 214},
               "rocm": {"lost": 100, "sticky": 700, "oom": 2, "degraded": 214}}
#: The driver's answer when no CUDA context is current on the calling thread (CUresult 201).
CUDA_ERROR_INVALID_CONTEXT = 201
#: The Xid that accompanies an injected "lost" fault on NVIDIA GPUs ("GPU has fallen off the bus").
LOST_XID = 79


class CuPyRuntime(DeviceRuntime, StreamRuntime):
    """One CUDA or ROCm GPU: every part of a runtime, streams included (CUDA/HIP streams)."""

    def __init__(self, cupy: ModuleType, info: DeviceInfo, toolchain: str = "", nvml: Any = None) -> None:
        self.info = info
        self.cupy = cupy
        self.dlpack_device = (_DLPACK_TYPE[info.backend], info.index)
        self._device = cupy.cuda.Device(info.index)
        self._errors = (cupy.cuda.runtime.CUDARuntimeError, cupy.cuda.driver.CUDADriverError,
                        cupy.cuda.memory.OutOfMemoryError)
        # gcnArchName carries target features ("gfx90a:sramecc+:xnack-"); code objects are named by the processor.
        arch = str(info.extra.get("arch", "")).split(":")[0]
        self._target = Target("hip" if info.backend == "rocm" else "cuda", arch, frozenset(FEATURES), toolchain)
        self._nvml = nvml
        self._listener: Any = None
        self._broken: Health | None = None  # set by a context-corrupting / lost error: sticky for the process
        self._stream: contextvars.ContextVar[Any] = contextvars.ContextVar(f"hetero_stream_{info.name}", default=None)
        self._staging: PinnedStaging | None = None
        self._grids: dict[tuple[Any, ...], tuple[tuple[int, ...], tuple[int, ...]]] = {}
        #: The only GPU of its backend: launches need not make it current first (see :meth:`launch`).
        self.single = True
        #: Stable ids of every device of this backend: one NVML event listener watches them all.
        self.peer_ids: list[str] = [info.stable_id]

    # -- errors and health --------------------------------------------------------------
    @contextlib.contextmanager
    def _on_device(self, doing: str) -> Iterator[None]:
        """Run CuPy calls on this device; a failure becomes a hetero DeviceError (see cuda_errors)."""
        try:
            with self._device:
                yield
        except self._errors as exc:
            error = cuda_errors.translate(exc, self.info.backend, self.info.name, doing, xid=self._recent_xid())
            self.note_error(error)
            raise error from exc

    def note_error(self, error: BaseException) -> None:
        """Remember a device error that outlives the call: after a context-corrupting or device-lost
        error, :meth:`health` is ``unhealthy`` for the rest of the process (degraded after ECC)."""
        if self._broken is not None and self._broken.state is HealthState.UNHEALTHY:
            return
        what = f"{getattr(error, 'code_name', None) or type(error).__name__} (code {getattr(error, 'code', '?')})"
        if isinstance(error, ContextCorruptedError):
            self._broken = Health(HealthState.UNHEALTHY, f"{what}: the {self._stack()} context is corrupted in this "
                                  "process; move work to another device or restart the process")
        elif isinstance(error, DeviceLostError):
            self._broken = Health(HealthState.UNHEALTHY, f"{what}: the device is lost; it needs a reset or a reboot")
        elif isinstance(error, DeviceDegradedError):
            self._broken = Health(HealthState.DEGRADED, f"{what}: uncorrectable ECC; reset the GPU to retire the pages")

    def _stack(self) -> str:
        return "HIP" if self.info.backend == "rocm" else "CUDA"

    def _recent_xid(self) -> int | None:
        return self._listener.last_xid(self.info.stable_id) if self._listener is not None else None

    def health(self) -> Health:
        if self._broken is not None and self._broken.state is HealthState.UNHEALTHY:
            return self._broken
        if self.info.backend == "rocm":
            from hetero.backends.cupy.rocm_health import rocm_health

            vendor = rocm_health(str(self.info.extra.get("pci_bus_id", "")))[0]
        else:
            vendor = self._nvml_reading().health
        if self._broken is not None and vendor.state in (HealthState.OK, HealthState.UNKNOWN):
            return self._broken
        return vendor

    def _nvml_reading(self) -> Any:
        from hetero.backends.cupy.nvml_health import shared

        if self._nvml is None:
            self._nvml = shared()
        return self._nvml.read(self.info.stable_id)

    def health_fields(self) -> dict[str, Any]:
        """The raw vendor health fields (NVML counters, or amdsmi/sysfs readings), for reports."""
        if self.info.backend == "rocm":
            from hetero.backends.cupy.rocm_health import rocm_health

            return rocm_health(str(self.info.extra.get("pci_bus_id", "")))[1]
        return self._nvml_reading().fields

    def drain_health_events(self) -> list[dict[str, Any]]:
        """NVML events (Xid, double-bit ECC, GPU lost) of this device since the last call; the event
        listener thread starts on the first call. Always empty on ``rocm``."""
        if self.info.backend != "cuda":
            return []
        if self._listener is None:
            from hetero.backends.cupy.nvml_health import shared
            from hetero.backends.cupy.xid_listener import listener_for

            if self._nvml is None:
                self._nvml = shared()
            self._listener = listener_for(self._nvml, self.peer_ids)
        return [{**event, "device": self.info.name} for event in self._listener.drain(self.info.stable_id)]

    def fault_error(self, kind: str, code: int | None = None, doing: str = "launch") -> BaseException:
        """The error the real path raises for a fault: CuPy's own exception for the vendor code of
        ``kind`` (:data:`FAULT_CODES`: lost 999 with Xid 79 on CUDA / hipErrorNoDevice 100 on ROCm,
        sticky 700, oom 2 (CuPy's pool OutOfMemoryError when allocating), degraded 214; ``code``:
        that code), translated exactly as :meth:`_on_device` translates real failures."""
        codes = FAULT_CODES[self.info.backend]
        if kind == "code":
            if code is None:
                raise ValueError("fault kind 'code' needs a vendor code, e.g. cuda:700")
        elif kind in codes:
            code = codes[kind]
        else:
            raise ValueError(f"unknown fault kind {kind!r}; valid kinds: {', '.join(codes)}, code")
        if kind == "oom" and doing in ("alloc", "allocate"):
            native: BaseException = self.cupy.cuda.memory.OutOfMemoryError(1 << 30, 0, 0)
        else:
            native = self.cupy.cuda.runtime.CUDARuntimeError(code)
        xid = LOST_XID if kind == "lost" and self.info.backend == "cuda" else self._recent_xid()
        error = cuda_errors.translate(native, self.info.backend, self.info.name, doing, xid=xid)
        error.__cause__ = native
        return error

    # -- streams (hetero.core.runtime_parts.StreamRuntime) -----------------------------------
    def new_stream(self) -> Any:
        """A new CuPy stream on this device (blocking: ordered after the legacy default stream)."""
        with self._on_device("creating a stream"):
            return self.cupy.cuda.Stream(non_blocking=False)

    def push_stream(self, stream: Any) -> contextvars.Token[Any]:
        """Make ``stream`` this context's stream on this device (undo with :meth:`pop_stream`)."""
        return self._stream.set(stream)

    def pop_stream(self, token: contextvars.Token[Any]) -> None:
        self._stream.reset(token)

    def sync_stream(self, stream: Any) -> None:
        with self._on_device("waiting for a stream"):
            stream.synchronize()

    def stream_wait(self, waiting: Any, other: Any) -> None:
        """Make ``waiting`` wait (on the device) for the work queued on ``other`` so far."""
        with self._on_device("ordering two streams"):
            event = self.cupy.cuda.Event(block=False, disable_timing=True)
            event.record(other)
            waiting.wait_event(event)

    def current_stream(self) -> Any:
        """The stream work goes to now: a hetero.Stream's, or None (the device's default stream)."""
        return self._stream.get()

    # -- memory -------------------------------------------------------------------------
    def allocate(self, nbytes: int) -> Any:
        with self._on_device(f"allocating {nbytes} bytes"):
            return self.cupy.cuda.alloc(nbytes)

    def _pinned(self) -> PinnedStaging:
        if self._staging is None:
            self._staging = PinnedStaging(CuPyEngine(self.cupy))
        return self._staging

    def upload(self, dst: Any, src: np.ndarray, offset: int = 0) -> None:
        stream = self._stream.get()
        with self._on_device(f"copying {src.nbytes} bytes host->device"):
            if src.nbytes >= THRESHOLD:
                self._pinned().upload(dst, src, offset, stream)
            else:  # from pageable memory the call returns once src has been staged by the driver
                (dst + offset).copy_from_host_async(src.ctypes.data, src.nbytes, stream)

    def download(self, dst: np.ndarray, src: Any, offset: int = 0) -> None:
        stream = self._stream.get()
        with self._on_device(f"copying {dst.nbytes} bytes device->host"):
            if DOWNLOAD_THRESHOLD is not None and dst.nbytes >= DOWNLOAD_THRESHOLD:
                self._pinned().download(dst, src, offset, stream)
            else:
                (src + offset).copy_to_host_async(dst.ctypes.data, dst.nbytes, stream)
                (stream or self.cupy.cuda.get_current_stream()).synchronize()

    def copy(self, dst: Any, src: Any, nbytes: int) -> None:
        with self._on_device(f"copying {nbytes} bytes on the device"):
            dst.copy_from_device_async(src, nbytes, self._stream.get())

    def memory_info(self) -> tuple[int, int]:
        """``(free, total)`` device memory in bytes, now."""
        with self._on_device("asking free memory"):
            free, total = self.cupy.cuda.runtime.memGetInfo()
        return int(free), int(total)

    def memory_used(self) -> int | None:
        free, total = self.memory_info()  # the driver's count: every process and context on the GPU
        return max(total - free, 0)

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
        if hasattr(native, "__cuda_array_interface__"):
            return self.cupy.asarray(native)  # zero-copy over the producer's memory
        return None

    def wrap(self, native: Any) -> Any:
        return native.data

    # -- kernels ------------------------------------------------------------------------
    def kernel_target(self) -> Target:
        return self._target

    def compile_source(self, source: Any) -> tuple[str, bytes]:
        """The run-time compile step: ``source`` (generated CUDA C++) -> ``("cubin", image)`` for this
        device's arch with NVRTC through cuda.bindings (no driver needed). Raises
        :class:`~hetero.backends.cupy.nvrtc_compile.NvrtcUnavailable` without cuda.bindings, KernelBuildError
        when NVRTC rejects the source."""
        if self._target.dialect != "cuda":
            raise nvrtc_compile.NvrtcUnavailable("hipRTC is reached through CuPy's RawModule on ROCm")
        return nvrtc_compile.compile_cuda(source.text, source.entry, self._target.arch, tuple(source.options))

    def build_kernel(self, source: Any, artifact: bytes | None, path: Path) -> tuple[Any, bytes | None]:
        """Load ``artifact`` (a fatbin, cubin, PTX or code object) when given; otherwise, or when
        the driver refuses the image, compile ``source.text`` (:meth:`compile_source`, else CuPy's
        RawModule) and return the image for the cache."""
        cupy = self.cupy
        with self._device:
            if artifact is not None:
                try:
                    return self._load(source.entry, bytes(artifact)), None
                except cupy.cuda.driver.CUDADriverError as exc:  # no image for this GPU, or PTX newer than the driver
                    logger.info("%s: prebuilt image for %s not loadable (%s); compiling from source",
                                self.info.name, source.entry, exc)
            try:
                _, image = self.compile_source(source)
            except nvrtc_compile.NvrtcUnavailable as exc:
                logger.debug("%s: %s; compiling with CuPy's RawModule", self.info.name, exc)
                return self._raw_module(source), None
            try:
                return self._load(source.entry, image), image
            except cupy.cuda.driver.CUDADriverError as exc:  # e.g. a driver older than this NVRTC's cubins
                logger.info("%s: the driver refused NVRTC's cubin for %s (%s); compiling with CuPy's RawModule",
                            self.info.name, source.entry, exc)
                return self._raw_module(source), None

    def _load(self, entry: str, image: bytes) -> Any:
        module = self.cupy.cuda.function.Module()
        module.load(image)
        return module.get_function(entry)

    def _raw_module(self, source: Any) -> Any:
        cupy = self.cupy
        compile_error = getattr(cupy.cuda.compiler, "CompileException", RuntimeError)
        try:
            module = cupy.RawModule(code=source.text, options=tuple(source.options), backend="nvrtc")
            return module.get_function(source.entry)
        except compile_error as exc:
            log = exc.get_message() if hasattr(exc, "get_message") else str(exc)
            compiler = "hipRTC" if self._target.dialect == "hip" else "NVRTC"
            raise KernelBuildError(f"{compiler} rejected the generated kernel", source=source.text,
                                   options=tuple(source.options), target=self.info.name, log=log) from exc

    def kernel_arg(self, buffer: Any, shape: tuple[int, ...], dtype: Any) -> Any:
        # A pointer-sized value: CuPy passes NumPy scalars by value, which is what a T* parameter takes.
        return np.uint64(buffer.ptr)

    def call_library(self, name: str, call: Callable[[], Any]) -> Any:
        """``call`` runs a CuPy routine (cuBLAS, rocBLAS) on this device and the current stream;
        its failures become hetero's DeviceErrors, as a kernel launch's do."""
        with self._on_device(f"running {name}"):
            stream = self._stream.get()
            if stream is None:
                return call()
            with stream:
                return call()

    def launch(self, kernel: Any, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
               args: Sequence[Any]) -> None:
        sizes = global_size if local_size is None else (global_size, local_size)  # no pair made for the common case
        shape = self._grids.get(sizes)
        if shape is None:
            shape = self._grids[sizes] = _grid(global_size, local_size)
            if len(self._grids) > 1024:  # sizes that change every call must not grow this forever
                self._grids.clear()
        grid, block = shape
        stream = self._stream.get()
        try:  # the hot path: no context manager or message built unless the launch fails
            if self.single:  # the only GPU is the current one (a thread with no context: see _retry)
                if stream is None:
                    kernel(grid, block, tuple(args))
                else:
                    kernel(grid, block, tuple(args), stream=stream)
            else:
                with self._device:
                    if stream is None:
                        kernel(grid, block, tuple(args))
                    else:
                        kernel(grid, block, tuple(args), stream=stream)
        except self._errors as exc:
            if self.single and getattr(exc, "status", None) == CUDA_ERROR_INVALID_CONTEXT:
                self._retry(lambda: kernel(grid, block, tuple(args), stream=stream), kernel, grid, block)
                return
            raise self._launch_error(exc, kernel, grid, block) from exc

    def _retry(self, launch: Callable[[], None], kernel: Any, grid: tuple[int, ...], block: tuple[int, ...]) -> None:
        """Make this GPU's context current on this thread (cudaSetDevice does since CUDA 12), then launch again."""
        try:
            self.cupy.cuda.runtime.setDevice(self.info.index)
            launch()
        except self._errors as exc:
            raise self._launch_error(exc, kernel, grid, block) from exc

    def _launch_error(self, exc: BaseException, kernel: Any, grid: tuple[int, ...], block: tuple[int, ...]) -> BaseException:
        doing = f"launching {getattr(kernel, 'name', 'a kernel')} (grid {grid}, block {block})"
        error = cuda_errors.translate(exc, self.info.backend, self.info.name, doing, xid=self._recent_xid())
        self.note_error(error)
        return error


def _grid(global_size: tuple[int, ...], local_size: tuple[int, ...] | None) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(grid, block) for a launch. CUDA grids count blocks; hetero's global size counts work-items,
    and kernels read global_size as gridDim * blockDim, so the block must divide it exactly."""
    block = local_size if local_size is not None else tuple(
        _largest_divisor(g, cap) for g, cap in zip(global_size, _DEFAULT_BLOCK[len(global_size)], strict=True))
    return tuple(g // b for g, b in zip(global_size, block, strict=True)), block

def _largest_divisor(n: int, cap: int) -> int:
    """The largest divisor of ``n`` that is at most ``cap`` (1 for a prime above ``cap``)."""
    for size in range(min(n, cap), 0, -1):
        if n % size == 0:
            return size
    return 1


class CuPyBackend(Backend):
    def __init__(self, name: str, hint: str) -> None:
        self.name = name
        precheck(name, hint)  # the reasons that need no CuPy import, without paying for one
        found = open_cupy(name, hint)
        cupy = found.cupy
        self.versions = dict(found.versions)
        self.versions["hiprtc" if name == "rocm" else "nvrtc"] = _rtc_version(cupy)
        toolchain = ", ".join(f"{part} {version}" for part, version in self.versions.items())
        self._devices = []
        for index in range(found.count):
            try:
                props = cupy.cuda.runtime.getDeviceProperties(index)
            except cupy.cuda.runtime.CUDARuntimeError as exc:
                raise cuda_errors.translate(exc, name, f"{name}:{index}", "reading device properties") from exc
            self._devices.append(CuPyRuntime(cupy, device_info(name, index, props, self.versions), toolchain))
        for runtime in self._devices:
            runtime.peer_ids = [d.info.stable_id for d in self._devices]
            runtime.single = len(self._devices) == 1

    def devices(self) -> Sequence[DeviceRuntime]:
        return self._devices

    def diagnostics(self) -> dict[str, Any]:
        return dict(self.versions)


def _rtc_version(cupy: ModuleType) -> str:
    """NVRTC's (hipRTC's) version: a cache-key part of every kernel compiled at run time."""
    if not cupy.cuda.runtime.is_hip:
        try:
            return nvrtc_compile.version()  # what compile_source uses
        except nvrtc_compile.NvrtcUnavailable:
            pass
    try:
        major, minor = cupy.cuda.nvrtc.getVersion()
    except Exception as exc:  # noqa: BLE001 - a missing or broken NVRTC shows up when the first kernel compiles
        return f"unknown ({type(exc).__name__})"
    return f"{major}.{minor}"

