"""What `pip install hetero` gives a newcomer: the sdist and wheel as built from this tree, and a fresh virtual
environment with the base dependencies only, on every Python the project declares and this machine has.

The sdist is built from the tree and the wheel from the unpacked sdist, as `python -m build` does, so
a file the sdist forgets fails here. The fresh environments install the wheel with its declared
dependencies (numpy, pyyaml, Numba, rich, shtab) and nothing else: the cpu device must run an array
operation there, and the 3.10 interpreter must import what once needed 3.11 (`typing.Self`).
"""

from __future__ import annotations

import email.parser
import glob
import json
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest
import tomllib
from conftest import run_python

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
# What the sdist's own test run needs besides the test files themselves.
TEST_SUPPORT = ["tests/conftest.py", "tests/fakes/fake_device.py", "tests/array_api_xfails.txt", "tests/plugins"]


@pytest.fixture(scope="module")
def dists(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The sdist built from the tree, and the wheel built from the unpacked sdist."""
    if not (ROOT / "pyproject.toml").is_file() or not (ROOT / "hetero").is_dir():
        pytest.skip("not a source tree")
    out = tmp_path_factory.mktemp("dist")
    build = "from setuptools import build_meta as b, sys; print(b.{}(sys.argv[1]))"
    run = subprocess.run([sys.executable, "-c", build.format("build_sdist").replace(", sys", "; import sys"),
                          str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    sdist = out / run.stdout.strip().splitlines()[-1]
    unpacked = tmp_path_factory.mktemp("sdist")
    with tarfile.open(sdist) as tar:
        tar.extractall(unpacked, filter="data")
    src = next(unpacked.iterdir())
    run = subprocess.run([sys.executable, "-c", build.format("build_wheel").replace(", sys", "; import sys"),
                          str(out)], cwd=src, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return {"sdist": sdist, "src": src, "wheel": out / run.stdout.strip().splitlines()[-1]}


def _tracked(folder: str) -> set[str]:
    """The files under ``folder`` that belong to the project (no caches)."""
    base = ROOT / folder
    return {str(p.relative_to(ROOT)) for p in base.rglob("*")
            if p.is_file() and "__pycache__" not in p.parts and ".hypothesis" not in p.parts
            and p.suffix not in (".pyc", ".pyo")}


def test_the_sdist_carries_its_tests_with_their_support_files_and_the_license(dists: dict[str, Path]) -> None:
    src = dists["src"]
    shipped = {str(p.relative_to(src)) for p in src.rglob("*") if p.is_file()}
    missing = sorted(_tracked("tests") - shipped)
    assert not missing, f"the sdist lacks {len(missing)} test files, e.g. {missing[:5]}"
    for name in ["LICENSE", "Makefile", *TEST_SUPPORT[:3]]:
        assert name in shipped, name
    assert any(name.startswith("tests/plugins/") for name in shipped)
    assert "Apache License" in (src / "LICENSE").read_text()


def test_the_wheel_has_every_module_the_license_and_the_metadata(dists: dict[str, Path]) -> None:
    with zipfile.ZipFile(dists["wheel"]) as wheel:
        names = set(wheel.namelist())
        info = next(n.split("/")[0] for n in names if n.endswith(".dist-info/METADATA"))
        meta = email.parser.Parser().parsestr(wheel.read(f"{info}/METADATA").decode())
    assert f"{info}/licenses/LICENSE" in names
    assert "hetero/py.typed" in names
    for top, installed in [("hetero", "hetero"), ("backends", "hetero/backends"), ("compiler", "hetero/compiler"),
                           ("scheduler", "hetero/scheduler"), ("fault", "hetero/fault")]:
        sources = {installed + name[len(top):] for name in _tracked(top) if name.endswith(".py")
                   and not Path(ROOT / name).is_symlink()}
        if top == "hetero":  # the links to the top-level folders are listed under their own names
            sources = {s for s in sources if not s.startswith(("hetero/backends/", "hetero/compiler/",
                                                                "hetero/scheduler/", "hetero/fault/"))}
        missing = sorted(sources - names)
        assert not missing, f"the wheel lacks {missing[:5]}"
    assert meta["License-Expression"] == "Apache-2.0"
    assert meta["Requires-Python"] == PYPROJECT["project"]["requires-python"]
    assert any(url.startswith("Source, ") for url in meta.get_all("Project-URL"))
    assert "Typing :: Typed" in meta.get_all("Classifier")
    # development tools are a dependency group, never a published extra
    assert "dev" not in (meta.get_all("Provides-Extra") or [])
    base = [r for r in meta.get_all("Requires-Dist") if "extra ==" not in r]
    assert any(r.startswith("numba") for r in base), base


def _interpreters() -> list[object]:
    """This interpreter's base Python, and every older declared minor version this machine has."""
    found = [pytest.param(getattr(sys, "_base_executable", sys.executable), id="py%d.%d" % sys.version_info[:2])]
    lowest = tuple(int(p) for p in PYPROJECT["project"]["requires-python"].lstrip(">=").split("."))
    for minor in range(lowest[1], sys.version_info.minor):
        candidates = [*sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{lowest[0]}.{minor}.*/bin/python3"))),
                      shutil.which(f"python{lowest[0]}.{minor}")]
        found += [pytest.param(c, id=f"py{lowest[0]}.{minor}") for c in candidates if c and _runs(c)][:1]
    return found


def _runs(python: str) -> bool:
    """Whether ``python`` starts and has venv (a pyenv shim for a version not selected does not)."""
    try:
        return subprocess.run([python, "-c", "import venv, ensurepip"], capture_output=True, timeout=60).returncode == 0
    except OSError:
        return False


@pytest.mark.parametrize("python", _interpreters())
def test_a_fresh_environment_with_the_base_dependencies_runs_arrays_on_the_cpu(
        dists: dict[str, Path], python: str, tmp_path: Path) -> None:
    env_dir = tmp_path / "venv"
    subprocess.run([python, "-m", "venv", str(env_dir)], check=True, timeout=120)
    py = env_dir / "bin" / "python"
    reach = subprocess.run([str(py), "-m", "pip", "download", "-q", "--no-deps", "-d", str(tmp_path / "probe"),
                            "pyyaml"], capture_output=True, text=True, timeout=300)
    if reach.returncode:
        pytest.skip(f"no package index reachable for the base dependencies: {reach.stderr.strip()[-200:]}")
    install = subprocess.run([str(py), "-m", "pip", "install", "-q", str(dists["wheel"])],
                             capture_output=True, text=True, timeout=900)
    assert install.returncode == 0, install.stderr[-3000:]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "HETERO_"))}
    env.update(HETERO_CACHE_DIR=str(tmp_path / "cache"), HETERO_STATE_DIR=str(tmp_path / "state"))
    script = (
        "import numpy as np, hetero, hetero.scheduler as scheduler\n"
        "assert hetero.__file__.startswith(%r), hetero.__file__\n"
        "x = hetero.arange(6, dtype='float32', device='cpu')\n"
        "print('sum', float(np.asarray((x * 2 + 1).sum())))\n"
        "with hetero.Stream(hetero.device('cpu')):\n"
        "    pass\n"
        "with scheduler.task('first-hour', quota={'cpu': '64 MiB'}):\n"
        "    print('quota ok')\n"
    ) % str(env_dir)
    run = subprocess.run([str(py), "-c", script], capture_output=True, text=True, timeout=300, env=env,
                         cwd=tmp_path)
    assert run.returncode == 0, run.stderr[-3000:]
    assert "sum 36.0" in run.stdout and "quota ok" in run.stdout
    devices = subprocess.run([str(env_dir / "bin" / "hetero"), "devices"], capture_output=True, text=True,
                             timeout=120, env=env)
    assert devices.returncode == 0, devices.stderr
    assert "cpu" in devices.stdout


def test_without_numba_the_cpu_device_is_unavailable_with_the_remedy() -> None:
    """Installed with --no-deps, or Numba removed: `cpu` is not listed as `ok` with kernels that fail."""
    code = ("import sys, json; sys.modules['numba'] = None\n"
            "import hetero\n"
            "status = next(s for s in hetero.backend_statuses() if s.name == 'cpu')\n"
            "print(json.dumps([status.available, status.reason, status.remedy, [d.name for d in hetero.devices()]]))")
    available, reason, remedy, names = json.loads(run_python(code).stdout)
    assert not available and "cpu" not in names
    assert "Numba" in reason and "pip install numba" in remedy
