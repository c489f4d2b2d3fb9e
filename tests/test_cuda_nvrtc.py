"""The cuda backend's run-time compile step runs here, without a GPU or driver: every kernel of the
corpus (and the emitter tests' extra kernels) goes through ``CuPyRuntime.compile_source`` for
an sm_90 device (NVRTC through cuda.bindings), and PTX/cubin come out. Only loading and
launching are left for the GPU (benchmarks/gpu_check.py)."""

from __future__ import annotations

import contextlib
import types

import pytest

pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings is not installed (pip install cuda-bindings nvidia-cuda-nvrtc)")

from test_emit_gpu import KERNELS

import hetero
from hetero.backends.cupy import nvrtc_compile
from hetero.backends.cupy.discovery import device_info
from hetero.backends.cupy.runtime import CuPyRuntime
from hetero.compiler.emit.registry import emitter_for
from hetero.compiler.frontend.signature import parse_signature

if not nvrtc_compile.available():
    pytest.skip("libnvrtc cannot be loaded (pip install nvidia-cuda-nvrtc)", allow_module_level=True)

H100_PROPS = {"name": b"NVIDIA H100 80GB HBM3", "totalGlobalMem": 85 << 30, "multiProcessorCount": 132,
              "maxThreadsPerBlock": 1024, "major": 9, "minor": 0, "uuid": bytes(range(16)),
              "pciDomainID": 0, "pciBusID": 0x19, "pciDeviceID": 0, "clockRate": 1980000, "ECCEnabled": 1}


def sm90_runtime() -> CuPyRuntime:
    """The backend's runtime for an sm_90 device described by a fake property dict (no driver)."""
    cuda = types.SimpleNamespace(Device=lambda index: contextlib.nullcontext(),
                                 runtime=types.SimpleNamespace(CUDARuntimeError=RuntimeError),
                                 driver=types.SimpleNamespace(CUDADriverError=RuntimeError),
                                 memory=types.SimpleNamespace(OutOfMemoryError=MemoryError))
    info = device_info("cuda", 0, H100_PROPS, {"driver": "13.0", "runtime": "13.0", "cupy": "14"})
    return CuPyRuntime(types.SimpleNamespace(cuda=cuda), info, f"nvrtc {nvrtc_compile.version()}")  # type: ignore[arg-type]


def emitted(runtime: CuPyRuntime, name: str) -> object:
    kernel, signature = KERNELS[name]
    target = runtime.kernel_target()
    return emitter_for(target.dialect).emit(kernel._lowered(parse_signature(signature)[1]), target)


def needs_fp16_headers(source: object) -> bool:
    return "cuda_fp16.h" in source.text  # type: ignore[attr-defined]


@pytest.mark.parametrize("name", sorted(KERNELS))
def test_every_kernel_compiles_to_sm90_through_the_backend(name: str) -> None:
    runtime = sm90_runtime()
    source = emitted(runtime, name)
    if needs_fp16_headers(source) and not nvrtc_compile.header_dirs():
        pytest.skip("cuda_fp16.h not found (pip install nvidia-cuda-runtime, or set CUDA_PATH)")
    kind, cubin = runtime.compile_source(source)
    assert kind == "cubin" and cubin[:4] == b"\x7fELF", "an sm_90 cubin (ELF) for the driver's module loader"
    assert source.entry.encode() in cubin  # type: ignore[attr-defined]
    ptx_kind, ptx = nvrtc_compile.compile_cuda(source.text, source.entry, runtime.kernel_target().arch,  # type: ignore[attr-defined]
                                               tuple(source.options), kind="ptx")  # type: ignore[attr-defined]
    text = ptx.decode()
    assert ptx_kind == "ptx" and ptx.endswith(b"\0") and ".target sm_90" in text
    assert f".entry {source.entry}(" in text  # type: ignore[attr-defined]


def test_the_target_comes_from_the_device_properties() -> None:
    runtime = sm90_runtime()
    assert runtime.kernel_target().arch == "sm_90" and runtime.kernel_target().dialect == "cuda"
    assert runtime.info.extra["compute_capability"] == "9.0"


def test_a_rejected_kernel_is_a_kernel_build_error_with_the_log() -> None:
    bad = types.SimpleNamespace(text='extern "C" __global__ void k(float* x) { x[0] = undefined_name; }',
                                entry="k", options=())
    with pytest.raises(hetero.KernelBuildError) as caught:
        sm90_runtime().compile_source(bad)
    assert "undefined_name" in caught.value.log and caught.value.source == bad.text
    assert any(o.startswith("--gpu-architecture=sm_90") for o in caught.value.options)


def test_an_arch_newer_than_nvrtc_falls_back_to_ptx_for_the_newest_it_knows() -> None:
    newest = max(nvrtc_compile.supported_archs())
    kind, ptx = nvrtc_compile.compile_cuda('extern "C" __global__ void k() {}', "k", f"sm_{newest + 1}")
    assert kind == "ptx" and f".target sm_{newest}" in ptx.decode()


def test_build_kernel_loads_the_nvrtc_cubin_and_returns_it_for_the_cache() -> None:
    runtime = sm90_runtime()
    loaded: list[bytes] = []

    class Module:
        def load(self, image: bytes) -> None:
            loaded.append(image)

        def get_function(self, name: str) -> str:
            return f"function {name}"

    runtime.cupy.cuda.function = types.SimpleNamespace(Module=Module)  # type: ignore[attr-defined]
    source = emitted(runtime, "saxpy")
    kernel, artifact = runtime.build_kernel(source, None, None)  # type: ignore[arg-type]
    assert kernel == f"function {source.entry}" and artifact == loaded[0]  # type: ignore[attr-defined]
    assert artifact is not None and artifact[:4] == b"\x7fELF"
    assert runtime.build_kernel(source, artifact, None) == (kernel, None)  # type: ignore[arg-type]

