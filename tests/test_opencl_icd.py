"""OpenCL runtimes installed by pip are found without user set-up, and a user's own
OCL_ICD_VENDORS is respected."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import hetero
from conftest import run_python
from hetero.backends.opencl import icd as opencl_icd


def test_placeholder_library_path_is_resolved_beside_the_environment(tmp_path: Path) -> None:
    prefix = tmp_path / "env"
    vendors = prefix / "etc" / "OpenCL" / "vendors"
    vendors.mkdir(parents=True)
    (prefix / "lib").mkdir()
    (prefix / "lib" / "libfakeocl.so").write_bytes(b"")
    (vendors / "fake.icd").write_text("/opt/anaconda1anaconda2anaconda3/lib/libfakeocl.so\n")
    (vendors / "system.icd").write_text("libpocl.so.2\n")
    (vendors / "gone.icd").write_text("/nowhere/libgone.so\n")
    found = {Path(r.icd).name: r for r in opencl_icd.scan([vendors])}
    assert found["fake.icd"].resolved == str(prefix / "lib" / "libfakeocl.so")
    assert "placeholder" in found["fake.icd"].note
    assert found["system.icd"].resolved == "libpocl.so.2"
    assert found["gone.icd"].resolved is None and "not found" in found["gone.icd"].note


def test_generated_vendors_folder_holds_real_paths(tmp_path: Path) -> None:
    runtimes = [opencl_icd.Runtime("/a/x.icd", "/opt/placeholder/libx.so", "/real/libx.so"),
                opencl_icd.Runtime("/b/y.icd", "liby.so", "liby.so"),
                opencl_icd.Runtime("/c/z.icd", "/gone/libz.so", None)]
    folder = opencl_icd._write_vendors_dir(runtimes, tmp_path)
    assert sorted(p.name for p in folder.iterdir()) == ["x.icd", "y.icd"]
    assert (folder / "x.icd").read_text().strip() == "/real/libx.so"
    assert opencl_icd._write_vendors_dir(runtimes, tmp_path) == folder  # same content, same folder
    assert not [p for p in folder.parent.iterdir() if p.name.startswith(".tmp-")]  # no half-written folder left


def test_pip_installed_intel_runtime_is_visible_without_set_up() -> None:
    report = opencl_icd.prepare(hetero.get_config().cache_dir)
    intel = [r for r in report.runtimes if "intelocl" in r.library]
    if not intel:
        pytest.skip("intel-opencl-rt is not installed (pip install 'hetero[oneapi]')")
    if report.user_override:
        pytest.skip("OCL_ICD_VENDORS is set by the user")
    assert intel[0].resolved and Path(intel[0].resolved).exists()
    assert os.environ["OCL_ICD_VENDORS"] == report.vendors_dir
    assert hetero.device("oneapi").model


def test_user_ocl_icd_vendors_is_respected(tmp_path: Path) -> None:
    empty = tmp_path / "vendors"
    empty.mkdir()
    code = ("import os, json, hetero\n"
            "s = {b.name: b.available for b in hetero.backend_statuses()}\n"
            "print(json.dumps([s.get('opencl'), s.get('oneapi'), os.environ['OCL_ICD_VENDORS']]))")
    result = run_python(code, {"OCL_ICD_VENDORS": str(empty), "HETERO_GENERATED_OCL_ICD_VENDORS": ""})
    opencl_ok, oneapi_ok, value = json.loads(result.stdout)
    assert value == str(empty)
    assert opencl_ok is False and oneapi_ok is False
