"""``hetero calibrate [--devices cpu,oneapi:0] [--quick] [--json]``: measure every device
(copies both ways, a few standard kernels at a few sizes) into the cost model the
scheduler's ``fastest`` policy and ``kernel.split`` plan with, and, on devices with several matmul
routines (CLBlast and hetero's tiled kernel on OpenCL devices), each routine per shape class,
which ``hetero.matmul`` then chooses between (:mod:`hetero.arraylib.linalg.routine_choice`); saved
in ``<state_dir>/costs.json``. A progress bar goes to stderr; the fitted laws and the matmul
figures to stdout."""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from typing import Any

from hetero.core.device_list import parse_devices
from hetero.core.errors import HeteroError


# The module docstring is reStructuredText for the docs; --help shows plain text.
DESCRIPTION = ("Measure every device (copies both ways, a few standard kernels at a few sizes) into the cost "
               "model that the scheduler's 'fastest' policy and kernel.split plan with, and on devices with "
               "several matmul routines (CLBlast and hetero's tiled kernel) each per shape class, for hetero.matmul "
               "to run the fastest; saved in <state_dir>/costs.json. A progress bar goes to stderr; the fitted "
               "laws and matmul figures to stdout. Example: hetero calibrate --devices cpu,oneapi:0 --quick")


def add_commands(sub: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    parser = sub.add_parser("calibrate", help="measure devices for the scheduler's cost model",
                            description=DESCRIPTION)
    parser.add_argument("--devices", nargs="+", metavar="DEVICES",
                        help="comma-separated devices to measure, e.g. cpu,oneapi:0 (space-separated too, as "
                             "before; default: every healthy device that runs kernels)")
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats (well under a minute)")
    parser.add_argument("--json", action="store_true", help="print the fitted models as JSON")
    return {"calibrate": cmd_calibrate}


class ProgressBar:
    """``[#######.....]  12/40  oneapi:0 saxpy n=65536`` redrawn in place on a terminal, one
    line per step otherwise (logs and CI)."""

    def __init__(self, stream: Any = None, width: int = 30) -> None:
        self.stream = stream or sys.stderr
        self.width = width
        self.live = bool(getattr(self.stream, "isatty", lambda: False)())
        self.start = time.perf_counter()

    def __call__(self, done: int, total: int, what: str) -> None:
        filled = self.width * done // max(total, 1)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {done:>3}/{total}  {what}"
        if self.live:
            self.stream.write("\r" + line.ljust(100)[:100])
            if done == total:
                self.stream.write("\n")
        else:
            self.stream.write(line + "\n")
        self.stream.flush()


def cmd_calibrate(args: argparse.Namespace) -> int:
    from hetero.arraylib.linalg import routine_calibration
    from hetero.kernels.calibration import FULL, QUICK, calibrate, calibration_devices
    from hetero.scheduler.cost_model import CostModel, default_path, reset_default_model

    devices = calibration_devices(parse_devices(args.devices, "--devices") if args.devices else None)
    if not devices:
        raise HeteroError("no device here runs kernels (run 'hetero devices --all' to see why)")
    model = CostModel(default_path())
    bar = ProgressBar()
    print(f"calibrating {', '.join(d.name for d in devices)}{' (quick)' if args.quick else ''}", file=sys.stderr)
    with_choice = routine_calibration.devices_with_a_choice(devices)
    kernel_steps = (QUICK if args.quick else FULL).steps(len(devices))
    total = kernel_steps + routine_calibration.steps(with_choice, args.quick)
    calibrate(devices, model, quick=args.quick, progress=lambda done, _, what: bar(done, total, what))
    figures = routine_calibration.calibrate(with_choice, model, quick=args.quick, progress=bar, done=kernel_steps,
                                            total=total)
    path = model.save()
    reset_default_model()  # this process's model (and hetero.matmul's choices) reloads with the new samples
    elapsed = time.perf_counter() - bar.start
    summary = model.summary()
    rates = [{"device": f.device, "class": f.klass.key, "routine": f.routine, "shape": list(f.shape),
              "seconds": f.seconds, "gflop_per_s": round(f.gflops, 2)} for f in figures]
    if args.json:
        print(json.dumps({**summary, "matmul": rates, "seconds": round(elapsed, 2)}, indent=2))
        return 0
    for kernel, per_device in summary["kernels"].items():
        if kernel.startswith("matmul."):  # the matmul routines' figures: their own lines below
            continue
        for name, law in per_device.items():
            print(f"{kernel:<28} {name:<10} t = {law['a']:.3e} * n^{law['b']:.2f}")
    for name, directions in summary["transfers"].items():
        parts = [f"{d} {law['bandwidth_gbs']:.2f} GB/s + {law['latency_s'] * 1e6:.0f} us"
                 for d, law in directions.items() if d in ("h2d", "d2h")]
        print(f"{'copies':<28} {name:<10} {', '.join(parts)}")
    for rate in rates:
        shape = "x".join(map(str, rate["shape"]))
        print(f"{'matmul ' + rate['class']:<28} {rate['device']:<10} {rate['routine']:<14} {shape:>16} "
              f"{rate['gflop_per_s']:8.2f} GFLOP/s")
    print(f"saved to {path} in {elapsed:.1f} s", file=sys.stderr)
    return 0
