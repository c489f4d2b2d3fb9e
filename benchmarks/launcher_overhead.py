"""Launcher overhead: the wall time of ``hetero-run script.py`` over ``python script.py`` for a
trivial script, each in a fresh process, alternating so that machine drift hits both alike.
Goal: hetero-run adds at most 0.5 s (reported, never enforced).

    python -m benchmarks.launcher_overhead [--quick] [--runs N]

Two scripts: ``x = 1`` (the issue's trivial script: everything hetero-run does is overhead,
including the worker bootstrap importing hetero) and ``import hetero`` (a script that uses
hetero anyway: what remains is the launcher's own cost). hetero-run runs with the default
devices (every device, which opens every backend) and with ``--devices cpu``. The launcher's
event log splits each run's launcher side into *device discovery* (listing the devices
``--devices`` names) and *before the worker starts* (discovery, assignment, handing the job
to a worker interpreter started ahead), and gives the worker's own life; the rest of the
wall time is interpreter start-up, imports and exit. Writes
``benchmarks/results/launcher_overhead.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import Progress, command_line, run_stats, write_results

GOAL_SECONDS = 0.5
SCRIPTS = {"trivial": "x = 1\n", "imports_hetero": "import hetero\n"}
VARIANTS: dict[str, list[str] | None] = {
    "python": None,
    "hetero-run": [],
    "hetero-run --devices cpu": ["--devices", "cpu"],
}


def child_environment(state_dir: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: modules load from .pyc files
    env["HETERO_STATE_DIR"] = state_dir
    return env


def run_once(variant: str, script: Path, work: Path, env: dict[str, str], index: int) -> dict[str, Any]:
    options = VARIANTS[variant]
    if options is None:
        argv = [sys.executable, str(script)]
    else:
        run_dir = work / f"run-{index}"
        argv = [sys.executable, "-m", "hetero.launcher.cli", "--run-dir", str(run_dir), *options, str(script)]
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"{variant} failed (exit {done.returncode}):\n{done.stderr}")
    sample: dict[str, Any] = {"wall_s": wall}
    if options is not None:
        records = [json.loads(line) for line in (run_dir / "events.jsonl").read_text().splitlines()]
        first = {r["event"]: r for r in reversed(records)}
        sample["discovery_s"] = first["run_started"]["discovery_s"]
        sample["launcher_before_worker_s"] = (first["worker_started"]["monotonic"] - first["run_started"]["monotonic"]
                                              + sample["discovery_s"])
        sample["worker_s"] = first["worker_exited"]["runtime_s"]
    return sample



def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.launcher_overhead", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="5 runs of each instead of 11")
    parser.add_argument("--runs", type=int, help="fresh processes per variant and script (default 11)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    runs = args.runs or (5 if args.quick else 11)
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="hetero-launcher-bench-") as temp:
        work = Path(temp)
        env = child_environment(str(work / "state"))
        progress = Progress(len(SCRIPTS) * len(VARIANTS) * (runs + 1))
        counter = 0
        for name, text in SCRIPTS.items():
            script = work / f"{name}.py"
            script.write_text(text)
            samples: dict[str, list[dict[str, Any]]] = {variant: [] for variant in VARIANTS}
            for round_ in range(runs + 1):  # round 0 warms caches and writes .pyc files
                order = list(VARIANTS) if round_ % 2 == 0 else list(reversed(VARIANTS))
                for variant in order:
                    progress.step(f"{name}: {variant} ({'warm-up' if round_ == 0 else f'run {round_}/{runs}'})")
                    counter += 1
                    sample = run_once(variant, script, work, env, counter)
                    if round_:
                        samples[variant].append(sample)
            plain = run_stats([s["wall_s"] for s in samples["python"]])
            entry: dict[str, Any] = {"python": {"wall": plain}, "samples": samples}
            for variant in VARIANTS:
                if variant == "python":
                    continue
                wall = run_stats([s["wall_s"] for s in samples[variant]])
                entry[variant] = {
                    "wall": wall,
                    "added_median_s": wall["median_s"] - plain["median_s"],
                    "launcher_before_worker": run_stats([s["launcher_before_worker_s"] for s in samples[variant]]),
                    "device_discovery": run_stats([s["discovery_s"] for s in samples[variant]]),
                    "worker": run_stats([s["worker_s"] for s in samples[variant]]),
                }
            results[name] = entry
    added = results["trivial"]["hetero-run"]["added_median_s"]
    status = "pass" if added <= GOAL_SECONDS else "fail"
    summary = {"hetero_run_minus_python_median_s": added, "goal_max_s": GOAL_SECONDS, "status": status,
               "with_devices_cpu_s": results["trivial"]["hetero-run --devices cpu"]["added_median_s"],
               "script_importing_hetero_s": results["imports_hetero"]["hetero-run"]["added_median_s"]}
    path = write_results("launcher_overhead", {
        "config": {"runs": runs, "quick": args.quick, "python": sys.executable, "scripts": SCRIPTS,
                   "variants": {k: v for k, v in VARIANTS.items()}},
        "summary": summary, "results": results,
    }, command_line("benchmarks.launcher_overhead", sys.argv[1:] if argv is None else argv))
    for name, entry in results.items():
        print(f"{name}: python median {entry['python']['wall']['median_s'] * 1e3:.0f} ms")
        for variant in VARIANTS:
            if variant == "python":
                continue
            row = entry[variant]
            print(f"  {variant:<26} median {row['wall']['median_s'] * 1e3:6.0f} ms  adds {row['added_median_s'] * 1e3:6.0f} ms"
                  f"  (discovery {row['device_discovery']['median_s'] * 1e3:.0f} ms,"
                  f" before worker {row['launcher_before_worker']['median_s'] * 1e3:.0f} ms,"
                  f" worker {row['worker']['median_s'] * 1e3:.0f} ms)")
    print(f"goal: hetero-run adds <= {GOAL_SECONDS} s over python for a trivial script: adds {added * 1e3:.0f} ms: "
          f"{status.upper()}")
    print(f"results: {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
