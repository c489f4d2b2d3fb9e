"""Test set-up: one test per device (or device pair) the machine has, and a private cache dir.

Tests that take a ``device`` or ``device_pair`` argument are generated for every
device ``hetero.devices()`` lists here, so the same suite runs on a laptop's CPU
and on a GPU node. CI fails early when fewer devices appear than the machine
should have (see .ci/run), so a lost runtime cannot shrink the run quietly.
"""

from __future__ import annotations

import itertools
import subprocess
import os
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("HETERO_CACHE_DIR", tempfile.mkdtemp(prefix="hetero-test-cache-"))
# scikit-learn's array API dispatch (tests/test_sklearn_xp.py) needs this before SciPy is first imported
os.environ.setdefault("SCIPY_ARRAY_API", "1")

import hetero  # noqa: E402  (after the cache dir is set)

ROOT = Path(__file__).resolve().parent.parent
PLUGINS = Path(__file__).resolve().parent / "plugins"
DEVICE_NAMES = [d.name for d in hetero.devices()]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "device" in metafunc.fixturenames:
        metafunc.parametrize("device", DEVICE_NAMES, indirect=True)
    if "opencl_device_fixture" in metafunc.fixturenames:
        opencl = [d.name for d in hetero.devices() if d.backend in ("oneapi", "opencl")]
        metafunc.parametrize("opencl_device_fixture", opencl, indirect=True)
    if "device_pair" in metafunc.fixturenames:
        pairs = list(itertools.product(DEVICE_NAMES, repeat=2))
        metafunc.parametrize("device_pair", pairs, ids=[f"{a}->{b}" for a, b in pairs], indirect=True)


@pytest.fixture
def device(request: pytest.FixtureRequest) -> hetero.Device:
    return hetero.device(request.param)


@pytest.fixture
def opencl_device_fixture(request: pytest.FixtureRequest) -> hetero.Device:
    """One OpenCL device (oneapi or opencl backend) per test; none here means the test is skipped."""
    return hetero.device(request.param)


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A private ``HETERO_STATE_DIR`` (quarantine, cost model, runs): tests never touch the user's."""
    path = tmp_path / "state"
    monkeypatch.setenv("HETERO_STATE_DIR", str(path))
    hetero.reload_config()
    yield path
    monkeypatch.undo()
    hetero.reload_config()


@pytest.fixture(autouse=True)
def _drill_quarantine_ends_with_the_test() -> Iterator[None]:
    """A test is a drill: devices its injected faults quarantined (kept in this process's memory)
    are released when it ends, as they are when a drill's process exits."""
    yield
    from hetero.fault import quarantine

    quarantine.forget_drill()


@pytest.fixture(autouse=True, scope="session")
def _no_unfired_rule_report_at_the_runners_exit() -> Iterator[None]:
    """Rules configured by tests (HETERO_FAULTS) that never fired would be reported when pytest's
    interpreter exits, onto a log stream pytest has closed; the exit report is tested in subprocesses."""
    yield
    from hetero.fault import injection_report

    for injection in injection_report.watched():
        injection_report.forget(injection)


@pytest.fixture
def device_pair(request: pytest.FixtureRequest) -> tuple[hetero.Device, hetero.Device]:
    a, b = request.param
    return hetero.device(a), hetero.device(b)


def run_python(code: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run ``code`` in a fresh interpreter (for what only a new process shows: imports, env)."""

    full_env = {**os.environ, **(env or {})}
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=300)
    if check and result.returncode != 0:
        raise AssertionError(f"subprocess failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="module")
def deterministic_torch() -> Iterator[None]:
    """One torch thread and deterministic algorithms for a module's tests, then as before (use it
    with ``pytest.mark.usefixtures``, after ``pytest.importorskip("torch")``)."""
    import torch

    threads, deterministic = torch.get_num_threads(), torch.are_deterministic_algorithms_enabled()
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    yield
    torch.use_deterministic_algorithms(deterministic)
    torch.set_num_threads(threads)
