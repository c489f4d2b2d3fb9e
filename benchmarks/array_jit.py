"""The digits MLP's SGD step written in array expressions, eager and under ``hetero.jit``, against
the same step in hand-written hetero kernels on each device, and against PyTorch eager and JAX's
``jax.jit`` on the CPU — side by side in one run.

    python -m benchmarks.array_jit [--quick] [--devices cpu oneapi:0 opencl:0]
                                   [--steps-per-sample 20] [--repeats N]

Sides (each trains its own copy of the same model from the same weights on the same batches,
samples alternating, harness.compare):

- ``kernels``: examples/digits_model.Trainer.step, 15 hand-written ``@hetero.kernel`` launches;
- ``eager``: examples/train_digits_arrays.ArrayTrainer.step, array expressions (fusion on);
- ``jit``: JitArrayTrainer.step, the same expressions under ``hetero.jit`` (one plan, replayed);
- on ``cpu`` only: ``torch`` (the same expressions in PyTorch eager, float32, the CPU wheel's
  threads) and ``jax`` (the same function under ``jax.jit``, its CPU backend), where installed.

A sample is ``--steps-per-sample`` steps then a device synchronize, each step uploading its batch
as the example does. Goals (issue 46): jit <= 1.2x and eager <= 2x the kernels' step; on the
CPU, jit ahead of torch eager. Writes ``benchmarks/results/array_jit.json``.
"""

from __future__ import annotations

import argparse
import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from benchmarks.harness import command_line, compare, format_seconds, write_results
from benchmarks.kernel_bench import DEFAULT_DEVICES, choose_devices, describe, load_average, print_footer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from digits_model import CLASSES, Trainer, initial_weights, load_digits, to_device
from train_digits_arrays import ArrayTrainer, JitArrayTrainer

import hetero

LR, BATCH = 0.2, 64


def torch_side(data: Any, steps: int) -> Callable[[], None] | None:
    """The step in PyTorch eager (the arrays' expressions, no autograd), or None without torch."""
    try:
        import torch
    except ImportError:
        return None
    order = Trainer(data, {}, seed=0, lr=LR, batch=BATCH)
    onehot = np.eye(CLASSES, dtype=np.float32)[data.y_train]
    w = {k: torch.from_numpy(v.copy()) for k, v in initial_weights(0).items()}
    numbers = itertools.count()

    def step(k: int) -> None:
        index = order.batch_indices(k)
        x, y = torch.from_numpy(data.x_train[index].copy()), torch.from_numpy(onehot[index].copy())
        h = torch.clamp_min(x @ w["w1"] + w["b1"], 0)
        logits = h @ w["w2"] + w["b2"]
        shifted = logits - logits.max(dim=1, keepdim=True).values
        e = torch.exp(shifted)
        total = e.sum(dim=1, keepdim=True)
        grad_logits = (e / total - y) * (1.0 / len(index))
        grad_w2, grad_b2 = h.T @ grad_logits, grad_logits.sum(dim=0)
        grad_h = torch.where(h > 0, grad_logits @ w["w2"].T, 0.0)
        grad_w1, grad_b1 = x.T @ grad_h, grad_h.sum(dim=0)
        w["w1"].sub_(LR * grad_w1)
        w["b1"].sub_(LR * grad_b1)
        w["w2"].sub_(LR * grad_w2)
        w["b2"].sub_(LR * grad_b2)

    def run() -> None:
        for _ in range(steps):
            step(next(numbers))
    return run


def jax_side(data: Any, steps: int) -> Callable[[], None] | None:
    """The step under ``jax.jit`` on JAX's CPU backend, or None without JAX."""
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return None
    order = Trainer(data, {}, seed=0, lr=LR, batch=BATCH)
    onehot = np.eye(CLASSES, dtype=np.float32)[data.y_train]
    cpu = jax.devices("cpu")[0]
    params = {k: jax.device_put(v, cpu) for k, v in initial_weights(0).items()}
    numbers = itertools.count()

    @jax.jit
    def update(p: dict[str, Any], x: Any, y: Any) -> dict[str, Any]:
        h = jnp.maximum(x @ p["w1"] + p["b1"], 0)
        logits = h @ p["w2"] + p["b2"]
        shifted = logits - jnp.max(logits, axis=1, keepdims=True)
        e = jnp.exp(shifted)
        total = jnp.sum(e, axis=1, keepdims=True)
        grad_logits = (e / total - y) * (1.0 / x.shape[0])
        grad_h = jnp.where(h > 0, grad_logits @ p["w2"].T, 0.0)
        grads = {"w1": x.T @ grad_h, "b1": jnp.sum(grad_h, axis=0), "w2": h.T @ grad_logits,
                 "b2": jnp.sum(grad_logits, axis=0)}
        return {k: p[k] - LR * grads[k] for k in p}

    def run() -> None:
        nonlocal params
        for _ in range(steps):
            index = order.batch_indices(next(numbers))
            params = update(params, jax.device_put(data.x_train[index], cpu), jax.device_put(onehot[index], cpu))
        jax.block_until_ready(params)
    return run


def measure_device(device: hetero.Device, steps: int, repeats: int, warmup: int) -> dict[str, Any]:
    data = load_digits(0)
    classes = {"kernels": Trainer, "eager": ArrayTrainer, "jit": JitArrayTrainer}
    trainers = {side: cls(data, to_device(initial_weights(0), device), seed=0, lr=LR, batch=BATCH)
                for side, cls in classes.items()}
    counters = {side: itertools.count() for side in classes}

    def hetero_side(side: str) -> Callable[[], None]:
        trainer, numbers = trainers[side], counters[side]

        def run() -> None:
            for _ in range(steps):
                trainer.step(next(numbers))
            device.synchronize()
        return run

    candidates: dict[str, Callable[[], None]] = {side: hetero_side(side) for side in classes}
    if device.name == "cpu":
        for name, make in (("torch", torch_side), ("jax", jax_side)):
            side = make(data, steps)
            if side is not None:
                candidates[name] = side
    for run in candidates.values():  # every kernel built and the plan traced before timing
        run()
    identical = all(np.array_equal(trainers["eager"].state[k].numpy(), trainers["jit"].state[k].numpy())
                    for k in trainers["eager"].state)
    timings = compare(candidates, repeats=repeats, warmup=warmup)
    step_s = {side: timings[side]["median_s"] / steps for side in candidates}
    ratios = {f"{side}_over_kernels": step_s[side] / step_s["kernels"] for side in ("eager", "jit")}
    for other in ("torch", "jax"):
        if other in step_s:
            ratios[f"jit_over_{other}"] = step_s["jit"] / step_s[other]
    return {"device": describe(device), "steps_per_sample": steps, "timings": timings, "step_s": step_s,
            "ratios": ratios, "jit_bit_identical_to_eager": identical,
            "jit_plan": trainers["jit"].update.describe(),  # type: ignore[attr-defined]
            "goals": {"jit_over_kernels_max": 1.2, "eager_over_kernels_max": 2.0, "jit_over_torch_max": 1.0}}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.array_jit", description=__doc__.split("\n\n")[0])
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
    print(f"{'device':<9} | {'kernels':>9} {'eager':>9} {'jit':>9} {'torch':>9} {'jax':>9} per step | "
          f"eager/k  jit/k  jit/torch  jit/jax | jit == eager")
    for device in devices:
        row = measure_device(device, args.steps_per_sample, repeats, warmup)
        rows.append(row)
        s, r = row["step_s"], row["ratios"]

        def cell(side: str) -> str:
            return format_seconds(s[side]) if side in s else "-"

        def ratio(name: str) -> str:
            return f"{r[name]:.2f}x" if name in r else "-"

        print(f"{device.name:<9} | {cell('kernels'):>9} {cell('eager'):>9} {cell('jit'):>9} {cell('torch'):>9} "
              f"{cell('jax'):>9}          | {ratio('eager_over_kernels'):>7} {ratio('jit_over_kernels'):>6} "
              f"{ratio('jit_over_torch'):>10} {ratio('jit_over_jax'):>8} | {row['jit_bit_identical_to_eager']}")
    path = write_results("array_jit", {
        "config": {"quick": args.quick, "steps_per_sample": args.steps_per_sample, "repeats": repeats, "warmup": warmup,
                   "batch": BATCH, "hidden": 32, "lr": LR, "seed": 0, "dtype": "float32",
                   "load_average_at_start": load_before, "load_average_at_end": load_average()},
        "devices": [describe(d) for d in devices],
        "missing_devices": missing,
        "rows": rows,
    }, command_line("benchmarks.array_jit", sys.argv[1:] if argv is None else argv))
    print_footer(missing, load_before, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
