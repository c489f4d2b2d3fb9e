"""Import time: what ``import hetero`` costs over ``import numpy`` (which it needs anyway),
each timed inside a fresh interpreter, alternating so that disk-cache and CPU-frequency
drift hit both alike. Goal: hetero adds less than 0.3 s (reported, never enforced).

    python -m benchmarks.import_time [--quick] [--runs N]

Writes ``benchmarks/results/import_time.json``. As extra information, each hetero child
also times its first ``hetero.devices()`` call (which opens every backend) and lists the
vendor libraries loaded after ``import hetero`` alone (there should be none).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import Progress, command_line, run_stats, write_results

GOAL_SECONDS = 0.3
REPO_ROOT = Path(__file__).resolve().parent.parent
# Libraries hetero must not import until devices are listed.
VENDOR_MODULES = ("pyopencl", "cupy", "numba", "torch", "pynvml")

# The child times the import first, before anything else it needs is loaded.
_CHILD = {
    "numpy": (
        "import time\n"
        "t0 = time.perf_counter()\n"
        "import numpy\n"
        "t1 = time.perf_counter()\n"
        "import json\n"
        "print(json.dumps({'import_s': t1 - t0}))\n"
    ),
    "hetero": (
        "import time\n"
        "t0 = time.perf_counter()\n"
        "import hetero\n"
        "t1 = time.perf_counter()\n"
        "import json, sys\n"
        f"loaded = [m for m in {VENDOR_MODULES!r} if m in sys.modules]\n"
        "t2 = time.perf_counter()\n"
        "hetero.devices()\n"
        "t3 = time.perf_counter()\n"
        "print(json.dumps({'import_s': t1 - t0, 'devices_s': t3 - t2, 'vendor_modules_after_import': loaded}))\n"
    ),
}


def child_environment() -> dict[str, str]:
    """This process's environment, but with bytecode caching allowed: as installed, hetero's
    modules load from .pyc files, and recompiling them in every child would time the compiler."""
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def run_child(what: str) -> dict[str, Any]:
    """One fresh interpreter importing ``what``: its own timings, plus the process's wall time."""
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", _CHILD[what]], cwd=REPO_ROOT, env=child_environment(),
                          capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"the {what} import child failed (exit {done.returncode}):\n{done.stderr}")
    # The last line: a backend may log to stdout/stderr before it.
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    report["process_wall_s"] = wall
    return report



def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.import_time", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="7 runs of each instead of 15")
    parser.add_argument("--runs", type=int, help="fresh interpreters per module (default 15)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    runs = args.runs or (7 if args.quick else 15)
    progress = Progress(2 * (runs + 1))
    samples: dict[str, list[dict[str, Any]]] = {"numpy": [], "hetero": []}
    for round_ in range(runs + 1):  # round 0 warms the disk cache and writes .pyc files
        for what in ("numpy", "hetero") if round_ % 2 == 0 else ("hetero", "numpy"):
            progress.step(f"import {what} ({'warm-up' if round_ == 0 else f'run {round_}/{runs}'})")
            report = run_child(what)
            if round_:
                samples[what].append(report)
    numpy_import = run_stats([s["import_s"] for s in samples["numpy"]])
    hetero_import = run_stats([s["import_s"] for s in samples["hetero"]])
    difference = hetero_import["median_s"] - numpy_import["median_s"]
    vendor = sorted({m for s in samples["hetero"] for m in s["vendor_modules_after_import"]})
    status = "pass" if difference < GOAL_SECONDS else "fail"
    summary = {"hetero_minus_numpy_median_s": difference, "goal_max_s": GOAL_SECONDS,
               "status": status,
               "vendor_modules_after_import": vendor}
    path = write_results("import_time", {
        "config": {"runs": runs, "quick": args.quick, "python": sys.executable, "bytecode_cache": "allowed",
                   "timed_in_child": "time.perf_counter() around the import statement"},
        "summary": summary,
        "numpy": {"import": numpy_import, "process_wall": run_stats([s["process_wall_s"] for s in samples["numpy"]])},
        "hetero": {"import": hetero_import, "process_wall": run_stats([s["process_wall_s"] for s in samples["hetero"]]),
                   "first_devices_call": run_stats([s["devices_s"] for s in samples["hetero"]])},
        "samples": samples,
    }, command_line("benchmarks.import_time", sys.argv[1:] if argv is None else argv))
    print(f"import numpy   median {numpy_import['median_s'] * 1e3:8.1f} ms  (min {numpy_import['min_s'] * 1e3:.1f})")
    print(f"import hetero  median {hetero_import['median_s'] * 1e3:8.1f} ms  (min {hetero_import['min_s'] * 1e3:.1f})")
    first = run_stats([s["devices_s"] for s in samples["hetero"]])
    print(f"first hetero.devices() median {first['median_s'] * 1e3:.1f} ms (not part of the goal)")
    print(f"goal: hetero adds < {GOAL_SECONDS} s over numpy: adds {difference * 1e3:.1f} ms: {status.upper()}")
    if vendor:
        print(f"note: import hetero alone loaded {', '.join(vendor)}")
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
