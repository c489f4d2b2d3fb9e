"""hetero.torch_device: torch's device for a hetero device, checked against the torch in the
process (real for CPU devices; the GPU cases with torch's availability faked), and the report
form that never imports torch."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys

import pytest
from conftest import ROOT

import hetero
from hetero.core.torch_devices import is_gpu, loaded_torch_device

torch = pytest.importorskip("torch")


@dataclasses.dataclass
class Fake:
    """A GPU hetero may list and this machine does not have."""

    backend: str
    kind: str
    index: int

    @property
    def name(self) -> str:
        return f"{self.backend}:{self.index}"


def _torch_has(monkeypatch: pytest.MonkeyPatch, *, cuda: str | None = None, hip: str | None = None,
               gpu: bool = False, xpu: bool = False) -> None:
    monkeypatch.setattr(torch.version, "cuda", cuda)
    monkeypatch.setattr(torch.version, "hip", hip)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: gpu)
    monkeypatch.setattr(torch.xpu, "is_available", lambda: xpu)


def test_cpu_devices_are_torch_cpu_by_device_and_by_name() -> None:
    assert hetero.torch_device("cpu") == "cpu"
    assert hetero.torch_device(hetero.device("cpu")) == "cpu"
    with hetero.use_device("cpu"):
        assert hetero.torch_device() == "cpu"
    for each in hetero.devices():  # PoCL, oneAPI's CPU runtime: host memory for torch
        if str(each.kind) == "cpu":
            assert hetero.torch_device(each) == "cpu", each.name
            assert hetero.torch_device(each.name) == "cpu", each.name


def test_a_name_hetero_does_not_know_is_refused() -> None:
    with pytest.raises(hetero.HeteroError):
        hetero.torch_device("nosuchbackend:0")


def test_cuda_is_cuda_only_on_a_cuda_build_with_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = Fake("cuda", "gpu", 2)
    _torch_has(monkeypatch, cuda="12.8", gpu=True)
    assert hetero.torch_device(gpu) == "cuda:2"  # type: ignore[arg-type]
    _torch_has(monkeypatch, cuda="12.8", gpu=False)  # no driver, or no GPU visible
    assert hetero.torch_device(gpu) == "cpu"  # type: ignore[arg-type]
    _torch_has(monkeypatch, hip="7.0", gpu=True)  # a ROCm build sees AMD GPUs only
    assert hetero.torch_device(gpu) == "cpu"  # type: ignore[arg-type]
    _torch_has(monkeypatch)  # the CPU wheel
    assert hetero.torch_device(gpu) == "cpu"  # type: ignore[arg-type]


def test_rocm_is_cuda_only_on_a_rocm_build_with_a_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = Fake("rocm", "gpu", 1)
    _torch_has(monkeypatch, hip="7.0", gpu=True)
    assert hetero.torch_device(gpu) == "cuda:1"  # type: ignore[arg-type]
    _torch_has(monkeypatch, cuda="12.8", gpu=True)  # a CUDA build cannot drive an AMD GPU
    assert hetero.torch_device(gpu) == "cpu"  # type: ignore[arg-type]
    _torch_has(monkeypatch, hip="7.0", gpu=False)
    assert hetero.torch_device(gpu) == "cpu"  # type: ignore[arg-type]


def test_an_intel_gpu_is_xpu_only_where_torch_has_xpu(monkeypatch: pytest.MonkeyPatch) -> None:
    gpu = Fake("oneapi", "gpu", 0)
    _torch_has(monkeypatch, xpu=True)
    assert hetero.torch_device(gpu) == "xpu:0"  # type: ignore[arg-type]
    assert hetero.torch_device(Fake("oneapi", "cpu", 0)) == "cpu"  # type: ignore[arg-type]
    _torch_has(monkeypatch, xpu=False)
    assert hetero.torch_device(gpu) == "cpu"  # type: ignore[arg-type]
    monkeypatch.delattr(torch, "xpu")  # a torch older than XPU support
    assert hetero.torch_device(gpu) == "cpu"  # type: ignore[arg-type]


def test_opencl_devices_are_never_torch_gpus(monkeypatch: pytest.MonkeyPatch) -> None:
    _torch_has(monkeypatch, cuda="12.8", gpu=True, xpu=True)
    assert hetero.torch_device(Fake("opencl", "gpu", 0)) == "cpu"  # type: ignore[arg-type]
    assert not is_gpu(Fake("opencl", "gpu", 0)) and is_gpu(Fake("oneapi", "gpu", 0))


def test_a_gpu_without_torch_installed_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(ImportError, match=r"cuda:0.*needs torch: pip install 'hetero\[torch\]'"):
        hetero.torch_device(Fake("cuda", "gpu", 0))  # type: ignore[arg-type]
    assert hetero.torch_device("cpu") == "cpu"  # no torch needed to know that


def test_the_report_form_never_imports_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    _torch_has(monkeypatch, cuda="12.8", gpu=True)
    assert loaded_torch_device(Fake("cuda", "gpu", 3)) == "cuda:3"
    assert loaded_torch_device(Fake("oneapi", "cpu", 0)) == "cpu"
    monkeypatch.delitem(sys.modules, "torch")
    assert loaded_torch_device(Fake("cuda", "gpu", 3)) is None  # no torch state can exist yet
    assert loaded_torch_device(hetero.device("cpu")) == "cpu"
    assert "torch" not in sys.modules


def test_hetero_torch_device_is_public_and_imports_no_torch() -> None:
    code = ("import sys, hetero; f = hetero.torch_device; assert 'torch' not in sys.modules; "
            "print(f('cpu')); assert 'torch' not in sys.modules; assert 'torch_device' in hetero.__all__")
    env = {**os.environ, "HETERO_DEVICE": "cpu"}
    done = subprocess.run([sys.executable, "-c", code], check=False, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "cpu"
