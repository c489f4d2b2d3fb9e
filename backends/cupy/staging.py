"""Pinned host staging for large host<->device copies on CuPy devices.

A copy from pageable (ordinary) host memory makes the driver stage it through its own small
pinned buffer, synchronously. For large copies hetero stages through two pinned buffers of
``CHUNK`` bytes per device instead, in turn: while the DMA engine moves one chunk, the CPU
fills (or drains) the other, so the host memcpy and the PCIe transfer overlap. Events guard
each buffer, so a buffer is never refilled before its previous DMA has finished.

The copy primitives come from an :class:`Engine` (CuPy's in the backend, a NumPy fake in the
tests), so the chunking and the waits are checked on machines without a GPU.
"""

from __future__ import annotations

import threading
from collections import deque
from typing import Any, Protocol

import numpy as np

# Where each path wins, measured on an H200 (2026-12-04, ``benchmarks/gpu_check.py``'s copy_paths;
# docs/gpu-validation.md): host->device, the driver's direct copy from pageable memory 10-12.7 GB/s
# at 1-16 MiB against 7.7-9.4 staged, staging 7.2-7.7 GB/s at 64-256 MiB against 5.9-6.5 direct;
# device->host, direct at least as fast at every size from 4 MiB (11.4 vs 6.3 GB/s at 256 MiB:
# staging is bound by the host copy out of the pinned buffers).
#: Host->device copies of at least this many bytes go through the pinned buffers; smaller ones go direct.
THRESHOLD = 32 << 20
#: Device->host copies of at least this many bytes go through the pinned buffers; None: all go direct.
DOWNLOAD_THRESHOLD: int | None = None
#: Bytes per pinned buffer (two per device).
CHUNK = 8 << 20


class Engine(Protocol):
    """What staging needs from a device runtime."""

    def pinned(self, nbytes: int) -> tuple[np.ndarray, Any]:
        """A pinned host buffer: a uint8 NumPy view of it and whatever keeps it alive / names it."""

    def h2d(self, dst: Any, offset: int, host: tuple[np.ndarray, Any], nbytes: int, stream: Any) -> None:
        """Enqueue a copy of the first ``nbytes`` of pinned ``host`` to ``dst`` at ``offset`` on ``stream``."""

    def d2h(self, host: tuple[np.ndarray, Any], src: Any, offset: int, nbytes: int, stream: Any) -> None:
        """Enqueue a copy of ``nbytes`` of ``src`` from ``offset`` into pinned ``host`` on ``stream``."""

    def record(self, stream: Any) -> Any:
        """An event recorded on ``stream`` now (with a ``synchronize()`` method)."""


class _Slot:
    __slots__ = ("event", "host")

    def __init__(self, host: tuple[np.ndarray, Any]) -> None:
        self.host = host
        self.event: Any = None

    def wait(self) -> None:
        if self.event is not None:
            self.event.synchronize()
            self.event = None


class PinnedStaging:
    """Two pinned buffers of one device, used in turn for chunked copies (thread-safe)."""

    def __init__(self, engine: Engine, chunk: int = CHUNK) -> None:
        self._engine = engine
        self.chunk = chunk
        self._slots: list[_Slot] | None = None
        self._lock = threading.Lock()

    def _buffers(self) -> list[_Slot]:
        if self._slots is None:  # allocated on first use: pinned memory is a scarce, slow-to-allocate resource
            self._slots = [_Slot(self._engine.pinned(self.chunk)) for _ in range(2)]
        return self._slots

    def upload(self, dst: Any, src: np.ndarray, offset: int, stream: Any) -> None:
        """Copy C-contiguous ``src`` to ``dst`` at byte ``offset``; returns once ``src`` may be
        reused (the last chunks may still be in flight from the pinned buffers)."""
        data = src.reshape(-1).view(np.uint8)
        with self._lock:
            slots = self._buffers()
            for number, start in enumerate(range(0, data.size, self.chunk)):
                slot = slots[number % 2]
                slot.wait()  # its previous DMA must be done before it is refilled
                size = min(self.chunk, data.size - start)
                slot.host[0][:size] = data[start:start + size]
                self._engine.h2d(dst, offset + start, slot.host, size, stream)
                slot.event = self._engine.record(stream)

    def download(self, dst: np.ndarray, src: Any, offset: int, stream: Any) -> None:
        """Copy ``dst.nbytes`` bytes of ``src`` from byte ``offset`` into C-contiguous ``dst``;
        returns when ``dst`` holds them."""
        out = dst.reshape(-1).view(np.uint8)
        pending: deque[tuple[_Slot, int, int]] = deque()

        def drain_oldest() -> None:
            slot, start, size = pending.popleft()
            slot.wait()
            out[start:start + size] = slot.host[0][:size]

        with self._lock:
            slots = self._buffers()
            for number, start in enumerate(range(0, out.size, self.chunk)):
                if len(pending) == len(slots):
                    drain_oldest()  # frees exactly the slot this chunk uses
                slot = slots[number % 2]
                slot.wait()
                size = min(self.chunk, out.size - start)
                self._engine.d2h(slot.host, src, offset + start, size, stream)
                slot.event = self._engine.record(stream)
                pending.append((slot, start, size))
            while pending:
                drain_oldest()


class CuPyEngine:
    """The staging primitives over CuPy: pinned memory, async copies and events on a stream."""

    def __init__(self, cupy: Any) -> None:
        self.cupy = cupy

    def pinned(self, nbytes: int) -> tuple[np.ndarray, Any]:
        memory = self.cupy.cuda.alloc_pinned_memory(nbytes)
        return np.frombuffer(memory, dtype=np.uint8, count=nbytes), memory

    def h2d(self, dst: Any, offset: int, host: tuple[np.ndarray, Any], nbytes: int, stream: Any) -> None:
        (dst + offset).copy_from_host_async(host[1].ptr, nbytes, stream)

    def d2h(self, host: tuple[np.ndarray, Any], src: Any, offset: int, nbytes: int, stream: Any) -> None:
        (src + offset).copy_to_host_async(host[1].ptr, nbytes, stream)

    def record(self, stream: Any) -> Any:
        event = self.cupy.cuda.Event(block=False, disable_timing=True)
        event.record(stream)
        return event
