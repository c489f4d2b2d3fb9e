"""CUDA C++ for hetero kernels: one typed IR kernel, with its device functions, becomes one
readable program that NVRTC or nvcc compiles; the entry point is ``extern "C"``.

The printing is shared with OpenCL and HIP (:mod:`hetero.compiler.emit.c`); how CUDA
spells things is :mod:`hetero.compiler.emit.c_cuda`.
"""

from __future__ import annotations

from hetero.compiler.emit.c_cuda import CUDA
from hetero.compiler.emit.c import CEmitter

EMITTER = CEmitter(CUDA)
