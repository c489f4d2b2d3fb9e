"""Numba-CUDA's device and context objects for ``hetero.compat.cuda``: ``cuda.get_current_device()``,
``cuda.current_context()``, ``cuda.gpus``, ``cuda.select_device(i)`` — over hetero's devices.

The current device is ``hetero.device()`` (the one :func:`hetero.use_device` selects). A
:class:`CudaDevice` answers Numba's questions from hetero's description of the device: ``name``,
``id``, ``compute_capability`` (CUDA's own on an NVIDIA device; elsewhere ``(7, 0)``, the level
whose features — warp shuffles and votes, fp16, 64-bit atomics — hetero provides on every device),
``WARP_SIZE``, ``MAX_THREADS_PER_BLOCK``, ``MULTIPROCESSOR_COUNT``, ``MAX_SHARED_MEMORY_PER_BLOCK``.
A :class:`Context` has ``get_memory_info()``, ``synchronize()`` and ``reset()``.
"""

from __future__ import annotations

import collections
from collections.abc import Iterator
from typing import Any

import hetero
from hetero.core.device import Device

#: The compute capability reported where the device is not NVIDIA's: the features hetero gives every device.
PORTABLE_CC = (7, 0)
#: Numba-CUDA's warp size (hetero emulates 32-lane warps where a device's sub-groups differ).
WARP_SIZE = 32

MemoryInfo = collections.namedtuple("MemoryInfo", ["free", "total"])


class CudaDevice:
    """A hetero device with the attributes of Numba-CUDA's ``Device``."""

    def __init__(self, device: Device) -> None:
        self.device = device

    @property
    def id(self) -> int:
        return self.device.index

    @property
    def name(self) -> bytes:
        """The model's name, as bytes (Numba's is the driver's ``char*``)."""
        return str(self.device.model or self.device.name).encode()

    @property
    def compute_capability(self) -> tuple[int, int]:
        """CUDA's compute capability on an NVIDIA device; :data:`PORTABLE_CC` elsewhere."""
        found = self.device.info.extra.get("compute_capability", "")
        major, _, minor = found.partition(".")
        return (int(major), int(minor)) if major.isdigit() and minor.isdigit() else PORTABLE_CC

    @property
    def uuid(self) -> str:
        return f"GPU-{self.device.stable_id}"

    WARP_SIZE = WARP_SIZE

    @property
    def MAX_THREADS_PER_BLOCK(self) -> int:
        return self.device.max_work_group_size

    @property
    def MULTIPROCESSOR_COUNT(self) -> int:
        return self.device.compute_units

    @property
    def MAX_SHARED_MEMORY_PER_BLOCK(self) -> int:
        return self.device.info.local_memory

    def get_primary_context(self) -> Context:
        return Context(self)

    def reset(self) -> None:
        """Numba frees the context's memory; hetero frees arrays when they are dropped: waits for the device."""
        self.device.synchronize()

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CudaDevice) and other.device is self.device

    def __hash__(self) -> int:
        return hash(self.device.name)

    def __repr__(self) -> str:
        return f"<CUDA device {self.id} {self.name.decode()!r}: hetero {self.device.name}>"


class Context:
    """Numba's CUDA context: the device's memory and queue."""

    def __init__(self, device: CudaDevice) -> None:
        self.device = device

    def get_memory_info(self) -> MemoryInfo:
        """``(free, total)`` bytes: the driver's count where the device's runtime has one, else the
        device's memory as ``total`` and ``free`` (hetero cannot ask how much of it is in use)."""
        runtime: Any = self.device.device.runtime
        if hasattr(runtime, "memory_info"):
            free, total = runtime.memory_info()
            return MemoryInfo(int(free), int(total))
        total = int(self.device.device.memory)
        return MemoryInfo(total, total)

    def synchronize(self) -> None:
        self.device.device.synchronize()

    def reset(self) -> None:
        self.device.reset()

    def __repr__(self) -> str:
        return f"<CUDA context on {self.device!r}>"


def _kernel_devices() -> list[Device]:
    return [d for d in hetero.devices() if d.runtime.kernel_target() is not None]


def get_current_device() -> CudaDevice:
    """The device kernels launch on now: ``hetero.device()``."""
    return CudaDevice(hetero.device())


def current_context(devnum: int | None = None) -> Context:
    """The current device's context (``devnum`` selects one of :data:`gpus` instead)."""
    return Context(gpus[devnum] if devnum is not None else get_current_device())


def get_context(devnum: int | None = None) -> Context:
    return current_context(devnum)


def select_device(device_id: int) -> CudaDevice:
    """Numba's: make device ``device_id`` of :data:`gpus` current. hetero's current device is
    scoped (``with hetero.use_device(...)``), so this selects for the rest of the thread's run."""
    chosen = gpus[device_id]
    hetero.use_device(chosen.device).__enter__()
    return chosen


def close() -> None:
    """Numba closes its contexts; hetero's devices stay open: waits for every device."""
    hetero.synchronize()


class _Gpus:
    """``cuda.gpus``: the devices that run kernels, indexable, iterable, with ``current``."""

    def __getitem__(self, index: int) -> CudaDevice:
        found = _kernel_devices()
        if not -len(found) <= index < len(found):
            raise IndexError(f"cuda.gpus[{index}]: there are {len(found)} devices that run kernels: "
                             f"{', '.join(d.name for d in found)}")
        return CudaDevice(found[index])

    def __len__(self) -> int:
        return len(_kernel_devices())

    def __iter__(self) -> Iterator[CudaDevice]:
        return (CudaDevice(d) for d in _kernel_devices())

    @property
    def current(self) -> CudaDevice:
        return get_current_device()

    def __repr__(self) -> str:
        return f"<cuda.gpus: {', '.join(d.name for d in _kernel_devices())}>"


gpus = _Gpus()


def list_devices() -> list[CudaDevice]:
    return list(gpus)


def detect() -> bool:
    """Print the devices that run kernels, as Numba's ``cuda.detect()`` does; True when there is one."""
    found = _kernel_devices()
    print(f"Found {len(found)} devices that run kernels (hetero)")
    for index, device in enumerate(found):
        print(f"id {index}    {device.model!r} {device.name}")
    return bool(found)
