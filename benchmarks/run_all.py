"""Run every benchmark in turn, each writing its own ``benchmarks/results/<name>.json``.

    python -m benchmarks.run_all [--quick]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from benchmarks import (
    array_ops, compat_cuda, compile_bundle, compile_time, copy_bandwidth, digits_arrays, guard_overhead, guard_recovery, import_time,
    inference, injection_overhead, launch_overhead, launcher_overhead, placement, recovery_vs_torchrun, sgemm, split, stream_triad,
    torch_guard,
)

BENCHMARKS: dict[str, Callable[[Sequence[str]], int]] = {
    "import_time": import_time.main,
    "copy_bandwidth": copy_bandwidth.main,
    "launch_overhead": launch_overhead.main,
    "stream_triad": stream_triad.main,
    "sgemm": sgemm.main,
    "array_ops": array_ops.main,
    "digits_arrays": digits_arrays.main,
    "compile_time": compile_time.main,
    "compile_bundle": compile_bundle.main,
    "placement": placement.main,
    "split": split.main,
    "injection_overhead": injection_overhead.main,
    "guard_overhead": guard_overhead.main,
    "guard_recovery": guard_recovery.main,
    "launcher_overhead": launcher_overhead.main,
    "recovery_vs_torchrun": recovery_vs_torchrun.main,
    "compat_cuda": compat_cuda.main,
    "inference": inference.main,
    "torch_guard": torch_guard.main,  # last: its lost drill leaves the cpu device unhealthy for the process
}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_all", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the short version of every benchmark")
    args = parser.parse_args(argv)
    passed = ["--quick"] if args.quick else []
    for name, run in BENCHMARKS.items():
        print(f"== {name} ==", flush=True)
        run(passed)
        print(flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
