"""The package installs as designed: one ``hetero`` namespace, typed, plugins by entry point,
and ``import hetero`` loads no vendor library."""

from __future__ import annotations

import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT, run_python

VENDOR_MODULES = ("pyopencl", "cupy", "cupy_backends", "numba", "llvmlite", "torch", "pynvml", "onnxruntime")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    result = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(ROOT)],
        capture_output=True, text=True, timeout=600,
    )
    if result.returncode != 0:
        pytest.fail(f"building the wheel failed:\n{result.stdout}\n{result.stderr}")
    (built,) = out.glob("hetero-*.whl")
    return built


def test_wheel_installs_everything_under_the_hetero_namespace(wheel: Path) -> None:
    names = zipfile.ZipFile(wheel).namelist()
    top = {name.split("/")[0] for name in names}
    assert {t for t in top if not t.endswith(".dist-info")} == {"hetero"}, top
    for module in ("hetero/__init__.py", "hetero/py.typed", "hetero/backends/cpu/backend.py", "hetero/backends/opencl/generic.py",
                   "hetero/backends/opencl/oneapi.py", "hetero/backends/cupy/cuda.py", "hetero/backends/cupy/rocm.py",
                   "hetero/compiler/__init__.py", "hetero/scheduler/__init__.py", "hetero/fault/__init__.py"):
        assert module in names, f"{module} missing from the wheel"
    assert not any(name.startswith(("backends/", "compiler/", "scheduler/", "fault/")) for name in names)


def test_wheel_registers_builtin_backends_as_entry_points(wheel: Path) -> None:
    archive = zipfile.ZipFile(wheel)
    (entry_points,) = [n for n in archive.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = archive.read(entry_points).decode()
    section = text.split("[hetero.backends]")[1].split("[")[0]
    registered = {line.split("=")[0].strip() for line in section.strip().splitlines()}
    assert registered == {"cpu", "opencl", "oneapi", "cuda", "rocm"}
    assert "hetero = hetero.cli.main:main" in text


def test_import_hetero_loads_no_vendor_library() -> None:
    code = f"import sys, json, hetero; print(json.dumps([m for m in {VENDOR_MODULES!r} if m in sys.modules]))"
    loaded = json.loads(run_python(code).stdout)
    assert loaded == [], f"import hetero imported vendor libraries: {loaded}"


def test_listing_cpu_devices_loads_no_gpu_library() -> None:
    code = ("import sys, json, hetero; hetero.device('cpu'); "
            f"print(json.dumps([m for m in {VENDOR_MODULES!r} if m in sys.modules]))")
    assert json.loads(run_python(code).stdout) == []
