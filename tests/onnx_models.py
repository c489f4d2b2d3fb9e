"""Small ONNX models built in the test with ``onnx.helper`` (no downloads), and their NumPy answers.

- ``mlp()``: x float32[N, 16] -> Gemm(16x32) -> Relu -> Gemm(32x4) -> y float32[N, 4]
- ``cnn()``: x float32[N, 1, 8, 8] -> Conv(4 filters 3x3, pad 1) -> Relu -> MaxPool 2x2 -> Flatten ->
  Gemm(64x3) -> y float32[N, 3]
"""

from __future__ import annotations

import dataclasses

import numpy as np

onnx = __import__("pytest").importorskip("onnx", reason="building test models needs onnx (pip install onnx)")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

OPSET = 17


@dataclasses.dataclass
class TestModel:
    data: bytes
    weights: dict[str, np.ndarray]
    input_shape: tuple[int, ...]  # one sample

    def sample(self, batch: int, seed: int = 0) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal((batch, *self.input_shape)).astype(np.float32)


def _model(nodes: list, inputs: list, outputs: list, weights: dict[str, np.ndarray]) -> bytes:
    graph = helper.make_graph(nodes, "hetero_test", inputs, outputs,
                              initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def mlp(seed: int = 0, hidden: int = 32) -> TestModel:
    rng = np.random.default_rng(seed)
    weights = {"w1": rng.standard_normal((16, hidden)).astype(np.float32) * 0.3,
               "b1": rng.standard_normal(hidden).astype(np.float32) * 0.1,
               "w2": rng.standard_normal((hidden, 4)).astype(np.float32) * 0.3,
               "b2": rng.standard_normal(4).astype(np.float32) * 0.1}
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"])]
    data = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 16])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])], weights)
    return TestModel(data, weights, (16,))


def mlp_reference(model: TestModel, x: np.ndarray) -> np.ndarray:
    w = model.weights
    h = np.maximum(x.astype(np.float64) @ w["w1"] + w["b1"], 0.0)
    return (h @ w["w2"] + w["b2"]).astype(np.float32)


def cnn(seed: int = 0) -> TestModel:
    rng = np.random.default_rng(seed)
    weights = {"k": rng.standard_normal((4, 1, 3, 3)).astype(np.float32) * 0.3,
               "kb": rng.standard_normal(4).astype(np.float32) * 0.1,
               "w": rng.standard_normal((64, 3)).astype(np.float32) * 0.2,
               "b": rng.standard_normal(3).astype(np.float32) * 0.1}
    nodes = [helper.make_node("Conv", ["x", "k", "kb"], ["c"], pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
             helper.make_node("Relu", ["c"], ["r"]),
             helper.make_node("MaxPool", ["r"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
             helper.make_node("Flatten", ["p"], ["f"], axis=1),
             helper.make_node("Gemm", ["f", "w", "b"], ["y"])]
    data = _model(nodes, [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
                  [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 3])], weights)
    return TestModel(data, weights, (1, 8, 8))


def cnn_reference(model: TestModel, x: np.ndarray) -> np.ndarray:
    w = model.weights
    n = x.shape[0]
    padded = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (3, 3), axis=(2, 3))  # n,1,8,8,3,3
    conv = np.einsum("ncijkl,fckl->nfij", windows, w["k"]) + w["kb"][None, :, None, None]
    relu = np.maximum(conv, 0.0)
    pooled = relu.reshape(n, 4, 4, 2, 4, 2).max(axis=(3, 5))
    return (pooled.reshape(n, 64) @ w["w"] + w["b"]).astype(np.float32)
