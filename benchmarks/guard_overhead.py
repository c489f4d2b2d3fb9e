"""What hetero.guard costs a training loop that never faults: the digits MLP
(examples/train_digits.py) in steps/s with the guard (snapshot every 10 steps) and without.

    python -m benchmarks.guard_overhead [--quick] [--devices oneapi:0 cpu opencl:0]
                                        [--steps-per-sample 50] [--repeats N] [--snapshot-every 10]

Both sides train their own copy of the same model on the same device with the same kernels;
samples alternate between them (harness.compare, ABBA order) so machine noise lands on both.
A sample is ``--steps-per-sample`` steps then a device synchronize. The guarded side keeps one
guard open across samples, so its snapshots fall every 10 steps as in a real run.
Because two loops timed on a busy machine differ by more than 5% on noise alone, the parts
are also timed alone: one snapshot of the model, and what ``g.run`` adds to a call on the
model's state (the generators it reads at each step's entry, which the snapshot keeps, and the
state's fingerprint at each step's entry and end);
``estimated_overhead`` = (snapshot / snapshot_every + g.run's cost) / plain step time; and
``overhead_paired_median`` is the median over back-to-back sample pairs of guarded/plain.
Goal: the guarded loop at most 5% slower on every device, by both of these measures.

The snapshots' own share (issue 19, item 4) is measured apart from g.run's bookkeeping: a third
copy of the model runs under a guard that takes no periodic snapshots (``rare``: it still takes
one when the other loops ran on the device between its samples), paired against the guarded one;
``snapshot_share_paired`` = the extra time per snapshot / ``snapshot_every`` / plain step time,
from the median pair. The part: one snapshot as the guard takes it (copies queued, not waited for:
``snapshot_s``), / ``snapshot_every`` / plain step time (``snapshot_share_parts``). Goal: at most
5% by both.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
from pathlib import Path
from typing import Any

from benchmarks.harness import compare, paired_ratios, write_results
from benchmarks.kernel_bench import DEFAULT_DEVICES, choose_devices, describe, load_average, print_footer

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "examples"))

from digits_model import Trainer, initial_weights, load_digits, to_device

import hetero

GOAL_OVERHEAD = 0.05


def measure_device(device: hetero.Device, steps: int, repeats: int, snapshot_every: int) -> dict[str, Any]:
    data = load_digits(0)
    plain = Trainer(data, to_device(initial_weights(0), device), seed=0)
    guarded = Trainer(data, to_device(initial_weights(0), device), seed=0)
    rare = Trainer(data, to_device(initial_weights(0), device), seed=0)
    plain_steps, guarded_steps, rare_steps = itertools.count(), itertools.count(), itertools.count()
    guard = hetero.guard(guarded.state, snapshot_every=snapshot_every, device=device)
    rare_guard = hetero.guard(rare.state, snapshot_every=1 << 30, device=device)

    def run_plain() -> None:
        for _ in range(steps):
            plain.step(next(plain_steps))
        device.synchronize()

    def run_guarded() -> None:
        for _ in range(steps):
            guard.run(guarded.step, next(guarded_steps))
        device.synchronize()

    def run_rare() -> None:
        for _ in range(steps):
            rare_guard.run(rare.step, next(rare_steps))
        device.synchronize()

    with guard, rare_guard:
        run_guarded()  # the steps' kernels: the standby builds them for the failover device, once
        run_rare()
        guard.wait_standby()  # its one-off preparation and builds there are not a per-step cost
        rare_guard.wait_standby()
        timings = compare({"plain": run_plain, "guarded": run_guarded}, repeats=repeats, warmup=2)
        paired = paired_ratios(run_plain, run_guarded, repeats)
        taken, rare_taken = guard.snapshots_taken, rare_guard.snapshots_taken
        by_snapshots = paired_ratios(run_rare, run_guarded, repeats)
        extra_snapshots = ((guard.snapshots_taken - taken) - (rare_guard.snapshots_taken - rare_taken)) / repeats
    # The parts, each timed alone (steadier than the difference of two noisy loops on a busy machine):
    # one snapshot of the model and of the random generators (as the guard takes it, rng=True), and
    # what g.run adds to a call that does nothing.
    from hetero.fault import snapshot

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
    # The paired guarded/rare samples differ by extra_snapshots snapshots a sample of `steps` steps.
    per_snapshot_s = (statistics.median(by_snapshots) - 1.0) * timings["plain"]["median_s"] / max(extra_snapshots, 1e-9)
    share_paired = per_snapshot_s / snapshot_every / step_s
    share_parts = snapshot_s / snapshot_every / step_s
    plain_rate = steps / timings["plain"]["median_s"]
    guarded_rate = steps / timings["guarded"]["median_s"]
    best_plain, best_guarded = steps / timings["plain"]["min_s"], steps / timings["guarded"]["min_s"]
    return {
        "device": describe(device), "steps_per_sample": steps, "snapshot_every": snapshot_every,
        "plain": timings["plain"], "guarded": timings["guarded"],
        "plain_steps_per_s": plain_rate, "guarded_steps_per_s": guarded_rate,
        "overhead": plain_rate / guarded_rate - 1.0, "overhead_of_min": best_plain / best_guarded - 1.0,
        "overhead_paired_median": statistics.median(paired) - 1.0, "paired_ratios": paired,
        "snapshots_taken": guard.snapshots_taken, "snapshot_s": snapshot_s, "run_added_s": run_added_s,
        "plain_step_s": step_s, "estimated_overhead": estimated,
        "snapshot_vs_rare_ratios": by_snapshots, "extra_snapshots_per_sample": extra_snapshots,
        "snapshot_paired_s": per_snapshot_s, "snapshot_share_paired": share_paired, "snapshot_share_parts": share_parts,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats")
    parser.add_argument("--devices", nargs="+", default=list(DEFAULT_DEVICES))
    parser.add_argument("--steps-per-sample", type=int, default=50)
    parser.add_argument("--repeats", type=int, default=21)
    parser.add_argument("--snapshot-every", type=int, default=10)
    args = parser.parse_args(argv)
    repeats = 7 if args.quick else args.repeats
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    rows = []
    for device in devices:
        row = measure_device(device, args.steps_per_sample, repeats, args.snapshot_every)
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
