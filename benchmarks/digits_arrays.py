"""The digits MLP's SGD step in array expressions (examples/train_digits_arrays.py) against the
same step in hand-written hetero kernels (examples/digits_model.py), side by side on each device.

    python -m benchmarks.digits_arrays [--quick] [--devices oneapi:0 cpu opencl:0]
                                       [--steps-per-sample 20] [--repeats N]

Each side trains its own copy of the same model from the same weights on the same batches;
samples alternate between the sides (harness.compare, ABBA order) so machine noise lands on
all of them alike. A sample is ``--steps-per-sample`` steps then a device synchronize, so
the time per step includes the device's work, not only the enqueueing. A third side runs
the array step with fusion off (``hetero.fusion(False)``: one kernel per operation), to show
what fusion saves. Also per side: kernel launches a step (vendor BLAS calls included) and the
test accuracy after the benchmark's steps (the sides train the same steps: they should agree).
No goal: the array version is expected to cost more per step (more launches, and each
operation's Python dispatch), and this says how much. Writes ``benchmarks/results/digits_arrays.json``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import command_line, compare, format_seconds, write_results
from benchmarks.kernel_bench import DEFAULT_DEVICES, choose_devices, describe, load_average, print_footer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from digits_model import Trainer, initial_weights, load_digits, to_device
from train_digits_arrays import ArrayTrainer

import hetero
from hetero.core.launch_counts import launch_counts

SIDES = ("kernels", "arrays", "arrays_unfused")
METHODS = {
    "kernels": "digits_model.Trainer.step: 15 hand-written @hetero.kernel launches",
    "arrays": "train_digits_arrays.ArrayTrainer.step: array expressions, fused (the default)",
    "arrays_unfused": "the same ArrayTrainer.step under hetero.fusion(False): one kernel per operation",
}


def measure_device(device: hetero.Device, steps: int, repeats: int, warmup: int) -> dict[str, Any]:
    data = load_digits(0)
    trainers = {side: (Trainer if side == "kernels" else ArrayTrainer)(data, to_device(initial_weights(0), device),
                                                                        seed=0, lr=0.2, batch=64) for side in SIDES}
    counters = {side: itertools.count() for side in SIDES}

    def sample(side: str) -> Callable[[], None]:
        trainer, numbers, fused = trainers[side], counters[side], side != "arrays_unfused"

        def run() -> None:
            with hetero.fusion(fused):
                for _ in range(steps):
                    trainer.step(next(numbers))
                device.synchronize()
        return run

    candidates = {side: sample(side) for side in SIDES}
    launches = {}
    for side in SIDES:  # one step alone, counted (also the first warm-up: every kernel is built here)
        before = launch_counts().get(device.name, 0)
        candidates[side]()
        launches[side] = (launch_counts().get(device.name, 0) - before) / steps
    timings = compare(candidates, repeats=repeats, warmup=warmup)
    step_s = {side: timings[side]["median_s"] / steps for side in SIDES}
    return {
        "device": describe(device), "steps_per_sample": steps, "methods": METHODS,
        "timings": timings, "step_s": step_s,
        "steps_per_s": {side: 1.0 / step_s[side] for side in SIDES},
        "launches_per_step": launches,
        "arrays_over_kernels": step_s["arrays"] / step_s["kernels"],
        "unfused_over_fused": step_s["arrays_unfused"] / step_s["arrays"],
        "steps_trained": {side: next(counters[side]) for side in SIDES},
        "test_accuracy": {side: trainers[side].test_accuracy() for side in SIDES},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.digits_arrays", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--devices", nargs="+", metavar="DEVICE", default=list(DEFAULT_DEVICES),
                        help=f"devices to run on (default: {' '.join(DEFAULT_DEVICES)}, those present)")
    parser.add_argument("--steps-per-sample", type=int, default=20, help="SGD steps per timed sample (default 20)")
    parser.add_argument("--repeats", type=int, help="samples per side (default 15, --quick 5)")
    args = parser.parse_args(argv)
    repeats = args.repeats or (5 if args.quick else 15)
    warmup = 1 if args.quick else 2
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    rows = []
    print(f"{'device':<9} | {'kernels':>9} {'arrays':>9} {'unfused':>9} per step | {'arrays/kernels':>14} "
          f"{'unfused/fused':>13} | launches a step k/a/u | accuracy k/a/u")
    for device in devices:
        row = measure_device(device, args.steps_per_sample, repeats, warmup)
        rows.append(row)
        s, n, acc = row["step_s"], row["launches_per_step"], row["test_accuracy"]
        print(f"{device.name:<9} | {format_seconds(s['kernels']):>9} {format_seconds(s['arrays']):>9} "
              f"{format_seconds(s['arrays_unfused']):>9}          | {row['arrays_over_kernels']:>13.2f}x "
              f"{row['unfused_over_fused']:>12.2f}x | {n['kernels']:.0f} / {n['arrays']:.0f} / {n['arrays_unfused']:.0f}"
              f"{'':<10} | " + " / ".join(f"{acc[side] * 100:.2f}%" for side in SIDES))
    path = write_results("digits_arrays", {
        "config": {"quick": args.quick, "steps_per_sample": args.steps_per_sample, "repeats": repeats, "warmup": warmup,
                   "batch": 64, "hidden": 32, "lr": 0.2, "seed": 0, "dtype": "float32",
                   "load_average_at_start": load_before, "load_average_at_end": load_average()},
        "devices": [describe(d) for d in devices],
        "missing_devices": missing,
        "rows": rows,
    }, command_line("benchmarks.digits_arrays", sys.argv[1:] if argv is None else argv))
    print_footer(missing, load_before, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
