"""What fault injection costs: a one-work-item kernel launched and waited for with injection off
(no rule: the runtime carries no wrapper) and armed (a rule on this device's launch and sync that
never fires: two wrappers counting calls), in alternating rounds; plus what ``health()`` costs on
OpenCL devices, where it runs a probe kernel (what the health monitor pays per poll).

    python -m benchmarks.injection_overhead [--quick] [--devices oneapi:0 cpu opencl:0] [--rounds N]

Goals (reported, never enforced): off costs nothing, checked structurally (no wrapper on the
runtime); armed, one wrapped call adds at most 1 us (the wrapped and the bare ``synchronize`` timed
interleaved, sample by sample). The end-to-end off/armed launch+sync rounds are information: on a
busy machine their difference is mostly noise.
Writes ``benchmarks/results/injection_overhead.json``.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, command_line, compare, format_seconds, measure, write_results
from benchmarks.kernel_bench import DEFAULT_DEVICES, choose_devices, describe, is_opencl, load_average, print_footer
from hetero import f32
from hetero.fault.injection import inject, wrapped_methods

GOAL_WRAPPER_MAX_S = 1e-6
NEVER = 10**12  # nth call of a rule that must not fire during the benchmark


@hetero.kernel
def store_one(out: hetero.Array[f32], a: f32):
    out[0] = a


def launcher(device: hetero.Device) -> Callable[[], None]:
    out, a, launch = hetero.zeros(1, dtype="float32", device=device), np.float32(2.0), store_one[1]

    def run() -> None:
        launch(out, a)
        device.synchronize()

    run()
    return run


def measure_device(device: hetero.Device, rounds: int, repeats: int, min_time: float) -> dict[str, Any]:
    first_health = None
    if is_opencl(device) and getattr(device.runtime, "_probe", True) is None:  # not built yet in this process
        start = time.perf_counter()
        device.health()
        first_health = time.perf_counter() - start
    run = launcher(device)
    rule = [f"{device.name}:launch:nth={NEVER}:lost", f"{device.name}:sync:nth={NEVER}:lost"]
    medians: dict[str, list[float]] = {"off": [], "armed": []}
    wrapped: dict[str, list[str]] = {}
    for round_ in range(rounds):
        for name in ("off", "armed") if round_ % 2 == 0 else ("armed", "off"):
            if name == "off":
                wrapped["off"] = wrapped_methods(device.runtime)
                medians["off"].append(measure(run, repeats, 20, min_time)["median_s"])
            else:
                with inject(rule) as injection:
                    wrapped["armed"] = wrapped_methods(device.runtime)
                    medians["armed"].append(measure(run, repeats, 20, min_time)["median_s"])
                if injection.fired:
                    raise RuntimeError(f"the benchmark rule fired on {device.name}: {injection.fired}")
    off, armed = statistics.median(medians["off"]), statistics.median(medians["armed"])
    row: dict[str, Any] = {"device": describe(device), "off_s": off, "armed_s": armed, "added_s": armed - off,
                           "round_medians": medians, "wrapped_methods": wrapped}
    # The wrapper alone, interleaved sample by sample with the bare method (both alive at once):
    # synchronize() with nothing queued, so the call itself is close to free.
    runtime = device.runtime
    bare = type(runtime).synchronize.__get__(runtime)
    with inject(rule[1]):
        per_call = compare({"bare": bare, "wrapped": runtime.synchronize}, repeats * 2, 200, min_time)
    row["wrapper_s"] = per_call["wrapped"]["median_s"] - per_call["bare"]["median_s"]
    row["bare_sync_s"], row["wrapped_sync_s"] = per_call["bare"]["median_s"], per_call["wrapped"]["median_s"]
    if is_opencl(device):
        row["health_first_call_s"] = first_health  # context + probe build (from PyOpenCL's disk cache when warm)
        row["health_probe_s"] = measure(device.runtime.health, repeats, 3, min_time)["median_s"]
    return row


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    header = (f"{'device':>9} | {'off':>10} {'armed':>10} {'added':>10} | {'per wrapped call':>16} | "
              f"{'health() probe':>14}")
    print(header)
    print("-" * len(header))
    for row in rows:
        probe = format_seconds(row["health_probe_s"]) if "health_probe_s" in row else "-"
        print(f"{row['device']['name']:>9} | {format_seconds(row['off_s']):>10} {format_seconds(row['armed_s']):>10} "
              f"{format_seconds(row['added_s']):>10} | {format_seconds(row['wrapper_s']):>16} | {probe:>14}")


def goal_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    summary = []
    for row in rows:
        name = row["device"]["name"]
        bare = row["wrapped_methods"]["off"] == []
        summary.append({"goal": "injection off: no wrapper on the runtime", "device": name,
                        "value": row["wrapped_methods"]["off"], "status": "pass" if bare else "fail"})
        summary.append({"goal": f"armed: one wrapped call adds <= {GOAL_WRAPPER_MAX_S * 1e6:.0f} us", "device": name,
                        "value": row["wrapper_s"], "status": "pass" if row["wrapper_s"] <= GOAL_WRAPPER_MAX_S else "fail"})
    return summary


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rounds and shorter samples")
    parser.add_argument("--devices", nargs="+", default=list(DEFAULT_DEVICES))
    parser.add_argument("--rounds", type=int, default=None, help="alternating off/armed rounds (default 10; quick 4)")
    args = parser.parse_args(argv)
    rounds = args.rounds or (4 if args.quick else 10)
    repeats, min_time = (9, 0.002) if args.quick else (21, 0.005)
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    progress = Progress(len(devices))
    rows = []
    for device in devices:
        progress.step(device.name)
        rows.append(measure_device(device, rounds, repeats, min_time))
    print_table(rows)
    summary = goal_summary(rows)
    for line in summary:
        value = line["value"] if not isinstance(line["value"], float) else format_seconds(line["value"])
        print(f"{line['status']:>4}  {line['device']:>9}  {line['goal']}: {value}")
    path = write_results("injection_overhead", {"rounds": rounds, "repeats": repeats, "rows": rows, "goals": summary,
                                                "missing_devices": missing, "load_average_before": load_before},
                         command_line("benchmarks.injection_overhead", sys.argv[1:] if argv is None else argv))
    print_footer(missing, load_before, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
