"""SGEMM, ``c = a @ b`` for n x n float32 matrices: hetero's tiled local-memory kernel
against the same tiled kernel hand-written in OpenCL C, side by side in one run, and on
``cpu`` against NumPy's BLAS as a reference.

    python -m benchmarks.sgemm [--quick] [--devices oneapi:0 cpu opencl:0] [--size N] [--repeats N]

Both OpenCL sides run 16 x 16 work-groups that stage 16 x 16 tiles of ``a`` and ``b`` in
local memory (the textbook kernel; ``tests/kernels/corpus.py`` has it with 8 x 8 tiles),
on hetero's own context and queue. Results are checked against float64 NumPy once before
timing. Rates are 2 n^3 / time. Goal (reported, never enforced): hetero at least 0.9x the
hand-written OpenCL kernel's GFLOP/s. Which BLAS NumPy ran is recorded (threadpoolctl).
n = 1024 (``--quick``: 512). Writes ``benchmarks/results/sgemm.json``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, Timing, command_line, compare, format_seconds, write_results
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

FULL_SIZE, QUICK_SIZE = 1024, 512
TILE = 16
GOAL_MIN_RATIO = 0.9  # hetero's GFLOP/s / the hand-written OpenCL kernel's


@hetero.kernel
def sgemm_tiled(a, b, c):
    """c = a @ b with TILE x TILE tiles in work-group memory; sizes are multiples of TILE."""
    tile_a = hetero.local_array((TILE, TILE), f32)
    tile_b = hetero.local_array((TILE, TILE), f32)
    col = hetero.local_id(0)
    row = hetero.local_id(1)
    gcol = hetero.global_id(0)
    grow = hetero.global_id(1)
    acc = 0.0
    for t in range(a.shape[1] // TILE):
        tile_a[row, col] = a[grow, t * TILE + col]
        tile_b[row, col] = b[t * TILE + row, gcol]
        hetero.barrier()
        for k in range(TILE):
            acc += tile_a[row, k] * tile_b[k, col]
        hetero.barrier()
    c[grow, gcol] = acc


OPENCL_SOURCE = f"""
#define TILE {TILE}
// c (n x m) = a (n x k) @ b (k x m), row-major; n, m, k multiples of TILE.
__kernel void sgemm_tiled(__global const float* restrict a, __global const float* restrict b,
                          __global float* restrict c, int k, int m) {{
    __local float tile_a[TILE][TILE];
    __local float tile_b[TILE][TILE];
    int col = get_local_id(0);
    int row = get_local_id(1);
    int gcol = get_global_id(0);
    int grow = get_global_id(1);
    float acc = 0.0f;
    for (int t = 0; t < k / TILE; t++) {{
        tile_a[row][col] = a[grow * k + t * TILE + col];
        tile_b[row][col] = b[(t * TILE + row) * m + gcol];
        barrier(CLK_LOCAL_MEM_FENCE);
        for (int j = 0; j < TILE; j++) {{
            acc += tile_a[row][j] * tile_b[j][col];
        }}
        barrier(CLK_LOCAL_MEM_FENCE);
    }}
    c[grow * m + gcol] = acc;
}}
"""


def schedule(quick: bool) -> tuple[int, int]:
    """(repeats, warm-up calls) per side: each call takes tenths of a second."""
    return (5, 1) if quick else (7, 1)


def blas_info() -> dict[str, Any]:
    """Which BLAS NumPy's ``@`` runs, and with how many threads."""
    try:
        import threadpoolctl
    except ImportError:
        return {"source": "numpy.show_config (threadpoolctl is not installed)", "numpy_config": _numpy_config()}
    return {"source": f"threadpoolctl {threadpoolctl.__version__}", "libraries": threadpoolctl.threadpool_info()}


def _numpy_config() -> Any:
    try:
        return np.show_config(mode="dicts")
    except TypeError:  # NumPy before 1.25 only prints it
        return "unavailable"


class Sides:
    """hetero's SGEMM and the reference on one device, over the same matrices."""

    def __init__(self, device: hetero.Device, n: int, inputs: tuple[np.ndarray, np.ndarray], want: np.ndarray) -> None:
        self.device, self.n, self.want = device, n, want
        self.a = hetero.asarray(inputs[0], device=device, copy=True)
        self.b = hetero.asarray(inputs[1], device=device, copy=True)
        self.c = hetero.zeros((n, n), dtype="float32", device=device)
        device.synchronize()
        self.launcher = sgemm_tiled[(n, n), (TILE, TILE)]
        self.methods = {"hetero": f"sgemm_tiled[({n}, {n}), ({TILE}, {TILE})](a, b, c); device.synchronize()"}
        self.candidates: dict[str, Callable[[], object]] = {"hetero": self._hetero}
        self.correct = {"hetero": self._check(self._hetero, self.c.numpy)}
        if is_opencl(device):
            self._add_opencl()
        elif device.runtime.host_memory:
            self._add_blas(inputs)

    def _hetero(self) -> None:
        self.launcher(self.a, self.b, self.c)
        self.device.synchronize()

    def _check(self, run: Callable[[], object], read: Callable[[], np.ndarray]) -> bool:
        hetero.copyto(self.c, np.zeros((self.n, self.n), np.float32))
        self.device.synchronize()
        run()
        return same(read(), self.want, rtol=1e-4, atol=1e-3)

    def _add_opencl(self) -> None:
        _, _, queue = opencl(self.device)
        self.program = build_opencl(self.device, OPENCL_SOURCE)
        knl = self.program.sgemm_tiled
        n = self.n
        args = (cl_buffer(self.a), cl_buffer(self.b), cl_buffer(self.c), np.int32(n), np.int32(n))

        def raw() -> None:
            knl(queue, (n, n), (TILE, TILE), *args).wait()

        self.candidates["raw"] = raw
        self.methods["raw"] = (f"OpenCL C sgemm_tiled (TILE {TILE}) built with PyOpenCL; "
                               f"knl(queue, ({n}, {n}), ({TILE}, {TILE}), a, b, c, k, m).wait()")
        self.correct["raw"] = self._check(raw, self.c.numpy)

    def _add_blas(self, inputs: tuple[np.ndarray, np.ndarray]) -> None:
        a, b = inputs
        out = np.empty((self.n, self.n), np.float32)

        def raw() -> None:
            np.matmul(a, b, out=out)

        self.candidates["raw"] = raw
        self.methods["raw"] = "numpy.matmul(a, b, out=c) (BLAS sgemm)"
        self.correct["raw"] = self._check(raw, lambda: out)


def _with_rate(timing: Timing, flops: int) -> dict[str, Any]:
    return {**timing, "gflop_per_s": flops / timing["median_s"] / 1e9}


def measure_device(device: hetero.Device, n: int, inputs: tuple[np.ndarray, np.ndarray], want: np.ndarray,
                   repeats: int, warmup: int) -> dict[str, Any]:
    sides = Sides(device, n, inputs, want)
    timings = compare(sides.candidates, repeats, warmup)
    flops = 2 * n**3
    row: dict[str, Any] = {"device": device.name, "n": n, "flops_per_call": flops, "methods": sides.methods,
                           "correct": sides.correct, "reference": "numpy BLAS" if not is_opencl(device) else "OpenCL C"}
    for name, timing in timings.items():
        row[name] = _with_rate(timing, flops)
    if "raw" in timings:
        # A rate ratio: hetero's GFLOP/s over the reference's (above 1: hetero is faster).
        row["ratio"] = timings["raw"]["median_s"] / timings["hetero"]["median_s"]
        row["ratio_of_min"] = timings["raw"]["min_s"] / timings["hetero"]["min_s"]
    return row


def goal_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """The goal holds for OpenCL rows; the cpu row's ratio to BLAS is information."""
    summary = []
    for row in rows:
        goal = row["reference"] == "OpenCL C"
        status = ("information" if not goal else "not measured" if "ratio" not in row else
                  "pass" if row["ratio"] >= GOAL_MIN_RATIO else "fail")
        summary.append({"device": row["device"], "reference": row["reference"], "goal_min_ratio": GOAL_MIN_RATIO if goal else None,
                        "ratio": row.get("ratio"), "ratio_of_min": row.get("ratio_of_min"), "status": status})
    return summary


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    header = (f"{'device':>9} {'n':>5} | {'hetero':>10} {'reference':>10} | {'hetero GF/s':>11} {'ref GF/s':>9} | "
              f"{'hetero/ref':>10} {'(min)':>6}  reference")
    print(header)
    print("-" * len(header))
    for row in rows:
        raw = row.get("raw")
        flags = "" if all(row["correct"].values()) else "  WRONG RESULT"
        print(f"{row['device']:>9} {row['n']:>5} | {format_seconds(row['hetero']['median_s']):>10} "
              f"{format_seconds(raw['median_s']) if raw else '-':>10} | {row['hetero']['gflop_per_s']:>11.2f} "
              f"{raw['gflop_per_s'] if raw else float('nan'):>9.2f} | {row.get('ratio', float('nan')):>9.2f}x "
              f"{row.get('ratio_of_min', float('nan')):>5.2f}x  {row['reference']}{flags}")


def print_summary(summary: Sequence[dict[str, Any]], blas: dict[str, Any]) -> None:
    for goal in summary:
        if goal["status"] == "information":
            print(f"{goal['device']}: hetero's tiled kernel runs at {goal['ratio']:.3f}x NumPy BLAS (information, no goal)")
            continue
        shown = ("no reference" if goal["ratio"] is None else
                 f"{goal['ratio']:.2f}x (fastest samples {goal['ratio_of_min']:.2f}x)")
        print(f"goal {goal['device']} SGEMM GFLOP/s hetero/hand-written OpenCL >= {goal['goal_min_ratio']}x: {shown}: "
              f"{goal['status'].upper()}")
    for library in blas.get("libraries", []):
        print(f"BLAS: {library.get('internal_api')} {library.get('version')} ({library.get('threading_layer', '-')}, "
              f"{library.get('num_threads')} threads) {library.get('filepath')}")


def _numba_threads() -> dict[str, Any] | None:
    """How many threads hetero's cpu kernels (Numba prange) had."""
    numba = sys.modules.get("numba")
    if numba is None:
        return None
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel region has run yet
        layer = None
    return {"num_threads": numba.config.NUMBA_NUM_THREADS, "threading_layer": layer}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.sgemm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"n = {QUICK_SIZE}, fewer repeats")
    parser.add_argument("--devices", nargs="+", metavar="DEVICE", default=list(DEFAULT_DEVICES),
                        help=f"devices to run on (default: {' '.join(DEFAULT_DEVICES)}, those present)")
    parser.add_argument("--size", type=int, help=f"matrix size, a multiple of {TILE} (default {FULL_SIZE})")
    parser.add_argument("--repeats", type=int, help="samples per side (default 7, --quick 5)")
    args = parser.parse_args(argv)
    if args.size is not None and (args.size <= 0 or args.size % TILE):
        parser.error(f"--size must be a positive multiple of {TILE}, got {args.size}")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    n = args.size or (QUICK_SIZE if args.quick else FULL_SIZE)
    repeats, warmup = schedule(args.quick)
    repeats = args.repeats or repeats
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    rng = np.random.default_rng(n)
    inputs = (rng.uniform(-1, 1, (n, n)).astype(np.float32), rng.uniform(-1, 1, (n, n)).astype(np.float32))
    want = (inputs[0].astype(np.float64) @ inputs[1].astype(np.float64)).astype(np.float32)
    progress = Progress(len(devices))
    rows = []
    for device in devices:
        progress.step(f"sgemm on {device.name}, n = {n}")
        rows.append(measure_device(device, n, inputs, want, repeats, warmup))
    summary = goal_summary(rows)
    blas = blas_info()
    path = write_results("sgemm", {
        "config": {"quick": args.quick, "n": n, "dtype": "float32", "tile": TILE, "repeats": repeats, "warmup": warmup,
                   "flops_counted": "2 * n**3 per call", "check": "allclose to float64 NumPy, rtol 1e-4, atol 1e-3",
                   "load_average_at_start": load_before, "load_average_at_end": load_average()},
        "devices": [describe(d) for d in devices],
        "missing_devices": missing,
        "blas": blas,
        "numba_threads": _numba_threads(),
        "summary": summary,
        "rows": rows,
    }, command_line("benchmarks.sgemm", sys.argv[1:] if argv is None else argv))
    print_table(rows)
    print()
    print_summary(summary, blas)
    print_footer(missing, load_before, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
