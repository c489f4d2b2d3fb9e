"""The cuda/rocm checks made before importing CuPy (its build told by its distribution's name, the
NVIDIA driver library): the same distinct reasons as after an import, and no import of CuPy
where they settle the answer."""

from __future__ import annotations

import ctypes
import subprocess
import sys
from pathlib import Path

import pytest

from hetero.backends.cupy import discovery as cuda_discovery
from hetero.backends.cupy.discovery import precheck
from hetero.core.errors import BackendUnavailableError


def fake_site(tmp_path: Path, distribution: str, version: str = "14.0.0") -> Path:
    """A site-packages folder holding a ``cupy`` package (that must not be imported) and one
    distribution's metadata."""
    (tmp_path / "cupy").mkdir()
    (tmp_path / "cupy" / "__init__.py").write_text("raise AssertionError('precheck imported CuPy')\n")
    info = tmp_path / f"{distribution.replace('-', '_')}-{version}.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {distribution}\nVersion: {version}\n")
    return tmp_path


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    def install(distribution: str) -> None:
        monkeypatch.delitem(sys.modules, "cupy", raising=False)
        monkeypatch.syspath_prepend(str(fake_site(tmp_path, distribution)))
    return install


def test_a_rocm_build_is_not_the_cuda_backend(site) -> None:  # type: ignore[no-untyped-def]
    site("cupy-rocm-6-0")
    with pytest.raises(BackendUnavailableError) as caught:
        precheck("cuda", "hint")
    assert "CuPy 14.0.0 (cupy-rocm-6-0) is built for ROCm" in caught.value.reason
    assert "'rocm' backend" in caught.value.reason
    precheck("rocm", "hint")  # the right build: only importing it tells more


def test_a_cuda_build_is_not_the_rocm_backend(site) -> None:  # type: ignore[no-untyped-def]
    site("cupy-cuda12x")
    with pytest.raises(BackendUnavailableError) as caught:
        precheck("rocm", "hint")
    assert "built for CUDA" in caught.value.reason and "'cuda' backend" in caught.value.reason


def test_a_build_whose_name_does_not_say_is_left_to_the_import(site) -> None:  # type: ignore[no-untyped-def]
    site("cupy")  # built from source
    precheck("cuda", "hint")
    precheck("rocm", "hint")


def test_no_driver_library(site, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    site("cupy-cuda13x")

    def no_library(name: str) -> None:
        raise OSError(f"{name}: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(cuda_discovery.ctypes, "CDLL", no_library)
    with pytest.raises(BackendUnavailableError) as caught:
        precheck("cuda", "hint")
    assert "no NVIDIA driver found (libcuda.so.1: cannot open" in caught.value.reason
    assert "cudaErrorInsufficientDriver" in caught.value.reason and "nvidia-smi" in caught.value.remedy


def test_no_cupy(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delitem(sys.modules, "cupy", raising=False)
    monkeypatch.setattr(cuda_discovery.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(BackendUnavailableError, match="CuPy is not installed"):
        precheck("cuda", "hint")


def test_listing_devices_here_does_not_import_cupy_without_a_driver() -> None:
    try:
        ctypes.CDLL("libcuda.so.1")
        pytest.skip("an NVIDIA driver library is present: CuPy is imported to ask it")
    except OSError:
        pass
    code = "import sys, hetero; hetero.devices(); print('cupy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
