"""Finding CUDA/ROCm devices: each reason a backend is unavailable is distinct and says the remedy
(checked on this machine's real state: CuPy installed, no driver; and with CuPy's import or its
runtime replaced), and device descriptors are built from CUDA/HIP property dicts."""

from __future__ import annotations

import contextlib
import io
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from hetero.backends.cupy import discovery as cuda_discovery
from hetero.backends.cupy.discovery import device_info, open_cupy, stable_id
from hetero.core.errors import BackendUnavailableError
from hetero.core.registry import backend_status

runtime_api = pytest.importorskip("cupy_backends.cuda.api.runtime", reason="CuPy is not installed")

H200 = {"name": b"NVIDIA H200", "totalGlobalMem": 150_000_000_000, "multiProcessorCount": 132,
        "maxThreadsPerBlock": 1024, "major": 9, "minor": 0, "uuid": bytes.fromhex("2f0e9c4e5a1b4c3d9e8f0123456789ab"),
        "pciDomainID": 0, "pciBusID": 0x19, "pciDeviceID": 0, "clockRate": 1980000, "ECCEnabled": 1}
MI300 = {"name": b"AMD Instinct MI300X", "totalGlobalMem": 192 << 30, "multiProcessorCount": 304,
         "maxThreadsPerBlock": 1024, "major": 9, "minor": 4, "gcnArchName": b"gfx942:sramecc+:xnack-",
         "uuid": b"", "pciDomainID": 0, "pciBusID": 0x83, "pciDeviceID": 0}


def fake_cupy(*, is_hip: bool = False, driver: int = 13000, count: int | Exception = 1,
              props: dict[str, Any] | None = None) -> Any:
    """CuPy with a scripted runtime (its error class is CuPy's real one)."""
    def device_count() -> int:
        if isinstance(count, Exception):
            raise count
        return count

    runtime = types.SimpleNamespace(
        is_hip=is_hip, CUDARuntimeError=runtime_api.CUDARuntimeError, runtimeGetVersion=lambda: 13020,
        driverGetVersion=lambda: driver, getDeviceCount=device_count,
        getDeviceProperties=lambda index: dict(props or H200))
    cuda = types.SimpleNamespace(runtime=runtime, Device=lambda index: contextlib.nullcontext(),
                                 driver=types.SimpleNamespace(CUDADriverError=RuntimeError),
                                 memory=types.SimpleNamespace(OutOfMemoryError=MemoryError),
                                 nvrtc=types.SimpleNamespace(getVersion=lambda: (13, 2)))
    return types.SimpleNamespace(__version__="14.2.0", cuda=cuda)


def unavailable(monkeypatch: pytest.MonkeyPatch, backend: str = "cuda", **kwargs: Any) -> BackendUnavailableError:
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(**kwargs))
    with pytest.raises(BackendUnavailableError) as caught:
        open_cupy(backend, "install hint")
    return caught.value


def test_this_machine_cupy_without_a_driver() -> None:
    status = backend_status("cuda")
    if status.available:
        pytest.skip("a CUDA GPU is present")
    assert "no NVIDIA driver found" in status.reason and "cudaErrorInsufficientDriver" in status.reason
    assert "install the GPU driver" in status.remedy
    rocm = backend_status("rocm")
    assert "built for CUDA" in rocm.reason and "'cuda' backend" in rocm.reason


def test_no_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(BackendUnavailableError) as caught:
        open_cupy("cuda", "pip install 'hetero[cuda]'")
    assert "CuPy is not installed" in caught.value.reason and caught.value.remedy == "pip install 'hetero[cuda]'"


def test_a_broken_cupy_install(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text("raise OSError('libnvrtc.so.13: cannot open shared object file')\n")
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(BackendUnavailableError) as caught:
        open_cupy("cuda", "hint")
    assert "CuPy failed to import: OSError: libnvrtc.so.13" in caught.value.reason
    assert "reinstall CuPy" in caught.value.remedy


def test_no_driver(monkeypatch: pytest.MonkeyPatch) -> None:
    error = unavailable(monkeypatch, driver=0, count=runtime_api.CUDARuntimeError(35))
    assert "no NVIDIA driver found (libcuda.so.1 is missing)" in error.reason and "nvidia-smi" in error.remedy


def test_a_driver_too_old_for_cupys_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    error = unavailable(monkeypatch, driver=12040, count=runtime_api.CUDARuntimeError(35))
    assert "supports CUDA 12.4, too old" in error.reason and "runtime 13.2" in error.reason
    assert "pip install cupy-cuda12x" in error.remedy


@pytest.mark.parametrize("count", [0, runtime_api.CUDARuntimeError(100)], ids=["zero", "cudaErrorNoDevice"])
def test_no_devices(monkeypatch: pytest.MonkeyPatch, count: Any) -> None:
    error = unavailable(monkeypatch, count=count)
    assert "sees no GPU" in error.reason and "CUDA_VISIBLE_DEVICES" in error.remedy


def test_another_runtime_failure_keeps_cupys_message(monkeypatch: pytest.MonkeyPatch) -> None:
    error = unavailable(monkeypatch, count=runtime_api.CUDARuntimeError(3))
    assert "cudaErrorInitializationError" in error.reason and "nvidia-smi" in error.remedy


@pytest.mark.parametrize("backend,is_hip,built", [("rocm", False, "CUDA"), ("cuda", True, "ROCm")])
def test_cupy_built_for_the_other_vendor(monkeypatch: pytest.MonkeyPatch, backend: str, is_hip: bool, built: str) -> None:
    error = unavailable(monkeypatch, backend, is_hip=is_hip)
    assert f"built for {built}" in error.reason


def test_each_reason_is_distinct(monkeypatch: pytest.MonkeyPatch) -> None:
    reasons = {unavailable(monkeypatch, driver=0, count=runtime_api.CUDARuntimeError(35)).reason,
               unavailable(monkeypatch, driver=12040, count=runtime_api.CUDARuntimeError(35)).reason,
               unavailable(monkeypatch, count=0).reason, unavailable(monkeypatch, "rocm").reason}
    monkeypatch.setitem(sys.modules, "cupy", None)
    with pytest.raises(BackendUnavailableError) as caught:
        open_cupy("cuda", "hint")
    assert len(reasons | {caught.value.reason}) == 5


def test_devices_all_shows_the_reason_and_remedy() -> None:
    from hetero.cli.main import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["devices", "--all"]) == 0
    status = backend_status("cuda")
    if not status.available:
        assert f"cuda: {status.reason}" in out.getvalue() and status.remedy in out.getvalue()


# -- descriptors --------------------------------------------------------------------------
def test_a_cuda_device_descriptor() -> None:
    info = device_info("cuda", 0, H200, {"driver": "13.0", "runtime": "13.2", "cupy": "14.2.0"})
    assert (info.name, info.model, info.vendor, info.compute_units) == ("cuda:0", "NVIDIA H200", "NVIDIA", 132)
    assert info.stable_id == "2f0e9c4e-5a1b-4c3d-9e8f-0123456789ab" and info.memory == 150_000_000_000
    assert info.extra["arch"] == "sm_90" and info.extra["compute_capability"] == "9.0"
    assert info.extra["pci_bus_id"] == "0000:19:00.0" and info.extra["runtime_version"] == "13.2"
    assert info.driver_version == "13.0" and info.extra["ecc_enabled"] == "true"


def test_a_rocm_device_descriptor_and_a_missing_uuid() -> None:
    info = device_info("rocm", 1, MI300, {"driver": "6.2"})
    assert info.vendor == "AMD" and info.extra["arch"] == "gfx942:sramecc+:xnack-"
    assert info.stable_id == "rocm-pci-0000:83:00.0" and info.model == "AMD Instinct MI300X"
    assert stable_id("cuda", {**H200, "uuid": bytes(16)}) == "cuda-pci-0000:19:00.0"


def test_the_backend_lists_devices_from_the_runtime(monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.backends.cupy.runtime import CuPyBackend

    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(count=2))
    backend = CuPyBackend("cuda", "hint")
    devices = backend.devices()
    assert [d.info.name for d in devices] == ["cuda:0", "cuda:1"]
    assert all(len(d.peer_ids) == 2 for d in devices)  # type: ignore[attr-defined]  # one NVML listener for all
    assert devices[0].kernel_target().arch == "sm_90"  # type: ignore[union-attr]
    diagnostics = backend.diagnostics()
    assert diagnostics["driver"] == "13.0" and diagnostics["runtime"] == "13.2" and diagnostics["nvrtc"]


def test_version_text() -> None:
    assert cuda_discovery.version_text(13020) == "13.2" and cuda_discovery.version_text(0) == "none"
