"""benchmarks/gpu_session.sh's dry run (``GPU_SESSION_DEVICE=cpu``): every part of issue 50's GPU
session runs what it can on cpu, at small sizes, and skips what needs CUDA, saying why; the
summary has one line per part and no failure. What the lent GPU will run, minus the GPU."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "benchmarks" / "gpu_session.sh"
PARTS = ["corpus", "arrays", "numba", "cudac", "onnx", "guard", "launcher", "arrayapi"]


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("bash") is None or shutil.which("timeout") is None,
                    reason="the session script needs bash and coreutils' timeout")
def test_dry_run_has_a_line_per_part_and_no_failure(tmp_path: Path) -> None:
    pytest.importorskip("torch", reason="the guard part trains a torch model (pip install torch)")
    pytest.importorskip("onnxruntime", reason="the onnx part serves an ONNX model (pip install onnxruntime)")
    out = tmp_path / "out"
    env = {**os.environ, "OUT": str(out), "PYTHON": sys.executable, "GPU_SESSION_DEVICE": "cpu",
           "GPU_SESSION_BUDGET": "400", "HETERO_STATE_DIR": str(tmp_path / "state")}
    proc = subprocess.run(["bash", str(SCRIPT)], env=env, cwd=ROOT, capture_output=True, text=True, timeout=600,
                          check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    lines = (out / "summary.txt").read_text().splitlines()
    assert [line.split()[0] for line in lines] == PARTS, lines
    failed = [line for line in lines if line.split()[1] not in ("PASS", "SKIP")]
    logs = {name: (out / name / "log.txt").read_text()[-3000:] for name in PARTS if (out / name / "log.txt").exists()}
    assert not failed, "\n".join(failed + [f"--- {line.split()[0]}\n{logs.get(line.split()[0], '')}" for line in failed])
    skipped = [line for line in lines if line.split()[1] == "SKIP"]
    assert all(len(line.split(maxsplit=3)) == 4 for line in skipped), skipped  # each SKIP says why
    assert (out / "machine.txt").exists() and (out / "arrays" / "arrays.json").exists()
    print((out / "summary.txt").read_text())
