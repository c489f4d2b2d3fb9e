"""Python's own work per array operation and per kernel launch: how many Python and C functions
one ``x + y``, ``x.sum()``, ``x.astype(...)``, ``x[:10] = 1``, ``x @ y`` and one
``@hetero.kernel`` launch (each with its wait) call, counted with ``sys.setprofile`` after a
warm-up long enough for every cache (compiled kernels, launch plans, the CPU's native dispatch)
to settle. Unlike a timing, a count is the same on a loaded or a quiet machine, so two trees are
compared exactly: a change that moves code between modules must leave the counts as they were.

    python -m benchmarks.call_counts [--devices cpu oneapi:0 opencl:0] [--warmup N]

Writes ``benchmarks/results/call_counts.json``. No goal: the counts are information, compared
between commits (``docs/architecture.md`` shows how the rooms' move was checked with them).
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter
from collections.abc import Callable, Sequence
from types import FrameType
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import command_line, write_results
from benchmarks.kernel_bench import DEFAULT_DEVICES, choose_devices
from hetero import f32

COUNTED = 10  # operations counted, after the warm-up


@hetero.kernel
def store_one(out: hetero.Array[f32], a: f32):  # type: ignore[no-untyped-def]
    out[0] = a


def operations(device: hetero.Device) -> dict[str, Callable[[], object]]:
    """The operations counted on ``device``, each ending with its result on the host or a wait."""
    x = hetero.asarray(np.ones(1024, np.float32), device=device)
    y = hetero.asarray(np.ones(1024, np.float32), device=device)
    out = hetero.zeros(1, device=device)

    def launch() -> None:
        store_one[1](out, 1.0)
        device.synchronize()

    return {"x + y": lambda: (x + y).numpy(), "x.sum()": lambda: x.sum().numpy(),
            "x.astype(float64)": lambda: x.astype("float64").numpy(),
            "x[:10] = 1.0": lambda: x.__setitem__(slice(0, 10), 1.0), "x @ y": lambda: (x @ y).numpy(),
            "kernel launch + wait": launch}


def count(op: Callable[[], object], warmup: int) -> dict[str, float]:
    """Python and C calls of one ``op()``, the mean over :data:`COUNTED` runs after ``warmup`` runs."""
    for _ in range(warmup):
        op()
    counts: Counter[str] = Counter()

    def profile(frame: FrameType, event: str, arg: Any) -> None:
        if event in ("call", "c_call"):
            counts[event] += 1

    sys.setprofile(profile)
    try:
        for _ in range(COUNTED):
            op()
    finally:
        sys.setprofile(None)
    return {"python_calls": counts["call"] / COUNTED, "c_calls": counts["c_call"] / COUNTED}


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.call_counts", description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="+", metavar="DEVICE", default=list(DEFAULT_DEVICES),
                        help=f"devices to count on (default: {' '.join(DEFAULT_DEVICES)}, those present)")
    parser.add_argument("--warmup", type=int, default=300, help="runs of each operation before counting (default 300)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    devices, missing = choose_devices(args.devices)
    rows = []
    for device in devices:
        for name, op in operations(device).items():
            row = {"device": device.name, "operation": name, **count(op, args.warmup)}
            rows.append(row)
            print(f"{device.name:10} {name:22} {row['python_calls']:7.1f} Python calls {row['c_calls']:7.1f} C calls")
    path = write_results("call_counts", {"config": {"warmup": args.warmup, "counted": COUNTED},
                                         "missing_devices": missing, "rows": rows},
                         command_line("benchmarks.call_counts", sys.argv[1:] if argv is None else list(argv)))
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
