"""STREAM triad, ``a = b + s*c`` in float32: hetero's kernel against the same kernel
hand-written for the raw library, side by side in one run, as memory bandwidth.

    python -m benchmarks.stream_triad [--quick] [--devices oneapi:0 cpu opencl:0] [--elements N] [--repeats N]

On OpenCL devices hetero's ``triad[(n,), (256,)]`` races the kernel written in OpenCL C
and launched with PyOpenCL (same buffers, same queue, same local size 256); on ``cpu``
it races a Numba ``prange`` loop over the same arrays. Bandwidth counts STREAM's bytes,
3 arrays x 4 bytes x n per call. ``numpy.copyto`` of 256 MiB gives the machine's copy
ceiling. Goal (reported, never enforced): hetero at least 0.9x the hand-written kernel's
bandwidth. 64 Mi elements (768 MiB per device); ``--quick``: 4 Mi.
Writes ``benchmarks/results/stream_triad.json``.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, Timing, command_line, compare, format_seconds, measure, write_results
from benchmarks.kernel_bench import (
    DEFAULT_DEVICES,
    build_opencl,
    choose_devices,
    cl_buffer,
    describe,
    is_opencl,
    load_average,
    opencl,
    print_footer,
    same,
)
from hetero import f32

MI = 1 << 20
FULL_ELEMENTS, QUICK_ELEMENTS = 64 * MI, 4 * MI
COPY_BYTES = 256 * MI
LOCAL_SIZE = 256
SCALAR = 3.0
GOAL_MIN_RATIO = 0.9  # hetero's bandwidth / the hand-written kernel's


@hetero.kernel
def triad(a, b, c, s: f32):
    i = hetero.global_id(0)
    if i < a.shape[0]:
        a[i] = b[i] + s * c[i]


OPENCL_SOURCE = """
__kernel void triad(__global float* restrict a, __global const float* restrict b,
                    __global const float* restrict c, float s, int n) {
    int i = get_global_id(0);
    if (i < n) {
        a[i] = b[i] + s * c[i];
    }
}
"""


def numba_triad() -> Callable[[np.ndarray, np.ndarray, np.ndarray, np.float32], None]:
    import numba  # only here: importing the module should not load Numba

    @numba.njit(parallel=True, cache=False)
    def run(a: np.ndarray, b: np.ndarray, c: np.ndarray, s: np.float32) -> None:
        for i in numba.prange(a.shape[0]):
            a[i] = b[i] + s * c[i]

    return run


def schedule(quick: bool) -> tuple[int, int]:
    """(repeats, warm-up calls) per side."""
    return (9, 2) if quick else (15, 2)


def _round_up(n: int, step: int) -> int:
    return -(-n // step) * step


class Sides:
    """hetero's triad and the hand-written one on one device, over the same three arrays."""

    def __init__(self, device: hetero.Device, n: int) -> None:
        rng = np.random.default_rng(n)
        self.device, self.n, self.s = device, n, np.float32(SCALAR)
        host_b = rng.standard_normal(n, dtype=np.float32)
        host_c = rng.standard_normal(n, dtype=np.float32)
        self.want = host_b + self.s * host_c
        self.a = hetero.zeros(n, dtype="float32", device=device)
        self.b = hetero.asarray(host_b, device=device, copy=True)
        self.c = hetero.asarray(host_c, device=device, copy=True)
        device.synchronize()
        del host_b, host_c
        self.global_size = _round_up(n, LOCAL_SIZE)
        self.launcher = triad[(self.global_size,), (LOCAL_SIZE,)]
        self.methods = {"hetero": f"triad[({self.global_size},), ({LOCAL_SIZE},)](a, b, c, s); device.synchronize()"}
        self.candidates: dict[str, Callable[[], object]] = {"hetero": self._hetero}
        self.correct = {"hetero": self._check(self._hetero)}
        if is_opencl(device):
            self._add_opencl()
        elif device.runtime.host_memory:
            self._add_numba()

    def _hetero(self) -> None:
        self.launcher(self.a, self.b, self.c, self.s)
        self.device.synchronize()

    def _check(self, run: Callable[[], object]) -> bool:
        hetero.copyto(self.a, np.zeros(self.n, np.float32))
        self.device.synchronize()
        run()
        # OpenCL C may contract b + s*c into one fused multiply-add: a rounding apart.
        return same(self.a.numpy(), self.want, rtol=1e-6, atol=1e-6)

    def _add_opencl(self) -> None:
        _, _, queue = opencl(self.device)
        self.program = build_opencl(self.device, OPENCL_SOURCE)
        knl = self.program.triad
        args = (cl_buffer(self.a), cl_buffer(self.b), cl_buffer(self.c), self.s, np.int32(self.n))
        sizes = ((self.global_size,), (LOCAL_SIZE,))

        def raw() -> None:
            knl(queue, *sizes, *args).wait()

        self.candidates["raw"] = raw
        self.methods["raw"] = (f"OpenCL C triad built with PyOpenCL; knl(queue, ({self.global_size},), ({LOCAL_SIZE},), "
                               "a, b, c, np.float32(s), np.int32(n)).wait()")
        self.correct["raw"] = self._check(raw)

    def _add_numba(self) -> None:
        run = numba_triad()
        a, b, c, s = self.a.numpy(), self.b.numpy(), self.c.numpy(), self.s  # views of the same memory

        def raw() -> None:
            run(a, b, c, s)

        self.candidates["raw"] = raw
        self.methods["raw"] = "numba.njit(parallel=True) prange loop over the same arrays"
        self.correct["raw"] = self._check(raw)


def _with_rate(timing: Timing, nbytes: int) -> dict[str, Any]:
    return {**timing, "gb_per_s": nbytes / timing["median_s"] / 1e9}


def measure_device(device: hetero.Device, n: int, repeats: int, warmup: int) -> dict[str, Any]:
    sides = Sides(device, n)
    timings = compare(sides.candidates, repeats, warmup)
    nbytes = 3 * 4 * n
    row: dict[str, Any] = {"device": device.name, "elements": n, "bytes_per_call": nbytes, "methods": sides.methods,
                           "correct": sides.correct}
    for name, timing in timings.items():
        row[name] = _with_rate(timing, nbytes)
    if "raw" in timings:
        # A bandwidth ratio: hetero's GB/s over the hand-written kernel's (above 1: hetero is faster).
        row["ratio"] = timings["raw"]["median_s"] / timings["hetero"]["median_s"]
        row["ratio_of_min"] = timings["raw"]["min_s"] / timings["hetero"]["min_s"]
    return row


def copy_ceiling(repeats: int) -> dict[str, Any]:
    """``numpy.copyto`` of 256 MiB (one thread): the bandwidth a plain host copy gets here."""
    src = np.ones(COPY_BYTES, np.uint8)
    dst = np.zeros(COPY_BYTES, np.uint8)
    timing = measure(lambda: np.copyto(dst, src), repeats, warmup=2)
    return {**timing, "bytes": COPY_BYTES,
            "gb_per_s_one_way": COPY_BYTES / timing["median_s"] / 1e9,
            # STREAM counts a copy's read and write, as the triad's GB/s counts its 3 arrays.
            "gb_per_s_read_plus_write": 2 * COPY_BYTES / timing["median_s"] / 1e9}


def goal_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [{"device": row["device"], "goal_min_ratio": GOAL_MIN_RATIO, "ratio": row.get("ratio"),
             "ratio_of_min": row.get("ratio_of_min"),
             "status": "not measured" if "ratio" not in row else "pass" if row["ratio"] >= GOAL_MIN_RATIO else "fail"}
            for row in rows]


def print_table(rows: Sequence[dict[str, Any]], ceiling: dict[str, Any]) -> None:
    header = (f"{'device':>9} {'elements':>9} | {'hetero':>10} {'raw':>10} | {'hetero GB/s':>11} {'raw GB/s':>9} | "
              f"{'hetero/raw':>10} {'(min)':>6}")
    print(header)
    print("-" * len(header))
    for row in rows:
        raw = row.get("raw")
        flags = "" if all(row["correct"].values()) else "  WRONG RESULT"
        print(f"{row['device']:>9} {row['elements']:>9} | {format_seconds(row['hetero']['median_s']):>10} "
              f"{format_seconds(raw['median_s']) if raw else '-':>10} | {row['hetero']['gb_per_s']:>11.2f} "
              f"{raw['gb_per_s'] if raw else float('nan'):>9.2f} | {row.get('ratio', float('nan')):>9.2f}x "
              f"{row.get('ratio_of_min', float('nan')):>5.2f}x{flags}")
    print(f"copy ceiling: numpy.copyto 256 MiB {format_seconds(ceiling['median_s'])}: "
          f"{ceiling['gb_per_s_read_plus_write']:.2f} GB/s read+write ({ceiling['gb_per_s_one_way']:.2f} GB/s one way)")


def print_summary(summary: Sequence[dict[str, Any]]) -> None:
    for goal in summary:
        shown = ("no reference" if goal["ratio"] is None else
                 f"{goal['ratio']:.2f}x (fastest samples {goal['ratio_of_min']:.2f}x)")
        print(f"goal {goal['device']} triad bandwidth hetero/hand-written >= {goal['goal_min_ratio']}x: {shown}: "
              f"{goal['status'].upper()}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.stream_triad", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 Mi elements, fewer repeats")
    parser.add_argument("--devices", nargs="+", metavar="DEVICE", default=list(DEFAULT_DEVICES),
                        help=f"devices to run on (default: {' '.join(DEFAULT_DEVICES)}, those present)")
    parser.add_argument("--elements", type=int, help="array length (default 64 Mi, --quick 4 Mi)")
    parser.add_argument("--repeats", type=int, help="samples per side (default 15, --quick 9)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    n = args.elements or (QUICK_ELEMENTS if args.quick else FULL_ELEMENTS)
    repeats, warmup = schedule(args.quick)
    repeats = args.repeats or repeats
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    progress = Progress(len(devices) + 1)
    progress.step("copy ceiling: numpy.copyto 256 MiB")
    ceiling = copy_ceiling(repeats)
    rows = []
    for device in devices:
        progress.step(f"triad on {device.name}, {n} elements")
        rows.append(measure_device(device, n, repeats, warmup))
        gc.collect()  # free this device's 3 arrays before the next device's
    summary = goal_summary(rows)
    path = write_results("stream_triad", {
        "config": {"quick": args.quick, "elements": n, "dtype": "float32", "local_size": LOCAL_SIZE, "scalar": SCALAR,
                   "repeats": repeats, "warmup": warmup, "bytes_counted": "3 * 4 * elements per call",
                   "load_average_at_start": load_before, "load_average_at_end": load_average()},
        "devices": [describe(d) for d in devices],
        "missing_devices": missing,
        "copy_ceiling": ceiling,
        "summary": summary,
        "rows": rows,
    }, command_line("benchmarks.stream_triad", sys.argv[1:] if argv is None else argv))
    print_table(rows, ceiling)
    print()
    print_summary(summary)
    print_footer(missing, load_before, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
