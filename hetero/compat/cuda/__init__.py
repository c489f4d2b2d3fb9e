"""Numba's CUDA API over every hetero device: ``from hetero.compat import cuda`` in place of
``from numba import cuda``, and the kernels run on cpu, OpenCL, oneAPI, CUDA and ROCm devices.

    from hetero.compat import cuda

    @cuda.jit
    def add(a, b, c):
        i = cuda.grid(1)
        if i < c.size:
            c[i] = a[i] + b[i]

    add[blocks, threads](a, b, c)     # Numba's launch: blocks × threads threads

Inside kernels: ``cuda.threadIdx/blockIdx/blockDim/gridDim`` ``.x/.y/.z``, ``cuda.grid(n)``,
``cuda.gridsize(n)``, ``cuda.syncthreads()``, ``cuda.shared.array``, ``cuda.atomic.*``,
tuple assignment, ``len``/``.size``/``.shape``, ``math`` functions, calls to ``@cuda.jit(device=True)``
and ``@numba.jit`` functions, all typed by Numba's rules (a Python float is f64: a device without
fp64 refuses such a kernel, naming the feature). On the host: :func:`to_device`,
:func:`device_array`, :func:`device_array_like`, ``copy_to_host``, :func:`reduce`, ``cuda.random``.
Kernels run on the device their arrays live on, else ``hetero.device()``
(``hetero.use_device("oneapi:0")`` selects one). What is not supported yet raises
:class:`hetero.CompileError` at the kernel's line, naming the construct.

May import what :mod:`hetero.compat` may import.
"""

from __future__ import annotations

import importlib.util

import hetero
from hetero.compat.cuda import cudadrv, devicearray, types
from hetero.compiler.frontend import exec_sources
from hetero.compat.cuda.arrays import (
    DeviceNDArray, device_array, device_array_like, mapped_array, mapped_array_like, pinned, pinned_array,
    pinned_array_like, to_device,
)
from hetero.compat.cuda.devices import (
    close, current_context, detect, get_context, get_current_device, gpus, list_devices, select_device,
)
from hetero.compat.cuda.compiler import compile_ptx, compile_ptx_for_current_device
from hetero.compat.cuda.dispatcher import Dispatcher, LaunchConfig, jit
from hetero.compat.cuda.ffi import config, declare_device
from hetero.compat.cuda.raw import RawKernel, RawModule
from hetero.compat.cuda.reduce import Reduce, reduce
from hetero.compat.cuda.streams import (
    Event, Stream, default_stream, event, event_elapsed_time, external_stream, legacy_default_stream,
    per_thread_default_stream, stream,
)
from hetero.compat.cuda.types import (
    b1, boolean, c8, c16, complex64, complex128, double, f2, f4, f8, float16, float32, float64, i1, i2, i4, i8, int8,
    int16, int32, int64, intp, none, u1, u2, u4, u8, uint8, uint16, uint32, uint64, uintp, void,
)
from hetero.language.cuda import (
    activemask, all_sync, any_sync, atomic, ballot_sync, fp16, blockDim, blockIdx, brev, cbrt, cg, clz, const, eq_sync, ffs, fma,
    grid, gridDim,
    gridsize, laneid, lanemask_lt, local, match_all_sync, match_any_sync, popc, shared, shfl_down_sync, shfl_sync,
    selp, shfl_up_sync, shfl_xor_sync, syncthreads, syncthreads_and, syncthreads_count, syncthreads_or, syncwarp,
    threadfence, threadfence_block, threadfence_system, threadIdx, warpsize,
)

exec_sources.install()  # kernels made by exec() of a template keep their text for the front end

#: Whether Numba itself (``numba.jit``) is installed beside this module, as numba-cuda's flag says.
HAS_NUMBA = importlib.util.find_spec("numba") is not None

__all__ = [
    "HAS_NUMBA", "compile_ptx", "compile_ptx_for_current_device", "fp16", "cudadrv", "devicearray", "Event", "Stream", "b1", "c8", "c16", "close", "complex64", "complex128", "current_context",
    "default_stream", "detect", "double", "event", "event_elapsed_time", "external_stream", "f2", "f4", "f8",
    "get_context", "get_current_device", "gpus", "i1", "i2", "i4", "i8", "legacy_default_stream", "list_devices",
    "mapped_array_like", "none", "per_thread_default_stream", "pinned_array_like", "select_device", "selp", "stream", "u1",
    "u2", "u4", "u8",
    "config",
    "declare_device",
    "activemask",
    "all_sync",
    "any_sync",
    "ballot_sync",
    "brev",
    "cbrt",
    "eq_sync",
    "fma",
    "clz",
    "ffs",
    "laneid",
    "lanemask_lt",
    "match_all_sync",
    "match_any_sync",
    "popc",
    "shfl_down_sync",
    "shfl_sync",
    "shfl_up_sync",
    "shfl_xor_sync",
    "syncwarp",
    "threadfence",
    "threadfence_block",
    "threadfence_system",
    "warpsize",
    "DeviceNDArray",
    "Dispatcher",
    "LaunchConfig",
    "RawKernel",
    "RawModule",
    "Reduce",
    "atomic",
    "blockDim",
    "blockIdx",
    "boolean",
    "cg",
    "const",
    "device_array",
    "device_array_like",
    "float16",
    "float32",
    "float64",
    "grid",
    "gridDim",
    "gridsize",
    "int8",
    "int16",
    "int32",
    "int64",
    "intp",
    "is_available",
    "jit",
    "local",
    "mapped_array",
    "pinned",
    "pinned_array",
    "reduce",
    "shared",
    "synchronize",
    "syncthreads",
    "syncthreads_and",
    "syncthreads_count",
    "syncthreads_or",
    "threadIdx",
    "to_device",
    "types",
    "uint8",
    "uint16",
    "uint32",
    "uint64",
    "uintp",
    "void",
]


def synchronize() -> None:
    """Wait for every launch on every device (Numba: the current CUDA context)."""
    hetero.synchronize()


def is_available() -> bool:
    """Whether some device here runs kernels (with hetero, the cpu device always does)."""
    return any(d.runtime.kernel_target() is not None for d in hetero.devices())
