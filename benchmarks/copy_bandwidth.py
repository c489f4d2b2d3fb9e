"""Copy bandwidth: ``hetero.copyto`` against the raw vendor library doing the same copy,
measured side by side in one run, for every ordered pair of devices and host<->device.

    python -m benchmarks.copy_bandwidth [--quick] [--sizes 1KiB 4MiB ...] [--devices cpu oneapi:0]

Sizes run from 1 KiB up to 256 MiB in powers of 4 (``--quick``: up to 4 MiB, fewer
repeats). Writes ``benchmarks/results/copy_bandwidth.json`` and prints a table and the
host<->oneapi goals (hetero at most 1.3x PyOpenCL at 1 KiB, 1.1x at 256 MiB), which are
reported, never enforced.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, Timing, command_line, compare, format_bytes, format_seconds, parse_bytes, write_results
from benchmarks.raw_copies import raw_copy
from hetero.backends.opencl.pool import PooledBuffer

KiB, MiB = 1 << 10, 1 << 20
SIZES = tuple(KiB * 4**k for k in range(10))  # 1 KiB ... 256 MiB
QUICK_LIMIT = 4 * MiB
# (size, most hetero/raw median ratio allowed) for host<->oneapi copies.
GOALS = ((1 * KiB, 1.3), (256 * MiB, 1.1))

Side = hetero.Device | None  # None: a host NumPy array


def schedule(nbytes: int, quick: bool) -> tuple[int, int, float]:
    """(repeats, warmup calls, min seconds per sample) for one size: many short samples
    for small copies, 15 for the biggest (fewer let a busy machine swing the ratio by 10%)."""
    if quick:
        repeats = 15 if nbytes <= 64 * KiB else 9
        return repeats, 10 if nbytes <= MiB else 2, 0.001
    repeats = 61 if nbytes <= 64 * KiB else 31 if nbytes <= 4 * MiB else 15
    warmup = 50 if nbytes <= MiB else 3 if nbytes <= 16 * MiB else 2
    return repeats, warmup, 0.003


def routes(devices: Sequence[hetero.Device]) -> list[tuple[Side, Side]]:
    """Every ordered (src, dst) pair of devices, same device included, then host<->each device."""
    pairs: list[tuple[Side, Side]] = [(src, dst) for src in devices for dst in devices]
    for each in devices:
        pairs += [(None, each), (each, None)]
    return pairs


def side_name(side: Side) -> str:
    return "host" if side is None else side.name


class Arrays:
    """The preallocated arrays of one size: a patterned source and a destination per
    device and on the host, and zeros to reset destinations between checks."""

    def __init__(self, nbytes: int, devices: Sequence[hetero.Device]) -> None:
        rng = np.random.default_rng(nbytes)
        # A prime-length random block, tiled: a misplaced or partial copy shows.
        self.pattern = np.resize(rng.integers(0, 256, 4093, dtype=np.uint8), nbytes)
        self.zeros = np.zeros(nbytes, dtype=np.uint8)
        self.host_dst = np.zeros(nbytes, dtype=np.uint8)  # written now: no page faults in the timings
        self.sources: dict[str, hetero.Array] = {}
        self.targets: dict[str, hetero.Array] = {}
        for each in devices:
            self.sources[each.name] = hetero.empty(nbytes, hetero.uint8, device=each)
            self.targets[each.name] = hetero.empty(nbytes, hetero.uint8, device=each)
            hetero.copyto(self.sources[each.name], self.pattern)
            hetero.copyto(self.targets[each.name], self.zeros)
            each.synchronize()

    def source(self, side: Side) -> hetero.Array | np.ndarray:
        return self.pattern if side is None else self.sources[side.name]

    def target(self, side: Side) -> hetero.Array | np.ndarray:
        return self.host_dst if side is None else self.targets[side.name]

    def reset(self, side: Side) -> None:
        if side is None:
            self.host_dst.fill(0)
        else:
            hetero.copyto(self.targets[side.name], self.zeros)
            side.synchronize()

    def holds_pattern(self, side: Side) -> bool:
        out = self.target(side)
        return bool(np.array_equal(out if isinstance(out, np.ndarray) else out.numpy(), self.pattern))


def hetero_copy(dst: hetero.Array | np.ndarray, src: hetero.Array | np.ndarray, dst_side: Side) -> Callable[[], None]:
    """``hetero.copyto(dst, src)``, then the destination device's ``synchronize()``
    (a host destination holds the data when ``copyto`` returns)."""
    copyto = hetero.copyto
    if dst_side is None:
        def to_host() -> None:
            copyto(dst, src)

        return to_host
    synchronize = dst_side.synchronize

    def to_device() -> None:
        copyto(dst, src)
        synchronize()

    return to_device


def _buffer(obj: hetero.Array | np.ndarray) -> Any:
    """What the vendor library copies to or from: the host array, the device's NumPy buffer, or the
    ``cl.Buffer`` inside an OpenCL array's pooled handle."""
    if isinstance(obj, np.ndarray):
        return obj
    return obj.buffer.mem if isinstance(obj.buffer, PooledBuffer) else obj.buffer


def _checked(arrays: Arrays, dst_side: Side, run: Callable[[], None]) -> bool:
    arrays.reset(dst_side)
    run()
    return arrays.holds_pattern(dst_side)


def _with_rate(timing: Timing, nbytes: int) -> dict[str, Any]:
    return {**timing, "gb_per_s": nbytes / timing["median_s"] / 1e9}


def measure_row(arrays: Arrays, src_side: Side, dst_side: Side, nbytes: int, quick: bool, repeats: int | None) -> dict[str, Any]:
    src, dst = arrays.source(src_side), arrays.target(dst_side)
    ours = hetero_copy(dst, src, dst_side)
    reference = raw_copy(dst_side, _buffer(dst), src_side, _buffer(src), nbytes)
    planned, warmup, min_time = schedule(nbytes, quick)
    row: dict[str, Any] = {"src": side_name(src_side), "dst": side_name(dst_side), "bytes": nbytes,
                           "size": format_bytes(nbytes), "hetero_correct": _checked(arrays, dst_side, ours)}
    candidates = {"hetero": ours}
    if reference is not None:
        row["raw_method"], raw_fn = reference
        row["raw_correct"] = _checked(arrays, dst_side, raw_fn)
        candidates["raw"] = raw_fn
    timings = compare(candidates, repeats or planned, warmup, min_time)
    row["hetero"] = _with_rate(timings["hetero"], nbytes)
    row["raw"] = _with_rate(timings["raw"], nbytes) if "raw" in timings else None
    row["ratio"] = timings["hetero"]["median_s"] / timings["raw"]["median_s"] if "raw" in timings else None
    # The ratio of the fastest samples: less swayed by other work on the machine.
    row["ratio_of_min"] = timings["hetero"]["min_s"] / timings["raw"]["min_s"] if "raw" in timings else None
    return row


def goal_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The host<->oneapi ratios at the goal sizes, each goal marked pass, fail or not measured."""
    summary = []
    for nbytes, limit in GOALS:
        chosen = [row for row in rows if row["bytes"] == nbytes and row["ratio"] is not None
                  and {row["src"].partition(":")[0], row["dst"].partition(":")[0]} == {"host", "oneapi"}]
        ratios = {f"{row['src']}->{row['dst']}": row["ratio"] for row in chosen}
        status = "not measured" if not ratios else "pass" if max(ratios.values()) <= limit else "fail"
        summary.append({"size": format_bytes(nbytes), "bytes": nbytes, "goal_max_ratio": limit, "ratios": ratios,
                        "ratios_of_min": {f"{row['src']}->{row['dst']}": row["ratio_of_min"] for row in chosen},
                        "status": status})
    return summary


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    header = f"{'src':>9} {'dst':>9} {'size':>8} | {'hetero':>10} {'raw':>10} | {'hetero GB/s':>11} {'raw GB/s':>9} | {'ratio':>5}"
    print(header)
    print("-" * len(header))
    for row in rows:
        ours, raw = row["hetero"], row["raw"]
        raw_time = format_seconds(raw["median_s"]) if raw else "-"
        raw_rate = f"{raw['gb_per_s']:.3f}" if raw else "-"
        ratio = f"{row['ratio']:.2f}" if raw else "-"
        flags = "" if row["hetero_correct"] and row.get("raw_correct", True) else "  WRONG DATA"
        print(f"{row['src']:>9} {row['dst']:>9} {row['size']:>8} | {format_seconds(ours['median_s']):>10} {raw_time:>10} | "
              f"{ours['gb_per_s']:>11.3f} {raw_rate:>9} | {ratio:>5}{flags}")


def print_summary(summary: Sequence[dict[str, Any]]) -> None:
    for goal in summary:
        ratios = ", ".join(f"{route} {ratio:.2f}x (fastest samples {goal['ratios_of_min'][route]:.2f}x)"
                           for route, ratio in goal["ratios"].items()) or "no host<->oneapi rows"
        print(f"goal host<->oneapi {goal['size']}: hetero/raw <= {goal['goal_max_ratio']}x: {ratios}: {goal['status'].upper()}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.copy_bandwidth", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="sizes up to 4 MiB, fewer repeats")
    parser.add_argument("--sizes", nargs="+", type=parse_bytes, metavar="SIZE", help="sizes to run, e.g. 1KiB 256MiB")
    parser.add_argument("--devices", nargs="+", metavar="DEVICE", help="device names (default: every device)")
    parser.add_argument("--repeats", type=int, help="samples per measurement (default: by size)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = args.sizes or [n for n in SIZES if not args.quick or n <= QUICK_LIMIT]
    devices = [hetero.device(name) for name in args.devices] if args.devices else hetero.devices()
    plan = routes(devices)
    progress = Progress(len(sizes) * len(plan))
    rows = []
    for nbytes in sizes:
        arrays = Arrays(nbytes, devices)
        for src_side, dst_side in plan:
            progress.step(f"{side_name(src_side)} -> {side_name(dst_side)} {format_bytes(nbytes)}")
            rows.append(measure_row(arrays, src_side, dst_side, nbytes, args.quick, args.repeats))
        del arrays
        gc.collect()
    summary = goal_summary(rows)
    path = write_results("copy_bandwidth", {
        "config": {"sizes": sizes, "quick": args.quick, "repeats": args.repeats,
                   "schedule": {format_bytes(n): schedule(n, args.quick) for n in sizes}},
        "devices": [{"name": d.name, "backend": d.backend, "kind": str(d.kind), "model": d.model,
                     "driver_version": d.driver_version} for d in devices],
        "summary": summary,
        "rows": rows,
    }, command_line("benchmarks.copy_bandwidth", sys.argv[1:] if argv is None else argv))
    print_table(rows)
    print()
    print_summary(summary)
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
