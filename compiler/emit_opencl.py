"""OpenCL C for hetero kernels: one typed IR kernel, with its device functions, becomes one
readable OpenCL C 1.2 program that any OpenCL driver builds.

The printing is shared with CUDA and HIP (:mod:`hetero.compiler.emit_c`); how OpenCL C
spells things is :mod:`hetero.compiler.c_opencl`.
"""

from __future__ import annotations

from .c_opencl import OPENCL
from .emit_c import CEmitter
from .target import Target


def opencl_target(extensions: str, fp64: bool, arch: str, toolchain: str) -> Target:
    """The Target of an OpenCL device, from its extension string and double support."""
    present = set(extensions.split())
    features = {"fp64"} if fp64 else set()
    if "cl_khr_fp16" in present:
        features.add("fp16")
    if "cl_khr_int64_base_atomics" in present:
        features.add("int64_atomics")
    return Target("opencl", arch, frozenset(features), toolchain)


EMITTER = CEmitter(OPENCL)
