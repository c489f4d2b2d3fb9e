"""A ``torch.device`` is accepted wherever hetero takes a device: ``hetero.device``, ``device=`` of
array creation, ``.to``/``.to_device``; it names the hetero device torch's would be (the inverse of
:func:`hetero.torch_device`), and torch is never imported for it."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from conftest import run_python

import hetero
from hetero.core.errors import BackendUnavailableError, DeviceNotFoundError
from hetero.core.torch_names import hetero_spec

torch = pytest.importorskip("torch")


@dataclasses.dataclass
class Fake:
    """A oneAPI device hetero may list and this machine does not have."""

    backend: str
    kind: str
    index: int

    @property
    def name(self) -> str:
        return f"{self.backend}:{self.index}"


def test_torch_cpu_is_hetero_cpu_everywhere_a_device_is_taken() -> None:
    cpu = hetero.device("cpu")
    where = torch.device("cpu")
    assert hetero.device(where) is cpu
    assert hetero.asarray([1, 2], device=where).device is cpu
    assert hetero.zeros(3, device=where).device is cpu and hetero.empty(2, device=where).device is cpu
    assert hetero.full(2, 1.5, device=where).device is cpu and hetero.arange(3, device=where).device is cpu
    assert hetero.xp.ones(2, device=where).device is cpu and hetero.xp.linspace(0, 1, 3, device=where).device is cpu
    for device in hetero.devices():
        x = hetero.asarray(np.arange(3, dtype=np.float32), device=device)
        assert x.to(where).device is cpu and x.to_device(where).device is cpu
        assert x.to(where).tolist() == [0.0, 1.0, 2.0]
        assert hetero.asarray(x, device=where).device is cpu
    assert hetero.torch_device(where) == "cpu"  # and back


def test_cuda_names_hetero_cuda_or_rocm_as_this_torch_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    assert hetero_spec(torch.device("cuda", 1), list) == "cuda:1"
    assert hetero_spec(torch.device("cuda"), list) == "cuda"  # torch's current GPU: hetero's first
    monkeypatch.setattr(torch.version, "hip", "7.0")  # a ROCm build names AMD GPUs "cuda"
    assert hetero_spec(torch.device("cuda", 1), list) == "rocm:1"
    monkeypatch.undo()
    if "cuda" not in [d.backend for d in hetero.devices()]:
        with pytest.raises((BackendUnavailableError, DeviceNotFoundError), match="cuda"):
            hetero.device(torch.device("cuda", 0))


def test_xpu_names_the_intel_gpu_torch_calls_xpu() -> None:
    listed = [Fake("oneapi", "cpu", 0), Fake("oneapi", "gpu", 1), Fake("oneapi", "gpu", 2)]
    assert hetero_spec(torch.device("xpu", 2), lambda: listed) == "oneapi:2"
    assert hetero_spec(torch.device("xpu"), lambda: listed) == "oneapi:1"  # the first Intel GPU
    with pytest.raises(DeviceNotFoundError, match=r"xpu:0.*Intel GPU.*oneapi:1, oneapi:2"):
        hetero_spec(torch.device("xpu", 0), lambda: listed)  # oneapi:0 is a CPU: torch runs there as "cpu"
    if not any(d.backend == "oneapi" and str(d.kind) == "gpu" for d in hetero.devices()):
        with pytest.raises(DeviceNotFoundError, match="xpu"):
            hetero.device(torch.device("xpu"))


def test_a_torch_device_hetero_has_no_counterpart_for_is_refused() -> None:
    for where in (torch.device("meta"), torch.device("mps")):
        with pytest.raises(DeviceNotFoundError, match=f"torch device '{where.type}'"):
            hetero.device(where)
    with pytest.raises(TypeError, match="device spec must be"):
        hetero.device(3.5)  # type: ignore[arg-type]


def test_torch_is_never_imported_for_a_device() -> None:
    """Recognised by its type's module and name, and read through ``.type`` and ``.index``."""
    run_python(
        "import sys, hetero\n"
        "class device:\n"
        "    type, index = 'cpu', None\n"
        "device.__module__ = 'torch'\n"
        "assert hetero.device(device()) is hetero.device('cpu')\n"
        "assert hetero.zeros(2, device=device()).device.name == 'cpu'\n"
        "assert 'torch' not in sys.modules, 'torch was imported'\n"
    )
