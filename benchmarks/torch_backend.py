"""PyTorch models through hetero's torch backend (``hetero.torch.compile``), against torch eager and
``torch.compile`` (inductor) on the same CPU, side by side in one run; on the OpenCL devices too.

    python -m benchmarks.torch_backend [--devices cpu oneapi:0 opencl:0] [--models mnist_cnn ...] [--repeats 9]
        [--no-inductor] [--merge]

Models (random initialisation, no downloads): pytorch/examples' MNIST CNN on 8x8 digits
(``examples/mnist_digits.Net``, batch 64) and a small transformer encoder (2 layers, d=32, 4
heads, batch 8 x 16 tokens). Per model and device: the forward (``no_grad``, eval) and one SGD
training step (forward, ``backward``, ``opt.step``; dropout off, as torch's generator would run
on the host), their compile time (the first call), the graphs and the operations that ran on the
host; and ResNet-18 (``examples/resnet.py``, torchvision's architecture written out: torchvision's
wheel must match torch's build) on 2 x 3 x 64 x 64 images.
Writes ``benchmarks/results/torch_backend.json``.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch import nn

import hetero
import hetero.torch as ht
from benchmarks.harness import RESULTS_DIR, command_line, compare, format_seconds, write_results

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from mnist_digits import Net  # noqa: E402
from resnet import ResNet18  # noqa: E402


def models() -> dict[str, tuple[Callable[[], nn.Module], Callable[[], torch.Tensor], Callable[[Any], torch.Tensor]]]:
    """name -> (a fresh model, an input batch, a loss of the output)."""
    def mnist() -> nn.Module:
        torch.manual_seed(0)
        net = Net()
        net.dropout1.p = net.dropout2.p = 0.0
        return net

    def encoder() -> nn.Module:
        torch.manual_seed(0)
        return nn.TransformerEncoder(nn.TransformerEncoderLayer(32, 4, 64, dropout=0.0, batch_first=True), 2,
                                     enable_nested_tensor=False)
    made = {"mnist_cnn": (mnist, lambda: torch.randn(64, 1, 8, 8), lambda y: y.mean()),
            "transformer_encoder": (encoder, lambda: torch.randn(8, 16, 32), lambda y: (y * y).mean())}
    def resnet() -> nn.Module:
        torch.manual_seed(0)
        return ResNet18(classes=10)
    made["resnet18"] = (resnet, lambda: torch.randn(2, 3, 64, 64), lambda y: y.mean())
    return made


def _step(model: Any, compiled: Any, x: torch.Tensor, loss_of: Callable[[Any], torch.Tensor]) -> Callable[[], None]:
    opt = torch.optim.SGD(model.parameters(), lr=1e-3)

    def step() -> None:
        opt.zero_grad()
        loss_of(compiled(x)).backward()
        opt.step()
    return step


def measure(name: str, device: hetero.Device, inductor: bool, repeats: int) -> dict[str, Any]:
    make, batch, loss_of = models()[name]
    x = batch()
    row: dict[str, Any] = {"model": name, "device": device.name}
    sides: dict[str, Any] = {"hetero": lambda m: ht.compile(m, device)}
    if device.name == "cpu":
        sides["eager"] = lambda m: m
        if inductor:
            sides["inductor"] = lambda m: torch.compile(m, backend="inductor")
    for phase in ("forward", "train_step"):
        calls: dict[str, Callable[[], object]] = {}
        for side, wrap in sides.items():
            torch._dynamo.reset()
            model = make().eval() if phase == "forward" else make().train()
            compiled = wrap(model)
            if phase == "forward":
                def call(c: Any = compiled) -> object:
                    with torch.no_grad():
                        return c(x)
            else:
                call = _step(model, compiled, x, loss_of)
            started = time.perf_counter()
            call()
            row[f"{phase}_compile_s_{side}"] = time.perf_counter() - started
            if side == "hetero":
                report = compiled.report
                row[f"{phase}_graphs"] = len(report.graphs)
                row[f"{phase}_host_ops"] = {op: c.host for op, c in report.host_ops.items()}
                row[f"{phase}_replayed"] = all(g["jit"] for g in report.graphs)
            calls[side] = call
        timings = compare(calls, repeats, 2)
        row[phase] = timings
        for side in calls:
            if side != "hetero":
                row[f"{phase}_hetero_over_{side}"] = timings["hetero"]["median_s"] / timings[side]["median_s"]
    return row


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="+", default=[d.name for d in hetero.devices()])
    parser.add_argument("--models", nargs="+", default=None)
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--no-inductor", action="store_true", help="leave torch.compile's inductor out (it needs a C++ compiler)")
    parser.add_argument("--merge", action="store_true", help="keep the results file's other rows (model, device)")
    args = parser.parse_args(argv)
    rows = []
    for name in args.models or list(models()):
        for device_name in args.devices:
            row = measure(name, hetero.device(device_name), not args.no_inductor, args.repeats)
            rows.append(row)
            cells = "  ".join(f"{phase} {side} {format_seconds(t['median_s'])}" for phase in ("forward", "train_step")
                              for side, t in row[phase].items())
            print(f"{name:<20} {device_name:<9} {cells}  host ops: {row['train_step_host_ops'] or 'none'}")
    command = command_line("benchmarks.torch_backend", sys.argv[1:] if argv is None else argv)
    for row in rows:
        row["command"] = command
    if args.merge and (RESULTS_DIR / "torch_backend.json").is_file():
        done = {(r["model"], r["device"]) for r in rows}
        kept = json.loads((RESULTS_DIR / "torch_backend.json").read_text()).get("rows", [])
        rows = [r for r in kept if (r["model"], r["device"]) not in done] + rows
    write_results("torch_backend", {"rows": rows, "torch": torch.__version__}, command)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
