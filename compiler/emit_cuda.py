"""CUDA C++ for hetero kernels: one typed IR kernel, with its device functions, becomes one
readable program that NVRTC or nvcc compiles; the entry point is ``extern "C"``.

The printing is shared with OpenCL and HIP (:mod:`hetero.compiler.emit_c`); how CUDA
spells things is :mod:`hetero.compiler.c_cuda`.
"""

from __future__ import annotations

from .c_cuda import CUDA
from .emit_c import CEmitter

EMITTER = CEmitter(CUDA)
