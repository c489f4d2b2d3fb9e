"""The exit-status table of ``hetero`` and ``hetero-run`` (docs/cli.md): bad arguments exit 2, a
failure 1, each with one line on stderr and no traceback unless ``--debug`` or ``HETERO_LOG=DEBUG``
asks for it. Every row is a real process, as a user runs it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HETERO = [sys.executable, "-m", "hetero"]
RUN = [sys.executable, "-m", "hetero.launcher.cli"]

# command line (files: see _files) -> exit status, a piece of the one stderr line
TABLE = [
    ([*HETERO, "nosuch"], 2, "invalid choice: 'nosuch'"),
    ([*HETERO, "devices", "--bogus"], 2, "unrecognized arguments: --bogus"),
    ([*HETERO, "cache"], 2, "hetero cache: error:"),
    ([*HETERO, "calibrate", "--devices", "gpu0"], 2, "no device 'gpu0'"),
    ([*HETERO, "calibrate", "--devices", "cpu;oneapi:0"], 2, "'cpu;oneapi:0' is not a device name"),
    ([*HETERO, "compile", "missing.py", "--targets", "cpu", "-o", "x.hbundle"], 2, "missing.py"),
    ([*HETERO, "compile", "kernels.py", "--targets", "nosuch", "-o", "x.hbundle"], 2, "unknown target 'nosuch'"),
    ([*HETERO, "compile", "kernels.py", "--targets", "cpu", "-o", "x.hbundle"], 1, "defines no @hetero.kernel"),
    ([*HETERO, "bundle", "inspect", "missing.hbundle"], 2, "missing.hbundle"),
    ([*HETERO, "bundle", "inspect", "text.onnx"], 1, "text.onnx"),
    ([*HETERO, "serve", "missing.onnx"], 2, "missing.onnx"),
    ([*HETERO, "serve", "text.onnx", "--devices", "cpu,gpu0"], 2, "no device 'gpu0'"),
    ([*HETERO, "infer", "missing.onnx"], 2, "missing.onnx"),
    ([*HETERO, "infer", "text.onnx", "--device", "cpu"], 1, "text.onnx is not an ONNX model"),
    ([*HETERO, "infer", "text.onnx", "--device", "gpu0"], 2, "no device 'gpu0'"),
    ([*HETERO, "quarantine", "release"], 2, "name a DEVICE"),
    ([*RUN, "--devices", "gpu0", "train.py"], 2, "no device 'gpu0'"),
    ([*RUN, "--devices", "cpu;oneapi", "train.py"], 2, "'cpu;oneapi' is not a device name"),
    ([*RUN, "missing.py"], 2, "script 'missing.py' not found"),
    ([*RUN, "--nproc", "0", "train.py"], 2, "--nproc must be at least 1"),
]


def _files(folder: Path) -> None:
    (folder / "text.onnx").write_text("this is not a model\n")
    (folder / "kernels.py").write_text("x = 1\n")
    (folder / "train.py").write_text("open('ran', 'w')\n")


def _run(argv: list[str], folder: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "HETERO_STATE_DIR": str(folder / "state"), **env}
    environment.pop("HETERO_LOG", None) if "HETERO_LOG" not in env else None
    return subprocess.run(argv, capture_output=True, text=True, cwd=folder, env=environment, timeout=120, check=False)


@pytest.mark.parametrize(("argv", "status", "said"), TABLE,
                         ids=[("hetero-run " if a[2] == "hetero.launcher.cli" else "hetero ") + " ".join(a[3:])
                              for a, _, _ in TABLE])
def test_exit_status_and_one_line(tmp_path: Path, argv: list[str], status: int, said: str) -> None:
    _files(tmp_path)
    done = _run(argv, tmp_path)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == status, done.stderr
    assert len(lines) == 1 and said in lines[0] and "error:" in lines[0], done.stderr
    assert not (tmp_path / "ran").exists()


def test_debug_and_hetero_log_show_the_traceback(tmp_path: Path) -> None:
    _files(tmp_path)
    for argv, env in (([*HETERO, "--debug", "infer", "missing.onnx"], {}),
                      ([*HETERO, "infer", "missing.onnx", "--debug"], {}),
                      ([*HETERO, "infer", "missing.onnx"], {"HETERO_LOG": "DEBUG"})):
        done = _run(argv, tmp_path, **env)
        assert done.returncode == 2 and "Traceback" in done.stderr, done.stderr
        assert done.stderr.strip().splitlines()[-1].startswith("hetero: error:")
