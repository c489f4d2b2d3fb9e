"""``hetero.arraylib.sort.sort`` of float32 against its peers, side by side in one run.

    python -m benchmarks.array_sort [--quick] [--elements N] [--devices cpu oneapi:0 opencl:0] [--repeats N]

On ``cpu`` the peer is NumPy on the same host memory: ``np.sort(kind="stable")`` (the same
result, bit for bit) and, for information, NumPy's default (unstable) ``np.sort``. On OpenCL
devices the peers run on the device's own context and queue: ``pyopencl.bitonic_sort.BitonicSort``
(keys only, in place on a copy) and ``pyopencl.algorithm.RadixSort`` on the float32 bits as
uint32 keys (the data are in [0, 1), where the bits order as the values). Every side is
checked against NumPy once before timing. The data are uniform float32 in [0, 1); n = 16 Mi
(``--quick``: 1 Mi). The ratio is the peer's time over hetero's (above 1: hetero faster).
Figures taken on a shared, loaded machine vary with its load (the load average is recorded).
Writes ``benchmarks/results/array_sort.json``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, command_line, compare, format_seconds, write_results
from benchmarks.kernel_bench import DEFAULT_DEVICES, choose_devices, describe, is_opencl, load_average, opencl, print_footer
from hetero.arraylib.sort import sort

FULL_ELEMENTS, QUICK_ELEMENTS = 16 * 2**20, 2**20


def sides(device: hetero.Device, data: np.ndarray) -> tuple[dict[str, Callable[[], object]], dict[str, str]]:
    """The callables timed on ``device`` (each returns its sorted keys, device work finished)."""
    x = hetero.asarray(data, device=device)
    calls: dict[str, Callable[[], object]] = {}
    methods = {"hetero": "hetero.arraylib.sort.sort(x): generated bitonic sort, (key, index) packed in u64"}

    def ours() -> object:
        out = sort(x)
        device.synchronize()
        return out

    calls["hetero"] = ours
    if not is_opencl(device):
        host = x.numpy()
        calls["numpy_stable"] = lambda: np.sort(host, kind="stable")  # noqa: E731
        calls["numpy_default"] = lambda: np.sort(host)  # noqa: E731
        methods["numpy_stable"] = "numpy.sort(x, kind='stable') on the same host memory"
        methods["numpy_default"] = "numpy.sort(x) (quicksort/introsort, unstable), for information"
        return calls, methods
    cl, context, queue = opencl(device)
    import pyopencl.array as cl_array
    from pyopencl.algorithm import RadixSort
    from pyopencl.bitonic_sort import BitonicSort

    keys = cl_array.to_device(queue, data)
    bitonic = BitonicSort(context)

    def pyopencl_bitonic() -> object:
        work = keys.copy()
        bitonic(work, queue=queue)
        queue.finish()
        return work

    calls["pyopencl_bitonic"] = pyopencl_bitonic
    methods["pyopencl_bitonic"] = "pyopencl.bitonic_sort.BitonicSort on a copy of the keys (unstable, keys only)"
    as_bits = cl_array.to_device(queue, data.view(np.uint32))
    radix = RadixSort(context, "uint *keys", key_expr="keys[i]", sort_arg_names=["keys"], key_dtype=np.uint32)

    def pyopencl_radix() -> object:
        (out,), _ = radix(as_bits, key_bits=32, queue=queue)
        queue.finish()
        return out

    calls["pyopencl_radix"] = pyopencl_radix
    methods["pyopencl_radix"] = "pyopencl.algorithm.RadixSort of the float32 bits as uint32 keys, 32 key bits"
    return calls, methods


def _host(result: object) -> np.ndarray:
    if isinstance(result, hetero.Array):
        return result.numpy()
    if hasattr(result, "get"):
        return np.asarray(result.get())  # type: ignore[attr-defined]
    return np.asarray(result)


def measure(device: hetero.Device, n: int, repeats: int) -> dict[str, Any]:
    data = np.random.default_rng(n).random(n, dtype=np.float32)
    want = np.sort(data, kind="stable")
    calls, methods = sides(device, data)
    correct = {}
    for name, call in calls.items():
        got = _host(call())
        correct[name] = bool(np.array_equal(got.view(np.float32) if got.dtype == np.uint32 else got, want))
    timings = compare(calls, repeats, warmup=1, min_time=0.0)
    row: dict[str, Any] = {"device": device.name, "n": n, "methods": methods, "correct": correct}
    for name, timing in timings.items():
        row[name] = {**timing, "melements_per_s": n / timing["median_s"] / 1e6}
    row["ratios"] = {name: timings[name]["median_s"] / timings["hetero"]["median_s"] for name in timings if name != "hetero"}
    return row


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    print(f"{'device':>9} {'n':>9} | {'side':>17} {'median':>10} {'Melem/s':>9} | peer time / hetero time")
    for row in rows:
        for name in row["methods"]:
            flag = "" if row["correct"][name] else "  WRONG RESULT"
            ratio = f"{row['ratios'][name]:.2f}x" if name in row["ratios"] else "-"
            print(f"{row['device']:>9} {row['n']:>9} | {name:>17} {format_seconds(row[name]['median_s']):>10} "
                  f"{row[name]['melements_per_s']:>9.1f} | {ratio}{flag}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.array_sort", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"n = {QUICK_ELEMENTS}, fewer repeats")
    parser.add_argument("--elements", type=int, help=f"elements sorted (default {FULL_ELEMENTS})")
    parser.add_argument("--devices", nargs="+", metavar="DEVICE", default=list(DEFAULT_DEVICES),
                        help=f"devices to run on (default: {' '.join(DEFAULT_DEVICES)}, those present)")
    parser.add_argument("--repeats", type=int, help="samples per side (default 5, --quick 3)")
    args = parser.parse_args(argv)
    if args.elements is not None and args.elements < 2:
        parser.error(f"--elements must be at least 2, got {args.elements}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    n = args.elements or (QUICK_ELEMENTS if args.quick else FULL_ELEMENTS)
    repeats = args.repeats or (3 if args.quick else 5)
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    progress = Progress(len(devices))
    rows = []
    for device in devices:
        progress.step(f"sort of {n} float32 on {device.name}")
        rows.append(measure(device, n, repeats))
    path = write_results("array_sort", {
        "config": {"quick": args.quick, "n": n, "dtype": "float32", "data": "uniform [0, 1)", "repeats": repeats,
                   "check": "equal to numpy.sort(kind='stable')", "ratio": "peer median time / hetero median time",
                   "load_average_at_start": load_before, "load_average_at_end": load_average(),
                   "note": "a shared 2-core VM under other work: figures vary with its load"},
        "devices": [describe(d) for d in devices],
        "missing_devices": missing,
        "rows": rows,
    }, command_line("benchmarks.array_sort", sys.argv[1:] if argv is None else argv))
    print_table(rows)
    print_footer(missing, load_before, path)
    return 0


__all__ = ["main", "measure", "sides"]

if __name__ == "__main__":
    raise SystemExit(main())
