"""``hetero infer``: one run (its outputs printed and written atomically), a benchmark, and the
errors a user meets (missing files, wrong dtype, a pickled input refused)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from hetero.cli import main as cli
from tests.onnx_models import mlp, mlp_reference

pytest.importorskip("onnxruntime", reason="hetero infer needs onnxruntime (pip install 'hetero[onnx]')")


@pytest.fixture
def files(tmp_path: Path) -> tuple[Path, Path, np.ndarray]:
    model = mlp()
    path = tmp_path / "mlp.onnx"
    path.write_bytes(model.data)
    x = model.sample(3)
    np.save(tmp_path / "x.npy", x)
    return path, tmp_path / "x.npy", mlp_reference(model, x)


def test_infer_prints_and_writes_the_outputs(files, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, x, want = files
    out = tmp_path / "out.npz"
    assert cli.main(["infer", str(model), "--input", str(x), "--device", "cpu", "--output", str(out)]) == 0
    assert "mlp.onnx on cpu via CPUExecutionProvider" in capsys.readouterr().out
    np.testing.assert_allclose(np.load(out)["y"], want, rtol=1e-5, atol=2e-5)


def test_infer_benchmark_json_and_npz_inputs(files, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, x, _ = files
    np.savez(tmp_path / "feeds.npz", x=np.load(x))
    assert cli.main(["infer", str(model), "--input", str(tmp_path / "feeds.npz"), "--benchmark", "20", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["benchmark"]["count"] == 20 and report["benchmark"]["p99_ms"] >= report["benchmark"]["p50_ms"]
    assert report["outputs"]["y"] == {"shape": [3, 4], "dtype": "float32"}
    assert report["partial"] is False
    assert report["placement"] in (None, {"Gemm": {"CPUExecutionProvider": 2}, "Relu": {"CPUExecutionProvider": 1}})


def test_infer_errors_name_the_problem(files, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    model, x, _ = files
    assert cli.main(["infer", str(tmp_path / "none.onnx"), "--input", str(x)]) == 2
    assert "does not exist" in capsys.readouterr().err
    np.save(tmp_path / "x64.npy", np.load(x).astype(np.float64))
    out = tmp_path / "never.npz"
    assert cli.main(["infer", str(model), "--input", str(tmp_path / "x64.npy"), "--output", str(out)]) == 1
    assert "must be float32, got float64" in capsys.readouterr().err and not out.exists()
    np.save(tmp_path / "obj.npy", np.array([{"a": 1}], dtype=object), allow_pickle=True)
    assert cli.main(["infer", str(model), "--input", str(tmp_path / "obj.npy")]) == 1
    assert "without unpickling" in capsys.readouterr().err
    assert cli.main(["infer", str(model)]) == 2  # a missing argument: exit 2, as every bad argument
    assert "--input" in capsys.readouterr().err
