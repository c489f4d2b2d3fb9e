"""Numba's ``kernel.inspect_asm()`` and friends: what hetero really makes of a kernel for CUDA.

Numba compiles a kernel to PTX through NVVM; hetero compiles it to CUDA C++ and then to PTX with NVRTC,
which is what a CUDA device runs when the kernel launches there. ``inspect_asm`` (and
``inspect_lto_ptx``) give that PTX for each signature, for the compute capability of the current
device where it is an NVIDIA GPU, else for the oldest architecture this NVRTC supports: real compiler
output whichever device the kernel runs on, so a test that looks for an instruction (``max.f64``,
``atom.shared.add.f64``) reads what hetero's CUDA path emits. It needs NVRTC (``cuda-bindings`` and the
``nvidia-cuda-nvrtc`` wheel, ``pip install 'hetero[cuda]'``), and says so when absent.

``inspect_types`` gives hetero's typed IR (the types it inferred for every value), ``inspect_llvm`` and
``inspect_sass`` refuse by name: hetero makes no LLVM IR (no NVVM), and SASS needs ``cuobjdump`` on a
cubin, which hetero does not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hetero.core.errors import CompileError, MissingDependencyError
from hetero.core.target import FEATURES, Target

if TYPE_CHECKING:
    from hetero.compat.cuda.dispatcher import Dispatcher
    from hetero.core.types import ParamType
    from hetero.kernels.kernel import Kernel


def cuda_arch() -> str:
    """``sm_XY``: the current device's compute capability on an NVIDIA GPU, else NVRTC's oldest."""
    from hetero.backends.cupy import nvrtc_compile
    from hetero.compat.cuda.devices import get_current_device

    archs = nvrtc_compile.supported_archs()
    device = get_current_device()
    if device.device.info.backend == "cuda":
        major, minor = device.compute_capability
        return f"sm_{major}{minor}"
    return f"sm_{min(archs)}"


def ptx(dispatcher: Dispatcher, kernel: Kernel, types: tuple[ParamType, ...], arch: str | None = None) -> str:
    """The PTX hetero's CUDA path makes of ``kernel`` (``dispatcher``'s, or a variant of it) for ``types``,
    for ``arch`` (``sm_90``; default :func:`cuda_arch`)."""
    from hetero.backends.cupy import nvrtc_compile
    from hetero.compiler.build import pipeline

    if not nvrtc_compile.available():
        raise MissingDependencyError(
            f"{dispatcher.py_func.__name__}.inspect_asm() shows the PTX hetero's CUDA path makes, with NVRTC: "
            "pip install 'hetero[cuda]' (cuda-bindings and nvidia-cuda-nvrtc), no GPU needed")
    function = kernel._lowered(types, kernel.checked())
    target = Target("cuda", _supported(arch or cuda_arch()), frozenset(FEATURES), f"nvrtc {nvrtc_compile.version()}")
    source = pipeline.emit(function, target)
    _, image = nvrtc_compile.compile_cuda(source.text, source.entry, target.arch, tuple(source.options), kind="ptx")
    return image.rstrip(b"\0").decode("utf-8", "replace")


def _supported(arch: str) -> str:
    """``arch``, or the newest this NVRTC knows below it (a GPU newer than the compiler runs its PTX)."""
    from hetero.backends.cupy import nvrtc_compile

    number, archs = nvrtc_compile.arch_number(arch), nvrtc_compile.supported_archs()
    if number in archs:
        return arch
    below = [a for a in archs if a <= number]
    return f"sm_{max(below) if below else min(archs)}"


def signatures(dispatcher: Dispatcher, signature: Any) -> list[tuple[Any, Kernel, tuple[ParamType, ...]]]:
    """``(key, types)`` for ``signature``, or for every signature the kernel has: the one given to
    ``cuda.jit`` and each it was launched with."""
    from hetero.compat.cuda import types as nbtypes

    name = dispatcher.py_func.__name__
    if signature is not None:
        parsed = nbtypes.parse(signature, name)
        wanted = tuple(parsed.hetero_types(name))
        launched = [k for k in (dispatcher.kernel, *dispatcher._variants.values())
                    if any(s.declared_types == wanted for s in list(k._dispatch.values()))]
        return [(signature, (launched or [dispatcher.kernel])[-1], wanted)]
    found: list[tuple[Any, Kernel, tuple[ParamType, ...]]] = []
    if dispatcher.signature is not None:
        found.append((dispatcher.signature, dispatcher.kernel, tuple(dispatcher._declared or ())))
    for kernel in (dispatcher.kernel, *dispatcher._variants.values()):
        for spec in list(kernel._dispatch.values()):
            if all(spec.declared_types != types for _, _, types in found):
                found.append((spec.declared_types, kernel, spec.declared_types))
    if not found:
        raise CompileError(f"{name} has no signature yet: launch it, or give cuda.jit a signature, or pass one "
                           f"({name}.inspect_asm('void(float32[:])'))")
    return found


def asm(dispatcher: Dispatcher, signature: Any = None) -> str | dict[Any, str]:
    """``inspect_asm``: the PTX for ``signature``, or ``{signature: PTX}`` for every one."""
    found = {key: ptx(dispatcher, kernel, types) for key, kernel, types in signatures(dispatcher, signature)}
    return next(iter(found.values())) if signature is not None else found


def typed_ir(dispatcher: Dispatcher, signature: Any = None) -> str:
    """``inspect_types``: hetero's optimised, typed IR of each signature, as text."""
    from hetero.compiler.ir.text import format_function

    return "\n\n".join(f"# {dispatcher.py_func.__name__} {key}\n{format_function(kernel._lowered(types))}"
                       for key, kernel, types in signatures(dispatcher, signature))


def refuse(dispatcher: Dispatcher, what: str, why: str, instead: Sequence[str]) -> CompileError:
    return CompileError(f"{dispatcher.py_func.__name__}.{what}(): {why}; use " + " or ".join(instead))
