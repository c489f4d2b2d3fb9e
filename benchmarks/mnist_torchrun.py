"""The peer of ``examples/mnist_digits_hetero.py`` under ``torchrun``: the plain script
(``examples/mnist_digits.py``: its Net, data, ``train`` and ``test``) with the checkpointing
torchrun's fault-tolerance guide describes: a snapshot (model, optimizer, scheduler, torch's
generator, the epoch) saved at the end of every epoch and loaded when the script starts, so a
restarted worker begins again at the start of the epoch it was in.

    python -m torch.distributed.run --standalone --nproc-per-node 1 --max-restarts 1 \\
        benchmarks/mnist_torchrun.py --snapshot /tmp/snap.pt --epochs 3
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import torch
from torch import optim
from torch.optim.lr_scheduler import StepLR
from torch.utils.data import DataLoader

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))
from mnist_digits import Net, datasets, test, train  # noqa: E402 - the plain script's parts


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--snapshot", required=True, help="the epoch snapshot file")
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--lr", type=float, default=1.0)
    parser.add_argument("--gamma", type=float, default=0.7)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--log-interval", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--deterministic", action="store_true")
    parser.add_argument("--trace")
    args = parser.parse_args()
    torch.manual_seed(args.seed)
    torch.use_deterministic_algorithms(args.deterministic)
    device = torch.device("cpu")
    train_set, test_set = datasets(args.repeat)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True)
    test_loader = DataLoader(test_set, batch_size=1000)
    model = Net().to(device)
    optimizer = optim.Adadelta(model.parameters(), lr=args.lr)
    scheduler = StepLR(optimizer, step_size=1, gamma=args.gamma)
    first = 1
    if os.path.exists(args.snapshot):
        snapshot = torch.load(args.snapshot, weights_only=True)
        model.load_state_dict(snapshot["model"])
        optimizer.load_state_dict(snapshot["optimizer"])
        scheduler.load_state_dict(snapshot["scheduler"])
        torch.set_rng_state(snapshot["rng"])
        first = snapshot["epoch"] + 1
        print(f"resuming from the snapshot of epoch {snapshot['epoch']}", file=sys.stderr)
    for epoch in range(first, args.epochs + 1):
        train(args, model, device, train_loader, optimizer, epoch)
        test(model, device, test_loader)
        scheduler.step()
        temporary = args.snapshot + ".tmp"
        torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                    "scheduler": scheduler.state_dict(), "rng": torch.get_rng_state(), "epoch": epoch}, temporary)
        os.replace(temporary, args.snapshot)


if __name__ == "__main__":
    main()
