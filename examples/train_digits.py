"""Train a small MLP on scikit-learn's digits with hetero kernels only, under hetero.guard: a
device fault mid-run moves the training to another device, and it finishes as if nothing happened.

    python examples/train_digits.py                                   # on hetero.device()
    python examples/train_digits.py --inject 'oneapi:0:launch:nth=300:lost'
    python examples/train_digits.py --device opencl:0 --steps 600 --json

With ``--inject`` (a fault rule, as in HETERO_FAULTS: DEVICE:OP:TRIGGER:WHAT) the run starts on
the rule's device unless ``--device`` says otherwise; the injected error is that backend's own
(e.g. CL_DEVICE_NOT_AVAILABLE on an OpenCL device), so classification, quarantine and the
guard's migration run exactly as for a real fault. A drill does not touch your real quarantine:
a device quarantined for an injected fault stays quarantined in this process only (under
hetero-run: in that run only), unless HETERO_FAULTS_PERSIST=1.

``--checkpoint-every K`` also saves a disk checkpoint every K steps (hetero.checkpoint), and a
run started with HETERO_RESUME_STEP set (as ``hetero-run`` restarts a worker) resumes from the
newest one.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))  # digits_model, digits_kernels

import numpy as np
from digits_model import Trainer, initial_weights, load_digits, to_device

import hetero


def parse_args(argv: list[str] | None = None, description: str | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description or __doc__.splitlines()[0])
    parser.add_argument("--device", help="where to start (default: the --inject rule's device, else hetero.device())")
    parser.add_argument("--steps", type=int, default=600, help="SGD steps (default 600)")
    parser.add_argument("--seed", type=int, default=0, help="data split, initial weights and batches (default 0)")
    parser.add_argument("--hidden", type=int, default=32, help="hidden units (default 32)")
    parser.add_argument("--lr", type=float, default=0.2, help="learning rate (default 0.2)")
    parser.add_argument("--batch", type=int, default=64, help="batch size (default 64)")
    parser.add_argument("--inject", metavar="RULE", help="inject a fault, e.g. 'oneapi:0:launch:nth=300:lost'")
    parser.add_argument("--snapshot-every", type=int, default=10, help="guard snapshot interval in steps (default 10)")
    parser.add_argument("--checkpoint-every", type=int, default=0, help="disk checkpoint interval (default 0: none)")
    parser.add_argument("--no-guard", action="store_true", help="train without hetero.guard (for comparison)")
    parser.add_argument("--log-every", type=int, default=0, help="progress interval (default: steps/10)")
    parser.add_argument("--compare", action="store_true",
                        help="with --inject: also train fault-free on the same device and seed, and compare")
    parser.add_argument("--json", action="store_true", help="print a one-line JSON summary at the end")
    args = parser.parse_args(argv)
    for name in ("steps", "snapshot_every", "batch", "hidden"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be >= 1")
    return args


def starting_device(args: argparse.Namespace) -> hetero.Device:
    if args.device:
        return hetero.device(args.device)
    if args.inject:
        from hetero.fault.injection_rules import parse_rules

        named = [rule.device for rule in parse_rules(args.inject) if not any(c in rule.device for c in "*?[")]
        if named:
            return hetero.device(named[0])
    return hetero.device()


def initial_state(args: argparse.Namespace, device: hetero.Device) -> tuple[dict[str, Any], int]:
    """Fresh weights from the seed, or the newest checkpoint when hetero-run restarted us."""
    if hetero.checkpoint.resume_step() is not None:
        loaded = hetero.checkpoint.load(device=device)
        if loaded is not None:
            saved, step = loaded
            print(f"resuming from the checkpoint of step {step}")
            return {k: hetero.asarray(v, device=device) for k, v in saved.items()}, step
    return to_device(initial_weights(args.seed, args.hidden), device), 0


def train(args: argparse.Namespace, trainer_class: type[Trainer] = Trainer) -> dict[str, Any]:
    """The training loop, around ``trainer_class``'s steps (examples/train_digits_arrays.py passes
    the array version)."""
    if args.inject:
        print("fault drill: a device quarantined for the injected fault stays quarantined in this process only "
              "(your quarantine store is untouched)")
    data = load_digits(args.seed)
    device = starting_device(args)
    state, first = initial_state(args, device)
    trainer = trainer_class(data, state, seed=args.seed, lr=args.lr, batch=args.batch)
    log_every = args.log_every or max(1, args.steps // 10)
    guard = (contextlib.nullcontext(None) if args.no_guard
             else hetero.guard(state, snapshot_every=args.snapshot_every, device=device, start_step=first))
    injection = hetero.fault.inject(args.inject) if args.inject else contextlib.nullcontext()
    print(f"training a 64-{args.hidden}-10 MLP on {len(data.x_train)} digits, {args.steps} steps, starting on "
          f"{device.name}" + (f", fault rule {args.inject!r}" if args.inject else ""))
    start = time.perf_counter()
    with guard as g:
        with injection:
            seen = 0
            for step in range(first, args.steps):
                loss = g.run(trainer.step, step) if g is not None else trainer.step(step)
                if g is not None and len(g.recoveries) > seen:
                    for event in g.recoveries[seen:]:
                        print(f"  recovery: step {event['step']}: {event['error']}\n"
                              f"            {event['fault_class']} -> {event['action']}: moved "
                              f"{event['failed_device']} -> {event['device']}, restored the snapshot of step "
                              f"{event['snapshot_step']}, replayed {event['steps_replayed']} step(s) in "
                              f"{event['recovery_seconds'] * 1e3:.1f} ms")
                    seen = len(g.recoveries)
                if (step + 1) % log_every == 0 or step + 1 == args.steps:
                    where = g.device.name if g is not None else device.name
                    print(f"  step {step + 1:5d}  loss {float(np.mean(loss.numpy())):.4f}  on {where}")
                if args.checkpoint_every and (step + 1) % args.checkpoint_every == 0:
                    hetero.checkpoint.save(state, step + 1)
            hetero.synchronize()
        seconds = time.perf_counter() - start
        accuracy = trainer.test_accuracy()
        final = g.device.name if g is not None else device.name
        recoveries = list(g.recoveries) if g is not None else []
        snapshots = g.snapshots_taken if g is not None else 0
    print(f"test accuracy {accuracy * 100:.2f}% after {args.steps} steps ({seconds:.2f} s, "
          f"{(args.steps - first) / seconds:.0f} steps/s); started on {device.name}, finished on {final}, "
          f"{len(recoveries)} recovery(ies)")
    return {
        "accuracy": accuracy, "start_device": device.name, "final_device": final, "steps": args.steps,
        "first_step": first, "seed": args.seed, "seconds": seconds, "steps_per_second": (args.steps - first) / seconds,
        "snapshots": snapshots, "recoveries": recoveries, "inject": args.inject,
        "weights": {k: float(np.abs(v.numpy()).sum()) for k, v in state.items()},
    }


def main(argv: list[str] | None = None, trainer_class: type[Trainer] = Trainer, description: str | None = None) -> int:
    args = parse_args(argv, description)
    try:
        summary = train(args, trainer_class)
    except hetero.RecoveryFailedError as exc:
        print(f"training stopped: {exc}", file=sys.stderr)
        raise
    if args.compare and args.inject:
        print(f"\nthe same run without the fault, on {summary['start_device']}:")
        clean = train(argparse.Namespace(**{**vars(args), "inject": None, "device": summary["start_device"],
                                            "log_every": args.steps}), trainer_class)
        difference = abs(summary["accuracy"] - clean["accuracy"]) * 100
        summary["fault_free_accuracy"] = clean["accuracy"]
        print(f"with the fault {summary['accuracy'] * 100:.2f}% (on {summary['start_device']} then "
              f"{summary['final_device']}), without {clean['accuracy'] * 100:.2f}%: {difference:.2f} percentage "
              f"points apart ({'within' if difference <= 0.5 else 'NOT within'} 0.5)")
    if args.json:
        print(json.dumps(summary, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
