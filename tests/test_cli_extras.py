"""The ``hetero`` command's conveniences: ``python -m hetero``, ``hetero compile --json`` and the
shell completion scripts of both commands (``hetero completion SHELL [--for hetero-run]``)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

import hetero

ROOT = Path(__file__).resolve().parent.parent


def _hetero(*args: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "hetero", *args], capture_output=True, text=True, cwd=cwd,
                          env=os.environ, timeout=300, check=False)


def test_python_m_hetero_is_the_hetero_command() -> None:
    done = _hetero("--version")
    assert done.returncode == 0 and done.stdout.strip() == f"hetero {hetero.__version__}"


def test_compile_json(tmp_path: Path) -> None:
    out = tmp_path / "k.hbundle"
    done = _hetero("compile", "tests/kernels/corpus.py", "--targets", "cpu", "--kernels", "saxpy", "--signature",
                   "saxpy(f32, f32[:], f32[:])", "-o", str(out), "--json", "-q")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    assert report["path"] == str(out) and out.is_file()
    assert report["kernels"] == ["saxpy"] and report["targets"] == ["cpu"] and report["artifacts"] == 1
    assert report["missing"] == [] and set(report["target_seconds"]) == {"cpu"}


@pytest.mark.parametrize("shell", ["bash", "zsh", "tcsh"])
@pytest.mark.parametrize("prog", ["hetero", "hetero-run"])
def test_completion_scripts_know_the_commands_options(prog: str, shell: str) -> None:
    done = _hetero("completion", shell, "--for", prog)
    assert done.returncode == 0, done.stderr
    # (tcsh's script lists only what completes to something: subcommands, choices, paths)
    words = ("serve", "completion") if prog == "hetero" else ("--restart-on", "--policy")
    for word in words:
        assert word in done.stdout, word
    if shell == "bash" and shutil.which("bash"):  # the script is valid bash, and defines the completion
        check = subprocess.run(["bash", "-c", f"source /dev/stdin && complete -p {prog}"], input=done.stdout,
                               capture_output=True, text=True, timeout=60, check=False)
        assert check.returncode == 0 and prog in check.stdout, check.stderr
