"""Every benchmark's goals, judged from ``benchmarks/results/<name>.json``: :data:`ADAPTERS` maps a
results file's name to the function that reads it into :class:`Goal` rows, and
:func:`load_goals` reads the files, so ``run_all`` and ``readme_table`` judge the same way.

A missing results file gives one N/A row ("not run"); a file that is not the JSON its benchmark
writes raises :class:`ResultsError` naming the file and how to rewrite it.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from benchmarks import goals_compute, goals_runtime
from benchmarks.goal import STATUSES, Goal, Status

__all__ = ["ADAPTERS", "RESULTS_DIR", "RUN_ELSEWHERE", "STATUSES", "WRITTEN_BY", "Goal", "ResultsError", "Status", "format_table", "goals_of",
           "issue_verdicts", "load_goals", "read_results", "verdict"]

RESULTS_DIR = Path(__file__).resolve().parent / "results"

Adapter = Callable[[dict[str, Any]], list[Goal]]
#: results file name -> its adapter, in the order the docs/benchmarks.md table lists them.
ADAPTERS: dict[str, Adapter] = {
    "copy_bandwidth": goals_compute.copy_bandwidth,
    "import_time": goals_compute.import_time,
    "launch_overhead": goals_compute.launch_overhead,
    "stream_triad": goals_compute.stream_triad,
    "sgemm": goals_compute.sgemm,
    "compile_time": goals_compute.compile_time,
    "compile_bundle": goals_compute.compile_bundle,
    "placement": goals_runtime.placement,
    "split": goals_runtime.split,
    "injection_overhead": goals_runtime.injection_overhead,
    "guard_recovery": goals_runtime.guard_recovery,
    "guard_overhead": goals_runtime.guard_overhead,
    "recovery_vs_torchrun": goals_runtime.recovery_vs_torchrun,
    "launcher_overhead": goals_runtime.launcher_overhead,
    "torch_guard": goals_runtime.torch_guard,
    "array_ops": goals_compute.array_ops,
    "digits_arrays": goals_compute.digits_arrays,
    "array_jit": goals_compute.array_jit,
    "inference": goals_runtime.inference,
    "ray_cluster": goals_runtime.ray_cluster,
    "ray_train": goals_runtime.ray_train,
    "compat_cuda": goals_compute.compat_cuda,
    "gpu_check": goals_compute.gpu_check,
    "split_h200": goals_runtime.split_elsewhere,
}
#: Results written on another machine (one with a GPU), not by ``run_all``: shown in docs/benchmarks.md, never
#: counted in this machine's verdict.
RUN_ELSEWHERE = frozenset({"gpu_check", "split_h200"})
#: Results files written by another benchmark than their name says (split_h200.json: benchmarks.split on an H200).
WRITTEN_BY = {"split_h200": "split"}
# What an adapter raises when a file lacks the fields its benchmark writes.
_SCHEMA_ERRORS = (KeyError, TypeError, ValueError, IndexError, AttributeError, ZeroDivisionError)


class ResultsError(ValueError):
    """A results file that cannot be read as the JSON its benchmark writes."""


def read_results(path: Path, name: str | None = None) -> dict[str, Any]:
    """The JSON object in ``path``; ``name``: the benchmark that should have written it."""
    rerun = f"; rerun `python -m benchmarks.{name}` to rewrite it" if name else ""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ResultsError(f"{path}: not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}){rerun}") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ResultsError(f"{path}: cannot be read ({exc}){rerun}") from None
    if not isinstance(data, dict):
        raise ResultsError(f"{path}: holds a JSON {type(data).__name__}, not the object a benchmark writes{rerun}")
    written_by = data.get("benchmark")
    if name and written_by is not None and written_by != name:
        raise ResultsError(f"{path}: written by benchmark {written_by!r}, not {name!r}{rerun}")
    return data


def goals_of(name: str, results_dir: Path = RESULTS_DIR) -> list[Goal]:
    """The goals in ``results_dir/<name>.json``: one N/A row if the file is missing."""
    if name not in ADAPTERS:
        raise KeyError(f"no goals adapter for {name!r}; known: {', '.join(ADAPTERS)}")
    path = results_dir / f"{name}.json"
    if not path.exists():
        return [Goal(name, f"`python -m benchmarks.{name}`", "not run (no results file)", "", "N/A")]
    data = read_results(path, WRITTEN_BY.get(name, name))
    try:
        return ADAPTERS[name](data)
    except _SCHEMA_ERRORS as exc:
        raise ResultsError(f"{path}: not the results {name} writes ({type(exc).__name__}: {exc}); rerun "
                           f"`python -m benchmarks.{name}` to rewrite it") from exc


def load_goals(results_dir: Path = RESULTS_DIR, names: Iterable[str] | None = None) -> list[Goal]:
    """The goals of ``names`` (default: every adapter), in :data:`ADAPTERS` order."""
    wanted = list(ADAPTERS) if names is None else list(names)
    unknown = [name for name in wanted if name not in ADAPTERS]
    if unknown:
        raise KeyError(f"no goals adapter for {', '.join(unknown)}; known: {', '.join(ADAPTERS)}")
    return [goal for name in ADAPTERS if name in wanted for goal in goals_of(name, results_dir)]


def verdict(goals: Sequence[Goal]) -> tuple[bool, str]:
    """Whether every measurable goal passed, and the one line that says so."""
    measured = [goal for goal in goals if goal.measurable]
    missed = [goal for goal in measured if goal.status == "MISS"]
    if not missed:
        note = "" if measured else " (none of them could be measured here)"
        return True, f"PASS: all {len(measured)} measurable goals met{note}"
    by_benchmark = Counter(goal.benchmark for goal in missed)
    listed = ", ".join(f"{name} ({n})" for name, n in by_benchmark.items())
    return False, f"MISS: {len(missed)} of {len(measured)} goals missed: {listed}"


def issue_verdicts(goals: Sequence[Goal]) -> dict[int, tuple[bool, str]]:
    """Per open issue with goals here (:attr:`Goal.issue`), :func:`verdict` over its goals alone, the line
    prefixed ``issue N:``: an issue's acceptance reads its own line, whatever other benchmarks' goals say."""
    issues = sorted({goal.issue for goal in goals if goal.issue is not None})
    verdicts = {}
    for issue in issues:
        ok, line = verdict([goal for goal in goals if goal.issue == issue])
        verdicts[issue] = (ok, f"issue {issue}: {line}")
    return verdicts


def format_table(goals: Sequence[Goal]) -> str:
    """The goals as a plain-text table: benchmark, what, measured, goal, status."""
    header = ("benchmark", "what", "measured", "goal", "issue", "status")
    cells = [header, *((g.benchmark, g.what, g.measured, g.goal, "" if g.issue is None else str(g.issue), g.status)
                       for g in goals)]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    lines = [" | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True)).rstrip() for row in cells]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(lines)
