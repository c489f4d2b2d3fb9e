"""The benchmark runner: time callables (alone or interleaved with rivals), show progress,
and write results with the machine and library versions that produced them.

Timings are reported, never asserted: a slow machine is not a failing test.
"""

from __future__ import annotations

import datetime
import gc
import json
import math
import os
import platform
import shlex
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from hetero.core.sizes import parse_size

# HETERO_BENCH_RESULTS moves every result file elsewhere (benchmarks/gpu_session.sh: one folder
# per part under $OUT, and its dry run leaves the repository's results alone).
RESULTS_DIR = Path(os.environ.get("HETERO_BENCH_RESULTS") or Path(__file__).resolve().parent / "results")
# A sample shorter than this is too close to the timer's own cost and to scheduler
# jitter, so fast calls are timed in batches that last at least this long.
DEFAULT_MIN_TIME = 0.002
_MAX_BATCH = 1_000_000
_VERSIONED = ("hetero", "numpy", "pyopencl", "numba")

Timing = dict[str, float | int]


def measure(fn: Callable[[], object], repeats: int = 21, warmup: int = 3, min_time: float = DEFAULT_MIN_TIME) -> Timing:
    """Time ``fn()``: ``repeats`` samples of the seconds one call takes, after ``warmup``
    untimed calls. Calls faster than ``min_time`` are timed in batches of N calls (the
    same N for every sample) and each sample is the batch time divided by N.

    Returns ``median_s``, ``min_s``, ``max_s``, ``mean_s``, ``stdev_s``, ``repeats`` and
    ``batch`` (calls per sample)."""
    return compare({"fn": fn}, repeats, warmup, min_time)["fn"]


def compare(candidates: Mapping[str, Callable[[], object]], repeats: int = 21, warmup: int = 3,
            min_time: float = DEFAULT_MIN_TIME, samples_out: dict[str, list[float]] | None = None) -> dict[str, Timing]:
    """Time several callables doing the same work, one sample of each in turn (ABBA order),
    so that machine noise lands on all of them alike. Each gets its own batch size. ``samples_out``,
    when given, receives each candidate's samples in round order (for same-round ratios)."""
    if repeats < 1:
        raise ValueError(f"repeats must be at least 1, got {repeats}")
    names = list(candidates)
    for name in names:
        for _ in range(warmup):
            candidates[name]()
    batches = {name: _batch_size(candidates[name], min_time) for name in names}
    settle()
    samples: dict[str, list[float]] = {name: [] for name in names}
    gc_was_enabled = gc.isenabled()
    gc.disable()  # a collection inside one sample would be charged to whoever ran then
    try:
        for round_ in range(repeats):
            for name in names if round_ % 2 == 0 else reversed(names):
                samples[name].append(_sample(candidates[name], batches[name]))
    finally:
        if gc_was_enabled:
            gc.enable()
    if samples_out is not None:
        samples_out.update(samples)
    return {name: _summary(samples[name], batches[name]) for name in names}


def settle(timeout: float = 120.0) -> None:
    """Wait for what hetero finishes in the background after a warm-up: cpu kernels launched
    often move from their cached native entries to Numba's dispatcher on a background thread
    (:mod:`hetero.backends.cpu.kernels`); samples must time the path a long run settles on."""
    cpu_kernels = sys.modules.get("hetero.backends.cpu.kernels")
    if cpu_kernels is not None:
        cpu_kernels.wait_for_numba(timeout)


def _sample(fn: Callable[[], object], batch: int) -> float:
    calls = range(batch)
    clock = time.perf_counter_ns
    start = clock()
    for _ in calls:
        fn()
    return (clock() - start) / batch / 1e9


def _batch_size(fn: Callable[[], object], min_time: float) -> int:
    """How many calls of ``fn`` it takes to fill ``min_time``: 1 for slow calls. Each estimate
    is the fastest of three tries, so that one hiccup does not shrink the batch."""
    if _sample(fn, 1) >= min_time:
        return 1
    calls = 1
    while True:
        per_call = min(_sample(fn, calls) for _ in range(3))
        if per_call * calls >= min_time:
            return calls
        if per_call * calls >= min_time / 8 or calls >= _MAX_BATCH:
            return min(_MAX_BATCH, math.ceil(min_time / max(per_call, 1e-12)))
        calls *= 8


def _summary(samples: Sequence[float], batch: int) -> Timing:
    return {
        "median_s": statistics.median(samples),
        "min_s": min(samples),
        "max_s": max(samples),
        "mean_s": statistics.fmean(samples),
        "stdev_s": statistics.stdev(samples) if len(samples) > 1 else 0.0,
        "repeats": len(samples),
        "batch": batch,
    }


def paired_ratios(plain: Callable[[], object], guarded: Callable[[], object], pairs: int) -> list[float]:
    """guarded/plain time of ``pairs`` back-to-back samples (which goes first alternates, garbage
    collection off): a slow spell of the machine lands on both halves of a pair, so the median
    ratio is steadier than a ratio of medians."""
    ratios = []
    gc.disable()
    try:
        for pair in range(pairs):
            seconds = {}
            for name, fn in (("plain", plain), ("guarded", guarded))[:: 1 if pair % 2 == 0 else -1]:
                start = time.perf_counter()
                fn()
                seconds[name] = time.perf_counter() - start
            ratios.append(seconds["guarded"] / seconds["plain"])
    finally:
        gc.enable()
    return ratios


def run_stats(values: Sequence[float]) -> dict[str, float]:
    """Median, min, max, mean and count of whole-run samples (seconds), as results files store them."""
    return {"median_s": statistics.median(values), "min_s": min(values), "max_s": max(values),
            "mean_s": statistics.fmean(values), "runs": len(values)}


class Progress:
    """Counter lines on stderr (``[12/180] oneapi:0 -> cpu 4 MiB``) so long runs show life."""

    def __init__(self, total: int, enabled: bool = True) -> None:
        self.total = total
        self.done = 0
        self.enabled = enabled

    def step(self, label: str) -> None:
        self.done += 1
        if self.enabled:
            print(f"[{self.done}/{self.total}] {label}", file=sys.stderr, flush=True)


# -- describing values ---------------------------------------------------------------
def format_bytes(nbytes: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if nbytes >= scale and nbytes % scale == 0:
            return f"{nbytes // scale} {unit}"
    return f"{nbytes} B"


def parse_bytes(text: str) -> int:
    """A positive size as :func:`hetero.core.sizes.parse_size` reads it (``"4MiB"``, ``"4 MiB"``, ``"4m"``, ``"4096"``)."""
    try:
        value = parse_size(text, "size")
    except (TypeError, ValueError) as exc:
        raise ValueError(f"cannot read {text!r} as a size: {exc}") from None
    if value <= 0:
        raise ValueError(f"size {text!r} must be positive")
    return value


def format_seconds(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.2f} us"


# -- writing results -----------------------------------------------------------------
def machine() -> dict[str, Any]:
    """What ran the benchmark: platform, CPU model, cores, Python, hostname."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:
        cores = os.cpu_count() or 1
    return {
        "platform": platform.platform(),
        "machine": platform.machine(),
        "cpu_model": _cpu_model(),
        "cores": cores,
        "logical_cpus": os.cpu_count(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "hostname": platform.node(),
        # Other work on the machine is the main source of noise: this says how busy it was.
        "load_average_1_5_15min": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
    }


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name":
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def versions() -> dict[str, str]:
    """Versions of the libraries a result depends on, for those installed."""
    found = {}
    for name in _VERSIONED:
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return found


def command_line(module: str, argv: Sequence[str]) -> str:
    """The shell command that reruns ``module`` with ``argv`` from the repository root."""
    return shlex.join(["python", "-m", module, *argv])


def write_results(name: str, payload: Mapping[str, Any], command: str | None = None) -> Path:
    """Write ``benchmarks/results/<name>.json`` atomically: ``payload`` plus ``benchmark``,
    ``command``, ``timestamp_utc``, ``machine`` and ``versions``. Returns the path."""
    header: dict[str, Any] = {
        "benchmark": name,
        "command": command or command_line(f"benchmarks.{name}", sys.argv[1:]),
        "timestamp_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "machine": machine(),
        "versions": versions(),
    }
    clash = header.keys() & payload.keys()
    if clash:
        raise ValueError(f"payload of benchmark {name!r} uses reserved keys {sorted(clash)}")
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    target = RESULTS_DIR / f"{name}.json"
    handle, temp = tempfile.mkstemp(dir=RESULTS_DIR, prefix=f".{name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w") as out:
            json.dump({**header, **payload}, out, indent=2)
            out.write("\n")
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temp, 0o644)  # mkstemp makes it private; results are for sharing
        os.replace(temp, target)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise
    return target
