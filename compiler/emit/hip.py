"""HIP for hetero kernels: one typed IR kernel, with its device functions, becomes one
readable program that hipRTC or hipcc compiles; the entry point is ``extern "C"``.

The printing is shared with OpenCL and CUDA (:mod:`hetero.compiler.emit.c`); HIP spells
things as CUDA does, with its own headers (:class:`hetero.compiler.emit.c_cuda.HipDialect`).
"""

from __future__ import annotations

from hetero.compiler.emit.c_cuda import HIP
from hetero.compiler.emit.c import CEmitter

EMITTER = CEmitter(HIP)
