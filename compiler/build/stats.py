"""Counters of the compiler's work in this process, so tests and benchmarks can see
whether a launch compiled, hit the disk cache, hit memory, or used a prebuilt bundle."""

from __future__ import annotations

import dataclasses
import threading


@dataclasses.dataclass
class CompileStats:
    lowered: int = 0  # Python -> IR (frontend) runs
    emitted: int = 0  # IR -> dialect source (emitter) runs at launch time
    # Vendor toolchain invocations on source generated in this process: JIT cache misses,
    # and nvcc/hipcc runs while building a bundle.
    builds: int = 0
    disk_hits: int = 0  # artifacts loaded from the disk cache
    bundle_hits: int = 0  # specializations served by a loaded bundle (no frontend, no JIT compile)
    # Bundled portable code made device-specific at first use: OpenCL C built by the
    # device's driver, the CPU module emitted from the bundle's IR for Numba.
    finalized: int = 0
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, field: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self, field, getattr(self, field) + amount)

    def reset(self) -> None:
        with self._lock:
            for field in dataclasses.fields(self):
                if field.name != "_lock":
                    setattr(self, field.name, 0)


stats = CompileStats()
