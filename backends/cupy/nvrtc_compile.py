"""The ``cuda`` backend's run-time compile step: CUDA C++ -> PTX or cubin with NVRTC, through
NVIDIA's ``cuda.bindings.nvrtc`` (packages ``cuda-bindings`` and ``nvidia-cuda-nvrtc``).

NVRTC needs neither a GPU nor a driver, so this step runs (and is tested) on any machine;
only loading the image (``cuModuleLoadData``) needs the device. CuPy's own ``RawModule``
asks the driver first, which is why it is only the fallback when ``cuda.bindings`` is missing.

Headers: generated code includes ``cuda_fp16.h`` only for kernels using f16. NVRTC does not
ship it; it comes from the CUDA runtime headers (``nvidia-cuda-runtime`` wheel, a CUDA
toolkit or conda), found with ``cuda.pathfinder`` when installed, else ``CUDA_PATH``/``CUDA_HOME``.
"""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from hetero.core.errors import KernelBuildError

logger = logging.getLogger("hetero.backends.nvrtc")

INSTALL_HINT = "pip install cuda-bindings nvidia-cuda-nvrtc (cuda-python's NVRTC bindings)"


class NvrtcUnavailable(RuntimeError):
    """cuda.bindings.nvrtc cannot be imported or loaded here (the caller falls back to CuPy)."""


def _nvrtc() -> Any:
    try:
        from cuda.bindings import nvrtc
    except ImportError as exc:
        raise NvrtcUnavailable(f"cuda.bindings.nvrtc is not importable ({exc}); {INSTALL_HINT}") from exc
    return nvrtc


def available() -> bool:
    try:
        version()
    except NvrtcUnavailable:
        return False
    return True


@functools.cache
def version() -> str:
    """NVRTC's version ("13.5"): part of the cache key of everything it compiles."""
    nvrtc = _nvrtc()
    try:
        status, major, minor = nvrtc.nvrtcVersion()
    except Exception as exc:  # the bindings import, but libnvrtc cannot be loaded
        raise NvrtcUnavailable(f"libnvrtc could not be loaded: {type(exc).__name__}: {exc}; {INSTALL_HINT}") from exc
    _check(nvrtc, status, "nvrtcVersion")
    return f"{major}.{minor}"


@functools.cache
def supported_archs() -> tuple[int, ...]:
    """The SM versions this NVRTC can emit cubins for (75, 80, ..., 120)."""
    nvrtc = _nvrtc()
    status, archs = nvrtc.nvrtcGetSupportedArchs()
    _check(nvrtc, status, "nvrtcGetSupportedArchs")
    return tuple(int(a) for a in archs)


@functools.cache
def header_dirs() -> tuple[str, ...]:
    """Directories holding ``cuda_fp16.h`` (the CUDA runtime headers), best first; may be empty."""
    found: list[str] = []
    try:
        from cuda import pathfinder

        located = pathfinder.find_nvidia_header_directory("cudart")
        if located:
            found.append(str(located))
    except Exception as exc:  # noqa: BLE001 - cuda.pathfinder is optional and its lookups may raise
        logger.debug("cuda.pathfinder found no CUDA runtime headers: %s", exc)
    for variable in ("CUDA_PATH", "CUDA_HOME"):
        root = os.environ.get(variable)
        if root and (Path(root) / "include" / "cuda_fp16.h").is_file():
            found.append(str(Path(root) / "include"))
    return tuple(dict.fromkeys(found))


def _check(nvrtc: Any, status: Any, what: str) -> None:
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise KernelBuildError(f"{what} failed: {status.name}", source="", target="nvrtc")


def arch_number(arch: str) -> int:
    """``sm_90`` / ``sm_90a`` / ``compute_90`` -> 90."""
    digits = "".join(ch for ch in arch.split("_", 1)[-1] if ch.isdigit())
    if not digits:
        raise ValueError(f"not a CUDA architecture: {arch!r} (expected e.g. 'sm_90')")
    return int(digits)


def compile_cuda(text: str, entry: str, arch: str, options: Sequence[str] = (), *, kind: str = "cubin",
                 name: str | None = None) -> tuple[str, bytes]:
    """Compile CUDA C++ ``text`` for ``arch`` (``sm_90``) with NVRTC: ``(kind, image)``.

    ``kind="cubin"`` gives machine code for that exact arch (what the backend loads: no JIT at
    load time, and it loads on drivers older than this NVRTC); ``kind="ptx"`` gives PTX for it.
    When this NVRTC cannot emit a cubin for ``arch`` (a GPU newer than the compiler), PTX for the
    newest arch it knows comes back instead, which the driver JIT-compiles. Raises
    KernelBuildError (with NVRTC's log and the source) when the code does not compile.
    """
    if kind not in ("cubin", "ptx"):
        raise ValueError(f"kind must be 'cubin' or 'ptx', got {kind!r}")
    nvrtc = _nvrtc()
    number = arch_number(arch)
    archs = supported_archs()
    if kind == "cubin" and number not in archs:
        kind, number = "ptx", max(a for a in archs if a <= number) if any(a <= number for a in archs) else min(archs)
    flags = [f"--gpu-architecture={'sm' if kind == 'cubin' else 'compute'}_{number}", "--std=c++17",
             *(f"--include-path={d}" for d in header_dirs()), *options]
    status, program = nvrtc.nvrtcCreateProgram(text.encode(), (name or f"{entry}.cu").encode(), 0, [], [])
    _check(nvrtc, status, "nvrtcCreateProgram")
    try:
        encoded = [flag.encode() for flag in flags]
        (status,) = nvrtc.nvrtcCompileProgram(program, len(encoded), encoded)
        log = _log(nvrtc, program)
        if status != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            hint = ("" if header_dirs() or "cuda_fp16.h" not in log else
                    "\n(the CUDA runtime headers were not found: pip install nvidia-cuda-runtime, or set CUDA_PATH)")
            raise KernelBuildError(f"NVRTC {version()} rejected the generated kernel {entry}", source=text,
                                   options=tuple(flags), target=f"cuda {arch}", log=log + hint)
        size_call, get_call = ((nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN) if kind == "cubin"
                               else (nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX))
        status, size = size_call(program)
        _check(nvrtc, status, size_call.__name__)
        image = b" " * size
        (status,) = get_call(program, image)
        _check(nvrtc, status, get_call.__name__)
    finally:
        nvrtc.nvrtcDestroyProgram(program)
    return kind, image.rstrip(b"\0") + b"\0" if kind == "ptx" else image


def _log(nvrtc: Any, program: Any) -> str:
    status, size = nvrtc.nvrtcGetProgramLogSize(program)
    if status != nvrtc.nvrtcResult.NVRTC_SUCCESS or size <= 1:
        return ""
    buffer = b" " * size
    nvrtc.nvrtcGetProgramLog(program, buffer)
    return buffer.rstrip(b"\0").decode(errors="replace").strip()
