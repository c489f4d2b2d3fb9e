"""The ``hetero`` command as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import hetero


def _hetero(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    exe = Path(sys.executable).with_name("hetero")
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "hetero.cli.main"]
    return subprocess.run([*command, *args], capture_output=True, text=True, timeout=300, env={**os.environ, **(env or {})})


def test_devices_all_json_lists_devices_and_unavailable_backends() -> None:
    result = _hetero("devices", "--all", "--json")
    assert result.returncode == 0, result.stderr
    payload = json.loads(result.stdout)
    names = [d["name"] for d in payload["devices"]]
    assert names == [d.name for d in hetero.devices()]
    assert "cpu" in names
    backends = {b["backend"]: b for b in payload["backends"]}
    assert {"cpu", "opencl", "oneapi", "cuda", "rocm"} <= set(backends)
    for status in backends.values():
        assert status["available"] or status["reason"], status
    for device in payload["devices"]:
        assert {"vendor", "kind", "model", "memory", "compute_units", "driver_version", "health", "stable_id"} <= set(device)


def test_devices_table() -> None:
    result = _hetero("devices", "--all")
    assert result.returncode == 0, result.stderr
    header = result.stdout.splitlines()[0].split()
    assert header == ["device", "vendor", "kind", "model", "memory", "units", "driver", "health"]
    assert "\ncpu " in result.stdout
    unavailable = [s.name for s in hetero.backend_statuses() if not s.available]
    for name in unavailable:
        assert f"  {name}: " in result.stdout


def test_devices_with_an_unavailable_backend_forced_is_an_error_without_all() -> None:
    unavailable = [s.name for s in hetero.backend_statuses() if not s.available]
    if not unavailable:
        return
    result = _hetero("devices", env={"HETERO_BACKENDS": unavailable[0]})
    assert result.returncode == 1 and "hetero: error:" in result.stderr and "unavailable" in result.stderr
    assert _hetero("devices", "--all", env={"HETERO_BACKENDS": unavailable[0]}).returncode == 0


def test_version_and_help() -> None:
    assert _hetero("--version").stdout.strip() == f"hetero {hetero.__version__}"
    assert "devices" in _hetero("--help").stdout
    assert _hetero().returncode == 2
