"""The examples a user copies from run and report success."""

from __future__ import annotations

import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.parametrize("script,expect", [
    ("copy_across_devices.py", "all copies bit-exact"),
    ("kernel_everywhere.py", "every device agrees with NumPy"),
])
def test_example_runs(script: str, expect: str) -> None:
    result = subprocess.run([sys.executable, str(ROOT / "examples" / script), "--size", "5000"],
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stdout + result.stderr
    assert expect in result.stdout
