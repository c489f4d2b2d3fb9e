"""Vendor toolchains behind one interface: nvcc (a fatbin holding the cubin for ``sm_XX``
and PTX for newer GPUs), hipcc (AMD code objects for ``gfxXXXX``), OpenCL C (the source
itself; SPIR-V where clang and llvm-spirv are installed) and the CPU module (Python source
that Numba compiles where it runs).

There is one compile path: a toolchain says which executables it needs, how to ask
their version and which command lines turn a source file into an artifact; the shared
code runs them as subprocesses with argument lists (never a shell) and a timeout, and
puts the full compiler log in the :class:`~hetero.core.errors.KernelBuildError` it raises.
Running one through the compile cache is :func:`hetero.compiler.build.pipeline.build_artifact`'s job.
"""

from __future__ import annotations

import abc
import dataclasses
import os
import re
import shlex
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

from hetero._version import __version__
from hetero.core.errors import CompileError, KernelBuildError, ToolchainNotFoundError

from hetero.compiler.emit.base import EmittedSource

#: Seconds one compiler command may run before it is killed.
DEFAULT_TIMEOUT = 300.0
#: Artifact kinds that a GPU runtime loads as a module image (cuModuleLoadData, hipModuleLoadData).
BINARY_KINDS = frozenset({"fatbin", "cubin", "ptx", "hsaco"})


@dataclasses.dataclass(frozen=True)
class Artifact:
    """What a toolchain produced: ``kind`` (``fatbin``, ``ptx``, ``hsaco``, ``spirv``,
    ``opencl-c``, ``python``), the bytes, and the compiler's output (empty when it was silent
    or the artifact came from the cache)."""

    kind: str
    data: bytes
    log: str = ""


@dataclasses.dataclass(frozen=True)
class RunResult:
    """A finished command: its exit status (None: killed at the timeout) and its stdout + stderr."""

    returncode: int | None
    log: str


def run_tool(argv: Sequence[str], cwd: Path | None = None, timeout: float = DEFAULT_TIMEOUT,
             env: Mapping[str, str] | None = None) -> RunResult:
    """Run ``argv`` (no shell) with no stdin; OSError when the executable cannot be started."""
    try:
        done = subprocess.run(list(argv), cwd=cwd, env=None if env is None else dict(env), stdin=subprocess.DEVNULL,
                              capture_output=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        partial = _text(exc.stdout) + _text(exc.stderr)
        return RunResult(None, f"{partial.rstrip()}\n[killed after {timeout:g} s]".lstrip())
    return RunResult(done.returncode, (_text(done.stdout) + _text(done.stderr)).strip())


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data if isinstance(data, str) else data.decode("utf-8", errors="replace")


class Toolchain(abc.ABC):
    """Turns a dialect's generated source into an artifact for one architecture."""

    #: What users call it (``nvcc``); also a cache-key part.
    name: str
    #: The dialect of the sources it takes (``cuda``, ``hip``, ``opencl``, ``cpu``).
    dialect: str
    #: Executables that must be on PATH (none for toolchains that only package source).
    tools: tuple[str, ...] = ()
    #: How to install the tools, for the error when one is missing.
    install_hint: str = ""
    #: Whether its artifacts go through the compile cache (not when the artifact is the source itself).
    caches_artifacts: bool = False

    def __init__(self) -> None:
        self._versions: dict[tuple[tuple[str, str], ...], str] = {}
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"<toolchain {self.name}>"

    @property
    def purpose(self) -> str:
        return f"to build {self.dialect} kernels with {self.name}"

    def check_arch(self, arch: str) -> None:
        """Raise CompileError when ``arch`` is not an architecture this toolchain names."""

    @abc.abstractmethod
    def artifact_kind(self, arch: str) -> str:
        """The :attr:`Artifact.kind` that :meth:`compile` produces for ``arch``."""

    def available(self) -> bool:
        return all(shutil.which(tool) for tool in self.tools)

    def require(self) -> dict[str, str]:
        """The full path of every tool; ToolchainNotFoundError naming the first one missing."""
        paths: dict[str, str] = {}
        for tool in self.tools:
            path = shutil.which(tool)
            if path is None:
                raise ToolchainNotFoundError(tool, self.purpose, self.install_hint)
            paths[tool] = path
        return paths

    def version(self) -> str:
        """The toolchain's version (``nvcc 13.0.88``), asked once per set of executables found."""
        paths = self.require()
        key = tuple(sorted(paths.items()))
        with self._lock:
            known = self._versions.get(key)
        if known is None:
            known = self._query_version(paths)
            with self._lock:
                self._versions[key] = known
        return known

    @abc.abstractmethod
    def _query_version(self, paths: Mapping[str, str]) -> str:
        """Ask the tools at ``paths`` for their version."""

    @abc.abstractmethod
    def compile(self, source: EmittedSource, arch: str, *, timeout: float = DEFAULT_TIMEOUT) -> Artifact:
        """Compile ``source`` for ``arch``. Raises KernelBuildError (with the log) when the
        compiler rejects it, ToolchainNotFoundError when a tool is missing."""

    def translate_options(self, options: Sequence[str]) -> list[str]:
        """The emitter's options (written for the runtime compiler) as this tool takes them."""
        return list(options)


class CommandToolchain(Toolchain):
    """A toolchain of executables: the shared subprocess compile path."""

    caches_artifacts = True

    #: File name suffix of the source the compiler reads.
    suffix: str = ".txt"
    #: Arguments that make each tool print its version.
    version_args: tuple[str, ...] = ("--version",)
    #: The architectures it accepts, and how to write one (for the error).
    arch_pattern: re.Pattern[str] = re.compile(r".+")
    arch_example: str = ""

    def check_arch(self, arch: str) -> None:
        if not self.arch_pattern.fullmatch(arch):
            raise CompileError(f"{self.name} cannot build for architecture {arch!r}; write one like {self.arch_example}")

    def environment(self) -> dict[str, str] | None:
        """The environment the tools run in (None: this process's own)."""
        return None

    @abc.abstractmethod
    def commands(self, paths: Mapping[str, str], src: Path, out: Path, arch: str,
                 options: Sequence[str]) -> list[list[str]]:
        """The command lines, run in order in a private directory, that turn ``src`` into ``out``."""

    def _query_version(self, paths: Mapping[str, str]) -> str:
        texts = []
        for tool, path in paths.items():
            try:
                result = run_tool([path, *self.version_args], timeout=60, env=self.environment())
            except OSError as exc:
                raise ToolchainNotFoundError(tool, self.purpose, f"{self.install_hint} ({path}: {exc})") from exc
            texts.append(result.log if result.returncode == 0 else "")
        parsed = self.parse_version(texts)
        if parsed:
            return parsed
        # No version to read: fall back on what identifies the executables, so cache keys still change with them.
        return f"{self.name} (unknown version: " + ", ".join(f"{p} {_file_identity(p)}" for p in paths.values()) + ")"

    def parse_version(self, outputs: Sequence[str]) -> str:
        """The version from each tool's ``--version`` output ('' when it cannot be read)."""
        first = next((line.strip() for line in outputs[0].splitlines() if line.strip()), "") if outputs else ""
        return f"{self.name} {first}" if first else ""

    def compile(self, source: EmittedSource, arch: str, *, timeout: float = DEFAULT_TIMEOUT) -> Artifact:
        self.check_arch(arch)
        paths = self.require()
        target = f"{'rocm' if self.dialect == 'hip' else self.dialect}:{arch}"
        logs: list[str] = []
        with tempfile.TemporaryDirectory(prefix=f"hetero-{self.name}-") as folder:
            work = Path(folder)
            src = work / f"kernel{self.suffix}"
            src.write_text(source.text, encoding="utf-8")
            out = work / f"kernel.{self.artifact_kind(arch)}"
            for argv in self.commands(paths, src, out, arch, self.translate_options(source.options)):
                try:
                    result = run_tool(argv, work, timeout, self.environment())
                except OSError as exc:
                    raise ToolchainNotFoundError(Path(argv[0]).name, self.purpose, f"{self.install_hint} ({exc})") from exc
                if result.returncode != 0:  # the error shows the failing command as its options, then all output
                    why = f"timed out after {timeout:g} s" if result.returncode is None else f"exit status {result.returncode}"
                    raise KernelBuildError(f"{self.name} failed ({why}) building {source.entry}", source=source.text,
                                           options=tuple(argv), target=target, log="\n".join([*logs, result.log]))
                logs.append(f"$ {shlex.join(argv)}\n{result.log}".rstrip())
            try:
                data = out.read_bytes()
            except OSError as exc:
                raise KernelBuildError(f"{self.name} reported success but wrote no {out.name} ({exc})",
                                       source=source.text, target=target, log="\n".join(logs)) from exc
        return Artifact(self.artifact_kind(arch), data, "\n".join(logs))


def _file_identity(path: str) -> str:
    try:
        info = os.stat(path)
    except OSError:
        return "(unreadable)"
    return f"({info.st_size} bytes, mtime {int(info.st_mtime)})"


class NvccToolchain(CommandToolchain):
    """NVIDIA's nvcc. ``sm_XX`` gives a fatbin of the ``sm_XX`` cubin plus ``compute_XX`` PTX
    (which the driver JIT-compiles on newer GPUs); ``compute_XX`` gives PTX alone."""

    name = "nvcc"
    dialect = "cuda"
    tools = ("nvcc",)
    install_hint = ("install the CUDA Toolkit (https://developer.nvidia.com/cuda-downloads, or the "
                    "'cuda-nvcc' conda/apt package) and put its bin/ on PATH")
    suffix = ".cu"
    arch_pattern = re.compile(r"(sm|compute)_(\d{2,3})([af]?)")
    arch_example = "sm_90 (cubin + PTX) or compute_90 (PTX only)"
    #: NVRTC-only options the emitter may give, which nvcc does not take.
    _NVRTC_ONLY = ("-default-device", "--device-as-default-execution-space")

    def artifact_kind(self, arch: str) -> str:
        return "ptx" if arch.startswith("compute_") else "fatbin"

    def parse_version(self, outputs: Sequence[str]) -> str:
        found = re.search(r"release [\d.]+, V([\d.]+)", outputs[0]) if outputs else None
        return f"nvcc {found.group(1)}" if found else super().parse_version(outputs)

    def translate_options(self, options: Sequence[str]) -> list[str]:
        return [option for option in options if option not in self._NVRTC_ONLY and not option.startswith("-arch")]

    def commands(self, paths: Mapping[str, str], src: Path, out: Path, arch: str,
                 options: Sequence[str]) -> list[list[str]]:
        kind, number, suffix = self.arch_pattern.fullmatch(arch).groups()  # type: ignore[union-attr]
        virtual = f"compute_{number}{suffix}"
        if kind == "compute":
            return [[paths["nvcc"], "-ptx", f"-arch={virtual}", *options, "-o", str(out), str(src)]]
        return [[paths["nvcc"], "-fatbin", f"-gencode=arch={virtual},code=sm_{number}{suffix}",
                 f"-gencode=arch={virtual},code={virtual}", *options, "-o", str(out), str(src)]]


class HipccToolchain(CommandToolchain):
    """AMD's hipcc (clang): a code object (``.hsaco``) for one ``gfxXXXX``."""

    name = "hipcc"
    dialect = "hip"
    tools = ("hipcc",)
    install_hint = "install ROCm's HIP SDK (https://rocm.docs.amd.com, e.g. 'apt install hipcc') and put hipcc on PATH"
    suffix = ".hip"
    arch_pattern = re.compile(r"gfx[0-9a-f]{3,4}(:[a-z0-9_]+[+-])*")
    arch_example = "gfx90a or gfx942 (optionally with features: gfx90a:xnack-)"

    def artifact_kind(self, arch: str) -> str:
        return "hsaco"

    def environment(self) -> dict[str, str]:
        # hipcc builds for NVIDIA when it finds nvcc, unless told the platform.
        return {**os.environ, "HIP_PLATFORM": "amd"}

    def parse_version(self, outputs: Sequence[str]) -> str:
        text = outputs[0] if outputs else ""
        hip = re.search(r"HIP version:\s*(\S+)", text)
        clang = re.search(r"clang version\s*(\S+)", text)
        if not hip:
            return super().parse_version(outputs)
        return f"hipcc {hip.group(1)}" + (f" (clang {clang.group(1)})" if clang else "")

    def commands(self, paths: Mapping[str, str], src: Path, out: Path, arch: str,
                 options: Sequence[str]) -> list[list[str]]:
        # hipRTC declares threadIdx & co. itself; hipcc needs the runtime header (a no-op when the source includes it).
        return [[paths["hipcc"], "--genco", f"--offload-arch={arch}", "-O3", "-include", "hip/hip_runtime.h", *options,
                 "-o", str(out), str(src)]]


class SpirvToolchain(CommandToolchain):
    """OpenCL C to SPIR-V with clang (to LLVM bitcode for ``spir64``) and llvm-spirv. Optional:
    only where both are installed."""

    name = "clang+llvm-spirv"
    dialect = "opencl"
    tools = ("clang", "llvm-spirv")
    install_hint = "install clang and the SPIR-V translator (e.g. 'apt install clang llvm-spirv')"
    suffix = ".cl"
    arch_pattern = re.compile(r"spirv64")
    arch_example = "spirv64"

    #: Versioned names distributions install (clang-15 with llvm-spirv-15): a pair must match,
    #: as llvm-spirv reads the bitcode of its own LLVM version.
    _SUFFIXES = ("", *(f"-{n}" for n in range(20, 13, -1)))

    def artifact_kind(self, arch: str) -> str:
        return "spirv"

    def _pair(self) -> dict[str, str] | None:
        for suffix in self._SUFFIXES:
            clang, translator = shutil.which(f"clang{suffix}"), shutil.which(f"llvm-spirv{suffix}")
            if clang and translator:
                return {"clang": clang, "llvm-spirv": translator}
        return None

    def available(self) -> bool:
        return self._pair() is not None

    def require(self) -> dict[str, str]:
        pair = self._pair()
        if pair is None:
            missing = "clang" if not any(shutil.which(f"clang{s}") for s in self._SUFFIXES) else "llvm-spirv"
            raise ToolchainNotFoundError(missing, self.purpose, self.install_hint)
        return pair

    def parse_version(self, outputs: Sequence[str]) -> str:
        firsts = [next((line.strip() for line in text.splitlines() if line.strip()), "?") for text in outputs]
        return "; ".join(firsts) if any(f != "?" for f in firsts) else ""

    def translate_options(self, options: Sequence[str]) -> list[str]:
        return [option for option in options if option.startswith(("-D", "-I", "-cl-"))]

    def commands(self, paths: Mapping[str, str], src: Path, out: Path, arch: str,
                 options: Sequence[str]) -> list[list[str]]:
        bitcode = out.with_suffix(".bc")
        # No LLVM passes: they emit `freeze`, which llvm-spirv 15 cannot translate; the driver optimizes anyway.
        return [[paths["clang"], "-cl-std=CL2.0", "-target", "spir64", "-emit-llvm", "-c", "-O2", "-Xclang",
                 "-disable-llvm-passes", *options, "-o", str(bitcode), str(src)],
                [paths["llvm-spirv"], str(bitcode), "-o", str(out)]]


class SourceToolchain(Toolchain):
    """Dialects whose artifact is the generated source itself, finished where it runs: the
    OpenCL driver builds OpenCL C for its device; Numba compiles the CPU module."""

    def __init__(self, name: str, dialect: str, kind: str) -> None:
        super().__init__()
        self.name = name
        self.dialect = dialect
        self._kind = kind

    def artifact_kind(self, arch: str) -> str:
        return self._kind

    def check_arch(self, arch: str) -> None:
        if arch != "any":
            raise CompileError(f"{self.dialect} kernels are packaged as portable source; the target is "
                               f"'{self.dialect}', not '{self.dialect}:{arch}'")

    def _query_version(self, paths: Mapping[str, str]) -> str:
        return f"hetero {__version__} {self.dialect} emitter"

    def compile(self, source: EmittedSource, arch: str, *, timeout: float = DEFAULT_TIMEOUT) -> Artifact:
        self.check_arch(arch)
        return Artifact(self._kind, source.text.encode("utf-8"))


NVCC = NvccToolchain()
HIPCC = HipccToolchain()
SPIRV = SpirvToolchain()
OPENCL_SOURCE = SourceToolchain("opencl-c", "opencl", "opencl-c")
CPU_SOURCE = SourceToolchain("python", "cpu", "python")

_BY_DIALECT: dict[str, tuple[Toolchain, ...]] = {
    "cuda": (NVCC,),
    "hip": (HIPCC,),
    "opencl": (OPENCL_SOURCE, SPIRV),
    "cpu": (CPU_SOURCE,),
}


def toolchain_for(dialect: str, arch: str) -> Toolchain:
    """The toolchain that builds ``dialect`` code for ``arch`` (``opencl`` + ``spirv64``: SPIR-V)."""
    choices = _BY_DIALECT.get(dialect)
    if choices is None:
        raise CompileError(f"no toolchain for dialect {dialect!r}; known: {', '.join(_BY_DIALECT)}")
    if dialect == "opencl" and arch == "spirv64":
        return SPIRV
    return choices[0]


def toolchains() -> list[Toolchain]:
    """Every toolchain hetero knows, available or not."""
    return [toolchain for group in _BY_DIALECT.values() for toolchain in group]


__all__ = [
    "BINARY_KINDS", "DEFAULT_TIMEOUT", "Artifact", "CommandToolchain", "HipccToolchain", "NvccToolchain",
    "RunResult", "SourceToolchain", "SpirvToolchain", "Toolchain", "run_tool", "toolchain_for", "toolchains",
]
