"""``hetero compile``: building the kernel corpus for many targets in parallel versus each
toolchain alone, one after another; and a bundle's load + first launch versus a JIT first
launch.

    python -m benchmarks.compile_bundle [--quick] [--rounds N] [--jobs N] [--targets ...] [--devices cpu oneapi:0]

Build: every kernel of ``tests/kernels/corpus.py`` (one signature each) for the targets
(default ``cuda:sm_80 cuda:sm_90 rocm:gfx90a rocm:gfx942 opencl cpu``; a target whose
toolchain is missing or fails, like gfx942 on ROCm 5.2's hipcc, is recorded as failed
and still costs its failed runs), with no kernel cache. ``parallel`` is one
``build_bundle`` over all targets with ``--jobs`` workers (default: the CPU count);
``sequential`` is ``build_bundle`` for each target alone with one worker, summed; each
round runs both, alternating which goes first. ``hetero compile`` itself (a fresh
process: start-up, import, lowering included) is timed once per round.

Launch: fresh interpreters with empty caches and an empty PATH (no compiler reachable).
``jit`` launches each kernel the first time with no bundle (Python -> IR -> source -> the
device's compiler); ``bundle`` loads the bundle (timed) and then launches; ``bundle_warm``
is a second bundle child on the first one's cache. A kernel's first-launch cost is its
first launch minus the fastest of three more. ``hetero.compiler.build.stats`` proves the paths.
Writes ``benchmarks/results/compile_bundle.json``; timings are reported, never asserted.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, command_line, format_seconds, run_stats, write_results
from benchmarks.kernel_bench import choose_devices, describe, load_average

REPO_ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("cuda:sm_80", "cuda:sm_90", "rocm:gfx90a", "rocm:gfx942", "opencl", "cpu")
DEVICES = ("cpu", "oneapi:0")
SIGNATURES = {
    "saxpy": "f32, f32[:], f32[:]", "daxpy": "f64, f64[:], f64[:]", "matmul_tiled": "f32[:,:], f32[:,:], f32[:,:]",
    "reduce_sum": "f32[:], f32[:]", "reduce_sum_i64": "i64[:], i64[:]", "jacobi": "f32[:,:], f32[:,:]",
    "histogram": "i32[:], i64, i32[:]", "scan_blocks": "i32[:], i32[:]", "softmax_rows": "f32[:,:], f32[:,:]",
    "transpose_tiled": "f32[:,:], f32[:,:]", "mandelbrot": "i32[:,:], i32", "apply_smoothstep": "f32[:], f32[:]",
    "floor_ops": "i32[:], i32[:], i32[:], i32[:]", "triad": "f32[:], f32[:], f32[:], f32",
}
QUICK_KERNELS = ("saxpy", "jacobi", "histogram", "apply_smoothstep")
LAUNCH_KERNELS = ("saxpy", "jacobi", "histogram", "apply_smoothstep", "matmul_tiled", "reduce_sum", "softmax_rows",
                  "mandelbrot")
CHILD_TIMEOUT_S = 900


def corpus_module() -> Any:
    return importlib.import_module("tests.kernels.corpus")


def kernel_specs(names: Sequence[str]) -> list[Any]:
    from hetero.compiler.build.bundle_build import KernelSpec
    from hetero.compiler.frontend.signature import parse_signature

    corpus = corpus_module()
    return [KernelSpec(getattr(corpus, name).py_func, (parse_signature(SIGNATURES[name])[1],)) for name in names]


# -- build: parallel vs each toolchain alone ------------------------------------------------
def time_build(specs: Sequence[Any], targets: Sequence[str], jobs: int, out: Path) -> tuple[float, Any]:
    """Seconds to build, and the report (None when every build failed, e.g. a target this toolchain lacks)."""
    from hetero.compiler.build.bundle_build import build_bundle, parse_targets

    start = time.perf_counter()
    try:
        report = build_bundle(specs, parse_targets(list(targets)), out, jobs=jobs, keep_going=True, cache=None,
                              progress=None)
    except hetero.BundleBuildError:
        report = None
    return time.perf_counter() - start, report


def time_cli(names: Sequence[str], targets: Sequence[str], out: Path, env: dict[str, str]) -> float:
    signatures = [arg for name in names for arg in ("--signature", f"{name}({SIGNATURES[name]})")]
    command = [sys.executable, "-m", "hetero.cli.main", "compile", "tests/kernels/corpus.py", "--targets", ",".join(targets),
               *signatures, "--kernels", ",".join(names), "-o", str(out), "--keep-going", "--no-cache", "-q"]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise RuntimeError(f"hetero compile failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    return elapsed


def measure_builds(names: Sequence[str], targets: Sequence[str], rounds: int, jobs: int, folder: Path,
                   progress: Progress) -> dict[str, Any]:
    specs = kernel_specs(names)
    parallel: list[float] = []
    alone: dict[str, list[float]] = {t: [] for t in targets}
    cli: list[float] = []
    in_parallel: dict[str, list[float]] = {t: [] for t in targets}
    failed: dict[str, str] = {}
    for round_ in range(rounds):
        steps = ["parallel", "sequential"] if round_ % 2 == 0 else ["sequential", "parallel"]
        for step in steps:
            progress.step(f"build round {round_ + 1}/{rounds}: {step}")
            if step == "parallel":
                seconds, report = time_build(specs, targets, jobs, folder / "all.hbundle")
                parallel.append(seconds)
                for target, spent in report.target_seconds.items():
                    in_parallel[target].append(spent)
                failed.update({gap.target: gap.error.strip().splitlines()[-1] for gap in report.manifest.missing})
            else:
                for target in targets:
                    alone[target].append(time_build(specs, [target], 1, folder / "one.hbundle")[0])
        progress.step(f"build round {round_ + 1}/{rounds}: hetero compile (a fresh process)")
        env = {**os.environ, "HETERO_CACHE_DIR": str(folder / f"cli-cache-{round_}")}
        cli.append(time_cli(names, targets, folder / "cli.hbundle", env))
    sequential = [sum(alone[t][r] for t in targets) for r in range(rounds)]
    return {
        "kernels": list(names), "targets": list(targets), "jobs": jobs, "rounds": rounds,
        "parallel_s": run_stats(parallel), "sequential_sum_s": run_stats(sequential),
        "speedup": statistics.median(sequential) / statistics.median(parallel),
        "hetero_compile_cli_s": run_stats(cli),
        "per_target": {t: {"alone_s": run_stats(alone[t]), "per_kernel_alone_s": statistics.median(alone[t]) / len(names),
                           "toolchain_s_in_parallel_run": run_stats(in_parallel[t]), "failed": failed.get(t)}
                       for t in targets},
    }


# -- launch: bundle vs JIT, in fresh processes -----------------------------------------------
def launch_cases(corpus: Any, device: hetero.Device) -> list[tuple[str, Callable[[], None]]]:
    rng = np.random.default_rng(0)

    def on(a: np.ndarray) -> hetero.Array:
        return hetero.asarray(a, device=device, copy=True)

    def zeros(shape: Any, dtype: str = "float32") -> hetero.Array:
        return hetero.zeros(shape, dtype=dtype, device=device)

    x, y = on(rng.standard_normal(4096, dtype=np.float32)), zeros(4096)
    src, dst = on(rng.standard_normal((64, 48), dtype=np.float32)), zeros((64, 48))
    values, counts = on(rng.integers(0, 1000, 4096, dtype=np.int32)), zeros(16, "int32")
    a, b, c = on(rng.standard_normal((32, 48), dtype=np.float32)), on(rng.standard_normal((48, 24), dtype=np.float32)), zeros((32, 24))
    total, soft, mandel = zeros(1), zeros((37, 19)), zeros((24, 32), "int32")
    cases: dict[str, Callable[[], None]] = {
        "saxpy": lambda: corpus.saxpy[4096](2.0, x, y),
        "jacobi": lambda: corpus.jacobi[(48, 64)](src, dst),
        "histogram": lambda: corpus.histogram[4096](values, 16, counts),
        "apply_smoothstep": lambda: corpus.apply_smoothstep[4096](x, y),
        "matmul_tiled": lambda: corpus.matmul_tiled[(24, 32), (corpus.TILE, corpus.TILE)](a, b, c),
        "reduce_sum": lambda: corpus.reduce_sum[(4096,), (64,)](x, total),
        "softmax_rows": lambda: corpus.softmax_rows[40](on(np.ones((37, 19), np.float32)), soft),
        "mandelbrot": lambda: corpus.mandelbrot[(32, 24)](mandel, 50),
    }
    return list(cases.items())


def run_child(mode: str, device_name: str, bundle: str, kernels: Sequence[str]) -> dict[str, Any]:
    from hetero.compiler.build.stats import stats

    corpus = corpus_module()
    device = hetero.device(device_name)
    # Open the device and load its runtime with a kernel outside the timed set, before any bundle (not counted).
    out = hetero.zeros(1024, device=device)
    corpus.triad[1024](out, out, out, 1.0)
    device.synchronize()
    def counters() -> dict[str, int]:
        return {k: v for k, v in vars(stats).items() if not k.startswith("_")}

    before = counters()
    load_s = 0.0
    if mode != "jit":
        start = time.perf_counter()
        hetero.load_bundle(bundle)
        load_s = time.perf_counter() - start

    def timed(launch: Callable[[], None]) -> float:
        start = time.perf_counter()
        launch()
        device.synchronize()
        return time.perf_counter() - start

    rows = []
    for name, launch in launch_cases(corpus, device):
        if name in kernels:
            first = timed(launch)
            steady = min(timed(launch) for _ in range(3))
            rows.append({"kernel": name, "first_s": first, "steady_s": steady, "cost_s": first - steady})
    after = counters()
    return {"mode": mode, "device": device_name, "load_s": load_s, "kernels": rows,
            "counters": {k: after[k] - before[k] for k in after}}


def spawn_child(mode: str, device: str, bundle: Path, kernels: Sequence[str], cache: Path) -> dict[str, Any]:
    env = {**os.environ, "HETERO_CACHE_DIR": str(cache), "POCL_CACHE_DIR": str(cache / "pocl"), "PATH": ""}
    env.pop("NUMBA_CACHE_DIR", None)
    command = [sys.executable, "-m", "benchmarks.compile_bundle", "--child", mode, device, str(bundle), *kernels]
    done = subprocess.run(command, cwd=REPO_ROOT, env=env, capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the {mode} child on {device} failed ({done.returncode}):\n{done.stderr}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def measure_launches(devices: Sequence[hetero.Device], kernels: Sequence[str], rounds: int, folder: Path,
                     progress: Progress) -> list[dict[str, Any]]:
    bundle = folder / "launch.hbundle"
    time_build(kernel_specs(kernels), ["opencl", "cpu"], 2, bundle)
    summaries = []
    for device in devices:
        runs: dict[str, list[dict[str, Any]]] = {"jit": [], "bundle": [], "bundle_warm": []}
        for round_ in range(rounds):
            cache = Path(tempfile.mkdtemp(prefix="hetero-bundle-bench-", dir=folder))
            order = ["jit", "bundle"] if round_ % 2 == 0 else ["bundle", "jit"]
            for mode in order:
                progress.step(f"{device.name} round {round_ + 1}/{rounds}: {mode}")
                runs[mode].append(spawn_child(mode, device.name, bundle, kernels, cache / mode))
            progress.step(f"{device.name} round {round_ + 1}/{rounds}: bundle_warm (the bundle child's cache)")
            runs["bundle_warm"].append(spawn_child("bundle_warm", device.name, bundle, kernels, cache / "bundle"))
            shutil.rmtree(cache, ignore_errors=True)
        modes = {}
        for mode, reports in runs.items():
            totals = [r["load_s"] + sum(k["cost_s"] for k in r["kernels"]) for r in reports]
            modes[mode] = {
                "load_s": run_stats([r["load_s"] for r in reports]),
                "load_plus_first_launches_s": run_stats(totals),
                "per_kernel_cost_s": {k["kernel"]: statistics.median(r["kernels"][i]["cost_s"] for r in reports)
                                      for i, k in enumerate(reports[0]["kernels"])},
                "counters": reports[-1]["counters"],
            }
        summaries.append({"device": device.name, "kernels": list(kernels), "modes": modes,
                          "speedup_bundle_vs_jit": modes["jit"]["load_plus_first_launches_s"]["median_s"]
                          / modes["bundle"]["load_plus_first_launches_s"]["median_s"]})
    return summaries



def print_report(build: dict[str, Any], launches: Sequence[dict[str, Any]]) -> None:
    print(f"build: {len(build['kernels'])} kernels x {len(build['targets'])} targets, {build['jobs']} jobs")
    print(f"  parallel (one run)             {format_seconds(build['parallel_s']['median_s'])}")
    print(f"  each target alone, summed      {format_seconds(build['sequential_sum_s']['median_s'])}"
          f"   speed-up {build['speedup']:.2f}x")
    print(f"  hetero compile (fresh process) {format_seconds(build['hetero_compile_cli_s']['median_s'])}")
    print(f"  {'target':<13} {'alone':>10} {'per kernel':>11}  note")
    for target, row in build["per_target"].items():
        note = f"FAILED: {row['failed'][:90]}" if row["failed"] else ""
        print(f"  {target:<13} {format_seconds(row['alone_s']['median_s']):>10} "
              f"{format_seconds(row['per_kernel_alone_s']):>11}  {note}")
    for summary in launches:
        print(f"launch on {summary['device']} ({len(summary['kernels'])} kernels; load + first launches, medians):")
        for mode, row in summary["modes"].items():
            c = row["counters"]
            print(f"  {mode:<12} {format_seconds(row['load_plus_first_launches_s']['median_s']):>10} "
                  f"(load {format_seconds(row['load_s']['median_s'])}; lowered {c['lowered']}, emitted {c['emitted']}, "
                  f"builds {c['builds']}, finalized {c['finalized']}, disk hits {c['disk_hits']}, "
                  f"bundle hits {c['bundle_hits']})")
        print(f"  bundle vs JIT: {summary['speedup_bundle_vs_jit']:.2f}x")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.compile_bundle", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help=f"one round, kernels {', '.join(QUICK_KERNELS)}")
    parser.add_argument("--rounds", type=int, help="rounds of each measurement (default 3; --quick 1)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="workers of the parallel build")
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), help="build targets")
    parser.add_argument("--devices", nargs="+", default=list(DEVICES), help="devices for the launch comparison")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        mode, device, bundle, *kernels = args.child
        print(json.dumps(run_child(mode, device, bundle, kernels)))
        return 0
    rounds = args.rounds or (1 if args.quick else 3)
    names = list(QUICK_KERNELS) if args.quick else list(SIGNATURES)
    launch_kernels = list(QUICK_KERNELS) if args.quick else list(LAUNCH_KERNELS)
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    progress = Progress(rounds * 3 + len(devices) * rounds * 3)
    folder = Path(tempfile.mkdtemp(prefix="hetero-compile-bundle-"))
    try:
        build = measure_builds(names, args.targets, rounds, args.jobs, folder, progress)
        launches = measure_launches(devices, launch_kernels, rounds, folder, progress)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    write_results("compile_bundle", {
        "config": {"quick": args.quick, "rounds": rounds, "jobs": args.jobs, "cores": os.cpu_count(),
                   "build": "keep_going, no kernel cache; parallel = one build_bundle over all targets; sequential = "
                            "build_bundle per target with 1 job, summed",
                   "launch": "fresh interpreters, empty HETERO_CACHE_DIR/POCL_CACHE_DIR, PATH empty; cost = first "
                             "launch minus the fastest of 3 more; bundle mode adds hetero.load_bundle's time",
                   "load_average_at_start": load_before, "load_average_at_end": load_average()},
        "devices": [describe(d) for d in devices],
        "missing_devices": missing,
        "build": build,
        "launch": launches,
    }, command_line("benchmarks.compile_bundle", sys.argv[1:] if argv is None else argv))
    print_report(build, launches)
    return 0


if __name__ == "__main__":
    sys.exit(main())
