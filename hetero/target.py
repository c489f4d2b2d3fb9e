"""What kernel code is generated for: a dialect, an architecture and the features it has.

A backend describes each device as a ``Target``; the compiler emits for targets and
never sees devices. Vocabulary: imports nothing else of the project.
"""

from __future__ import annotations

import dataclasses

DIALECTS = ("opencl", "cpu", "cuda", "hip")
#: Features a kernel may need and a target may lack.
FEATURES = ("fp64", "fp16", "int64_atomics")


@dataclasses.dataclass(frozen=True)
class Target:
    """``dialect`` is one of :data:`DIALECTS`; ``arch`` names the instruction set or device
    (``sm_90``, ``gfx90a``, an OpenCL device's stable id, ``x86_64``); ``features`` is a
    subset of :data:`FEATURES`; ``toolchain`` is the compiler/driver version (a cache-key part)."""

    dialect: str
    arch: str
    features: frozenset[str] = frozenset()
    toolchain: str = ""

    def __str__(self) -> str:
        return f"{self.dialect}:{self.arch}"
