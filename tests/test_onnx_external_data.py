"""External data: a model whose weights live in a file beside it loads from any working directory,
and a model whose external data points outside its folder is refused before ONNX Runtime reads it.

The torch model is written by PyTorch's current exporter (``torch.onnx.export(..., dynamo=True,
external_data=True)``), which keeps initializers over its size threshold in ``model.onnx.data``.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

ort = pytest.importorskip("onnxruntime", reason="hetero.onnx needs onnxruntime (pip install 'hetero[onnx]')")
onnx = pytest.importorskip("onnx", reason="building test models needs onnx (pip install onnx)")
from onnx import TensorProto, helper  # noqa: E402

from hetero.onnx import ModelError, Pool, Session  # noqa: E402
from hetero.onnx.errors import ExternalDataError  # noqa: E402

WEIGHT = np.arange(256 * 4, dtype=np.float32).reshape(256, 4) / 1024  # 4 KiB: over the exporter's inline threshold


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``model.onnx`` + ``model.onnx.data`` from torch.onnx.export: y = x @ WEIGHT."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript", reason="torch.onnx.export (dynamo) needs onnxscript (pip install onnxscript)")

    class MatMul(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.from_numpy(WEIGHT.copy()))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x @ self.w

    folder = tmp_path_factory.mktemp("exported")
    torch.onnx.export(MatMul(), (torch.ones(2, 256),), str(folder / "model.onnx"), dynamo=True, external_data=True,
                      input_names=["x"], output_names=["y"])
    stored = onnx.load(str(folder / "model.onnx"), load_external_data=False)
    assert [e.value for t in stored.graph.initializer for e in t.external_data if e.key == "location"] == \
        ["model.onnx.data"], "the exporter kept the weight inline: the test would not test external data"
    return folder / "model.onnx"


def _x() -> np.ndarray:
    return np.random.default_rng(0).standard_normal((2, 256)).astype(np.float32)


def test_an_exported_model_loads_from_another_working_directory(exported: Path, tmp_path: Path,
                                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    # a same-named file in the working directory must not be read in place of the model's own
    np.full(WEIGHT.shape, 7.0, np.float32).tofile(elsewhere / "model.onnx.data")
    monkeypatch.chdir(elsewhere)
    x = _x()
    want = x @ WEIGHT
    relative = os.path.relpath(exported, elsewhere)
    np.testing.assert_allclose(Session(relative, "cpu").run({"x": x})["y"], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(Session(exported, "cpu").run({"x": x})["y"], want, rtol=1e-5, atol=1e-5)
    with Pool(relative, devices="cpu") as pool:
        np.testing.assert_allclose(pool.run({"x": x})["y"], want, rtol=1e-5, atol=1e-5)


def test_the_models_bytes_with_external_data_are_refused_not_resolved_in_the_working_directory(
        exported: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Bytes have no folder: the working directory's same-named file must not stand in for the weights."""
    np.full(WEIGHT.shape, 7.0, np.float32).tofile(tmp_path / "model.onnx.data")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ExternalDataError, match="tensor 'w' keeps its data in 'model.onnx.data'.*load the model from its "
                                                 "path") as info:
        Session(exported.read_bytes(), "cpu")
    assert info.value.tensor == "w" and info.value.location == "model.onnx.data"


def _crafted(location: str, name: str = "w") -> bytes:
    """MatMul(x[1, 3], w[3, 4]) whose w is external data at ``location`` (48 bytes from offset 0)."""
    w = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=[3, 4], data_location=TensorProto.EXTERNAL)
    for key, value in (("location", location), ("offset", "0"), ("length", "48")):
        entry = w.external_data.add()
        entry.key, entry.value = key, value
    graph = helper.make_graph([helper.make_node("MatMul", ["x", name], ["y"])], "crafted",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], initializer=[w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


SECRET = np.arange(12, dtype=np.float32)


@pytest.fixture
def layout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """``models/`` (the model's folder), a ``secret`` beside it, and the working directory in ``cwd/``
    (where a ``key`` the model might name waits)."""
    (tmp_path / "models").mkdir()
    (tmp_path / "cwd").mkdir()
    SECRET.tofile(tmp_path / "secret")
    SECRET.tofile(tmp_path / "cwd" / "key")
    monkeypatch.chdir(tmp_path / "cwd")
    return tmp_path


@pytest.mark.parametrize("kind", ["parent", "absolute", "symlink", "fifo", "directory", "missing", "short"])
def test_external_data_outside_the_models_folder_is_refused_naming_model_tensor_and_location(
        layout: Path, kind: str) -> None:
    models = layout / "models"
    location = {"parent": "../secret", "absolute": str(layout / "secret"), "symlink": "link", "fifo": "pipe",
                "directory": "sub", "missing": "key", "short": "small.bin"}[kind]
    if kind == "symlink":
        (models / "link").symlink_to(layout / "secret")
    elif kind == "fifo":
        if not hasattr(os, "mkfifo"):
            pytest.skip("no FIFOs here")
        os.mkfifo(models / "pipe")  # reading it would block forever
    elif kind == "directory":
        (models / "sub").mkdir()
    elif kind == "short":
        (models / "small.bin").write_bytes(b"\0" * 8)  # the model says 48 bytes
    path = models / "m.onnx"
    path.write_bytes(_crafted(location))
    want = {"parent": "outside the model's folder", "absolute": "an absolute path", "symlink": "outside the model's folder",
            "fifo": "not a regular file", "directory": "not a regular file", "missing": "does not exist",
            "short": "holds 8 bytes"}[kind]
    for make in (lambda: Session(path, "cpu"), lambda: Pool(str(path), devices="cpu")):
        with pytest.raises(ModelError) as info:
            make()
        message = str(info.value)
        assert str(path) in message and "'w'" in message and repr(location) in message and want in message, message
        assert "\n" not in message
    assert isinstance(info.value, ExternalDataError) and info.value.location == location


def test_a_tensor_attribute_with_external_data_is_checked_too(layout: Path) -> None:
    """External data can sit in a Constant node's tensor, not only in the initializers."""
    models = layout / "models"
    value = TensorProto(name="c", data_type=TensorProto.FLOAT, dims=[3, 4], data_location=TensorProto.EXTERNAL)
    for key, text in (("location", "../secret"), ("offset", "0"), ("length", "48")):
        entry = value.external_data.add()
        entry.key, entry.value = key, text
    graph = helper.make_graph([helper.make_node("Constant", [], ["w"], value=value),
                               helper.make_node("MatMul", ["x", "w"], ["y"])], "constant",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    (models / "c.onnx").write_bytes(model.SerializeToString())
    with pytest.raises(ExternalDataError, match="tensor 'c' keeps its data in '../secret'"):
        Session(models / "c.onnx", "cpu")


def test_external_data_inside_the_folder_is_read_from_there(layout: Path) -> None:
    models = layout / "models"
    (models / "weights").mkdir()
    (SECRET + 100).tofile(models / "weights" / "w.bin")
    (models / "m.onnx").write_bytes(_crafted("weights/w.bin"))
    y = Session(models / "m.onnx", "cpu").run({"x": np.ones((1, 3), np.float32)})["y"]
    np.testing.assert_array_equal(y, np.ones((1, 3), np.float32) @ (SECRET + 100).reshape(3, 4))
