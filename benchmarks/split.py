"""Split efficiency: one low-arithmetic-intensity launch (STREAM triad, ``a = b + s*c``,
float32) spread over several devices by ``kernel.split``, against each device alone.

    python -m benchmarks.split [--quick] [--devices cpu oneapi:0 opencl:0] [--source cpu]
                               [--elements N] [--repeats N]

*Alone*: ``triad[n]`` on each device with the arrays already there (no copies), waited for.
The split rows wait for the arrays' device after each call too (a split whose rows all go there is
an asynchronous launch; timing only its enqueue would charge its work to the next sample).
*Split*: ``triad.split(devices)[n]`` (adaptive, the default) and ``split(..., adaptive=False)``
(*split always*) with the arrays on ``--source`` (default: the first
device), so parts on other devices pay their copies in and out, as a caller would; the plan
comes from a private cost model taught by the split's own warm-up launches (every launch
records its parts' compute times), and the rows each device got are recorded. Throughput
counts STREAM's bytes (3 arrays x 4 bytes x n per call). Samples are interleaved (one of
each candidate in turn); *split always* is timed after them, interleaved with the best device alone
only (its launches leave every runtime's threads spinning, which its neighbours paid for). The adaptive
split first runs SPLIT_SETTLE launches of its own: a long loop's first few hundred compare the ways
measured close to each other several times, and the samples time what the loop pays after that.
``split_over_best_alone_paired`` (the goal's measure) is the median over rounds of the best device's
sample over the split's of the same round; ``split_over_best_alone`` is the ratio of their medians.
On this machine every device runs on the same two CPU cores, so
the expected ratio split / best alone is about 1 or below: the point is what splitting
costs when there is nothing to gain. On a GPU box, ``--devices cuda:0 cpu`` asks how
close the split comes to the sum of the two devices' throughputs (``sum_alone_gbs``).
16 Mi elements (192 MiB per device); ``--quick``: 2 Mi. Writes ``benchmarks/results/split.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, compare, format_seconds, write_results
from benchmarks.kernel_bench import choose_devices, describe, load_average, print_footer
from hetero.kernels.calibration_kernels import triad
from hetero.scheduler.cost_model import CostModel

MI = 1 << 20
FULL_ELEMENTS, QUICK_ELEMENTS = 16 * MI, 2 * MI
SCALAR = np.float32(3.0)
WARMUP_SPLITS = 8  # launches that teach the private cost model before timing
STEADY_WARMUP = 200  # calls of each candidate before the samples (an adaptive split re-measures the ways it does not run every 128 launches or more: a long loop's choice, not its first guess)
SPLIT_SETTLE = 640  # calls of the adaptive split before that: its first ones compare each way measured close to the chosen one
# with it three times, PROBE_EVERY (128) launches apart, which a long loop pays once (the samples time what it pays after)
STEADY_SAMPLE_S = 0.1  # each sample: calls filling at least this long (the first call after another candidate pays for the switch: its runtime's threads still spinning)


def _arrays(n: int, device: hetero.Device) -> tuple[hetero.Array, hetero.Array, hetero.Array]:
    rng = np.random.default_rng(0)  # copies: memory hetero allocated, as hetero.zeros gives (on cpu
    # it starts on a page, so an OpenCL CPU device can run on it in place; NumPy's own may not)
    b = hetero.asarray(rng.random(n, dtype=np.float32), device=device, copy=True)
    c = hetero.asarray(rng.random(n, dtype=np.float32), device=device, copy=True)
    return hetero.zeros(n, device=device), b, c


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--devices", nargs="+", default=["cpu", "oneapi:0", "opencl:0"])
    parser.add_argument("--source", help="where the split's arrays live (default: the first device)")
    parser.add_argument("--elements", type=int)
    parser.add_argument("--repeats", type=int)
    args = parser.parse_args(argv)
    n = args.elements or (QUICK_ELEMENTS if args.quick else FULL_ELEMENTS)
    repeats = args.repeats or (5 if args.quick else 31)  # the devices alone are a few % apart here: 11 rounds left the
    # best of three medians ~2% above its true speed (the highest of three noisy figures) and the ratio ±4%
    devices, missing = choose_devices(args.devices)
    if len(devices) < 2:
        print(f"split needs two devices or more; found {[d.name for d in devices]}", file=sys.stderr)
        return 0
    source = hetero.device(args.source) if args.source else devices[0]
    load_before = load_average()
    stream_bytes = 3 * 4 * n
    progress = Progress(len(devices) + 2)

    candidates: dict[str, Callable[[], object]] = {}
    resident: dict[str, tuple[hetero.Array, ...]] = {}
    for device in devices:
        arrays = resident[device.name] = _arrays(n, device)
        launcher = triad[n]

        def alone(device: hetero.Device = device, arrays: tuple[hetero.Array, ...] = arrays,
                  launcher: Any = launcher) -> None:
            launcher(*arrays, SCALAR)
            device.synchronize()

        alone()  # compile
        candidates[f"alone {device.name}"] = alone
        progress.step(f"{device.name} alone, compiled")

    split_arrays = resident[source.name] if source.name in resident else _arrays(n, source)
    # "split": the default (adaptive: runs on the source alone when that measured faster);
    # "split always": every launch split as the cost model plans, whatever it costs.
    split_launcher = triad.split(devices, model=CostModel())[n]
    forced_launcher = triad.split(devices, model=CostModel(), adaptive=False)[n]
    for launcher in (forced_launcher, split_launcher):  # one after the other: each learns undisturbed
        for _ in range(WARMUP_SPLITS):
            launcher(*split_arrays, SCALAR)
    progress.step(f"split warm-up: {forced_launcher.last.bounds if forced_launcher.last else None}")

    def waited(launcher: Any) -> Callable[[], object]:
        def call() -> None:  # as the alone rows: the work done, not just queued (a split running
            launcher(*split_arrays, SCALAR)  # whole on the arrays' device is an asynchronous launch)
            source.synchronize()

        return call

    candidates["split"] = waited(split_launcher)
    for _ in range(SPLIT_SETTLE if not args.quick else SPLIT_SETTLE // 4):
        candidates["split"]()

    a, b, c = split_arrays
    correct = True
    for launcher in (split_launcher, forced_launcher):
        a.numpy().fill(0)
        launcher(a, b, c, SCALAR)
        correct = correct and bool(np.allclose(a.numpy(), b.numpy() + SCALAR * c.numpy(), rtol=1e-6))
    # Steady state, as a long loop meets it: past the launcher's first, densely timed launches
    # (STEADY_WARMUP), and each sample a batch of calls filling STEADY_SAMPLE_S, so the rare
    # re-measurements and timed launches count in proportion (not hidden by a median, nor all of it).
    samples: dict[str, list[float]] = {}
    timings = compare(candidates, repeats=repeats, warmup=STEADY_WARMUP, min_time=STEADY_SAMPLE_S, samples_out=samples)
    best_name = min((name for name in timings if name.startswith("alone ")), key=lambda name: timings[name]["median_s"])
    # The same ratio round by round: the best device's sample over the split's of the same round (they
    # ran next to each other, in both orders), whose median is steadier than the ratio of the medians
    # on a machine whose speed swings by a third between spells (each median is then +-5% at 31 rounds)
    rounds = [alone / split for alone, split in zip(samples[best_name], samples["split"], strict=True)]
    paired = statistics.median(rounds)
    # "split always" on its own, beside the best device alone: its launches keep every device's
    # runtime busy, and whichever candidate ran after it paid for their threads still spinning (the
    # adaptive split, its neighbour both ways in the interleaved order, ran 4% slower than the same
    # device alone for it)
    forced_timings = compare({"split always": waited(forced_launcher), best_name: candidates[best_name]},
                             repeats=max(3, repeats // 2), warmup=STEADY_WARMUP // 4, min_time=STEADY_SAMPLE_S)
    timings["split always"] = forced_timings["split always"]
    progress.step("timed")
    plan, forced = split_launcher.last, forced_launcher.last
    rows = dict(zip(plan.devices, [hi - lo for lo, hi in plan.bounds], strict=True)) if plan else {}
    forced_rows = dict(zip(forced.devices, [hi - lo for lo, hi in forced.bounds], strict=True)) if forced else {}

    gbs = {name: stream_bytes / t["median_s"] / 1e9 for name, t in timings.items()}
    alone_gbs = {name.removeprefix("alone "): value for name, value in gbs.items() if name.startswith("alone ")}
    best = best_name.removeprefix("alone ")  # the fastest alone: the least median time, the most GB/s
    ratio = gbs["split"] / alone_gbs[best]
    print(f"triad, {n} float32 elements ({stream_bytes / MI:.0f} MiB per call), split arrays on {source.name}")
    for name, timing in timings.items():
        print(f"  {name:<20} {format_seconds(timing['median_s']):>12}  {gbs[name]:7.2f} GB/s")
    forced_ratio = forced_timings[best_name]["median_s"] / forced_timings["split always"]["median_s"]
    print(f"  split rows: {rows}  (basis: {plan.basis if plan else '-'})")
    print(f"  split always rows: {forced_rows}  (basis: {forced.basis if forced else '-'})")
    print(f"  split / best alone ({best}): {paired:.3f}x round by round ({ratio:.3f}x of the medians); split always: {forced_ratio:.2f}x; sum of devices alone "
          f"{sum(alone_gbs.values()):.2f} GB/s; results correct: {correct}")
    payload: dict[str, Any] = {
        "elements": n, "bytes_per_call": stream_bytes, "source": source.name,
        "devices": [describe(d) for d in devices], "missing": missing, "repeats": repeats,
        "timings": timings, "gbs": gbs, "best_alone": best, "split_over_best_alone": ratio,
        "split_over_best_alone_paired": paired, "split_over_best_alone_rounds": rounds,
        "sum_alone_gbs": sum(alone_gbs.values()), "split_over_sum_alone": gbs["split"] / sum(alone_gbs.values()),
        "split_always_over_best_alone": forced_ratio,
        "split_always_over_sum_alone": gbs["split always"] / sum(alone_gbs.values()),
        "split_always_rows": forced_rows, "split_always_basis": forced.basis if forced else None,
        "split_rows": rows, "split_basis": plan.basis if plan else None,
        "split_always_predicted_s": list(forced.predicted_s) if forced else None,
        "split_always_measured_part_s": list(forced.measured_s) if forced else None,
        "split_correct": correct, "load_average_at_start": load_before,
    }
    path = write_results("split", payload)
    print_footer(missing, load_before, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
