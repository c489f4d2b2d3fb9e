"""What hetero.guard costs a training loop that never faults: the digits MLP
(examples/train_digits.py) in steps/s with the guard (snapshot every 10 steps) and without.

    python -m benchmarks.guard_overhead [--quick] [--devices oneapi:0 cpu opencl:0]
                                        [--steps-per-sample 50] [--repeats N] [--pairs N]
                                        [--snapshot-every 10]

Both sides train their own copy of the same model on the same device with the same kernels.
Steps/s: samples of ``--steps-per-sample`` steps then a device synchronize, alternating between the
sides (harness.compare, ABBA order).

``overhead_paired_median`` (the goal's measure): the median over ``--pairs`` back-to-back pairs of
samples of ``snapshot_every`` steps each (the guarded one holds exactly one snapshot), of
guarded/plain. Short samples and many pairs, because this 2-core VM drifts: with 21 pairs of
50-step samples (the measure before 2026-12-04) the median of two *identical* plain loops was
anywhere within +-4%, the same order as the 5% goal, and a guarded run read from +6% to +15% on the
same code; with 300-400 pairs of 10 steps two plain loops read within +-1% (six runs on three
devices) and the guarded one within about +-1.5% from run to run (100 pairs, ``--quick``: +-2%). The guarded sample always starts at a multiple of ``snapshot_every``: its
periodic snapshot falls there, where the guard also notices that the plain loop ran kernels on the
device between its samples (a boundary change, hetero.recovery.fingerprint), so it takes that one
snapshot and no other.

The parts, each timed alone (warm, so they read lower than the same work costs inside the loop,
right after a step): one snapshot of the model, and what ``g.run`` adds to a call on the model's
state (the generators it reads at each step's entry, which the snapshot keeps, and the state's
fingerprint at each step's entry and end); ``estimated_overhead`` = (snapshot / snapshot_every +
g.run's cost) / plain step time. Goal: the guarded loop at most 5% slower on every device, by both
of these measures.

The snapshots' own share (issue 19, item 4), apart from g.run's bookkeeping: one guard, alone on the
device, snapshotting every ``2 * snapshot_every`` steps, runs windows of ``snapshot_every`` steps
back to back (a device synchronize ends each), so every other window holds its snapshot;
``snapshot_share_paired`` = the median over ``--pairs`` pairs of (the window with the snapshot / the
window after it, without) - 1, times the window's time, / ``snapshot_every`` / plain step time: one
snapshot's cost inside the loop, spread over the steps between two. (It used to be the difference of
two guards' loops alternating on one device, which took a boundary snapshot at each other's samples:
a share within +-5% of the truth on noise.) The part: one snapshot as the guard takes it (copies
queued, not waited for: ``snapshot_s``), / ``snapshot_every`` / plain step time
(``snapshot_share_parts``). Goal: at most 5% by both.
"""

from __future__ import annotations

import argparse
import gc
import itertools
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, paired_ratios, write_results
from benchmarks.kernel_bench import DEFAULT_DEVICES, choose_devices, describe, load_average, print_footer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from digits_model import Trainer, initial_weights, load_digits, to_device

import hetero
from hetero.recovery.guard import Guard

GOAL_OVERHEAD = 0.05


def measure_device(device: hetero.Device, steps: int, repeats: int, snapshot_every: int, pairs: int) -> dict[str, Any]:
    data = load_digits(0)
    plain = Trainer(data, to_device(initial_weights(0), device), seed=0)
    guarded = Trainer(data, to_device(initial_weights(0), device), seed=0)
    alone = Trainer(data, to_device(initial_weights(0), device), seed=0)
    plain_steps, guarded_steps, alone_steps = itertools.count(), itertools.count(), itertools.count()
    guard = hetero.guard(guarded.state, snapshot_every=snapshot_every, device=device)
    alone_guard = hetero.guard(alone.state, snapshot_every=2 * snapshot_every, device=device)

    def run_plain(count: int = steps) -> None:
        for _ in range(count):
            plain.step(next(plain_steps))
        device.synchronize()

    def run_guarded(count: int = steps) -> None:
        for _ in range(count):
            guard.run(guarded.step, next(guarded_steps))
        device.synchronize()

    def run_alone(count: int) -> None:
        for _ in range(count):
            alone_guard.run(alone.step, next(alone_steps))
        device.synchronize()

    with guard, alone_guard:
        run_guarded()  # the steps' kernels: the standby builds them for the failover device, once
        run_alone(2 * snapshot_every)
        guard.wait_standby()  # its one-off preparation and builds there are not a per-step cost
        alone_guard.wait_standby()
        timings = compare({"plain": run_plain, "guarded": run_guarded}, repeats=repeats, warmup=2)
        run_guarded(-guard.step_number % snapshot_every)  # the next guarded sample starts with its snapshot
        taken = guard.snapshots_taken
        paired = paired_ratios(lambda: run_plain(snapshot_every), lambda: run_guarded(snapshot_every), pairs)
        snapshots_per_sample = (guard.snapshots_taken - taken) / pairs
        alone_taken = alone_guard.snapshots_taken
        windows = snapshot_windows(run_alone, alone_guard, snapshot_every, pairs)
        alone_snapshots = alone_guard.snapshots_taken - alone_taken
    # The parts, each timed alone (steadier than the difference of two noisy loops on a busy machine):
    # one snapshot of the model and of the random generators (as the guard takes it, rng=True), and
    # what g.run adds to a call that does nothing.
    from hetero.recovery import snapshot

    # A snapshot keeps the generators g.run read at the step's entry (counted in g.run's cost), so
    # the snapshot's part is the state's copy alone; g.run is timed on the model's own state, whose
    # fingerprint it reads at each step's entry and end.
    pending: list[snapshot.Snapshot] = []

    def take() -> None:  # as the guard takes one: copies queued, not waited for; asked about at the next
        if pending:
            pending.pop().complete(block=False)
        pending.append(snapshot.take(guarded.state, 0, wait=False))

    parts = compare({"snapshot": take}, repeats=repeats)
    device.synchronize()
    bare = hetero.guard(guarded.state, snapshot_every=1 << 30, standby=False, device=device)

    def noop() -> None:
        return None

    with bare:
        bare.run(noop)  # its first snapshot
        calls = compare({"direct": noop, "g.run": lambda: bare.run(noop)}, repeats=repeats)
    snapshot_s = parts["snapshot"]["median_s"]
    run_added_s = calls["g.run"]["median_s"] - calls["direct"]["median_s"]
    step_s = timings["plain"]["median_s"] / steps
    estimated = (snapshot_s / snapshot_every + run_added_s) / step_s
    ratios = [with_s / without_s for with_s, without_s in windows]
    per_snapshot_s = (statistics.median(ratios) - 1.0) * statistics.median(without_s for _, without_s in windows)
    share_paired = per_snapshot_s / snapshot_every / step_s
    share_parts = snapshot_s / snapshot_every / step_s
    plain_rate = steps / timings["plain"]["median_s"]
    guarded_rate = steps / timings["guarded"]["median_s"]
    best_plain, best_guarded = steps / timings["plain"]["min_s"], steps / timings["guarded"]["min_s"]
    return {
        "device": describe(device), "steps_per_sample": steps, "snapshot_every": snapshot_every, "pairs": pairs,
        "plain": timings["plain"], "guarded": timings["guarded"],
        "plain_steps_per_s": plain_rate, "guarded_steps_per_s": guarded_rate,
        "overhead": plain_rate / guarded_rate - 1.0, "overhead_of_min": best_plain / best_guarded - 1.0,
        "overhead_paired_median": statistics.median(paired) - 1.0, "paired_ratios": paired,
        "paired_quartiles": quartiles(paired), "snapshots_per_paired_sample": snapshots_per_sample,
        "snapshots_taken": guard.snapshots_taken, "snapshot_s": snapshot_s, "run_added_s": run_added_s,
        "plain_step_s": step_s, "estimated_overhead": estimated,
        "snapshot_window_ratios": ratios, "snapshot_window_quartiles": quartiles(ratios),
        "snapshots_in_windows": alone_snapshots,
        "snapshot_paired_s": per_snapshot_s, "snapshot_share_paired": share_paired, "snapshot_share_parts": share_parts,
    }


def snapshot_windows(run: Callable[[int], None], guard: Guard, snapshot_every: int,
                     pairs: int) -> list[tuple[float, float]]:
    """(seconds of a window of ``snapshot_every`` steps holding the snapshot, of the window after it)
    for ``pairs`` pairs; ``guard`` snapshots every ``2 * snapshot_every`` steps and nothing else runs
    on its device meanwhile, so the window without holds none (garbage collection off)."""
    run(-guard.step_number % (2 * snapshot_every))  # the next window starts with a snapshot
    found = []
    gc.disable()
    try:
        for _ in range(pairs):
            start = time.perf_counter()
            run(snapshot_every)
            middle = time.perf_counter()
            run(snapshot_every)
            found.append((middle - start, time.perf_counter() - middle))
    finally:
        gc.enable()
    return found


def quartiles(values: list[float]) -> list[float]:
    """The first quartile, median and third quartile of ``values``: how wide the pairs spread."""
    return [float(q) for q in statistics.quantiles(values, n=4)] if len(values) > 1 else list(values) * 3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--devices", nargs="+", default=list(DEFAULT_DEVICES))
    parser.add_argument("--steps-per-sample", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=21, help="samples for steps/s and the parts")
    parser.add_argument("--pairs", type=int, default=400, help="pairs of snapshot_every-step samples (--quick: 100)")
    parser.add_argument("--snapshot-every", type=int, default=10)
    args = parser.parse_args(argv)
    repeats = 7 if args.quick else args.repeats
    pairs = 100 if args.quick else args.pairs
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    rows = []
    for device in devices:
        row = measure_device(device, args.steps_per_sample, repeats, args.snapshot_every, pairs)
        rows.append(row)
        print(f"{device.name:<10} plain {row['plain_steps_per_s']:6.0f} steps/s, guarded "
              f"{row['guarded_steps_per_s']:6.0f} steps/s: overhead {row['overhead'] * 100:+5.1f}% "
              f"(median of paired samples {row['overhead_paired_median'] * 100:+5.1f}%); parts: snapshot "
              f"{row['snapshot_s'] * 1e6:.0f} us / {args.snapshot_every} steps + g.run {row['run_added_s'] * 1e6:.1f} us "
              f"a step = {row['estimated_overhead'] * 100:.1f}% of a {row['plain_step_s'] * 1e6:.0f} us step; snapshots alone "
              f"{row['snapshot_share_paired'] * 100:.1f}% paired, {row['snapshot_share_parts'] * 100:.1f}% by parts")
    verdicts = {r["device"]["name"]: "pass" if max(r["overhead_paired_median"], r["estimated_overhead"]) <= GOAL_OVERHEAD
                else "FAIL" for r in rows}
    snapshot_verdicts = {r["device"]["name"]: "pass" if max(r["snapshot_share_paired"], r["snapshot_share_parts"])
                         <= GOAL_OVERHEAD else "FAIL" for r in rows}
    print(f"goal: guarded at most {GOAL_OVERHEAD:.0%} slower: "
          + ", ".join(f"{name} {verdict}" for name, verdict in verdicts.items()))
    print(f"goal: snapshots at most {GOAL_OVERHEAD:.0%} of step time: "
          + ", ".join(f"{name} {verdict}" for name, verdict in snapshot_verdicts.items()))
    path = write_results("guard_overhead", {"rows": rows, "goal": {"max_overhead": GOAL_OVERHEAD, "verdicts": verdicts,
                                                                     "snapshot_verdicts": snapshot_verdicts},
                                            "missing": missing, "load_average_start": load_before})
    print_footer(missing, load_before, path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
