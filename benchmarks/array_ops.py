"""Array operations against their references, side by side in one run: the elementwise
sections of :mod:`benchmarks.array_elementwise` (fused ``a*b + c*d``, ``x + y``, ``x.sum()``,
per-operation overhead, ``x - x.mean(axis=0)`` against the contiguous ``x - y``), the
reductions of :mod:`benchmarks.array_reductions` (``sum``, ``mean``, ``max``, ``argmax`` and
axis reductions of 64 Mi float32 against NumPy, ``pyopencl.array`` and the device's read
bandwidth), then ``matmul``: ``hetero.matmul`` of n x n float32 matrices on each
device's BLAS and on hetero's tiled kernel.

    python -m benchmarks.array_ops [--quick] [--size N] [--elements N] [--devices cpu oneapi:0 opencl:0] [--repeats N]

On ``cpu`` the sides are ``hetero.matmul`` (NumPy's BLAS on the arrays' host memory, through
hetero's launch accounting) and ``numpy.matmul`` on the same data, each making a new result: goal (reported, never
enforced) hetero at least 0.9x NumPy's GFLOP/s. On OpenCL devices: ``hetero.matmul`` with
CLBlast (when installed) and with ``blas: off`` (hetero's tiled kernel), their ratio
information. Every side is checked against float64 NumPy once before timing. Rates are
2 n^3 / time; each sample waits for the device. n = 2048 (``--quick``: 512). Figures taken on a
shared, loaded machine vary with its load (the load average is recorded). Writes
``benchmarks/results/array_ops.json``.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetero
from benchmarks import array_elementwise, array_reductions
from benchmarks.harness import Progress, command_line, compare, format_seconds, write_results
from benchmarks.kernel_bench import DEFAULT_DEVICES, choose_devices, describe, load_average, print_footer, same

FULL_SIZE, QUICK_SIZE = 2048, 512
GOAL_MIN_RATIO = 0.9  # hetero.matmul's GFLOP/s / numpy.matmul's, on cpu


def _blas(on: bool) -> None:
    """Switch the configuration's ``blas`` (what ``HETERO_BLAS`` says) to ``on`` (the vendor BLAS)
    or ``off`` (hetero's tiled kernel) when it is not so already: a re-read of the configuration,
    well under a millisecond beside an n = 512 matmul."""
    mode = "on" if on else "off"
    if hetero.get_config().blas != mode:
        os.environ["HETERO_BLAS"] = mode
        hetero.reload_config()


def matmul_sides(device: hetero.Device, inputs: tuple[np.ndarray, np.ndarray]) -> tuple[dict[str, Callable[[], object]], dict[str, str]]:
    """The callables timed on ``device`` and what each runs."""
    a, b = (hetero.asarray(x, device=device) for x in inputs)
    sides: dict[str, Callable[[], object]] = {}
    methods: dict[str, str] = {}

    def run(on: bool) -> Callable[[], object]:
        def call() -> object:
            _blas(on)
            out = hetero.matmul(a, b)
            device.synchronize()
            return out
        return call

    _blas(True)
    methods["hetero"] = str(hetero.explain_op("matmul", a, b))
    sides["hetero"] = run(True)
    if device.runtime.host_memory:
        host_a, host_b = a.numpy(), b.numpy()
        sides["numpy"] = lambda: np.matmul(host_a, host_b)  # noqa: E731
        methods["numpy"] = "numpy.matmul(a, b) on the same host memory (a new result each call, as hetero.matmul)"
    elif methods["hetero"].find("hetero: tiled") < 0:
        _blas(False)
        methods["tiled"] = str(hetero.explain_op("matmul", a, b))
        _blas(True)
        sides["tiled"] = run(False)
    return sides, methods


def measure_matmul(device: hetero.Device, n: int, repeats: int, warmup: int) -> dict[str, Any]:
    rng = np.random.default_rng(n)
    inputs = (rng.uniform(-1, 1, (n, n)).astype(np.float32), rng.uniform(-1, 1, (n, n)).astype(np.float32))
    want = inputs[0].astype(np.float64) @ inputs[1].astype(np.float64)
    sides, methods = matmul_sides(device, inputs)
    correct = {}
    for name, side in sides.items():
        result = side()
        host = result.numpy() if isinstance(result, hetero.Array) else np.asarray(result)
        correct[name] = same(host, want, rtol=1e-3, atol=1e-2)
    timings = compare(sides, repeats, warmup)
    flops = 2 * n**3
    row: dict[str, Any] = {"device": device.name, "n": n, "methods": methods, "correct": correct}
    for name, timing in timings.items():
        row[name] = {**timing, "gflop_per_s": flops / timing["median_s"] / 1e9}
    other = "numpy" if "numpy" in timings else "tiled" if "tiled" in timings else None
    if other is not None:
        row["ratio_vs"] = other
        row["ratio"] = timings[other]["median_s"] / timings["hetero"]["median_s"]  # hetero's rate / the other's
    return row


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    print(f"{'device':>9} {'n':>5} | {'hetero':>10} {'beside':>10} | {'hetero GF/s':>11} {'beside GF/s':>11} | ratio  beside")
    for row in rows:
        other = row.get("ratio_vs")
        beside = row.get(other) if other else None
        flags = "" if all(row["correct"].values()) else "  WRONG RESULT"
        print(f"{row['device']:>9} {row['n']:>5} | {format_seconds(row['hetero']['median_s']):>10} "
              f"{format_seconds(beside['median_s']) if beside else '-':>10} | {row['hetero']['gflop_per_s']:>11.2f} "
              f"{beside['gflop_per_s'] if beside else float('nan'):>11.2f} | {row.get('ratio', float('nan')):>4.2f}x  "
              f"{other or '-'}{flags}")
        for name, method in row["methods"].items():
            print(f"{'':>9}   {name}: {method}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.array_ops", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"n = {QUICK_SIZE}, fewer repeats")
    parser.add_argument("--size", type=int, help=f"matrix size (default {FULL_SIZE})")
    parser.add_argument("--devices", nargs="+", metavar="DEVICE", default=list(DEFAULT_DEVICES),
                        help=f"devices to run on (default: {' '.join(DEFAULT_DEVICES)}, those present)")
    parser.add_argument("--repeats", type=int, help="matmul samples per side (default 5, --quick 3)")
    parser.add_argument("--elements", type=int, help="elementwise array length (default 64 Mi, --quick 4 Mi)")
    args = parser.parse_args(argv)
    if args.size is not None and args.size <= 0:
        parser.error(f"--size must be positive, got {args.size}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    n = args.size or (QUICK_SIZE if args.quick else FULL_SIZE)
    repeats = args.repeats or (3 if args.quick else 5)
    warmup = 1
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    progress = Progress(3 * len(devices))
    elements = args.elements or (array_elementwise.QUICK_ELEMENTS if args.quick else array_elementwise.FULL_ELEMENTS)
    elementwise = array_elementwise.run(devices, elements, 7 if args.quick else 11, progress,
                                        array_elementwise.QUICK_BROADCAST_ROWS if args.quick
                                        else array_elementwise.BROADCAST_ROWS)
    reductions = array_reductions.run(devices, elements, 5 if args.quick else 11, progress)
    rows = []
    for device in devices:
        progress.step(f"matmul on {device.name}, n = {n}")
        rows.append(measure_matmul(device, n, repeats, warmup))
    summary = [{"device": row["device"], "vs": row.get("ratio_vs"), "ratio": row.get("ratio"),
                "goal_min_ratio": GOAL_MIN_RATIO if row.get("ratio_vs") == "numpy" else None,
                "status": ("pass" if row["ratio"] >= GOAL_MIN_RATIO else "fail") if row.get("ratio_vs") == "numpy"
                else "information"} for row in rows]
    path = write_results("array_ops", {
        "config": {"quick": args.quick, "n": n, "dtype": "float32", "repeats": repeats, "warmup": warmup,
                   "flops_counted": "2 * n**3 per call", "check": "allclose to float64 NumPy, rtol 1e-3, atol 1e-2",
                   "load_average_at_start": load_before, "load_average_at_end": load_average(),
                   "note": "a shared 2-core VM under other work: figures vary with its load"},
        "devices": [describe(d) for d in devices],
        "missing_devices": missing,
        "elementwise": {"elements": elements, **elementwise},
        "reductions": {"elements": elements, **reductions},
        "matmul": {"summary": summary, "rows": rows},
    }, command_line("benchmarks.array_ops", sys.argv[1:] if argv is None else argv))
    array_elementwise.print_rows(elementwise["rows"], elementwise["summary"])
    array_reductions.print_rows(reductions["rows"], reductions["summary"])
    print_table(rows)
    for goal in summary:
        if goal["status"] != "information":
            print(f"goal {goal['device']} matmul GFLOP/s hetero/numpy >= {GOAL_MIN_RATIO}x: {goal['ratio']:.2f}x: "
                  f"{goal['status'].upper()}")
    print_footer(missing, load_before, path)
    return 0


__all__ = ["main", "matmul_sides", "measure_matmul"]

if __name__ == "__main__":
    raise SystemExit(main())
