"""Counters of the compiler's work in this process, so tests and benchmarks can see
whether a launch compiled, hit the disk cache, or hit memory."""

from __future__ import annotations

import dataclasses
import threading


@dataclasses.dataclass
class CompileStats:
    lowered: int = 0  # Python -> IR (frontend) runs
    builds: int = 0  # vendor toolchain invocations on generated source (cache misses)
    disk_hits: int = 0  # artifacts loaded from the disk cache
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock, repr=False, compare=False)

    def add(self, field: str, amount: int = 1) -> None:
        with self._lock:
            setattr(self, field, getattr(self, field) + amount)

    def reset(self) -> None:
        with self._lock:
            self.lowered = self.builds = self.disk_hits = 0


stats = CompileStats()
