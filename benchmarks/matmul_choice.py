"""``hetero.matmul`` with ``blas: auto`` (the routine chosen per shape class from the state dir's
calibration, :mod:`hetero.arraylib.linalg.routine_choice`) against each routine forced, side by
side in one run: ``blas: on`` (one CLBlast call: the choice before calibration existed) and
``blas: off`` (hetero's tiled kernel), on the OpenCL devices, for a few shapes of the classes a
calibration measures and PCA's ``x.T @ x`` (200k x 64, the first operand a transposed view).

    hetero calibrate --devices opencl:0,oneapi:0 --quick     # the figures auto chooses by
    python -m benchmarks.matmul_choice [--devices oneapi:0 opencl:0] [--repeats N]

Rates are 2 M N K / time; each sample waits for the device; the sides are interleaved (ABBA).
Each row names the routine auto ran and why (explain_op). Writes
``benchmarks/results/matmul_choice.json``. Figures on a shared machine vary with its load (recorded).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import command_line, compare, write_results
from benchmarks.kernel_bench import choose_devices, load_average, print_footer

#: (M, K, N, first operand transposed)
SHAPES = ((512, 512, 512, False), (64, 4096, 64, False), (256, 8192, 256, False), (64, 200_000, 64, True))
MODES = ("auto", "on", "off")


def _mode(mode: str) -> None:
    if hetero.get_config().blas != mode:
        os.environ["HETERO_BLAS"] = mode
        hetero.reload_config()


def measure(device: hetero.Device, shape: tuple[int, int, int, bool], repeats: int) -> dict[str, Any]:
    m, k, n, transposed = shape
    rng = np.random.default_rng(k)
    host_a = rng.uniform(-1, 1, (k, m) if transposed else (m, k)).astype(np.float32)
    host_b = rng.uniform(-1, 1, (k, n)).astype(np.float32)
    a = hetero.asarray(host_a, device=device)
    a = a.T if transposed else a
    b = hetero.asarray(host_b, device=device)

    def side(mode: str) -> Callable[[], object]:
        def run() -> object:
            _mode(mode)
            result = a @ b
            device.synchronize()
            return result
        return run

    routines = {}
    for mode in MODES:
        _mode(mode)
        routines[mode] = str(hetero.explain_op("matmul", a, b).choice)
    timings = compare({mode: side(mode) for mode in MODES}, repeats=repeats, warmup=1)
    _mode("auto")
    flops = 2 * m * n * k
    return {"device": device.name, "m": m, "k": k, "n": n, "transposed_first": transposed, "routines": routines,
            "seconds": {mode: timings[mode]["median_s"] for mode in MODES},
            "gflop_per_s": {mode: round(flops / timings[mode]["median_s"] / 1e9, 2) for mode in MODES},
            "auto_vs_on": round(timings["on"]["median_s"] / timings["auto"]["median_s"], 3)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.matmul_choice", description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="+", default=["oneapi:0", "opencl:0"])
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    rows = []
    for device in devices:
        for shape in SHAPES:
            row = measure(device, shape, args.repeats)
            rows.append(row)
            rates = row["gflop_per_s"]
            print(f"{device.name:>9} {row['m']}x{row['k']}x{row['n']}{' (x.T)' if shape[3] else ''}: auto "
                  f"{rates['auto']:.1f}, on {rates['on']:.1f}, off {rates['off']:.1f} GFLOP/s; auto/on "
                  f"{row['auto_vs_on']:.2f}x\n{'':>11}auto ran {row['routines']['auto']}", flush=True)
    path = write_results("matmul_choice", {
        "config": {"repeats": args.repeats, "dtype": "float32", "state_dir": str(hetero.get_config().state_dir),
                   "load_average_at_start": load_before, "load_average_at_end": load_average()},
        "rows": rows, "missing_devices": missing,
    }, command_line("benchmarks.matmul_choice", sys.argv[1:] if argv is None else argv))
    print_footer(missing, load_before, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
