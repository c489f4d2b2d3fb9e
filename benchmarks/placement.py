"""Placement decision cost: how long the scheduler takes to choose among 16 devices, per
policy. Goal: a median of at most 20 us per decision (reported, never enforced).

    python -m benchmarks.placement [--quick] [--repeats N]

The decision is :func:`hetero.scheduler.rank` (``full=False``: the winner, as ``place`` and
``hetero.device("auto")`` take it; ``rank-all`` rows order every device, as ``explain`` does) over a synthetic table of 16 devices (six
NVIDIA, four AMD and three Intel GPUs-or-accelerators, three CPUs) with memory in use, tasks,
one quarantined, one degraded and holds by priority classes, for a request of 1 GiB with a
kernel and size (the ``fastest`` policy asks a dictionary-backed cost model for all 16).
No device is touched. ``model/fastest`` is the same decision asking hetero's own in-memory
``CostModel`` (4 kernels x 4 sizes sampled on each device, as ``hetero calibrate`` leaves it):
what a program with a calibrated model pays; before its predictions were kept per kernel, device
and size (2026-12-05) that was 680 us here, a fit per device per decision. For information, also: the same with an ``explain`` table built,
``assign`` of 8 workers, and on this machine's devices the cached ``hetero.device("auto")``
and an uncached ``hetero.scheduler.place()`` (which asks every device's health).

Writes ``benchmarks/results/placement.json``.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import sys
from collections.abc import Callable, Sequence
from typing import Any

from benchmarks.harness import Progress, Timing, command_line, format_seconds, measure, write_results
from benchmarks.kernel_bench import load_average

GOAL_SECONDS = 20e-6
POLICIES = ("first-fit", "binpack", "spread", "fastest", "priority")
GiB = 1 << 30


def synthetic_table() -> list[Any]:
    """16 devices as the policies see them, in configured order, with varied load."""
    from hetero.core.device import DeviceInfo, HealthState, Kind
    from hetero.scheduler import Candidate

    specs = [(f"cuda:{i}", Kind.GPU, "NVIDIA", 80, 132) for i in range(6)]
    specs += [(f"rocm:{i}", Kind.GPU, "AMD", 64, 104) for i in range(4)]
    specs += [(f"oneapi:{i}", Kind.GPU, "Intel", 48, 64) for i in range(2)]
    specs += [("opencl:0", Kind.ACCELERATOR, "Xilinx", 16, 20), ("opencl:1", Kind.CPU, "PoCL", 32, 16),
              ("oneapi:2", Kind.CPU, "Intel", 256, 64), ("cpu", Kind.CPU, "Intel", 512, 64)]
    table = []
    for order, (name, kind, vendor, memory, units) in enumerate(specs):
        backend, _, index = name.partition(":")
        info = DeviceInfo(name=name, backend=backend, index=int(index or 0), vendor=vendor, kind=kind,
                          model=f"model {name}", memory=memory * GiB, compute_units=units, max_work_group_size=1024,
                          fp64=True, driver_version="1", stable_id=f"uuid-{order}")
        table.append(Candidate(info, used=(order * 3 % 7) * GiB, tasks=order % 3, order=order,
                               held_by=(None, "low", "normal")[order % 3], holders=("job",) if order % 3 else ()))
    table[2] = dataclasses.replace(table[2], quarantined=True)
    table[5] = dataclasses.replace(table[5], health=HealthState.DEGRADED)
    return table


@dataclasses.dataclass
class TableCostModel:
    """Predictions from a dictionary: what a calibrated model answers, at dictionary speed."""

    seconds: dict[str, float]

    def predict(self, kernel_key: str, device_stable_id: str, n: int) -> float | None:
        return self.seconds.get(device_stable_id)


def calibrated_model(table: Sequence[Any]) -> Any:
    """hetero's own CostModel (in memory) holding samples of 4 kernels at 4 sizes on every device."""
    from hetero.scheduler.cost_model import CostModel

    model = CostModel()
    for candidate in table:
        for kernel in ("saxpy@0123456789abcdef", "triad@1", "sgemm@2", "relu@3"):
            for n in (1 << 12, 1 << 16, 1 << 20, 1 << 22):
                for _ in range(3):
                    model.record(kernel, candidate.info.stable_id, n, 1e-9 * n / (1 + candidate.order % 5))
    return model


def cases() -> dict[str, Callable[[], object]]:
    from hetero.scheduler import Request, assign, get_policy, rank
    from hetero.scheduler.explanation import explanation

    table = synthetic_table()
    request = Request(memory=GiB, kernel="saxpy@0123456789abcdef", n=1 << 20)
    model = TableCostModel({c.info.stable_id: 1e-3 / (1 + c.order % 5) for c in table})
    found: dict[str, Callable[[], object]] = {}
    for name in POLICIES:
        policy = get_policy(name)
        found[f"decide/{name}"] = functools.partial(rank, table, request, policy, model, full=False)
        found[f"rank-all/{name}"] = functools.partial(rank, table, request, policy, model)
    calibrated = calibrated_model(table)
    found["model/fastest"] = functools.partial(rank, table, request, get_policy("fastest"), calibrated, full=False)
    binpack = get_policy("binpack")
    found["explain/binpack"] = lambda: str(explanation(rank(table, request, binpack, model)))
    found["assign8/spread"] = lambda: assign(8, "spread", table)
    return found


def live_cases() -> dict[str, Callable[[], object]]:
    import hetero
    from hetero.scheduler import forget_decisions, place

    forget_decisions()
    hetero.device("auto")
    return {"live/device('auto') cached": lambda: hetero.device("auto"), "live/place() uncached": place}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.placement", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples")
    parser.add_argument("--repeats", type=int, help="samples per case (default 31, --quick 9)")
    parser.add_argument("--no-live", action="store_true", help="skip the cases on this machine's devices")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    repeats = args.repeats or (9 if args.quick else 31)
    load_before = load_average()
    todo = cases()
    if not args.no_live:
        todo |= live_cases()
    progress = Progress(len(todo))
    rows: list[dict[str, Any]] = []
    for name, fn in todo.items():
        progress.step(name)
        timing: Timing = measure(fn, repeats=repeats, warmup=20)
        rows.append({"case": name, **timing})
    decisions = [row for row in rows if row["case"].startswith("decide/")]
    worst = max(float(row["median_s"]) for row in decisions)
    summary = {"goal": f"median decision for 16 devices <= {format_seconds(GOAL_SECONDS)}, every policy",
               "worst_median_s": worst, "status": "pass" if worst <= GOAL_SECONDS else "fail"}
    path = write_results("placement", {
        "config": {"quick": args.quick, "repeats": repeats, "devices": 16, "request": "memory=1GiB, kernel, n=2**20",
                   "load_average_at_start": load_before, "load_average_at_end": load_average()},
        "summary": summary,
        "rows": rows,
    }, command_line("benchmarks.placement", sys.argv[1:] if argv is None else argv))
    width = max(len(row["case"]) for row in rows)
    print(f"{'case':<{width}}  {'median':>10}  {'min':>10}  {'max':>10}")
    for row in rows:
        print(f"{row['case']:<{width}}  {format_seconds(row['median_s']):>10}  {format_seconds(row['min_s']):>10}  "
              f"{format_seconds(row['max_s']):>10}")
    print()
    print(f"goal {summary['goal']}: worst {format_seconds(worst)}: {str(summary['status']).upper()}")
    print(f"load average at start {load_before}, results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
