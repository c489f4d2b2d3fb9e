"""A model whose output is a sequence of maps (skl2onnx's default ``ZipMap`` on classifiers): the
session returns it as a list of dicts, the pool too, ``hetero serve`` sends it as KServe v2 BYTES
(one JSON object per row), and ``hetero infer`` prints and writes it."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("onnxruntime", reason="hetero.onnx needs onnxruntime (pip install 'hetero[onnx]')")
from tests.sklearn_models import converted  # noqa: E402

from hetero.onnx import Pool, Session  # noqa: E402

PROBABILITY = "output_probability"


def _expected(name: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The sample, its labels and probabilities, from the same model converted without ZipMap."""
    data, x = converted(name, zipmap=False)
    plain = Session(data, "cpu").run({"X": x})
    return x, plain["label"], plain["probabilities"]


@pytest.mark.parametrize("name", ["logistic", "knn"])
def test_a_sequence_of_maps_comes_back_as_a_list_of_dicts(name: str) -> None:
    data, _ = converted(name, zipmap=True)
    x, labels, probabilities = _expected(name)
    session = Session(data, "cpu")
    spec = next(s for s in session.outputs if s.name == PROBABILITY)
    assert spec.onnx_type == "seq(map(int64,tensor(float)))" and not spec.is_tensor
    assert PROBABILITY in spec.describe() and "seq(map(int64,tensor(float)))" in spec.describe()
    out = session.run({"X": x})
    np.testing.assert_array_equal(out["output_label"], labels)
    rows = out[PROBABILITY]
    assert isinstance(rows, list) and len(rows) == len(x) and all(isinstance(row, dict) for row in rows)
    got = np.array([[row[k] for k in sorted(row)] for row in rows], np.float32)
    np.testing.assert_allclose(got, probabilities, rtol=1e-6)
    with Pool(data, devices="cpu") as pool:
        assert pool.run({"X": x})[PROBABILITY] == rows
        assert pool.run({"X": x}, outputs=["output_label"]).keys() == {"output_label"}


def test_a_string_input_is_still_refused_by_name() -> None:
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph([helper.make_node("Identity", ["s"], ["t"])], "strings",
                              [helper.make_tensor_value_info("s", TensorProto.STRING, [1])],
                              [helper.make_tensor_value_info("t", TensorProto.STRING, [1])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    with pytest.raises(TypeError, match="model input 's' has type tensor\\(string\\), which hetero.onnx cannot feed"):
        Session(model.SerializeToString(), "cpu")


def test_hetero_serve_sends_the_maps_as_bytes_of_json() -> None:
    triton = pytest.importorskip("tritonclient.http", reason="the KServe v2 client: pip install 'tritonclient[http]'")
    from hetero.serve import ServerThread

    data, _ = converted("logistic", zipmap=True)
    x, labels, probabilities = _expected("logistic")
    with Pool(data, devices="cpu", name="clf") as pool, ServerThread(pool) as server, \
            triton.InferenceServerClient(server.address, network_timeout=20) as client:
        meta = client.get_model_metadata("clf")
        assert {"name": PROBABILITY, "datatype": "BYTES", "shape": [-1]} in meta["outputs"]
        for binary in (True, False):
            feed = triton.InferInput("X", list(x.shape), "FP32").set_data_from_numpy(x, binary_data=binary)
            wanted = [triton.InferRequestedOutput(n, binary_data=binary) for n in ("output_label", PROBABILITY)]
            result = client.infer("clf", [feed], outputs=wanted)
            np.testing.assert_array_equal(result.as_numpy("output_label"), labels)
            rows = [json.loads(row) for row in result.as_numpy(PROBABILITY)]
            assert [sorted(row) for row in rows] == [["0", "1", "2"]] * len(x)  # JSON keys are strings
            got = np.array([[row[k] for k in sorted(row)] for row in rows], np.float32)
            np.testing.assert_allclose(got, probabilities, rtol=1e-6)


def test_hetero_infer_prints_and_writes_the_maps(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from hetero.cli import main as cli

    data, x = converted("logistic", zipmap=True)
    (tmp_path / "clf.onnx").write_bytes(data)
    np.save(tmp_path / "x.npy", x)
    out = tmp_path / "out.npz"
    assert cli.main(["infer", str(tmp_path / "clf.onnx"), "--input", str(tmp_path / "x.npy"), "--device", "cpu",
                     "--output", str(out)]) == 0
    printed = capsys.readouterr().out
    assert f"{PROBABILITY}: seq(map(int64,tensor(float))), 5 items" in printed
    written = np.load(out)  # no pickle: the maps are JSON strings
    assert [sorted(json.loads(row)) for row in written[PROBABILITY]] == [["0", "1", "2"]] * 5
    assert cli.main(["infer", str(tmp_path / "clf.onnx"), "--input", str(tmp_path / "x.npy"), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["outputs"][PROBABILITY] == {"type": "seq(map(int64,tensor(float)))", "items": 5}
