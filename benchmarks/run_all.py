"""Run every benchmark in turn, each writing its own ``benchmarks/results/<name>.json``, then judge
every goal from those files: a table, one verdict line, and ``benchmarks/results/run_all.json``
recording the run (load average before and after, CPU model, cores, platform, Python, date, git
commit, each benchmark's time and exit), and docs/benchmarks.md's "Measured here" table regenerated.

    python -m benchmarks.run_all [--quick] [--only NAME[,NAME]] [--no-readme]
    python -m benchmarks.run_all --summary [--only NAME[,NAME]] [--results DIR]   # judge the files, run nothing

Besides the verdict over every goal, one verdict line per issue whose acceptance is a set of goals
(the table's *issue* column: issue 19's), judged over that issue's goals alone. Exit status 0 when
every goal this machine measured passed, 1 when one missed or a benchmark failed to write its results.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import difflib
import importlib
import json
import os
import subprocess
import sys
import time
import traceback
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import readme_table
from benchmarks.goals import RESULTS_DIR, Goal, ResultsError, format_table, issue_verdicts, load_goals, read_results, verdict

#: The benchmarks, in the order they run (each is ``benchmarks.<name>``, imported when it runs).
BENCHMARKS: tuple[str, ...] = (
    "import_time", "copy_bandwidth", "launch_overhead", "stream_triad", "sgemm", "array_ops", "digits_arrays", "array_jit",
    "compile_time", "compile_bundle", "placement", "split", "injection_overhead", "guard_overhead", "guard_recovery",
    "launcher_overhead", "recovery_vs_torchrun", "compat_cuda", "inference", "ray_cluster", "ray_train",
    "torch_guard",  # last: its lost drill leaves the cpu device unhealthy for the process
)
RECORD = "run_all.json"
ROOT = Path(__file__).resolve().parent.parent


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.run_all", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the short version of every benchmark")
    parser.add_argument("--only", metavar="NAME[,NAME]", help=f"run (or summarise) these only; from: {', '.join(BENCHMARKS)}")
    parser.add_argument("--summary", action="store_true", help="run nothing: judge the results files already there")
    parser.add_argument("--results", type=Path, default=RESULTS_DIR, metavar="DIR",
                        help="with --summary: the results folder to judge (default: benchmarks/results)")
    parser.add_argument("--no-readme", action="store_true", help="leave docs/benchmarks.md's 'Measured here' table as it is")
    args = parser.parse_args(argv)
    try:
        names = chosen(args.only)
    except ValueError as exc:
        parser.error(str(exc))
    if args.results.resolve() != RESULTS_DIR and not args.summary:
        parser.error("--results needs --summary: the benchmarks always write benchmarks/results")
    if args.summary:
        return summarise(names, args.results)[0]

    load_before = load_average()
    started = time.time()
    runs = {name: run_one(name, ["--quick"] if args.quick else []) for name in names}
    failed = [f"{name}: {run['error']}" for name, run in runs.items() if run["error"]]
    status, goals, line = summarise(names, RESULTS_DIR, failed)
    record = {
        "benchmark": "run_all",
        "command": " ".join(["python", "-m", "benchmarks.run_all", *(argv if argv is not None else sys.argv[1:])]),
        "timestamp_utc": _utc(time.time()),
        "started_utc": _utc(started),
        "quick": args.quick,
        "machine": machine(),
        "git": git_commit(),
        "load_average_before": load_before,
        "load_average_after": load_average(),
        "benchmarks": {**previous_runs(RESULTS_DIR / RECORD, names), **runs},
        "only": list(names) if args.only else None,
        "goals": [dataclasses.asdict(goal) for goal in goals],
        "verdict": {"ok": status == 0, "line": line,
                    "issues": {str(n): {"ok": ok, "line": text} for n, (ok, text) in issue_verdicts(goals).items()}},
    }
    path = write_record(RESULTS_DIR / RECORD, record)
    print(f"run recorded in {path}")
    if not args.no_readme:
        try:
            print(readme_table.update(readme_table.README, RESULTS_DIR))
        except (ResultsError, readme_table.ReadmeError) as exc:
            print(f"ERROR: docs/benchmarks.md's table not regenerated: {exc}", file=sys.stderr)
            return 1
    return status


def chosen(only: str | None) -> tuple[str, ...]:
    """The benchmarks ``--only`` names, in run order; all of them without it."""
    if not only:
        return BENCHMARKS
    wanted = [name.strip() for name in only.split(",") if name.strip()]
    for name in wanted:
        if name not in BENCHMARKS:
            close = difflib.get_close_matches(name, BENCHMARKS, n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise ValueError(f"--only: no benchmark {name!r}{hint}; choose from {', '.join(BENCHMARKS)}")
    return tuple(name for name in BENCHMARKS if name in wanted)


def run_one(name: str, argv: list[str]) -> dict[str, Any]:
    """Run ``benchmarks.<name>``; what it took, its exit status, and whether it wrote its results."""
    print(f"== {name} ==", flush=True)
    results = RESULTS_DIR / f"{name}.json"
    before = results.stat().st_mtime_ns if results.exists() else None
    load_before, started = load_average(), time.monotonic()
    exit_status: int | None = None
    error = None
    try:
        main_of: Callable[[Sequence[str]], int] = importlib.import_module(f"benchmarks.{name}").main
        exit_status = main_of(argv)
    except Exception as exc:  # noqa: BLE001 - one benchmark's crash must not lose the others' results
        traceback.print_exc()
        error = f"raised {type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
    written = results.exists() and results.stat().st_mtime_ns != before
    if error is None and not written:
        error = f"wrote no {results.name}"
    print(flush=True)
    return {"date_utc": _utc(time.time()), "seconds": round(time.monotonic() - started, 1), "exit_status": exit_status,
            "results_written": written, "error": error, "load_average_before": load_before, "load_average_after": load_average()}


def summarise(names: Sequence[str], results_dir: Path, failed: Sequence[str] = ()) -> tuple[int, list[Goal], str]:
    """Print the goals of ``names`` and the verdict; the exit status, the goals and the verdict line."""
    try:
        goals = load_goals(results_dir, names)
    except ResultsError as exc:
        print(f"ERROR: {exc}", file=sys.stderr)
        return 1, [], f"ERROR: {exc}"
    print(format_table(goals))
    ok, line = verdict(goals)
    for goal in goals:
        if goal.status == "MISS":
            print(f"  missed: {goal.benchmark}: {goal.what}: {goal.measured} (goal {goal.goal})")
    for problem in failed:
        print(f"  ERROR: {problem}")
    error = f"; ERROR: {len(failed)} benchmark(s) failed: {', '.join(p.split(':')[0] for p in failed)}" if failed else ""
    for _, issue_line in issue_verdicts(goals).values():  # a failed benchmark's stale file judges nothing
        print(issue_line + error)
    line += error
    print(line)
    return (0 if ok and not failed else 1), goals, line


def machine() -> dict[str, Any]:
    """What ran the benchmarks, without the hostname: platform, CPU model, cores, Python."""
    from benchmarks.harness import machine as harness_machine  # imports hetero: only when recording a run

    return {key: value for key, value in harness_machine().items() if key not in ("hostname", "load_average_1_5_15min")}


def load_average() -> list[float] | None:
    return [round(v, 2) for v in os.getloadavg()] if hasattr(os, "getloadavg") else None


def git_commit() -> dict[str, Any]:
    """The commit the benchmarks ran from, and whether tracked files differed from it."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10, check=True)
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True,
                               text=True, timeout=10, check=True)
    except (OSError, subprocess.SubprocessError):
        return {"commit": None, "dirty": None}
    return {"commit": commit.stdout.strip(), "dirty": bool(dirty.stdout.strip())}


def previous_runs(path: Path, names: Sequence[str]) -> dict[str, Any]:
    """The earlier record's entries for the benchmarks not run now (``--only``): they still describe their files."""
    if not path.exists():
        return {}
    try:
        earlier = read_results(path, "run_all").get("benchmarks", {})
    except ResultsError as exc:
        print(f"note: {exc}; starting a new record", file=sys.stderr)
        return {}
    return {name: run for name, run in earlier.items() if name not in names and name in BENCHMARKS}


def write_record(path: Path, record: dict[str, Any]) -> Path:
    from hetero.core.files import atomic_write  # imports hetero: only when recording a run

    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(record, indent=2) + "\n", mode=0o644)
    return path


def _utc(seconds: float) -> str:
    return datetime.datetime.fromtimestamp(seconds, datetime.timezone.utc).isoformat(timespec="seconds")


if __name__ == "__main__":
    sys.exit(main())
