"""``numba.cuda.compiler``'s (and ``numba.cuda``'s) ``compile_ptx``: a kernel compiled to PTX without
launching it, as hetero's CUDA path compiles it (its CUDA C++ through NVRTC; see
:mod:`hetero.compat.cuda.inspection`).

    ptx, resty = compile_ptx(kernel_function, "void(float32[:], int32)", cc=(9, 0))

``device=True`` (a device function on its own) is refused by name: hetero compiles device functions
into the kernels that call them, never alone. ``fastmath``, ``opt``, ``lineinfo`` and ``debug`` are
accepted and change nothing (hetero keeps IEEE semantics: its PTX has no ``.approx``/``.ftz`` forms);
``abi``/``abi_info`` and ``output="ltoir"`` are refused by name.
"""

from __future__ import annotations

from typing import Any

from hetero.core.errors import CompileError


def compile_ptx(pyfunc: Any, sig: Any, debug: bool = False, lineinfo: bool = False, device: bool = False,
                fastmath: bool = False, cc: tuple[int, int] | None = None, opt: bool = True, abi: str = "numba",
                abi_info: Any = None, output: str = "ptx", forceinline: bool = False,
                launch_bounds: Any = None) -> tuple[str, Any]:
    """``(ptx, return type)`` of ``pyfunc`` compiled as a kernel for signature ``sig``, for compute
    capability ``cc`` (default: the current device's on an NVIDIA GPU, else NVRTC's oldest)."""
    from hetero.compat.cuda import inspection, types
    from hetero.compat.cuda.dispatcher import Dispatcher

    name = getattr(pyfunc, "__name__", repr(pyfunc))
    if device:
        raise CompileError(f"compile_ptx({name}, device=True): hetero compiles a device function into the kernels "
                           "that call it, never on its own; compile a kernel that calls it (device=False)")
    if output != "ptx":
        raise CompileError(f"compile_ptx({name}, output={output!r}): hetero gives PTX only (it makes no LTO-IR)")
    if abi != "numba" or abi_info is not None:
        raise CompileError(f"compile_ptx({name}, abi={abi!r}): hetero compiles kernels with its own ABI only")
    dispatcher = Dispatcher(pyfunc, sig)
    assert dispatcher.signature is not None
    arch = None if cc is None else f"sm_{int(cc[0])}{int(cc[1])}"
    (_, kernel, found), = inspection.signatures(dispatcher, sig)
    if dispatcher.signature.return_type is not types.void:
        raise CompileError(f"compile_ptx({name}): a kernel returns nothing; its signature says "
                           f"{dispatcher.signature.return_type}")
    return inspection.ptx(dispatcher, kernel, found, arch), types.void


def compile_ptx_for_current_device(pyfunc: Any, sig: Any, debug: bool = False, lineinfo: bool = False,
                                   device: bool = False, fastmath: bool = False, opt: bool = True,
                                   abi: str = "numba", abi_info: Any = None, output: str = "ptx",
                                   forceinline: bool = False, launch_bounds: Any = None) -> tuple[str, Any]:
    """:func:`compile_ptx` for the current device's compute capability."""
    return compile_ptx(pyfunc, sig, debug=debug, lineinfo=lineinfo, device=device, fastmath=fastmath, cc=None,
                       opt=opt, abi=abi, abi_info=abi_info, output=output, forceinline=forceinline,
                       launch_bounds=launch_bounds)


__all__ = ["compile_ptx", "compile_ptx_for_current_device"]
