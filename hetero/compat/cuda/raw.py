"""CuPy-style raw CUDA C kernels on every device: ``RawKernel(code, name)`` and ``RawModule``.

    add = RawKernel(r'''
    extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
        int i = blockDim.x * blockIdx.x + threadIdx.x;
        if (i < n) c[i] = a[i] + b[i];
    }''', "add")
    add((blocks,), (threads,), (a, b, c, np.int32(n)))     # CuPy's call: grid, block, args

The source goes through hetero's CUDA C front end (:mod:`hetero.compiler.cuda_c`, libclang),
then the middle compiler like any kernel: OpenCL, oneAPI, cpu, CUDA and ROCm devices all run
it. A pointer parameter takes a device array (a :class:`hetero.Array` or a
:class:`~hetero.compat.cuda.arrays.DeviceNDArray`, seen flat) or a NumPy array (copied in and
back); its element type must match. A scalar is converted to its parameter's C type. The kernel
runs on the device its arrays live on, else ``hetero.device()``. ``options`` takes ``-D`` and
``-I`` as nvcc does; template kernels are named with their arguments (``"matmul<32>"``).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

import hetero
from hetero.array import Array
from hetero.array_copy import GeneratedSpecialization
from hetero.compat.cuda.arrays import DeviceNDArray
from hetero.compiler import cuda_c, ir
from hetero.device import Device
from hetero.errors import CompileError, KernelLaunchError
from hetero.types import ArrayType, ScalarType


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
            with open(path) as source:
                code = source.read()
        assert code is not None
        defines, includes = _options(options)
        self._source = cuda_c.Source(code, path or "<RawModule>.cu", [*include_dirs, *includes], defines)
        self._kernels: dict[str, RawKernel] = {}
        for name in name_expressions:
            self.get_function(name)

    def get_function(self, name: str) -> RawKernel:
        """The kernel ``name`` (a template as ``"kernel<32>"``)."""
        if name not in self._kernels:
            self._kernels[name] = RawKernel._of(self._source.kernel(name))
        return self._kernels[name]


class RawKernel:
    """One CUDA C kernel of ``code``; call as CuPy does: ``kernel(grid, block, args)``."""

    def __init__(self, code: str, name: str, options: Sequence[str] = (), path: str | None = None,
                 include_dirs: Sequence[str] = (), **ignored: Any) -> None:
        defines, includes = _options(options)
        source = cuda_c.Source(code, path or f"<RawKernel {name}>.cu", [*include_dirs, *includes], defines)
        self._setup(source.kernel(name))

    @classmethod
    def _of(cls, function: ir.Function) -> RawKernel:
        kernel = cls.__new__(cls)
        kernel._setup(function)
        return kernel

    def _setup(self, function: ir.Function) -> None:
        self.function = function
        self.name = function.name
        self._built: dict[str, GeneratedSpecialization] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<hetero.compat.cuda RawKernel {self.name}>"

    def _specialization(self, device: Device) -> GeneratedSpecialization:
        with self._lock:
            if device.name not in self._built:
                self._built[device.name] = GeneratedSpecialization(self.function, device)
            return self._built[device.name]

    def __call__(self, grid: Any, block: Any, args: Sequence[Any], *, shared_mem: int = 0) -> None:
        if shared_mem:
            raise KernelLaunchError(f"{self.name}: dynamic shared memory (shared_mem={shared_mem}) is not supported yet")
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
        self._specialization(device).run(global_size, values, threads)
        for host, staged in copies:
            if host.flags.writeable:
                np.copyto(host, staged.numpy().reshape(host.shape))


def _dims(value: Any, what: str) -> tuple[int, ...]:
    parts = value if isinstance(value, tuple) else (value,)
    if not 1 <= len(parts) <= 3 or not all(isinstance(p, (int, np.integer)) and p >= 1 for p in parts):
        raise KernelLaunchError(f"{what} must be a positive int or a tuple of 1 to 3 of them, got {value!r}")
    return tuple(int(p) for p in parts)


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
