"""Numba-CUDA's foreign functions: ``cuda.declare_device(name, sig, link="functions.cu")``.

Numba links a CUDA C ``__device__`` function into its kernels, called with Numba's ABI: the C
function takes a pointer to the return value first, then the arguments, and returns 0::

    extern "C" __device__ int mul_f32_f32(float *return_value, float x, float y);

hetero has no CUDA linker off NVIDIA hardware, so the C source is read by hetero's CUDA C front
end (:mod:`hetero.compiler.frontend.cuda_c`) and lowered into the kernel's own IR, for every device: the
call ``mul(x, y)`` becomes the function's body, inlined, writing a per-thread slot that is then
read. A ``CPointer(float32)`` argument takes an array of the kernel (``ffi.from_buffer(a)`` of
cffi names one). ``#include`` folders are ``config.CUDA_NVRTC_EXTRA_SEARCH_PATHS`` (``:``
separated), as for Numba's NVRTC, and the linked file's own folder.
"""

from __future__ import annotations

import os
import threading
import types as pytypes
from collections.abc import Sequence
from typing import Any

from hetero.compat.cuda import types as nbtypes
from hetero.compiler.frontend import cuda_c, cuda_c_files
from hetero.compiler.ir import nodes as ir
from hetero.core.errors import CompileError
from hetero.core.types import ArrayType, ScalarType, i64

#: Numba's ``numba.cuda.config`` settings that hetero reads.
config = pytypes.SimpleNamespace(CUDA_NVRTC_EXTRA_SEARCH_PATHS="")


class ForeignFunction:
    """A CUDA C ``__device__`` function a kernel calls (see :func:`declare_device`)."""

    def __init__(self, name: str, signature: nbtypes.Signature, link: tuple[str, ...]) -> None:
        self.name = name
        self.signature = signature
        self.link = link
        self._lowered: dict[str, ir.Function] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<hetero.compat.cuda foreign function {self.name} from {', '.join(self.link) or 'nowhere'}>"

    def __call__(self, *args: Any) -> Any:
        raise RuntimeError(f"{self.name} is a device function: call it from a @cuda.jit kernel")

    def param_types(self) -> tuple[ScalarType | ArrayType, ...]:
        """The kernel-side argument types: scalars, and 1-D arrays for ``CPointer`` arguments."""
        out: list[ScalarType | ArrayType] = []
        for arg in self.signature.args:
            if isinstance(arg, nbtypes.CPointerT):
                assert arg.element.hetero_type is not None
                out.append(ArrayType(arg.element.hetero_type, 1))
            elif isinstance(arg, nbtypes.NumbaType) and arg.hetero_type is not None:
                out.append(arg.hetero_type)
            else:
                raise CompileError(f"{self.name}: a foreign function takes scalars and CPointer(...) arguments, "
                                   f"not {arg}")
        return tuple(out)

    def __hetero_foreign__(self) -> ir.Function:
        """The device function a kernel's call lowers to: the C function's IR behind a wrapper that
        owns the return slot (both inlined into the kernel by the frontend)."""
        paths = config.CUDA_NVRTC_EXTRA_SEARCH_PATHS
        with self._lock:
            if paths not in self._lowered:
                self._lowered[paths] = self._wrap(self._find(paths))
            return self._lowered[paths]

    def _find(self, paths: str) -> ir.Function:
        if not self.link:
            raise CompileError(f"{self.name}: declare_device needs link= the .cu file that defines it (hetero compiles "
                               "the CUDA C source itself; there is no prebuilt code to link)")
        includes = [p for p in paths.split(":") if p]
        missing: list[str] = []
        for path in self.link:
            if not os.path.exists(path):
                raise CompileError(f"{self.name}: the linked file {path} does not exist")
            code = cuda_c_files.read_source(path)  # a regular file, within the front end's size limit
            unit = cuda_c.Source(code, path, includes)  # the file's own folder first, as NVRTC searches
            try:
                return unit.device_function(self.name)
            except CompileError as exc:
                if "no __device__ function named" not in exc.message:
                    raise
                missing.append(path)
        raise CompileError(f"{self.name} is not defined as a __device__ function in {', '.join(missing)}")

    def _wrap(self, fn: ir.Function) -> ir.Function:
        returns = self.signature.return_type.hetero_type
        params = self.param_types()
        expected = (*(() if returns is None else (ArrayType(returns, 1),)), *params)
        got = tuple(p.type for p in fn.params)
        if len(got) != len(expected) or any(
                (g.dtype != e.dtype) if isinstance(g, ArrayType) and isinstance(e, ArrayType) else g != e
                for g, e in zip(got, expected, strict=False)):
            shown = ", ".join(str(t) for t in expected)
            raise CompileError(f"{self.name}: its C parameters ({', '.join(str(t) for t in got)}) do not follow Numba's "
                               f"ABI for {self.signature.return_type}(...): a pointer to the result, then the "
                               f"arguments ({shown})", fn.loc.file, fn.loc.line)
        loc = fn.loc
        wrapper_params = tuple(ir.Param(f"a{k}", t) for k, t in enumerate(params))
        args: list[ir.Expr] = [ir.Var(t.dtype if isinstance(t, ArrayType) else t, f"a{k}") for k, t in enumerate(params)]
        local_arrays: tuple[ir.LocalArray, ...] = ()
        body: list[ir.Stmt] = []
        if returns is not None:
            local_arrays = (ir.LocalArray("result", returns, (1,), private=True),)
            args.insert(0, ir.Var(returns, "result"))
        body.append(ir.Assign(loc, "status", ir.Call(fn.return_type, fn.name, tuple(args))))
        body.append(ir.Return(loc, None if returns is None else ir.Load(returns, "result", (ir.Const(i64, 0),))))
        return ir.Function(f"_foreign_{self.name}", wrapper_params, returns or ir.VOID, {"status": fn.return_type},
                           local_arrays, tuple(body), False, loc, (*fn.callees, fn), fn.features)


def declare_device(name: str, sig: Any, link: str | Sequence[str] | None = None) -> ForeignFunction:
    """Numba's ``cuda.declare_device``: the CUDA C ``__device__`` function ``name`` of signature ``sig``
    (``"float32(float32, float32)"``), defined in the ``link`` file(s), callable from kernels."""
    signature = nbtypes.parse(sig, name)
    if not signature.written:  # as Numba: a kernel returns nothing, a C function must say what it returns
        raise CompileError(f"declare_device({name!r}, {sig!r}): give the return type too, e.g. 'float32(float32, float32)'")
    files = (link,) if isinstance(link, str) else tuple(link or ())
    return ForeignFunction(name, signature, files)


__all__ = ["ForeignFunction", "config", "declare_device"]
