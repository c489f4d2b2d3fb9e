"""OpenCL C for hetero kernels: one typed IR kernel, with its device functions, becomes one
readable OpenCL C 1.2 program that any OpenCL driver builds.

The printing is shared with CUDA and HIP (:mod:`hetero.compiler.emit.c`); how OpenCL C
spells things is :mod:`hetero.compiler.emit.c_opencl`.
"""

from __future__ import annotations

# How an OpenCL device's extensions become its Target's features: one function on the ground
# floor, which the OpenCL runtime's kernel_target calls too.
from hetero.core.target import opencl_target

from hetero.compiler.emit.c_opencl import OPENCL
from hetero.compiler.emit.c import CEmitter

EMITTER = CEmitter(OPENCL)

__all__ = ["EMITTER", "opencl_target"]
