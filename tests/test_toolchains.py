"""Toolchain drivers: versions, a missing tool's error, compiler logs in errors, timeouts,
no shell, and the toolchain version as a cache-key part. nvcc/hipcc tests skip where
those compilers are not installed; the shared compile path is tested with a fake tool."""

from __future__ import annotations

import re
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

import hetero
from hetero.compiler.build import toolchains
from hetero.compiler.build.cache import Cache, MemoryStorage
from hetero.compiler.emit.base import EmittedSource
from hetero.compiler.build.pipeline import build_artifact
from hetero.compiler.build.stats import stats
from hetero.compiler.build.toolchains import HIPCC, NVCC, SPIRV, CommandToolchain, run_tool

needs_nvcc = pytest.mark.skipif(not NVCC.available(), reason="nvcc is not installed")
needs_hipcc = pytest.mark.skipif(not HIPCC.available(), reason="hipcc is not installed")
KERNEL = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 2.0f; }\n'
BROKEN = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = undeclared_name; }\n'


def _source(text: str, dialect: str = "cuda") -> EmittedSource:
    return EmittedSource(dialect, "k", text, ())


@needs_nvcc
def test_nvcc_version_and_artifacts() -> None:
    assert re.fullmatch(r"nvcc \d+\.\d+\.\d+", NVCC.version())
    fatbin = NVCC.compile(_source(KERNEL), "sm_90")
    assert fatbin.kind == "fatbin" and fatbin.data[:4] == bytes.fromhex("50ed55ba")  # fatbin magic
    ptx = NVCC.compile(_source(KERNEL), "compute_80")
    assert ptx.kind == "ptx" and b".target sm_80" in ptx.data and b".entry k" in ptx.data


@needs_hipcc
def test_hipcc_version_and_code_object() -> None:
    assert re.match(r"hipcc \d+\.\d+", HIPCC.version())
    code = HIPCC.compile(_source(KERNEL, "hip"), "gfx90a")
    # --genco writes a clang offload bundle of code objects (ELF inside), which hipModuleLoadData takes.
    assert code.kind == "hsaco" and code.data.startswith((b"\x7fELF", b"__CLANG_OFFLOAD_BUNDLE__"))


@pytest.mark.skipif(not SPIRV.available(), reason="clang and llvm-spirv (a matching pair) are not installed")
def test_opencl_c_to_spirv() -> None:
    source = "__kernel void k(__global float* x, long n) { long i = get_global_id(0); if (i < n) x[i] = x[i] * 2.0f; }"
    spirv = SPIRV.compile(_source(source, "opencl"), "spirv64")
    assert spirv.kind == "spirv" and spirv.data[:4] == bytes.fromhex("03022307")  # the SPIR-V magic number
    assert "clang" in SPIRV.version()


def test_source_toolchains_need_nothing_installed() -> None:
    opencl = toolchains.toolchain_for("opencl", "any")
    assert opencl.available() and hetero.__version__ in opencl.version()
    assert opencl.compile(_source("__kernel void k() {}", "opencl"), "any").data == b"__kernel void k() {}"
    with pytest.raises(hetero.CompileError, match="portable source"):
        opencl.compile(_source("", "opencl"), "gfx90a")


@pytest.mark.parametrize(("toolchain", "tool", "hint"), [(NVCC, "nvcc", "CUDA Toolkit"), (HIPCC, "hipcc", "ROCm"),
                                                        (SPIRV, "clang", "llvm-spirv")])
def test_missing_tool_names_it_and_how_to_install(monkeypatch: pytest.MonkeyPatch, toolchain: CommandToolchain,
                                                  tool: str, hint: str) -> None:
    monkeypatch.setenv("PATH", "")
    assert not toolchain.available()
    with pytest.raises(hetero.ToolchainNotFoundError) as info:
        toolchain.compile(_source(KERNEL, toolchain.dialect), "spirv64" if toolchain is SPIRV else
                          ("sm_90" if toolchain is NVCC else "gfx90a"))
    assert info.value.tool == tool and tool in str(info.value) and hint in str(info.value)
    with pytest.raises(hetero.ToolchainNotFoundError):
        toolchain.version()


@needs_nvcc
def test_nvcc_error_carries_the_full_log_source_and_command() -> None:
    with pytest.raises(hetero.KernelBuildError) as info:
        NVCC.compile(_source(BROKEN), "sm_80")
    error = info.value
    assert "undeclared_name" in error.log and "error" in error.log
    assert error.source == BROKEN and error.options[0].endswith("nvcc") and "-fatbin" in error.options
    assert error.target == "cuda:sm_80" and "undeclared_name" in str(error)


@needs_hipcc
def test_hipcc_error_carries_the_log() -> None:
    with pytest.raises(hetero.KernelBuildError) as info:
        HIPCC.compile(_source(BROKEN, "hip"), "gfx90a")
    assert "undeclared_name" in info.value.log and "--offload-arch=gfx90a" in info.value.options


def test_bad_architecture_names_are_refused_before_running_anything() -> None:
    with pytest.raises(hetero.CompileError, match="sm_90"):
        NVCC.compile(_source(KERNEL), "sm90")
    with pytest.raises(hetero.CompileError, match="gfx90a"):
        HIPCC.compile(_source(KERNEL, "hip"), "90a")


def test_run_tool_passes_arguments_literally_without_a_shell() -> None:
    tricky = "$(echo hacked); echo also; `id` > /tmp/x"
    result = run_tool([sys.executable, "-c", "import sys; print(sys.argv[1])", tricky])
    assert result.returncode == 0 and result.log == tricky


class FakeCompiler(CommandToolchain):
    """A 'compiler' that is Python: copies the source upper-cased, fails on 'FAIL', sleeps on 'SLEEP'."""

    name = "fakecc"
    dialect = "opencl"
    tools = (sys.executable,)
    suffix = ".txt"
    SCRIPT = ("import sys, time; text = open(sys.argv[1]).read()\n"
              "if 'SLEEP' in text: time.sleep(30)\n"
              "if 'FAIL' in text: print('fakecc: error: the source says FAIL at line 1', file=sys.stderr); sys.exit(3)\n"
              "open(sys.argv[2], 'w').write(text.upper())")

    def __init__(self, version: str = "fakecc 1.0") -> None:
        super().__init__()
        self.fake_version = version

    def artifact_kind(self, arch: str) -> str:
        return "upper"

    def _query_version(self, paths: Mapping[str, str]) -> str:
        return self.fake_version

    def commands(self, paths: Mapping[str, str], src: Path, out: Path, arch: str,
                 options: Sequence[str]) -> list[list[str]]:
        return [[paths[sys.executable], "-c", self.SCRIPT, str(src), str(out)]]


def test_shared_compile_path_with_a_fake_tool() -> None:
    artifact = FakeCompiler().compile(_source("hello", "opencl"), "x")
    assert artifact.kind == "upper" and artifact.data == b"HELLO" and artifact.log.startswith(f"$ {sys.executable}")
    with pytest.raises(hetero.KernelBuildError) as info:
        FakeCompiler().compile(_source("FAIL here", "opencl"), "x")
    assert "exit status 3" in str(info.value) and "the source says FAIL" in info.value.log
    assert info.value.source == "FAIL here"


def test_timeout_kills_the_compiler_and_says_so() -> None:
    with pytest.raises(hetero.KernelBuildError) as info:
        FakeCompiler().compile(_source("SLEEP", "opencl"), "x", timeout=0.5)
    assert "timed out after 0.5 s" in str(info.value) and "killed after 0.5 s" in info.value.log


def test_toolchain_version_is_part_of_the_cache_key() -> None:
    cache = Cache(MemoryStorage())
    source = _source("cached", "opencl")
    before = stats.builds
    assert build_artifact(FakeCompiler("fakecc 1.0"), source, "x", cache=cache)[1] is False
    assert build_artifact(FakeCompiler("fakecc 1.0"), source, "x", cache=cache)[1] is True  # same version: hit
    assert build_artifact(FakeCompiler("fakecc 2.0"), source, "x", cache=cache)[1] is False  # new version: rebuilt
    assert stats.builds - before == 2
