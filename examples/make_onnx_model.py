"""Write a small ONNX model (a 64-32-10 MLP: ``y = relu(x @ w1 + b1) @ w2 + b2``, input ``x``,
output ``y``, float32, any batch size) for the inference examples of the docs, built with
``onnx.helper`` and fixed random weights.

    python examples/make_onnx_model.py model.onnx [--input x.npy] [--batch 8]

``--input`` also writes a batch of inputs (``--batch`` rows) as a ``.npy`` file, for
``hetero infer model.onnx --input x.npy``.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def build(inputs: int = 64, hidden: int = 32, outputs: int = 10, seed: int = 0):
    """The model, as an ``onnx.ModelProto``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    weights = {
        "w1": (rng.standard_normal((inputs, hidden)) / np.sqrt(inputs)).astype(np.float32),
        "b1": np.zeros(hidden, np.float32),
        "w2": (rng.standard_normal((hidden, outputs)) / np.sqrt(hidden)).astype(np.float32),
        "b2": np.zeros(outputs, np.float32),
    }
    nodes = [
        helper.make_node("MatMul", ["x", "w1"], ["h0"]),
        helper.make_node("Add", ["h0", "b1"], ["h1"]),
        helper.make_node("Relu", ["h1"], ["h"]),
        helper.make_node("MatMul", ["h", "w2"], ["y0"]),
        helper.make_node("Add", ["y0", "b2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes, "mlp",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", inputs])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", outputs])],
        [numpy_helper.from_array(value, name) for name, value in weights.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8  # readable by every ONNX Runtime hetero supports
    onnx.checker.check_model(model)
    return model


def write_model(path: str | Path = "model.onnx", inputs: int = 64) -> Path:
    """Build the model and write it to ``path``; returns the path."""
    import onnx

    path = Path(path)
    onnx.save(build(inputs), str(path))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("path", nargs="?", default="model.onnx", help="where to write the model (default model.onnx)")
    parser.add_argument("--input", metavar="FILE.npy", help="also write a batch of inputs here")
    parser.add_argument("--batch", type=int, default=8, help="rows of --input (default 8)")
    args = parser.parse_args()
    print(f"wrote {write_model(args.path)}")
    if args.input:
        np.save(args.input, np.random.default_rng(1).standard_normal((args.batch, 64)).astype(np.float32))
        print(f"wrote {args.input}")


if __name__ == "__main__":
    main()
