"""Small things users read (issue 12, item 17): a CPU OpenCL device reports its silicon's
vendor, the ROCm extra installs the current CuPy, help text is plain, quota errors show
human sizes, and a misspelt keyword to ``hetero.device()`` gets a did-you-mean."""

from __future__ import annotations

import subprocess
import sys
import tomllib
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from conftest import ROOT

import hetero
from hetero.backends import host
from hetero.core.errors import QuotaExceeded

AMD_CPUINFO = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model name\t: AMD EPYC 7763 64-Core Processor
"""


class _FakeCL:
    """Just what ``opencl_runtime._info`` reads of PyOpenCL."""

    device_type = SimpleNamespace(GPU=4, ACCELERATOR=8, CPU=2)


def _device(name: str, vendor: str, vendor_id: int, kind: int) -> Any:
    return SimpleNamespace(name=name, vendor=vendor, vendor_id=vendor_id, type=kind, driver_version="3.1",
                           global_mem_size=1 << 30, local_mem_size=64 << 10, max_compute_units=4, max_work_group_size=1024,
                           double_fp_config=1, version="OpenCL 3.0 PoCL")


_POCL = SimpleNamespace(name="Portable Computing Language", vendor="The pocl project", version="OpenCL 3.0 PoCL 3.1")


@pytest.mark.parametrize("device_name", ["pthread-znver3-AMD EPYC 7763 64-Core Processor", "cpu", "pthread-generic"])
def test_a_cpu_opencl_device_reports_the_silicons_vendor(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         device_name: str) -> None:
    from hetero.backends.opencl.runtime import _info

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(AMD_CPUINFO)
    monkeypatch.setattr(host, "CPUINFO", cpuinfo)
    # PoCL on an AMD EPYC host: the runtime's vendor fields say Intel (vendor id 0x8086).
    info = _info(_FakeCL, "opencl", 0, _POCL, _device(device_name, "GenuineIntel", 0x8086, 2))  # type: ignore[arg-type]
    assert info.vendor == "AMD"


def test_a_gpu_keeps_the_vendor_its_id_says(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.backends.opencl.runtime import _info

    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(AMD_CPUINFO)
    monkeypatch.setattr(host, "CPUINFO", cpuinfo)
    gpu = _device("Intel(R) Arc(TM) A770", "Intel(R) Corporation", 0x8086, 4)
    assert _info(_FakeCL, "oneapi", 0, _POCL, gpu).vendor == "Intel"  # type: ignore[arg-type]


@pytest.mark.parametrize(("text", "vendor"), [
    (AMD_CPUINFO, "AMD"),
    ("vendor_id\t: GenuineIntel\nmodel name\t: Intel(R) Xeon(R) Platinum 8480+\n", "Intel"),
    ("processor\t: 0\nCPU implementer\t: 0x41\nCPU part\t: 0xd0c\n", "Arm"),
    ("processor\t: 0\nCPU implementer\t: 0xc0\n", "Ampere"),
])
def test_the_host_cpu_vendor_comes_from_cpuinfo(tmp_path: Path, text: str, vendor: str) -> None:
    cpuinfo = tmp_path / "cpuinfo"
    cpuinfo.write_text(text)
    assert host.cpu_vendor_and_model(cpuinfo)[0] == vendor


def test_the_rocm_extra_installs_the_current_cupy_wheel() -> None:
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert any(req.startswith("cupy-rocm-7-0>=14") for req in extras["rocm"]), extras["rocm"]
    assert not any("cupy-rocm-5-0" in req for req in extras["rocm"])


def test_the_rocm_cupy_distributions_are_recognised(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.backends.cupy import discovery as cuda_discovery

    for name in ("cupy-rocm-7-0", "cupy-rocm-6-0", "cupy-rocm-5-0"):
        site = tmp_path / name
        (site / "cupy").mkdir(parents=True)
        (site / "cupy" / "__init__.py").write_text("")
        (site / f"{name.replace('-', '_')}-14.2.0.dist-info").mkdir()
        (site / f"{name.replace('-', '_')}-14.2.0.dist-info" / "METADATA").write_text(f"Name: {name}\nVersion: 14.2.0\n")
        found = cuda_discovery._distribution(str(site / "cupy" / "__init__.py"))
        assert found == (name, "14.2.0")
        assert cuda_discovery.built_for(found[0]) == "rocm"


def test_calibrate_help_is_plain_text() -> None:
    result = subprocess.run([sys.executable, "-m", "hetero.cli.main", "calibrate", "--help"], capture_output=True, text=True,
                            cwd=ROOT, timeout=120, check=True)
    assert "``" not in result.stdout and ":func:" not in result.stdout, result.stdout
    assert "hetero calibrate" in result.stdout and "costs.json" in result.stdout


def test_quota_exceeded_prints_human_sizes() -> None:
    error = QuotaExceeded("cuda:0", "train", 1 << 30, 512 << 20, 1610612736)
    text = str(error)
    # Exact bytes first (existing messages and scripts match them), the human size beside each.
    assert "allocating 1610612736 bytes (1.5 GiB)" in text and "quota of 1073741824 bytes (1 GiB)" in text, text
    assert "536870912 bytes in use, 512 MiB" in text, text


@pytest.mark.parametrize(("keyword", "suggestion"), [("polcy", "policy"), ("memroy", "memory"), ("kind", "kinds")])
def test_a_misspelt_keyword_to_device_gets_a_did_you_mean(keyword: str, suggestion: str) -> None:
    with pytest.raises(hetero.HeteroError, match=f"{keyword!r}.*did you mean {suggestion!r}") as info:
        hetero.device("auto", **{keyword: "x"})
    assert isinstance(info.value, TypeError)  # still what Python raises for a bad keyword
    assert "policy" in str(info.value) and "memory" in str(info.value)  # the valid ones are listed
    with pytest.raises(hetero.HeteroError, match="did you mean"):
        hetero.scheduler.explain(**{keyword: "x"})
