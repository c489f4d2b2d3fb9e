"""Process-level injected faults and HETERO_FAULTS in a fresh process (what the launcher passes to
its workers): ``crash`` dies by SIGKILL after logging, ``hang:1s`` holds the call then goes on."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap

import pytest
from conftest import ROOT, run_python

import hetero

ALLOCATE_THREE = textwrap.dedent("""
    import sys
    import hetero
    for n in range(3):
        hetero.zeros(4, device="cpu")
        print("allocated", n + 1, flush=True)
""")


def test_crash_kills_the_process_with_sigkill_after_logging() -> None:
    result = run_python(ALLOCATE_THREE, env={"HETERO_FAULTS": "cpu:alloc:nth=2:crash"}, check=False)
    assert result.returncode == -signal.SIGKILL
    assert result.stdout.splitlines() == ["allocated 1"]  # died at the second allocation
    assert "injected" in result.stderr and "cpu:alloc:nth=2:crash" in result.stderr
    assert "SIGKILL" in result.stderr


def test_hang_holds_the_call_then_continues() -> None:
    result = run_python(ALLOCATE_THREE, env={"HETERO_FAULTS": "cpu:alloc:nth=2:hang:1s"})
    assert result.stdout.splitlines() == ["allocated 1", "allocated 2", "allocated 3"]
    assert "injected" in result.stderr and "hang 1s" in result.stderr


def test_hetero_faults_reach_a_kernel_launch_in_a_fresh_process() -> None:
    name = next((d.name for d in hetero.devices() if d.backend in ("oneapi", "opencl")), "cpu")
    code = textwrap.dedent(f"""
        import json
        import hetero
        from hetero.core.errors import DeviceLostError
        from hetero.fault.injection import configured
        from kernels import corpus
        x, y = hetero.ones(8, device={name!r}), hetero.zeros(8, device={name!r})
        results = []
        for step in range(3):
            try:
                corpus.saxpy[8](1.0, x, y)
                results.append("ok")
            except DeviceLostError as error:
                results.append([type(error).__name__, error.injected, error.code, error.code_name])
        print(json.dumps({{"results": results, "fired": [r.as_dict() for r in configured().fired]}}))
    """)
    env = {"HETERO_FAULTS": f"{name}:launch:nth=2:lost", "PYTHONPATH": str(ROOT / "tests")}
    result = run_python(code, env=env)
    report = json.loads(result.stdout.splitlines()[-1])
    lost = report["results"][1]
    assert report["results"][0] == report["results"][2] == "ok"
    assert lost[:2] == ["DeviceLostError", True]
    if name != "cpu":
        assert lost[2:] == [-2, "CL_DEVICE_NOT_AVAILABLE"]
    assert [(f["device"], f["op"], f["call"]) for f in report["fired"]] == [(name, "launch", 2)]
    assert "injected" in result.stderr


def test_no_rules_means_no_wrappers() -> None:
    code = textwrap.dedent("""
        import hetero
        devices = hetero.devices()
        print(len(devices), sum(bool(set(vars(d.runtime)) & {"launch", "allocate", "upload", "health"})
                                for d in devices))
    """)
    result = run_python(code, env={"HETERO_FAULTS": ""})
    count, wrapped = result.stdout.split()
    assert int(count) >= 1 and wrapped == "0"


def test_hang_without_a_duration_holds_until_killed() -> None:
    env = {**os.environ, "HETERO_FAULTS": "cpu:alloc:nth=1:hang"}
    proc = subprocess.Popen([sys.executable, "-c", ALLOCATE_THREE], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        line = ""
        while "injected" not in line:  # the fault is logged before the call is held
            line = proc.stderr.readline()
            assert line or proc.poll() is None, "the process ended before the injected hang"
        assert "hang forever" in line
        with pytest.raises(subprocess.TimeoutExpired):  # held: a second later it is still there
            proc.wait(timeout=1.0)
    finally:
        proc.kill()
        out, _ = proc.communicate(timeout=60)
    assert "allocated" not in out and proc.returncode == -signal.SIGKILL
