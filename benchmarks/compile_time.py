"""Compile time of the kernel corpus, per dialect: cold (an empty cache: Python -> IR ->
dialect -> the vendor's compiler) and warm (a new process whose disk cache holds every
kernel), each in a fresh interpreter.

    python -m benchmarks.compile_time [--quick] [--devices oneapi:0 opencl:0 cpu] [--rounds N] [--warm-runs N]

Each round gives each device an empty ``HETERO_CACHE_DIR`` (and an empty PoCL kernel
cache), runs one cold child, then warm children on the filled cache. A child first starts
its backend (opens the device, launches one unrelated kernel: not counted), then launches
each corpus kernel (``tests/kernels/corpus.py``) four times; a kernel's compile cost is
its first launch minus the fastest of the other three (all waited for). ``hetero.compiler.build.stats`` shows which path
each first launch took (``builds``: compiled; ``disk_hits``: loaded from the disk cache),
and the child times the compiler's phases (parse, lower, optimize, emit, cache read, vendor
build or load, cache write). Goal (reported, never enforced): a disk-cache hit costs less
than 5 ms per kernel. Writes ``benchmarks/results/compile_time.json``.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, command_line, format_seconds, run_stats, write_results
from benchmarks.kernel_bench import choose_devices, describe, load_average, print_footer
from hetero import f32

GOAL_DISK_HIT_S = 0.005
#: A process's first kernel on ``cpu``, every artifact cached (issue 19): Numba's start-up must not be paid.
GOAL_FIRST_CPU_KERNEL_S = 0.1
DEVICES = ("oneapi:0", "opencl:0", "cpu")
REPO_ROOT = Path(__file__).resolve().parent.parent
QUICK_KERNELS = ("saxpy", "matmul_tiled", "reduce_sum", "softmax_rows")
CHILD_TIMEOUT_S = 900
SECOND_LAUNCHES = 3


@hetero.kernel
def startup_fill(out: hetero.Array[f32], v: f32):
    """Launched once before the timed kernels: opens the device and loads its toolchain."""
    i = hetero.global_id(0)
    if i < out.shape[0]:
        out[i] = v


Launch = Callable[[], None]


def _target(device: hetero.Device) -> Any:
    target = device.runtime.kernel_target()
    if target is None:
        raise SystemExit(f"{device.name} cannot run hetero kernels: nothing to time there")
    return target


def corpus_cases(corpus: Any, device: hetero.Device) -> list[tuple[str, Launch]]:
    """One launch per corpus kernel, with its arguments already on ``device`` (sizes as in
    tests/test_kernels.py: small, so that running the kernel costs next to nothing)."""
    rng = np.random.default_rng(0)

    def on(data: np.ndarray) -> hetero.Array:
        return hetero.asarray(data, device=device, copy=True)

    def zeros(shape: Any, dtype: str = "float32") -> hetero.Array:
        return hetero.zeros(shape, dtype=dtype, device=device)

    features = _target(device).features
    x, y = on(rng.standard_normal(1000, dtype=np.float32)), on(rng.standard_normal(1000, dtype=np.float32))
    cases: list[tuple[str, Launch]] = [("saxpy", lambda: corpus.saxpy[1000](2.0, x, y))]
    if device.fp64:
        x64, y64 = on(np.linspace(0, 1, 333)), on(np.linspace(1, 2, 333))
        cases.append(("daxpy", lambda: corpus.daxpy[333](np.float64(1 / 3), x64, y64)))
    ma, mb, mc = on(rng.standard_normal((32, 48), dtype=np.float32)), on(rng.standard_normal((48, 24), dtype=np.float32)), zeros((32, 24))
    cases.append(("matmul_tiled", lambda: corpus.matmul_tiled[(24, 32), (corpus.TILE, corpus.TILE)](ma, mb, mc)))
    rx, total = on(np.arange(1000, dtype=np.float32) % 7), zeros(1)
    cases.append(("reduce_sum", lambda: corpus.reduce_sum[(1024,), (64,)](rx, total)))
    if "int64_atomics" in features:
        ix, itotal = on(np.arange(5000, dtype=np.int64)), zeros(1, "int64")
        cases.append(("reduce_sum_i64", lambda: corpus.reduce_sum_i64[5000](ix, itotal)))
    src, dst = on(rng.standard_normal((40, 30), dtype=np.float32)), zeros((40, 30))
    cases.append(("jacobi", lambda: corpus.jacobi[(30, 40)](src, dst)))
    values, counts = on(rng.integers(0, 1000, 5000, dtype=np.int32)), zeros(16, "int32")
    cases.append(("histogram", lambda: corpus.histogram[5000](values, 16, counts)))
    sx, sout = on(rng.integers(-50, 50, 320, dtype=np.int32)), zeros(320, "int32")
    cases.append(("scan_blocks", lambda: corpus.scan_blocks[(160,), (32,)](sx, sout)))
    smx, smout = on(rng.standard_normal((37, 19), dtype=np.float32)), zeros((37, 19))
    cases.append(("softmax_rows", lambda: corpus.softmax_rows[40](smx, smout)))
    tsrc, tdst = on(np.arange(24 * 16, dtype=np.float32).reshape(16, 24)), zeros((24, 16))
    cases.append(("transpose_tiled", lambda: corpus.transpose_tiled[(24, 16), (corpus.TILE, corpus.TILE)](tsrc, tdst)))
    mout = zeros((24, 32), "int32")
    cases.append(("mandelbrot", lambda: corpus.mandelbrot[(32, 24)](mout, 50)))
    ssx, ssout = on(np.linspace(0, 1, 101, dtype=np.float32)), zeros(101)
    cases.append(("apply_smoothstep", lambda: corpus.apply_smoothstep[101](ssx, ssout)))
    fa, fb = on(np.array([-7, 7, -7, 7, 0, -1, 9, -9], np.int32)), on(np.array([2, -2, -2, 2, 3, 4, -4, 4], np.int32))
    fq, fr = zeros(8, "int32"), zeros(8, "int32")
    cases.append(("floor_ops", lambda: corpus.floor_ops[8](fa, fb, fq, fr)))
    ta, tb, tc = zeros(1 << 16), on(np.ones(1 << 16, np.float32)), on(np.arange(1 << 16, dtype=np.float32))
    cases.append(("triad", lambda: corpus.triad[1 << 16](ta, tb, tc, 3.0)))
    return cases


# -- the child: one fresh interpreter, one device ---------------------------------------------
class Phases:
    """Exclusive seconds spent in named compiler functions, by wrapping them in this process
    (hetero's internals: a function that has moved is skipped, and listed in ``missing``)."""

    def __init__(self, device: hetero.Device) -> None:
        from hetero.compiler.build import cache, pipeline
        from hetero.compiler.emit import registry as emit_registry
        from hetero.compiler.frontend import python as frontend
        from hetero.compiler.ir import passes

        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self.missing: list[str] = []
        self._stack: list[float] = []
        emitter = emit_registry.emitter_for(_target(device).dialect)
        for label, owner, name in (
            ("parse source", frontend, "function_source"),
            ("parse source", frontend, "declared_types"),
            ("lower to IR", frontend, "lower_kernel"),
            ("optimize IR", passes, "optimize"),
            ("cache key", pipeline, "compile_key"),
            ("emit dialect source", type(emitter), "emit"),
            ("cache read", cache.Cache, "get"),
            ("vendor build or load", type(device.runtime), "build_kernel"),
            ("cache write", cache.Cache, "put"),
            # Numba compiles (cold) or loads its cache (warm) lazily, inside the first call.
            ("first call into the runtime", type(device.runtime), "launch"),
        ):
            self._wrap(label, owner, name)

    def _wrap(self, label: str, owner: Any, name: str) -> None:
        original = getattr(owner, name, None)
        if original is None:
            self.missing.append(f"{getattr(owner, '__name__', owner)}.{name}")
            return
        stack, seconds, calls = self._stack, self.seconds, self.calls

        def timed(*args: Any, **kwargs: Any) -> Any:
            stack.append(0.0)  # time spent in timed calls nested in this one
            start = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                elapsed = time.perf_counter() - start
                seconds[label] += elapsed - stack.pop()
                calls[label] += 1
                if stack:
                    stack[-1] += elapsed

        setattr(owner, name, timed)

    def take(self) -> tuple[dict[str, float], dict[str, int]]:
        """The seconds and calls per phase since the last take."""
        taken = dict(self.seconds), dict(self.calls)
        self.seconds.clear()
        self.calls.clear()
        return taken


def run_child(device_name: str, kernels: Sequence[str] | None) -> dict[str, Any]:
    """Start ``device_name``'s backend, then launch each corpus kernel four times; the report."""
    import importlib

    from hetero.compiler.build.stats import stats

    def counters() -> dict[str, int]:
        return {"lowered": stats.lowered, "builds": stats.builds, "disk_hits": stats.disk_hits}

    corpus = importlib.import_module("tests.kernels.corpus")
    start = time.perf_counter()
    device = hetero.device(device_name)
    out = hetero.zeros(1024, dtype="float32", device=device)
    device.synchronize()
    opened = time.perf_counter()
    startup_fill[1024](out, 1.0)  # the process's first kernel (goal on cpu, warm: < 100 ms)
    device.synchronize()
    end = time.perf_counter()
    startup = {"seconds": end - start, "first_kernel_s": end - opened, "counters": counters()}
    phases = Phases(device)
    cases = [(name, launch) for name, launch in corpus_cases(corpus, device) if kernels is None or name in kernels]
    device.synchronize()
    def timed(launch: Launch) -> float:
        t0 = time.perf_counter()
        launch()
        device.synchronize()
        return time.perf_counter() - t0

    results = []
    for name, launch in cases:
        gc.collect()
        gc.disable()  # as in the harness: a collection would land on whichever kernel ran then
        try:
            before = counters()
            phases.take()
            first = timed(launch)
            spent, calls = phases.take()
            after = counters()
            # A launch that compiles nothing; the fastest of three, since on a busy machine a
            # parallel launch can wait milliseconds for a core.
            steady = min(timed(launch) for _ in range(SECOND_LAUNCHES))
        finally:
            gc.enable()
        results.append({"kernel": name, "first_s": first, "steady_s": steady, "cost_s": first - steady,
                        "counters": {key: after[key] - before[key] for key in after}, "phases_s": spent,
                        "phase_calls": calls, "unaccounted_s": first - sum(spent.values())})
    return {"device": device_name, "startup": startup, "kernels": results, "phases_missing": phases.missing,
            "cache_dir": str(hetero.get_config().cache_dir)}


# -- the parent ----------------------------------------------------------------------------
def child_environment(cache_dir: str, pocl_cache_dir: str) -> dict[str, str]:
    """This environment with hetero's and PoCL's caches in the given (per-round) folders, and
    Numba's cache beside hetero's generated modules (its default), not in a shared folder."""
    env = dict(os.environ)
    env["HETERO_CACHE_DIR"] = cache_dir
    env["POCL_CACHE_DIR"] = pocl_cache_dir
    env.pop("NUMBA_CACHE_DIR", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # as installed: hetero's own modules load from .pyc
    return env


def spawn(device_name: str, env: dict[str, str], kernels: Sequence[str] | None) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.compile_time", "--child", device_name]
    if kernels is not None:
        command += ["--kernels", *kernels]
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, check=False,
                          timeout=CHILD_TIMEOUT_S)
    if done.returncode != 0:
        raise RuntimeError(f"the compile-time child for {device_name} failed (exit {done.returncode}):\n{done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])  # the last line: a backend may print first
    return report


def path_taken(counters: dict[str, int]) -> str:
    if counters["builds"] and not counters["disk_hits"]:
        return "built"
    if counters["disk_hits"] and not counters["builds"]:
        return "disk hit"
    if not counters["builds"] and not counters["disk_hits"]:
        return "memory"
    return "mixed"



def summarize(device_name: str, cold: Sequence[dict[str, Any]], warm: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Per kernel: the cold and warm costs (medians over children), the paths the first
    launches took, and the median time of each compiler phase."""
    kernels: dict[str, dict[str, Any]] = {}
    for phase, reports in (("cold", cold), ("warm", warm)):
        for report in reports:
            for entry in report["kernels"]:
                record = kernels.setdefault(entry["kernel"], {"cold": [], "warm": []})
                record[phase].append(entry)
    rows = []
    for name, record in kernels.items():
        row: dict[str, Any] = {"kernel": name}
        for phase in ("cold", "warm"):
            entries = record[phase]
            if not entries:
                continue
            labels = sorted({label for e in entries for label in e["phases_s"]})
            row[phase] = {
                "cost": run_stats([e["cost_s"] for e in entries]),
                "first_launch": run_stats([e["first_s"] for e in entries]),
                "steady_launch": run_stats([e["steady_s"] for e in entries]),
                "paths": sorted({path_taken(e["counters"]) for e in entries}),
                "phases_median_s": {label: statistics.median(e["phases_s"].get(label, 0.0) for e in entries)
                                    for label in labels},
                "phase_calls": {label: max(e["phase_calls"].get(label, 0) for e in entries) for label in labels},
                "unaccounted_median_s": statistics.median(e["unaccounted_s"] for e in entries),
            }
        rows.append(row)
    warm_costs = [row["warm"]["cost"]["median_s"] for row in rows if "warm" in row]
    paths_ok = all(row.get("cold", {}).get("paths") == ["built"] and row.get("warm", {}).get("paths") == ["disk hit"]
                   for row in rows)
    over = [row["kernel"] for row in rows if "warm" in row and row["warm"]["cost"]["median_s"] >= GOAL_DISK_HIT_S]
    return {
        "device": device_name,
        "kernels": rows,
        "startup_s": {"cold": run_stats([r["startup"]["seconds"] for r in cold]),
                      "warm": run_stats([r["startup"]["seconds"] for r in warm])} if cold and warm else None,
        "cold_total_s": sum(row["cold"]["cost"]["median_s"] for row in rows if "cold" in row),
        "warm_median_s": statistics.median(warm_costs) if warm_costs else None,
        "warm_max_s": max(warm_costs) if warm_costs else None,
        "paths_as_expected": paths_ok,
        "goal_max_s": GOAL_DISK_HIT_S,
        "kernels_over_goal": over,
        "status": "not measured" if not warm_costs else "pass" if not over and paths_ok else "fail",
        **_first_kernel(device_name, warm, cold),
        "phases_missing": sorted({m for r in (*cold, *warm) for m in r["phases_missing"]}),
    }


def _first_kernel(device_name: str, warm: Sequence[dict[str, Any]], cold: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """The process's first kernel launch (device already open), warm and cold; judged on cpu."""
    firsts = {phase: [r["startup"]["first_kernel_s"] for r in runs if "first_kernel_s" in r["startup"]]
              for phase, runs in (("cold", cold), ("warm", warm))}
    measured = {phase: run_stats(values) for phase, values in firsts.items() if values}
    if device_name != "cpu" or "warm" not in measured:
        return {"first_kernel_s": measured}
    ok = measured["warm"]["median_s"] < GOAL_FIRST_CPU_KERNEL_S
    return {"first_kernel_s": measured, "first_kernel_goal_s": GOAL_FIRST_CPU_KERNEL_S,
            "first_kernel_status": "pass" if ok else "fail"}


def _slim(reports: dict[str, dict[str, list[dict[str, Any]]]]) -> dict[str, dict[str, list[dict[str, Any]]]]:
    """The children's reports without their per-phase timings (``devices_detail`` has their medians)."""
    keep = ("kernel", "first_s", "steady_s", "cost_s", "counters", "unaccounted_s")
    return {device: {phase: [{**report, "kernels": [{key: entry[key] for key in keep} for entry in report["kernels"]]}
                             for report in runs]
                     for phase, runs in phases.items()}
            for device, phases in reports.items()}


def print_device(summary: dict[str, Any]) -> None:
    print(f"== {summary['device']} ==")
    header = f"{'kernel':>17} | {'cold':>10} {'path':>8} | {'warm':>10} {'path':>8} | where a warm hit's time goes (medians)"
    print(header)
    print("-" * len(header))
    for row in summary["kernels"]:
        cold, warm = row.get("cold"), row.get("warm")
        phases = ""
        if warm:
            top = sorted(warm["phases_median_s"].items(), key=lambda item: -item[1])[:3]
            phases = ", ".join(f"{label} {seconds * 1e3:.2f} ms" for label, seconds in top)
        print(f"{row['kernel']:>17} | {format_seconds(cold['cost']['median_s']) if cold else '-':>10} "
              f"{'/'.join(cold['paths']) if cold else '-':>8} | {format_seconds(warm['cost']['median_s']) if warm else '-':>10} "
              f"{'/'.join(warm['paths']) if warm else '-':>8} | {phases}")
    if summary["startup_s"]:
        print(f"backend start-up (not counted): cold {format_seconds(summary['startup_s']['cold']['median_s'])}, "
              f"warm {format_seconds(summary['startup_s']['warm']['median_s'])}")


def print_summary(summaries: Sequence[dict[str, Any]]) -> None:
    for s in summaries:
        if s["warm_median_s"] is None:
            print(f"goal {s['device']}: disk-cache hit < {GOAL_DISK_HIT_S * 1e3:.0f} ms per kernel: NOT MEASURED")
            continue
        over = f"; over the goal: {', '.join(s['kernels_over_goal'])}" if s["kernels_over_goal"] else ""
        paths = "" if s["paths_as_expected"] else "; NOT every cold launch built and every warm one hit the disk cache"
        print(f"goal {s['device']}: disk-cache hit < {GOAL_DISK_HIT_S * 1e3:.0f} ms per kernel: median "
              f"{format_seconds(s['warm_median_s'])}, worst {format_seconds(s['warm_max_s'])}{over}{paths}: "
              f"{s['status'].upper()} (cold compile of all kernels: {format_seconds(s['cold_total_s'])})")
        if "first_kernel_status" in s:
            print(f"goal {s['device']}: a process's first kernel, its artifacts cached, < "
                  f"{GOAL_FIRST_CPU_KERNEL_S * 1e3:.0f} ms: median {format_seconds(s['first_kernel_s']['warm']['median_s'])} "
                  f"(cold {format_seconds(s['first_kernel_s']['cold']['median_s']) if 'cold' in s['first_kernel_s'] else '-'}): "
                  f"{s['first_kernel_status'].upper()}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compile_time", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"one round, one warm run, kernels {', '.join(QUICK_KERNELS)}")
    parser.add_argument("--devices", nargs="+", metavar="DEVICE", default=list(DEVICES),
                        help=f"devices to run on, one per dialect (default: {' '.join(DEVICES)}, those present)")
    parser.add_argument("--rounds", type=int, help="cold children per device, each on an empty cache (default 2)")
    parser.add_argument("--warm-runs", type=int, help="warm children per round (default 2)")
    parser.add_argument("--kernels", nargs="+", metavar="NAME", help="corpus kernels to time (default: all)")
    parser.add_argument("--child", metavar="DEVICE", help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(run_child(args.child, args.kernels)))
        return 0
    kernels = args.kernels or (list(QUICK_KERNELS) if args.quick else None)
    rounds = args.rounds or (1 if args.quick else 2)
    warm_runs = args.warm_runs or (1 if args.quick else 2)
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    progress = Progress(len(devices) * rounds * (1 + warm_runs))
    reports: dict[str, dict[str, list[dict[str, Any]]]] = {d.name: {"cold": [], "warm": []} for d in devices}
    for round_ in range(rounds):
        for device in devices if round_ % 2 == 0 else reversed(devices):
            folder = tempfile.mkdtemp(prefix="hetero-compile-bench-")
            try:
                env = child_environment(os.path.join(folder, "hetero"), os.path.join(folder, "pocl"))
                progress.step(f"{device.name} round {round_ + 1}/{rounds}: cold (empty cache)")
                reports[device.name]["cold"].append(spawn(device.name, env, kernels))
                for run in range(warm_runs):
                    progress.step(f"{device.name} round {round_ + 1}/{rounds}: warm {run + 1}/{warm_runs}")
                    reports[device.name]["warm"].append(spawn(device.name, env, kernels))
            finally:
                shutil.rmtree(folder, ignore_errors=True)
    summaries = [summarize(name, r["cold"], r["warm"]) for name, r in reports.items()]
    path = write_results("compile_time", {
        "config": {"quick": args.quick, "rounds": rounds, "warm_runs": warm_runs, "kernels": kernels or "all",
                   "cost": f"first launch minus the fastest of the next {SECOND_LAUNCHES}, each followed by "
                           "device.synchronize(); garbage collection off while timing",
                   "startup": "hetero.device(...) + one unrelated kernel launch before the timed ones; not counted",
                   "caches": "per round: empty HETERO_CACHE_DIR and POCL_CACHE_DIR; Numba caches beside hetero's modules",
                   "load_average_at_start": load_before, "load_average_at_end": load_average()},
        "devices": [describe(d) for d in devices],
        "missing_devices": missing,
        "summary": [{key: s[key] for key in ("device", "cold_total_s", "warm_median_s", "warm_max_s", "goal_max_s",
                                             "kernels_over_goal", "paths_as_expected", "status")} for s in summaries],
        "devices_detail": summaries,
        "children": _slim(reports),
    }, command_line("benchmarks.compile_time", sys.argv[1:] if argv is None else argv))
    for s in summaries:
        print_device(s)
        print()
    print_summary(summaries)
    print_footer(missing, load_before, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
