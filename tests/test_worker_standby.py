"""Warm standby workers: a pre-started interpreter takes a launch request's command, environment
and directory, behaves like a fresh worker, and never outlives its supervisor's pipe."""

from __future__ import annotations

import json
import os
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from hetero.launcher.worker_main import WarmStandby
from hetero.fault.protocol import FAULT_EXIT_CODE

PROBE = """
    import json, os, sys
    early = {m: m in sys.modules for m in ("pyopencl", "numba", "cupy", "torch", "colorsys")}
    import hetero
    print(json.dumps({"name": __name__, "argv": sys.argv, "cwd": os.getcwd(), "tag": os.environ.get("TAG"),
                      "device": hetero.device().name, "early": early, "stdin": sys.stdin.read()}))
    sys.exit(int(os.environ.get("EXIT", "0")))
"""


@pytest.fixture
def spares() -> Iterator[list[WarmStandby]]:
    made: list[WarmStandby] = []
    yield made
    for spare in made:
        spare.close()


def _standby(spares: list[WarmStandby], env: dict[str, str], **kwargs: object) -> WarmStandby:
    spare = WarmStandby(env=env, **kwargs)  # type: ignore[arg-type]
    spares.append(spare)
    return spare


def _script(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "job" / "train.py"
    path.parent.mkdir(exist_ok=True)
    path.write_text(textwrap.dedent(body))
    return path


def test_a_standby_runs_the_request_with_its_environment_and_directory_and_no_early_vendor_library(tmp_path: Path, spares: list[WarmStandby],
                                                                             capfd: pytest.CaptureFixture[str]) -> None:
    script = _script(tmp_path, PROBE)
    base = {**os.environ, "HETERO_DEVICE": "cpu"}
    spare = _standby(spares, base, preload=("colorsys",))
    request = {**base, "TAG": "t", "HETERO_DEVICE": "oneapi:0", "EXIT": "5"}
    proc = spare.activate([str(script), "a"], request, cwd=str(tmp_path))
    assert proc is not None and proc.wait(timeout=120) == 5  # the program's exit status, unchanged
    seen = json.loads(capfd.readouterr().out.strip().splitlines()[-1])
    assert seen["name"] == "__main__" and seen["argv"] == [str(script), "a"]
    assert seen["cwd"] == str(tmp_path) and seen["tag"] == "t"
    assert seen["device"] == "oneapi:0"  # the request's HETERO_DEVICE, not the standby's
    assert seen["early"] == {"pyopencl": False, "numba": False, "cupy": False, "torch": False, "colorsys": True}
    assert seen["stdin"] == ""  # the supervisor's pipe is not the program's stdin


def test_device_fault_in_a_standby_reports_where_the_request_says(tmp_path: Path, spares: list[WarmStandby]) -> None:
    script = _script(tmp_path, """
        import hetero
        raise hetero.DeviceLostError("gone", backend="oneapi", device="oneapi:0")
    """)
    report = tmp_path / "fault.json"
    spare = _standby(spares, dict(os.environ))
    proc = spare.activate([str(script)], {**os.environ, "HETERO_FAULT_REPORT": str(report)})
    assert proc is not None and proc.wait(timeout=120) == FAULT_EXIT_CODE
    assert json.loads(report.read_text())["fault_class"] == "device-lost"


def test_a_closed_pipe_ends_the_standby(spares: list[WarmStandby]) -> None:
    spare = _standby(spares, dict(os.environ))
    proc = spare.proc
    assert proc is not None
    spare.close()
    assert proc.returncode == 0 and spare.proc is None
    assert spare.activate(["x.py"], dict(os.environ)) is None


def test_startup_only_variables_must_match(tmp_path: Path, spares: list[WarmStandby]) -> None:
    spare = _standby(spares, dict(os.environ))
    proc = spare.proc
    assert not spare.usable_for({**os.environ, "PYTHONHASHSEED": "123"})
    assert not spare.usable_for({**os.environ, "LD_LIBRARY_PATH": "/opt/other"})
    assert not spare.usable_for({**os.environ, "OMP_NUM_THREADS": "3"})  # NumPy's BLAS read it at import
    assert spare.usable_for({**os.environ, "CUDA_VISIBLE_DEVICES": "1", "TAG": "x"})
    assert spare.activate(["x.py"], {**os.environ, "PYTHONHASHSEED": "123"}) is None
    assert proc is not None and proc.poll() is not None  # retired, not left waiting


def test_a_bad_request_is_refused(spares: list[WarmStandby], capfd: pytest.CaptureFixture[str]) -> None:
    spare = _standby(spares, dict(os.environ))
    proc = spare.proc
    assert proc is not None and proc.stdin is not None
    proc.stdin.write(b"{not json\n")
    proc.stdin.close()
    assert proc.wait(timeout=60) == 2
    assert "bad standby request" in capfd.readouterr().err


def test_a_preload_that_fails_does_not_lose_the_standby(tmp_path: Path, spares: list[WarmStandby],
                                                        capfd: pytest.CaptureFixture[str]) -> None:
    script = _script(tmp_path, "print('ran')\n")
    spare = _standby(spares, dict(os.environ), preload=("no_such_module_xyz", "colorsys"))
    proc = spare.activate([str(script)], dict(os.environ))
    assert proc is not None and proc.wait(timeout=120) == 0
    out, err = capfd.readouterr()
    assert "ran" in out and "could not preload 'no_such_module_xyz'" in err


def test_standby_usage_errors() -> None:
    from hetero.launcher import worker_main as worker

    assert worker.standby(["--preload"]) == 2
    assert worker.standby(["--bogus", "x"]) == 2
