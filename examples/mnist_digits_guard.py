"""``mnist_digits.py`` under ``hetero.guard``: the same training, recovered inside the process
when its device fails (an out-of-memory error retried in place, a lost or corrupted device left
for the next healthy one), bit-identical to a run without faults.

Against ``mnist_digits.py`` (the plain script) the changes are: ``import hetero``, torch's device
taken from the guard's (``hetero.torch_device``), the ``with hetero.guard(...)`` block around the
epochs, and the step's lines in a function decorated ``@g.step`` that the batch loop calls; the
epochs, the DataLoader, ``scheduler.step()`` between epochs and the test pass stay as they were
(``python -m benchmarks.torch_guard`` counts the lines).

    python examples/mnist_digits_guard.py --inject 'cpu:torch:nth=5000:oom'
    python examples/mnist_digits_guard.py --inject 'cpu:torch:nth=5000:lost'   # moves to oneapi:0 / PoCL
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import time

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.datasets import load_digits
from torch import nn, optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader, Dataset, TensorDataset

import hetero


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.conv2 = nn.Conv2d(32, 64, 3, 1)
        self.dropout1 = nn.Dropout(0.25)
        self.dropout2 = nn.Dropout(0.5)
        self.fc1 = nn.Linear(64 * 2 * 2, 128)
        self.fc2 = nn.Linear(128, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.conv1(x))
        x = F.relu(self.conv2(x))
        x = self.dropout1(F.max_pool2d(x, 2))
        x = F.relu(self.fc1(torch.flatten(x, 1)))
        return F.log_softmax(self.fc2(self.dropout2(x)), dim=1)


def datasets(repeat: int) -> tuple[Dataset, Dataset]:
    """Digits, normalised, as 1x8x8 images: the first 1500 to train on (``repeat`` times over,
    for longer epochs), the other 297 to test on."""
    x, y = load_digits(return_X_y=True)
    x = torch.from_numpy(((x / 16.0 - 0.3) / 0.4).astype(np.float32).reshape(-1, 1, 8, 8))
    y = torch.from_numpy(y.astype(np.int64))
    train = TensorDataset(x[:1500].repeat(repeat, 1, 1, 1), y[:1500].repeat(repeat))
    return train, TensorDataset(x[1500:], y[1500:])


def trace(args: argparse.Namespace, epoch: int, batch_idx: int, data: torch.Tensor) -> None:
    """One line per trained batch in ``--trace`` (which batch, which process, when)."""
    if args.trace:
        with open(args.trace, "a") as out:
            out.write(json.dumps({"epoch": epoch, "batch": batch_idx, "sum": float(data.double().sum()),
                                  "pid": os.getpid(), "restart": int(os.environ.get("HETERO_RESTART",
                                                                      os.environ.get("TORCHELASTIC_RESTART_COUNT", 0))),
                                  "time": time.time()}) + "\n")


def train(args: argparse.Namespace, model: nn.Module, g: hetero.recovery.guard.Guard, train_loader: DataLoader,
          optimizer: optim.Optimizer, epoch: int) -> None:
    model.train()

    @g.step
    def step(data: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        device = hetero.torch_device(g.device)
        data, target = data.to(device), target.to(device)
        optimizer.zero_grad()
        output = model(data)
        loss = F.nll_loss(output, target)
        loss.backward()
        optimizer.step()
        return loss

    for batch_idx, (data, target) in enumerate(train_loader):
        loss = step(data, target)
        trace(args, epoch, batch_idx, data)
        if batch_idx % args.log_interval == 0:
            print(f"Train Epoch: {epoch} [{batch_idx * len(data)}/{len(train_loader.dataset)}]\tLoss: {loss.item():.6f}")


def test(model: nn.Module, device: torch.device, test_loader: DataLoader) -> None:
    model.eval()
    test_loss, correct = 0.0, 0
    with torch.no_grad():
        for data, target in test_loader:
            data, target = data.to(device), target.to(device)
            output = model(data)
            test_loss += F.nll_loss(output, target, reduction="sum").item()
            correct += int((output.argmax(dim=1) == target).sum())
    test_loss /= len(test_loader.dataset)
    print(f"Test set: Average loss: {test_loss:.4f}, Accuracy: {correct}/{len(test_loader.dataset)}")


def main() -> None:
    parser = argparse.ArgumentParser(description="PyTorch MNIST-style example on scikit-learn's digits")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--test-batch-size", type=int, default=1000)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=1, help="train on the digits this many times an epoch")
    parser.add_argument("--deterministic", action="store_true", help="torch.use_deterministic_algorithms(True)")
    parser.add_argument("--trace", help="append one JSON line per trained batch to this file")
    parser.add_argument("--save-model", help="save the final state_dict here")
    parser.add_argument("--inject", action="append", default=[], help="a fault rule (hetero.fault.inject)")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(args.deterministic)
    device = hetero.torch_device(hetero.device())

    train_set, test_set = datasets(args.repeat)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=args.test_batch_size)

    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    with hetero.guard({"model": model, "optimizer": optimizer, "scheduler": scheduler}) as g, \
            (hetero.fault.inject(args.inject) if args.inject else contextlib.nullcontext()):
        for epoch in range(1, args.epochs + 1):
            train(args, model, g, train_loader, optimizer, epoch)
            test(model, hetero.torch_device(g.device), test_loader)
            scheduler.step()

    if args.save_model:
        torch.save(model.state_dict(), args.save_model)


if __name__ == "__main__":
    main()
