"""OpenCL devices through PyOpenCL, shared by the ``oneapi`` (Intel platforms) and
``opencl`` (every other platform) backends: one implementation, two registrations.

Each device gets its own context and in-order queue, created on first use so that
listing devices stays cheap. Its memory comes from a buffer pool (:mod:`.opencl_pool`): an
array's buffer is a :class:`~hetero.backends.opencl.pool.PooledBuffer` whose ``mem`` is the
``cl.Buffer``, and freeing the array gives the memory back to the pool for the next allocation.
"""

from __future__ import annotations

import ctypes
import hashlib
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any, NoReturn, cast

import numpy as np

from hetero.core.config import get_config
from hetero.core.device import DeviceInfo, Health, HealthState, Kind
from hetero.core.errors import BackendUnavailableError, DeviceDegradedError, DeviceOutOfMemoryError, KernelBuildError
from hetero.core.plugin import Backend, DeviceRuntime
from hetero.core.target import Target, opencl_target

from hetero.backends.opencl import (
    clblast, errors as opencl_errors, icd as opencl_icd, subgroups as opencl_subgroups, uploads as opencl_uploads,
)
from hetero.backends import host
from hetero.backends.opencl.pool import DEFAULT_LIMIT, BufferPool, PooledBuffer

_VENDOR_IDS = {0x8086: "Intel", 0x1002: "AMD", 0x10DE: "NVIDIA", 0x13B5: "ARM", 0x5143: "Qualcomm", 0x106B: "Apple"}
#: How long health() waits for its probe kernel before calling the device unhealthy (seconds).
PROBE_TIMEOUT = 5.0
_PROBE_SOURCE = "__kernel void hetero_probe(__global int *out) { int i = get_global_id(0); out[i] = i * 3 + 7; }"
_PROBE_ITEMS = 64


def import_pyopencl(backend: str) -> ModuleType:
    """PyOpenCL, imported after the ICD loader has been pointed at every runtime."""
    opencl_icd.prepare(get_config().cache_dir)
    try:
        import pyopencl
    except ImportError as exc:
        raise BackendUnavailableError(
            backend, f"PyOpenCL is not installed ({exc})", f"pip install 'hetero[{backend}]'"
        ) from exc
    return pyopencl


def _reader(cl: ModuleType) -> Callable[..., Any]:
    """``read(queue, mem, host, offset, wait_for, is_blocking)``: a device->host copy of a whole buffer.
    PyOpenCL's own reader where this PyOpenCL has it under the name it has had since 2018:
    ``enqueue_copy`` dispatches on its arguments' types in Python first, which costs a guard
    snapshot of a small model (a copy per array, every ``snapshot_every`` steps) about as much as
    the copies themselves on PoCL (benchmarks/guard_overhead.py)."""
    found = getattr(getattr(cl, "_cl", None), "_enqueue_read_buffer", None)
    if callable(found):
        return cast(Callable[..., Any], found)

    def read(queue: Any, mem: Any, host: Any, offset: int, wait_for: Any, is_blocking: bool) -> Any:
        return cl.enqueue_copy(queue, host, mem, src_offset=offset, wait_for=wait_for, is_blocking=is_blocking)

    return read


class OpenCLRuntime(DeviceRuntime):
    def __init__(self, cl: ModuleType, cl_device: Any, info: DeviceInfo) -> None:
        self.info = info
        self.cl = cl
        self._read = _reader(cl)
        self._write = getattr(getattr(cl, "_cl", None), "_enqueue_write_buffer", None)  # as _reader, for writes
        #: writes queued without waiting (small uploads), kept until known done: see .opencl_uploads
        self._uploads = opencl_uploads.InFlight(cl, lambda: self.queue.flush())
        self.cl_device = cl_device
        self.dlpack_device = (4, info.index)  # kDLOpenCL; no common consumer imports it
        self._lock = threading.Lock()
        self.context: Any = None
        self.queue: Any = None
        self.pool: BufferPool | None = None  # made with the context
        self.pending = False  # work enqueued without waiting (kernels, device copies)
        # id(kernel) -> (kernel, its program, entry, scalar dtypes): what bound_launch makes another from
        self._kernel_sources: dict[int, tuple[Any, Any, str, list[Any]]] = {}
        #: uploads queued without waiting (.opencl_uploads) since the queue was last waited for: kept
        #: apart from ``pending``, which also says whether a failing call may report a kernel's failure
        self._writes_queued = False
        self._probe: tuple[Any, Any, Any] | None = None  # health probe: its queue, kernel and buffer
        self._probe_lock = threading.Lock()
        self._probe_stuck: tuple[Any, float] | None = None  # a probe that timed out: its event, start time
        self._subgroup_sizes: tuple[int, ...] | None = None  # what intel_reqd_sub_group_size takes, asked once
        self._alias_align = _alias_align(cl_device)

    def _open(self) -> None:
        with self._lock:
            if self.queue is None:
                try:
                    self.context = self.cl.Context([self.cl_device])
                    self.queue = self.cl.CommandQueue(self.context)
                except self.cl.Error as exc:
                    self._raise(exc, "creating a context and queue")
                self.pool = BufferPool(self._new_buffer, self._out_of_memory, min(DEFAULT_LIMIT, self.info.memory // 8),
                                       int(self.cl_device.max_mem_alloc_size))

    def _raise(self, exc: Any, doing: str, after_kernel: bool = False) -> NoReturn:
        """Raise the hetero error for a PyOpenCL error (``after_kernel``: a kernel may be what failed)."""
        raise opencl_errors.translate(self.cl, exc, self.info.backend, self.info.name, doing, after_kernel) from exc

    def fault_error(self, kind: str, code: int | None = None, doing: str = "launch") -> BaseException:
        """A genuine PyOpenCL error with the OpenCL code of ``kind`` (lost: CL_DEVICE_NOT_AVAILABLE,
        sticky: CL_OUT_OF_RESOURCES after a kernel, oom: CL_MEM_OBJECT_ALLOCATION_FAILURE, code: ``code``),
        run through the translation every failing call uses. ``degraded`` has no OpenCL code."""
        if kind == "code":
            if code is None:
                raise ValueError("fault kind 'code' needs an OpenCL status code, e.g. -5")
        elif kind in opencl_errors.KIND_CODES:
            code = opencl_errors.KIND_CODES[kind]
        else:
            raise ValueError(f"unknown fault kind {kind!r}; valid kinds: {', '.join(opencl_errors.KIND_CODES)}, code")
        if code is None:
            return DeviceDegradedError(f"{doing} failed: the device reports degraded hardware",
                                       backend=self.info.backend, device=self.info.name)
        routine = opencl_errors.ROUTINES.get(doing, doing)
        after_kernel = kind == "sticky" or doing in ("launch", "sync") or self.pending
        exc = opencl_errors.pyopencl_error(self.cl, code, routine, "")
        return opencl_errors.translate(self.cl, exc, self.info.backend, self.info.name, doing, after_kernel)

    # -- memory (the allocator part) ----------------------------------------------------------
    def allocate(self, nbytes: int) -> PooledBuffer:
        """A buffer from the pool (kept from an earlier free, else new; see :mod:`.opencl_pool`)."""
        if self.pool is None:
            self._open()
        try:
            return self.pool.allocate(nbytes)  # type: ignore[union-attr]
        except self.cl.Error as exc:
            self._raise(exc, f"allocating {nbytes} bytes")

    def _new_buffer(self, nbytes: int) -> Any:
        return self.cl.Buffer(self.context, self.cl.mem_flags.READ_WRITE, nbytes)

    def _out_of_memory(self, exc: BaseException) -> bool:
        code = getattr(exc, "code", None)
        return isinstance(exc, self.cl.Error) and opencl_errors.error_class(code, after_kernel=False) is DeviceOutOfMemoryError

    def close(self) -> None:
        """Release the pool's kept buffers; buffers freed from now on are released, not kept."""
        if self.pool is not None:
            self.pool.close()

    # Blocking copies on the in-order queue finish everything queued before them, so
    # they clear ``pending`` (and settle the uploads queued without waiting, .opencl_uploads);
    # synchronize() then skips a clFinish that would wait for nothing.
    def upload(self, dst: PooledBuffer, src: np.ndarray, offset: int = 0) -> None:
        # Only behind queued work: on an idle queue a blocking write waits for nothing but itself,
        # and costs less than a host copy, a queued write and a later wait (a 1 KiB copyto 1.5x).
        busy = self.pending or self._writes_queued
        private = opencl_uploads.private_copy(src) if busy and self._write is not None else None
        try:
            if private is not None:  # queued behind the work before it, not waited for
                event = self._write(self.queue, dst.mem, private, offset, None, False)
                if self.info.kind is not Kind.CPU:  # on its way now; a CPU runtime runs what is queued
                    self.queue.flush()  # as it comes, and a flush there cost a small step a third of its time
                self._writes_queued = True
                self._uploads.add(event, self._upload_failed)
                return
            self.cl.enqueue_copy(self.queue, dst.mem, src, dst_offset=offset, is_blocking=True)
        except self.cl.Error as exc:
            self._raise(exc, f"copying {src.nbytes} bytes host->device", self.pending)
        self._drained()

    def _drained(self) -> None:
        """The queue has been waited for: nothing is pending, and every upload queued without
        waiting is done (one that failed is raised now, as the device's error)."""
        self.pending = self._writes_queued = False
        if len(self._uploads):
            self._uploads.settle(self._upload_failed)

    def _upload_failed(self, status: int) -> NoReturn:
        exc = opencl_errors.pyopencl_error(self.cl, status, "clEnqueueWriteBuffer", "a queued host->device copy failed")
        self._raise(exc, "copying host->device (queued without waiting)", after_kernel=True)

    def download(self, dst: np.ndarray, src: PooledBuffer, offset: int = 0) -> None:
        try:
            self.cl.enqueue_copy(self.queue, dst, src.mem, src_offset=offset, is_blocking=True)
        except self.cl.Error as exc:
            self._raise(exc, f"copying {dst.nbytes} bytes device->host", self.pending)
        self._drained()

    def download_many(self, copies: Sequence[tuple[np.ndarray, PooledBuffer]], wait: bool = True) -> Callable[[bool], bool] | None:
        if "download" in vars(self):  # fault injection wraps download(): each copy must go through it, and count
            return super().download_many(copies, wait)
        doing = f"copying {len(copies)} buffers device->host"
        try:
            # Queued in order behind the kernels that write them (the queue is in order); one wait
            # for all. PyOpenCL's events of non-blocking copies keep their host arrays alive.
            read, queue = self._read, self.queue
            events = [read(queue, src.mem, dst, 0, None, False) for dst, src in copies]
            if wait:
                self.queue.finish()
            else:
                self.queue.flush()  # on their way now, not when something next waits
        except self.cl.Error as exc:
            self._raise(exc, doing, self.pending)
        if wait:
            self._drained()
            return None
        if not events:
            return None
        self.pending = True

        def finished(block: bool = True) -> bool:
            if not events:
                return True
            try:
                last = events[-1]  # in order: the last one done, all are
                # Asked first: a wait costs tens of microseconds on some runtimes even for a command
                # long finished, and these usually are. An error status (negative) makes wait() raise.
                status = last.command_execution_status
                if status != self.cl.command_execution_status.COMPLETE:
                    if status > 0 and not block:  # queued, submitted or running
                        return False
                    last.wait()
            except self.cl.Error as exc:
                self._raise(exc, doing, after_kernel=True)
            events.clear()
            return True

        return finished

    def alias_host(self, host: np.ndarray) -> HostAlias | None:
        """A ``CL_MEM_USE_HOST_PTR`` buffer over ``host`` on a CPU device whose memory is the
        host's, when ``host`` is aligned as the runtime needs to work in place (:func:`_alias_align`);
        None otherwise. Whether the runtime copies
        or not, :meth:`end_alias` leaves the kernels' writes in ``host``."""
        if self.info.kind is not Kind.CPU or host.nbytes == 0 or not host.flags.c_contiguous or not host.flags.writeable:
            return None
        if host.ctypes.data % self._alias_align:
            return None
        if self.queue is None:
            self._open()
        flags = self.cl.mem_flags.READ_WRITE | self.cl.mem_flags.USE_HOST_PTR
        try:
            mem = self.cl.Buffer(self.context, flags, hostbuf=host)
        except self.cl.Error as exc:
            self._raise(exc, f"making a buffer over {host.nbytes} bytes of host memory")
        return HostAlias(mem, host)

    def end_alias(self, buffer: HostAlias) -> None:
        """Map the buffer (the spec's way to make a ``USE_HOST_PTR`` buffer's contents current in
        the host memory: free where the runtime works in place), unmap it, and wait."""
        try:
            mapped, _ = self.cl.enqueue_map_buffer(self.queue, buffer.mem, self.cl.map_flags.READ, 0,
                                                   (buffer.nbytes,), np.uint8, is_blocking=False)
            mapped.base.release(self.queue)  # queued behind the map (an in-order queue): one wait for both
            self.queue.finish()
        except self.cl.Error as exc:
            self._raise(exc, "making a kernel's writes visible in host memory", after_kernel=True)
        self._drained()

    def copy(self, dst: PooledBuffer, src: PooledBuffer, nbytes: int) -> None:
        try:
            self.cl.enqueue_copy(self.queue, dst.mem, src.mem, byte_count=nbytes)
        except self.cl.Error as exc:
            self._raise(exc, f"copying {nbytes} bytes on the device", self.pending)
        self.pending = True

    def synchronize(self) -> None:
        if self.pending or self._writes_queued:
            try:
                self.queue.finish()
            except self.cl.Error as exc:
                self._raise(exc, "waiting for the queue", after_kernel=True)
            self._drained()

    # -- kernels ----------------------------------------------------------------------------
    def kernel_target(self) -> Target:
        toolchain = f"{self.info.extra.get('platform_version', '')} driver {self.info.driver_version}"
        if self._subgroup_sizes is None:
            self._subgroup_sizes = opencl_subgroups.subgroup_sizes(self.cl, self.cl_device)
        mode = get_config().subgroups  # shuffles on a CPU device's sub-groups are slow: see hetero.core.config
        sizes = () if mode == "off" else self._subgroup_sizes
        shuffles = mode == "all" or self.info.kind != Kind.CPU
        return opencl_target(self.cl_device.extensions, self.info.fp64, self.info.stable_id, toolchain, sizes, shuffles)

    def build_kernel(self, source: Any, artifact: bytes | None, path: Path) -> tuple[Any, bytes | None]:
        if self.queue is None:
            self._open()
        cl = self.cl
        program, binary = None, None
        with warnings.catch_warnings():
            # hetero keeps its own cache (keyed on the driver) and shows build logs on failure.
            warnings.simplefilter("ignore", cl.CompilerWarning)
            if artifact is not None:
                try:
                    program = cl.Program(self.context, [self.cl_device], [artifact]).build()
                except cl.Error:
                    program = None  # a binary the driver no longer takes: rebuild from source below
            if program is None:
                try:
                    program = cl.Program(self.context, source.text).build(options=list(source.options), cache_dir=False)
                except cl.Error as exc:
                    raise KernelBuildError("the OpenCL compiler rejected the generated kernel", source=source.text,
                                           options=tuple(source.options), target=self.info.name, log=str(exc)) from exc
                binary = bytes(program.get_info(cl.program_info.BINARIES)[0])
        kernel = cl.Kernel(program, source.entry)
        # Declared scalar types let PyOpenCL pack arguments without inspecting each one per launch.
        scalar_dtypes = [None if arg.kind == "array" else _abi_dtype(arg) for arg in source.abi]
        kernel.set_scalar_arg_dtypes(scalar_dtypes)
        self._kernel_sources[id(kernel)] = (kernel, program, source.entry, scalar_dtypes)
        return kernel, binary

    def kernel_arg(self, buffer: PooledBuffer, shape: tuple[int, ...], dtype: Any) -> Any:
        return buffer.mem  # the cl.Buffer; the array keeps its handle, and so this memory, alive

    def launch(self, kernel: Any, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
               args: Any) -> None:
        try:
            kernel(self.queue, global_size, local_size, *args)
        except self.cl.Error as exc:
            self._raise(exc, f"launching {kernel.function_name}", after_kernel=True)
        self.pending = True

    def bound_launch(self, kernel: Any, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
                     args: Sequence[Any]) -> Callable[[Sequence[tuple[int, Any]]], None] | None:
        """A kernel object of its own for this launch (another from the same program), its arguments
        set once here; each call resets the changed buffers and enqueues it."""
        known = self._kernel_sources.get(id(kernel))
        if known is None or known[0] is not kernel:
            return None
        _, program, entry, scalar_dtypes = known
        cl = self.cl
        own = cl.Kernel(program, entry)
        own.set_scalar_arg_dtypes(scalar_dtypes)
        own.set_args(*args)
        enqueue, error, name = cl.enqueue_nd_range_kernel, cl.Error, kernel.function_name

        def launch(changed: Sequence[tuple[int, Any]]) -> None:
            try:
                for position, value in changed:
                    own.set_arg(position, value)
                enqueue(self.queue, own, global_size, local_size)
            except error as exc:
                self._raise(exc, f"launching {name}", after_kernel=True)
            self.pending = True
        return launch

    def call_library(self, name: str, call: Callable[[], Any]) -> Any:
        """``call`` enqueues a CLBlast routine on :attr:`queue` (made here if it is not yet); an
        OpenCL status it fails with is translated as a failing kernel launch's is."""
        if self.queue is None:
            self._open()
        try:
            result = call()
        except clblast.CLBlastError as exc:
            if exc.status <= -1000:  # CLBlast's own codes: not a device error
                raise
            self._raise(opencl_errors.pyopencl_error(self.cl, exc.status, "clEnqueueNDRangeKernel", str(exc)),
                        f"running {name}", after_kernel=True)
        self.pending = True
        return result

    def health(self) -> Health:
        """OK when the device answers a query and runs a tiny probe kernel correctly within
        :data:`PROBE_TIMEOUT` seconds; UNHEALTHY with the reason otherwise. The probe is built once
        (and cached on disk), runs on its own queue, and costs well under a millisecond after that."""
        try:
            if not self.cl_device.get_info(self.cl.device_info.AVAILABLE):
                return Health(HealthState.UNHEALTHY, "the driver reports the device unavailable (CL_DEVICE_AVAILABLE "
                              "is false)")
        except self.cl.Error as exc:
            return Health(HealthState.UNHEALTHY, f"device query failed: {exc}")
        with self._probe_lock:
            return self._run_probe(PROBE_TIMEOUT)

    def _run_probe(self, timeout: float) -> Health:
        cl = self.cl
        if self._probe_stuck is not None:
            event, started = self._probe_stuck
            if _event_status(cl, event) > 0:  # > CL_COMPLETE (0): still queued or running
                return Health(HealthState.UNHEALTHY, f"the probe kernel started {time.monotonic() - started:.0f} s "
                              "ago has not finished (the device is hung)")
            self._probe_stuck = None
        try:
            if self._probe is None:
                self._probe = self._build_probe()
            queue, kernel, buffer = self._probe
            kernel(queue, (_PROBE_ITEMS,), None, buffer)
            out = np.zeros(_PROBE_ITEMS, np.int32)
            event = cl.enqueue_copy(queue, out, buffer, is_blocking=False)
            queue.flush()
        except cl.Error as exc:
            error = opencl_errors.translate(cl, exc, self.info.backend, self.info.name, "the health probe", True)
            return Health(HealthState.UNHEALTHY, f"probe kernel failed: {error}")
        started = time.monotonic()
        pause = 0.0001
        while (status := _event_status(cl, event)) > 0:
            if time.monotonic() - started > timeout:
                self._probe_stuck = (event, started)
                return Health(HealthState.UNHEALTHY, f"the probe kernel did not finish within {timeout:g} s "
                              "(the device is hung or overloaded)")
            time.sleep(pause)
            pause = min(pause * 2, 0.01)
        if status < 0:
            return Health(HealthState.UNHEALTHY, f"probe kernel failed with {opencl_errors.code_name(cl, status)}")
        expected = np.arange(_PROBE_ITEMS, dtype=np.int32) * 3 + 7
        if not np.array_equal(out, expected):
            return Health(HealthState.UNHEALTHY, "the probe kernel computed wrong values (first bad item "
                          f"{int(np.argmax(out != expected))})")
        return Health(HealthState.OK)

    def _build_probe(self) -> tuple[Any, Any, Any]:
        if self.queue is None:
            self._open()
        cl = self.cl
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", cl.CompilerWarning)
            program = cl.Program(self.context, _PROBE_SOURCE).build(
                cache_dir=str(get_config().cache_dir / "opencl-probe"))
        queue = cl.CommandQueue(self.context)  # its own queue: a probe never waits behind user work
        buffer = cl.Buffer(self.context, cl.mem_flags.READ_WRITE, _PROBE_ITEMS * 4)
        return queue, cl.Kernel(program, "hetero_probe"), buffer


#: The alignment a host array needs for :meth:`OpenCLRuntime.alias_host`: a page, as Intel's CPU
#: runtime needs (with 64 bytes it copies the whole buffer at each launch; measured with 1024),
#: except on the runtimes in :data:`ALIAS_ALIGN_OF`.
HOST_ALIAS_ALIGN = 4096
#: Platform name -> the alignment it works in place with. PoCL's CPU device uses any host pointer
#: NumPy gives (16 bytes: a 192 MiB triad on such arrays ran as fast as on its own buffers).
ALIAS_ALIGN_OF = {"Portable Computing Language": 16}


def _alias_align(cl_device: Any) -> int:
    try:
        return ALIAS_ALIGN_OF.get(str(cl_device.platform.name).strip(), HOST_ALIAS_ALIGN)
    except Exception:  # noqa: BLE001 - an ICD that cannot say its platform: the safe alignment
        return HOST_ALIAS_ALIGN


class HostAlias:
    """A ``cl.Buffer`` over a host array's own memory (:meth:`OpenCLRuntime.alias_host`): what a
    kernel launch takes, as a :class:`PooledBuffer`; it keeps the host array alive and goes to
    no pool."""

    __slots__ = ("host", "mem", "nbytes", "size")

    def __init__(self, mem: Any, host: np.ndarray) -> None:
        self.mem = mem
        self.host = host
        self.nbytes = self.size = host.nbytes

    def __repr__(self) -> str:
        return f"<HostAlias {self.nbytes} bytes of host memory at 0x{self.host.ctypes.data:x}>"


def _event_status(cl: ModuleType, event: Any) -> int:
    """An event's execution status: > 0 pending, 0 complete, < 0 the error code it failed with."""
    return int(event.get_info(cl.event_info.COMMAND_EXECUTION_STATUS))


def _abi_dtype(arg: Any) -> np.dtype[Any]:
    # bool kernel arguments are declared uchar (OpenCL forbids bool parameters): PyOpenCL packs a
    # bool dtype as the one byte that reads (its uint8 slot refuses Python's and NumPy's bools).
    return arg.dtype.dtype  # type: ignore[no-any-return]


def _kind(cl: ModuleType, device_type: int) -> Kind:
    if device_type & cl.device_type.GPU:
        return Kind.GPU
    if device_type & cl.device_type.ACCELERATOR:
        return Kind.ACCELERATOR
    return Kind.CPU


def _vendor(cl: ModuleType, device: Any) -> str:
    """The silicon's vendor. A CPU device is the host's CPU, whatever the runtime says: PoCL
    labels its CPU device "Intel" on an AMD EPYC host. Its name often says the model
    (``pthread-AMD EPYC 7763 ...``); else /proc/cpuinfo does."""
    if _kind(cl, device.type) is Kind.CPU:
        return host.vendor_from_name(device.name) or host.cpu_vendor_and_model()[0]
    return _VENDOR_IDS.get(device.vendor_id, device.vendor.strip())


def _info(cl: ModuleType, backend: str, index: int, platform: Any, device: Any) -> DeviceInfo:
    identity = "|".join((platform.name, platform.vendor, device.name, str(device.vendor_id), device.driver_version))
    return DeviceInfo(
        name=f"{backend}:{index}",
        backend=backend,
        index=index,
        vendor=_vendor(cl, device),
        kind=_kind(cl, device.type),
        model=device.name.strip(),
        memory=int(device.global_mem_size),
        compute_units=int(device.max_compute_units),
        max_work_group_size=int(device.max_work_group_size),
        fp64=bool(device.double_fp_config),
        driver_version=device.driver_version.strip(),
        # OpenCL gives no UUID without cl_khr_device_uuid (which PyOpenCL does not
        # expose): hash what identifies the device and its runtime instead.
        stable_id=f"{backend}-" + hashlib.sha1(identity.encode()).hexdigest()[:16],
        extra={"platform": platform.name.strip(), "platform_version": platform.version.strip(),
               "opencl_version": device.version.strip()},
        local_memory=int(device.local_mem_size),
    )


class OpenCLBackend(Backend):
    """Devices of the OpenCL platforms that ``wants(platform)`` accepts."""

    def __init__(self, name: str, wants: Callable[[Any], bool], missing: Callable[[list[str]], NoReturn]) -> None:
        self.name = name
        cl = import_pyopencl(name)
        try:
            platforms = cl.get_platforms()
        except cl.Error:  # CL_PLATFORM_NOT_FOUND_KHR: the loader found no runtime at all
            platforms = []
        self.platform_names = [p.name for p in platforms]
        self._devices: list[DeviceRuntime] = []
        for platform in platforms:
            if not wants(platform):
                continue
            try:
                found = platform.get_devices()
            except cl.Error:  # CL_DEVICE_NOT_FOUND: a platform with no device right now
                continue
            for device in found:
                info = _info(cl, name, len(self._devices), platform, device)
                self._devices.append(OpenCLRuntime(cl, device, info))
        if not self._devices:
            missing(self.platform_names)

    def devices(self) -> Sequence[DeviceRuntime]:
        return self._devices

    def diagnostics(self) -> dict[str, Any]:
        return {"platforms": self.platform_names, "icd": opencl_icd.prepare(get_config().cache_dir).as_dict()}


def library_load_error(path: str) -> str | None:
    """Why ``path`` cannot be loaded (the dynamic linker's message), or None when it loads."""
    try:
        ctypes.CDLL(path)
    except OSError as exc:
        return str(exc)
    return None
