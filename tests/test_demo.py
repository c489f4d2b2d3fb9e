"""`make demo` on a fresh machine: its devices must be ones pip alone brings (cpu and Intel's OpenCL
CPU runtime, oneapi:0), with more used where present. CI runs the demo itself, without and with
PoCL (.ci/run); this checks cheaply what the demo names against what such a machine has."""

from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest
from conftest import ROOT, run_python

import hetero


def demo_commands() -> list[list[str]]:
    done = subprocess.run(["make", "-n", "demo", "VENV=.venv"], cwd=ROOT, capture_output=True, text=True,
                          timeout=60, check=True)
    lines = done.stdout.replace("\\\n", " ").splitlines()  # a recipe's continued lines as one
    return [shlex.split(line) for line in lines if re.search(r"\bhetero-run\b", line)]


def without_system_icds(tmp_path: Path, code: str) -> str:
    """Run ``code`` as on a machine without PoCL: the system's OpenCL ICD folder replaced by an empty one."""
    empty = tmp_path / "no-icds"
    empty.mkdir()
    return run_python(code, env={"OPENCL_VENDOR_PATH": str(empty), "OCL_ICD_VENDORS": ""}).stdout


def test_hiding_the_system_icds_hides_pocl_and_keeps_intels_pip_runtime(tmp_path: Path) -> None:
    if not any(d.backend == "oneapi" for d in hetero.devices()):
        pytest.skip("Intel's OpenCL runtime (pip) is not installed here")
    names = without_system_icds(tmp_path, "import hetero; print(' '.join(d.name for d in hetero.devices()))").split()
    assert "cpu" in names and "oneapi:0" in names
    assert not [n for n in names if n.startswith("opencl:")]


def test_the_demo_runs_on_the_devices_pip_alone_brings(tmp_path: Path) -> None:
    runs = demo_commands()
    assert len(runs) == 2, runs
    specs = {argv[argv.index("--devices") + 1] for argv in runs if "--devices" in argv} or {"auto"}
    for spec in specs:
        code = ("from hetero.launcher.assign import candidate_devices; "
                f"print(' '.join(d.name for d in candidate_devices({spec!r})))")
        names = without_system_icds(tmp_path, code).split()
        assert names[0] == "cpu", f"--devices {spec}: the crash and hang rules fire on cpu, so it must come first"
        assert len(names) >= 2, f"--devices {spec}: a restart needs a second device on a machine with only {names}"
