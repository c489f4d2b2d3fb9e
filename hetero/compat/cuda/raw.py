"""CuPy-style raw CUDA C kernels on every device: ``RawKernel(code, name)`` and ``RawModule``.

    add = RawKernel(r'''
    extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
        int i = blockDim.x * blockIdx.x + threadIdx.x;
        if (i < n) c[i] = a[i] + b[i];
    }''', "add")
    add((blocks,), (threads,), (a, b, c, np.int32(n)))     # CuPy's call: grid, block, args

The source goes through hetero's CUDA C front end (:mod:`hetero.compiler.frontend.cuda_c`, libclang),
then the middle compiler like any kernel: OpenCL, oneAPI, cpu, CUDA and ROCm devices all run
it. A pointer parameter takes a device array (a :class:`hetero.Array` or a
:class:`~hetero.compat.cuda.arrays.DeviceNDArray`, seen flat) or a NumPy array (copied in and
back); its element type must match. A scalar is converted to its parameter's C type. The kernel
runs on the device its arrays live on, else ``hetero.device()``. ``options`` takes ``-D`` and
``-I`` as nvcc does; template kernels are named with their arguments (``"matmul<32>"``).
``shared_mem=`` sizes the kernel's ``extern __shared__`` array, as in CUDA: each size builds
its own variant (the array's size is a constant there).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

import hetero
from hetero.array.ndarray import Array
from hetero.kernels.generated import GeneratedSpecialization
from hetero.compat.cuda.arrays import DeviceNDArray
from hetero.compat.cuda.dispatcher import launch_dims as _dims
from hetero.compiler.frontend import cuda_c, cuda_c_files
from hetero.compiler.ir import nodes as ir
from hetero.core.device import Device
from hetero.core.errors import CompileError, KernelLaunchError
from hetero.core.types import ArrayType, ScalarType


def _options(options: Sequence[str]) -> tuple[list[str], list[str]]:
    defines, includes = [], []
    for option in options:
        if option.startswith("-D"):
            defines.append(option[2:])
        elif option.startswith("-I"):
            includes.append(option[2:])
        elif option.startswith(("-std=", "--std=", "-arch", "--gpu-architecture", "-O", "--use_fast_math", "-lineinfo")):
            continue  # nvcc/NVRTC options with no meaning for hetero's build
        else:
            raise CompileError(f"compile option {option!r} is not supported (only -D, -I and nvcc's -std/-arch/-O)")
    return defines, includes


class RawModule:
    """A CUDA C module: ``RawModule(code=..., name_expressions=[...])`` or ``RawModule(path="k.cu")``;
    :meth:`get_function` gives its kernels."""

    def __init__(self, code: str | None = None, path: str | None = None, options: Sequence[str] = (),
                 name_expressions: Sequence[str] = (), include_dirs: Sequence[str] = (), **ignored: Any) -> None:
        if code is None and path is None:
            raise TypeError("RawModule takes code= (CUDA C source; path= then names it in errors) or path= (a .cu file)")
        if code is None and path is not None:
            code = cuda_c_files.read_source(path)  # a regular file (not a FIFO), within the size limit
        assert code is not None
        defines, includes = _options(options)
        self._source = cuda_c.Source(code, path or "<RawModule>.cu", [*include_dirs, *includes], defines)
        self._kernels: dict[str, RawKernel] = {}
        for name in name_expressions:
            self.get_function(name)

    def get_function(self, name: str) -> RawKernel:
        """The kernel ``name`` (a template as ``"kernel<32>"``)."""
        if name not in self._kernels:
            self._kernels[name] = RawKernel._of(self._source, name)
        return self._kernels[name]


class RawKernel:
    """One CUDA C kernel of ``code``; call as CuPy does: ``kernel(grid, block, args)``."""

    def __init__(self, code: str, name: str, options: Sequence[str] = (), path: str | None = None,
                 include_dirs: Sequence[str] = (), **ignored: Any) -> None:
        defines, includes = _options(options)
        source = cuda_c.Source(code, path or f"<RawKernel {name}>.cu", [*include_dirs, *includes], defines)
        self._setup(source, name)

    @classmethod
    def _of(cls, source: cuda_c.Source, name: str) -> RawKernel:
        kernel = cls.__new__(cls)
        kernel._setup(source, name)
        return kernel

    def _setup(self, source: cuda_c.Source, name: str) -> None:
        self._source = source
        self._name = name
        self._functions: dict[int, ir.Function] = {}  # by the launch's dynamic shared memory, in bytes
        self._built: dict[tuple[str, int], GeneratedSpecialization] = {}
        self._lock = threading.Lock()
        try:  # what the source lacks or hetero refuses is reported now, not at the first launch
            self.function = self._function(0)
        except CompileError as exc:
            if "dynamic shared memory" not in exc.message:
                raise
            self.function = self._function(_PROBE_SHARED_BYTES)  # sized at each launch's shared_mem
        self.name = self.function.name

    def _function(self, shared_bytes: int) -> ir.Function:
        if shared_bytes not in self._functions:
            self._functions[shared_bytes] = self._source.kernel(self._name, shared_bytes)
        return self._functions[shared_bytes]

    def __repr__(self) -> str:
        return f"<hetero.compat.cuda RawKernel {self.name}>"

    def _specialization(self, device: Device, shared_mem: int) -> GeneratedSpecialization:
        with self._lock:
            key = (device.name, shared_mem)
            if key not in self._built:
                self._built[key] = GeneratedSpecialization(self._function(shared_mem), device)
            return self._built[key]

    def __call__(self, grid: Any, block: Any, args: Sequence[Any], *, shared_mem: int = 0) -> None:
        if not isinstance(shared_mem, (int, np.integer)) or shared_mem < 0:
            raise KernelLaunchError(f"{self.name}: shared_mem must be a number of bytes >= 0, got {shared_mem!r}")
        blocks, threads = _dims(grid, "grid"), _dims(block, "block")
        ndim = max(len(blocks), len(threads))
        blocks, threads = blocks + (1,) * (ndim - len(blocks)), threads + (1,) * (ndim - len(threads))
        params = self.function.params
        if len(args) != len(params):
            raise KernelLaunchError(f"{self.name} takes {len(params)} argument(s) "
                                    f"({', '.join(p.name for p in params)}), got {len(args)}")
        device = next((a.device for a in args if isinstance(a, (Array, DeviceNDArray))), None) or hetero.device()
        values: list[Any] = []
        copies: list[tuple[np.ndarray, Array]] = []
        for param, arg in zip(params, args, strict=True):
            values.append(_argument(self.name, param, arg, device, copies))
        global_size = tuple(b * t for b, t in zip(blocks, threads, strict=True))
        self._specialization(device, int(shared_mem)).run(global_size, values, threads)
        for host, staged in copies:
            if host.flags.writeable:
                np.copyto(host, staged.numpy().reshape(host.shape))


#: The dynamic shared memory a kernel that declares some is checked with at construction (each
#: launch's shared_mem then builds its own variant, the array sized to it).
_PROBE_SHARED_BYTES = 1024


def _argument(name: str, param: ir.Param, arg: Any, device: Device, copies: list[tuple[np.ndarray, Array]]) -> Any:
    if isinstance(param.type, ArrayType):
        want = param.type.dtype.dtype
        if isinstance(arg, DeviceNDArray):
            arg = arg.array
        elif isinstance(arg, np.ndarray):
            staged = hetero.asarray(np.ascontiguousarray(arg).reshape(-1), device=device)
            copies.append((arg, staged))
            arg = staged
        if not isinstance(arg, Array):
            raise TypeError(f"{name}: {param.name} is a pointer: pass an array, got {type(arg).__name__}")
        if np.dtype(arg.dtype) != want:
            raise TypeError(f"{name}: {param.name} points to {want}, the array holds {np.dtype(arg.dtype)}")
        return arg if arg.ndim == 1 else hetero.reshape(arg, (-1,))
    assert isinstance(param.type, ScalarType)
    if isinstance(arg, (Array, DeviceNDArray, np.ndarray)):
        raise TypeError(f"{name}: {param.name} is a {param.type}, got an array")
    return param.type.dtype.type(arg)
