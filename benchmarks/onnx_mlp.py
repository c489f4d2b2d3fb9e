"""The benchmarks' ONNX model, built with ``onnx.helper`` (no downloads), and its NumPy answer:
x float32[N, 16] -> Gemm(16 x hidden) -> Relu -> Gemm(hidden x 4) -> y float32[N, 4].

The same MLP as the tests' (``tests/onnx_models.py``), written again here because benchmarks do
not import the test tree.
"""

from __future__ import annotations

import dataclasses

import numpy as np

OPSET = 17
INPUTS, OUTPUTS = 16, 4


@dataclasses.dataclass(frozen=True)
class Mlp:
    """A serialized MLP, the weights it was built from, and its hidden width."""

    data: bytes
    weights: dict[str, np.ndarray]
    hidden: int

    def sample(self, batch: int, seed: int = 0) -> np.ndarray:
        return np.random.default_rng(seed).standard_normal((batch, INPUTS)).astype(np.float32)

    def reference(self, x: np.ndarray) -> np.ndarray:
        """The model's answer for ``x``, computed by NumPy in float64."""
        w = self.weights
        h = np.maximum(x.astype(np.float64) @ w["w1"] + w["b1"], 0.0)
        return (h @ w["w2"] + w["b2"]).astype(np.float32)

    def describe(self) -> str:
        return f"x float32[N,{INPUTS}] -> Gemm {INPUTS}x{self.hidden} -> Relu -> Gemm {self.hidden}x{OUTPUTS} -> y float32[N,{OUTPUTS}]"


def mlp(seed: int = 0, hidden: int = 32) -> Mlp:
    """The MLP with weights drawn from ``seed`` (the same seed gives the same model in any process)."""
    try:
        import onnx
        from onnx import TensorProto, helper, numpy_helper
    except ImportError as error:
        raise ImportError("building the benchmark's ONNX model needs onnx: pip install onnx") from error
    rng = np.random.default_rng(seed)
    weights = {"w1": rng.standard_normal((INPUTS, hidden)).astype(np.float32) * 0.3,
               "b1": rng.standard_normal(hidden).astype(np.float32) * 0.1,
               "w2": rng.standard_normal((hidden, OUTPUTS)).astype(np.float32) * 0.3,
               "b2": rng.standard_normal(OUTPUTS).astype(np.float32) * 0.1}
    nodes = [helper.make_node("Gemm", ["x", "w1", "b1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("Gemm", ["r", "w2", "b2"], ["y"])]
    graph = helper.make_graph(nodes, f"hetero_bench_mlp{hidden}",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", INPUTS])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", OUTPUTS])],
                              initializer=[numpy_helper.from_array(v, k) for k, v in weights.items()])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return Mlp(model.SerializeToString(), weights, hidden)


__all__ = ["Mlp", "mlp"]
