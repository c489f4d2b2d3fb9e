"""The digits MLP in torch (model + SGD with momentum) under hetero.guard: the guard snapshots the
module's and the optimizer's state_dicts to host memory and, after a device fault, restores them
(on the same device for an out-of-memory error, on the next healthy device otherwise) and
replays the steps since the snapshot.

    python examples/train_digits_torch.py                               # torch on hetero.device()
    python examples/train_digits_torch.py --inject 'cpu:alloc:nth=40:oom'
    python examples/train_digits_torch.py --device cuda:0 --inject 'cuda:0:alloc:nth=40:sticky'   # on a GPU

Each batch goes to the device through hetero (``hetero.asarray(..., device=hetero.device())``),
so hetero's fault rules (alloc, copy) reach the torch loop. torch runs where the guard's
device is: ``cuda:N`` for CUDA/ROCm GPUs, ``xpu:N`` for Intel GPUs, the CPU for CPU devices.
After a sticky fault on ``cuda:0`` the model and optimizer move to the next device's torch
device without reading the GPU's memory again (its context is unusable).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # digits_model

import numpy as np
import torch
from digits_model import INPUTS, load_digits

import hetero


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cpu", help="hetero device to start on (default cpu)")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.05)
    parser.add_argument("--inject", metavar="RULE", help="a fault rule, e.g. 'cpu:alloc:nth=40:oom'")
    parser.add_argument("--snapshot-every", type=int, default=10)
    parser.add_argument("--json", action="store_true", help="print a one-line JSON summary")
    return parser.parse_args(argv)


class TorchDigits:
    """A 64-32-10 torch MLP with SGD + momentum; ``step(k)`` trains on batch k (a function of seed and k)."""

    def __init__(self, seed: int, batch: int, lr: float) -> None:
        self.data = load_digits(seed)
        self.seed, self.batch = seed, batch
        torch.manual_seed(seed)
        self.model = torch.nn.Sequential(torch.nn.Linear(INPUTS, 32), torch.nn.ReLU(), torch.nn.Linear(32, 10))
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=lr, momentum=0.9)
        self.steps_per_epoch = len(self.data.x_train) // batch

    def state(self) -> dict[str, Any]:
        return {"model": self.model, "optimizer": self.optimizer}

    def _batch(self, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        epoch, position = divmod(step, self.steps_per_epoch)
        order = np.random.default_rng([self.seed, epoch]).permutation(len(self.data.x_train))
        index = order[position * self.batch:(position + 1) * self.batch]
        device = hetero.device()  # the guard's device
        x = hetero.asarray(self.data.x_train[index], device=device, copy=True)
        where = hetero.torch_device(device)  # cpu where this torch has no backend for the device
        tensor = x.torch() if device.backend in ("cpu", "cuda", "rocm") else torch.from_numpy(x.numpy())
        labels = torch.from_numpy(self.data.y_train[index].astype(np.int64))
        return tensor.to(where), labels.to(where)

    def step(self, step: int) -> float:
        x, y = self._batch(step)
        self.optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(self.model(x), y)
        loss.backward()
        self.optimizer.step()
        return float(loss.detach())

    def test_accuracy(self) -> float:
        where = next(self.model.parameters()).device
        with torch.no_grad():
            logits = self.model(torch.from_numpy(self.data.x_test).to(where))
        return float((logits.argmax(1).cpu().numpy() == self.data.y_test).mean())


def train(args: argparse.Namespace) -> tuple[TorchDigits, dict[str, Any]]:
    run = TorchDigits(args.seed, args.batch, args.lr)
    device = hetero.device(args.device)
    run.model.to(hetero.torch_device(device))
    injection = hetero.fault.inject(args.inject) if args.inject else contextlib.nullcontext()
    with hetero.guard(run.state(), snapshot_every=args.snapshot_every, device=device) as g, injection:
        for step in range(args.steps):
            loss = g.run(run.step, step)
            if (step + 1) % max(1, args.steps // 5) == 0:
                print(f"  step {step + 1:4d}  loss {loss:.4f}  on {g.device.name}")
    for event in g.recoveries:
        print(f"  recovery: step {event['step']}: {event['error']}\n            {event['fault_class']} -> "
              f"{event['action']} on {event['device']} (torch device {event['torch_device']}), replayed {event['steps_replayed']} step(s) "
              f"in {event['recovery_seconds'] * 1e3:.1f} ms")
    accuracy = run.test_accuracy()
    print(f"test accuracy {accuracy * 100:.2f}%; started on {device.name}, finished on {g.device.name} "
          f"(torch device {hetero.torch_device(g.device)})")
    return run, {"accuracy": accuracy, "start_device": device.name, "final_device": g.device.name,
                 "recoveries": g.recoveries, "snapshots": g.snapshots_taken, "steps": args.steps}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    _, summary = train(args)
    if args.json:
        print(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
