"""Launch overhead: a one-work-item kernel (``out[0] = a``) launched and waited for, hetero
against the same kernel hand-written for the raw library, side by side in one run.

    python -m benchmarks.launch_overhead [--quick] [--devices oneapi:0 cpu opencl:0] [--repeats N]

On an OpenCL device hetero's ``store_one[1](out, a)`` + ``device.synchronize()`` races
PyOpenCL's ``knl(queue, (1,), None, buf, np.float32(a)).wait()`` on hetero's own context
and queue; on ``cpu`` it races a Numba ``@njit`` function doing the same store. Goals
(reported, never enforced): on ``oneapi:0`` hetero's median is at most 1.3x PyOpenCL's;
on ``cpu`` hetero adds at most 3 us to the Numba call. ``opencl:0`` (PoCL) is information.
Writes ``benchmarks/results/launch_overhead.json``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, Timing, command_line, compare, format_seconds, write_results
from benchmarks.kernel_bench import DEFAULT_DEVICES, build_opencl, choose_devices, describe, is_opencl, load_average, opencl, print_footer
from hetero import f32

GOAL_ONEAPI_MAX_RATIO = 1.3
GOAL_CPU_MAX_ADDED_S = 3e-6


@hetero.kernel
def store_one(out: hetero.Array[f32], a: f32):
    out[0] = a


OPENCL_SOURCE = """
__kernel void store_one(__global float* restrict out, float a) {
    out[0] = a;
}
"""


def schedule(quick: bool) -> tuple[int, int, float]:
    """(repeats, warm-up calls, min seconds per sample): each sample is a batch of a few
    hundred launches, so the timer and loop cost vanish."""
    return (15, 50, 0.002) if quick else (61, 200, 0.005)


def numba_store() -> Callable[[np.ndarray, np.float32], None]:
    import numba  # only here: the cpu rows need it, importing the module should not

    @numba.njit(cache=False)
    def store(out: np.ndarray, a: np.float32) -> None:
        out[0] = a

    return store


class Sides:
    """The zero-argument callables raced on one device, each checked once to store its value."""

    def __init__(self, device: hetero.Device) -> None:
        self.device = device
        self.out = hetero.zeros(1, dtype="float32", device=device)
        self.launcher = store_one[1]
        self.checks: dict[str, bool] = {}
        self.methods: dict[str, str] = {"hetero": "store_one[1](out, a); device.synchronize()"}
        self.candidates: dict[str, Callable[[], object]] = {"hetero": self._hetero()}

        def launch_with(value: np.float32) -> None:
            self.launcher(self.out, value)
            device.synchronize()

        self._check("hetero", launch_with, self.out.numpy)
        if is_opencl(device):
            self._add_opencl()
        elif device.runtime.host_memory:
            self._add_numba()

    def _check(self, name: str, run: Callable[[np.float32], object], read: Callable[[], np.ndarray]) -> None:
        value = np.float32(len(self.checks) + 7.5)
        run(value)
        self.checks[name] = bool(read()[0] == value)

    def _hetero(self) -> Callable[[], object]:
        launcher, out, synchronize, a = self.launcher, self.out, self.device.synchronize, np.float32(2.0)

        def launch() -> None:
            launcher(out, a)
            synchronize()

        return launch

    def _add_opencl(self) -> None:
        cl, context, queue = opencl(self.device)
        buf = cl.Buffer(context, cl.mem_flags.READ_WRITE, 4)
        self.program = build_opencl(self.device, OPENCL_SOURCE)
        plain = cl.Kernel(self.program, "store_one")
        typed = cl.Kernel(self.program, "store_one")
        # PyOpenCL's documented fast path: with the scalar types declared once, set_args packs
        # them with struct instead of converting each NumPy scalar on every call.
        typed.set_scalar_arg_dtypes([None, np.float32])
        a = np.float32(2.0)

        def read() -> np.ndarray:
            host = np.zeros(1, np.float32)
            cl.enqueue_copy(queue, host, buf).wait()
            return host

        def raw() -> None:
            plain(queue, (1,), None, buf, a).wait()

        def raw_typed() -> None:
            typed(queue, (1,), None, buf, a).wait()

        self._check("raw", lambda v: plain(queue, (1,), None, buf, v).wait(), read)
        self._check("raw_typed", lambda v: typed(queue, (1,), None, buf, v).wait(), read)
        self.candidates.update(raw=raw, raw_typed=raw_typed)
        self.methods.update(raw="knl(queue, (1,), None, buf, np.float32(a)).wait()",
                            raw_typed="knl.set_scalar_arg_dtypes([None, np.float32]) once; "
                                      "knl(queue, (1,), None, buf, np.float32(a)).wait()")

    def _add_numba(self) -> None:
        store = numba_store()
        host = np.zeros(1, np.float32)
        a = np.float32(2.0)

        def raw() -> None:
            store(host, a)

        self._check("raw", lambda v: store(host, v), lambda: host)
        self.candidates["raw"] = raw
        self.methods["raw"] = "numba.njit store(out, np.float32(a)) on a NumPy array"


def layers(sides: Sides) -> dict[str, Callable[[], object]]:
    """hetero's launch peeled layer by layer (each followed by the device's synchronize), to
    show where its time goes: Launcher.__call__ -> Specialization.launch -> runtime.launch.
    Reaches into hetero's internals; empty when they have changed shape."""
    try:
        spec = next(s for s in store_one._dispatch.values() if s.device is sides.device)
        runtime, loaded, out, a = spec.runtime, spec.loaded, sides.out, np.float32(2.0)
        # a scalar's plan entry is its checking converter (hetero.kernels.launch_args.scalar_converter)
        values = [out._kernel_arg() if kind == "array" else np.int64(out.shape[axis]) if kind == "shape" else how(a)
                  for kind, _, axis, how in spec.plan]
    except (AttributeError, StopIteration, ValueError):
        return {}
    synchronize, global_size = sides.device.synchronize, (1,)
    peeled: dict[str, Callable[[], object]] = {
        "Launcher.__call__": sides.candidates["hetero"],
        "Specialization.launch": lambda: (spec.launch(global_size, None, (out, a)), synchronize()),
        "runtime.launch": lambda: (runtime.launch(loaded, global_size, None, values), synchronize()),
    }
    if hasattr(loaded, "set_args"):  # PyOpenCL: the argument setting alone, nothing enqueued
        peeled["cl.Kernel.set_args (alone)"] = lambda: loaded.set_args(*values)
    return peeled


def measure_device(device: hetero.Device, repeats: int, warmup: int, min_time: float) -> dict[str, Any]:
    sides = Sides(device)
    timings = compare(sides.candidates, repeats, warmup, min_time)
    row: dict[str, Any] = {"device": device.name, "methods": sides.methods, "correct": sides.checks,
                           **{name: timing for name, timing in timings.items()}}
    ours, raw = timings["hetero"], timings.get("raw")
    if raw is not None:
        row["ratio"] = ours["median_s"] / raw["median_s"]
        row["ratio_of_min"] = ours["min_s"] / raw["min_s"]
        row["added_s"] = ours["median_s"] - raw["median_s"]
    if "raw_typed" in timings:
        row["ratio_to_typed"] = ours["median_s"] / timings["raw_typed"]["median_s"]
    peeled = layers(sides)
    row["layers"] = {name: t["median_s"] for name, t in compare(peeled, max(15, repeats // 2), warmup, min_time).items()}
    return row


def goal_summary(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    by_device = {row["device"]: row for row in rows}
    oneapi, cpu = by_device.get("oneapi:0"), by_device.get("cpu")
    summary = [{"goal": f"oneapi:0 hetero/PyOpenCL median <= {GOAL_ONEAPI_MAX_RATIO}x", "device": "oneapi:0",
                "value": oneapi["ratio"] if oneapi else None, "ratio_of_min": oneapi["ratio_of_min"] if oneapi else None,
                "status": "not measured" if not oneapi else "pass" if oneapi["ratio"] <= GOAL_ONEAPI_MAX_RATIO else "fail"},
               {"goal": f"cpu hetero adds <= {GOAL_CPU_MAX_ADDED_S * 1e6:.0f} us to the Numba call (medians)",
                "device": "cpu", "value": cpu["added_s"] if cpu else None,
                "status": "not measured" if not cpu else "pass" if cpu["added_s"] <= GOAL_CPU_MAX_ADDED_S else "fail"}]
    return summary


def _time(timing: Timing | None) -> str:
    return format_seconds(timing["median_s"]) if timing else "-"


def print_table(rows: Sequence[dict[str, Any]]) -> None:
    header = (f"{'device':>9} | {'hetero':>9} {'raw':>9} {'raw typed':>9} | {'hetero/raw':>10} {'(min)':>6} "
              f"{'added':>9} | {'/typed':>6}")
    print(header)
    print("-" * len(header))
    for row in rows:
        ratio = f"{row['ratio']:.2f}x" if "ratio" in row else "-"
        of_min = f"{row['ratio_of_min']:.2f}x" if "ratio_of_min" in row else "-"
        added = format_seconds(row["added_s"]) if "added_s" in row else "-"
        typed = f"{row['ratio_to_typed']:.2f}x" if "ratio_to_typed" in row else "-"
        flags = "" if all(row["correct"].values()) else "  WRONG RESULT"
        print(f"{row['device']:>9} | {_time(row['hetero']):>9} {_time(row.get('raw')):>9} {_time(row.get('raw_typed')):>9} | "
              f"{ratio:>10} {of_min:>6} {added:>9} | {typed:>6}{flags}")
    print()
    for row in rows:
        if row["layers"]:
            peeled = ", ".join(f"{name} {format_seconds(seconds)}" for name, seconds in row["layers"].items())
            print(f"{row['device']:>9} layers (each + synchronize): {peeled}")


def print_summary(summary: Sequence[dict[str, Any]]) -> None:
    for goal in summary:
        if goal["value"] is None:
            shown = "no such device"
        elif goal["device"] == "cpu":
            shown = f"adds {format_seconds(goal['value'])}"
        else:
            shown = f"{goal['value']:.2f}x (fastest samples {goal['ratio_of_min']:.2f}x)"
        print(f"goal {goal['goal']}: {shown}: {goal['status'].upper()}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.launch_overhead", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer, shorter samples")
    parser.add_argument("--devices", nargs="+", metavar="DEVICE", default=list(DEFAULT_DEVICES),
                        help=f"devices to run on (default: {' '.join(DEFAULT_DEVICES)}, those present)")
    parser.add_argument("--repeats", type=int, help="samples per side (default 61, --quick 15)")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    repeats, warmup, min_time = schedule(args.quick)
    repeats = args.repeats or repeats
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    progress = Progress(len(devices))
    rows = []
    for device in devices:
        progress.step(f"launch overhead on {device.name}")
        rows.append(measure_device(device, repeats, warmup, min_time))
    summary = goal_summary(rows)
    path = write_results("launch_overhead", {
        "config": {"quick": args.quick, "repeats": repeats, "warmup": warmup, "min_time_s": min_time,
                   "kernel": "store_one[1](out: f32[:], a: f32): out[0] = a",
                   "load_average_at_start": load_before, "load_average_at_end": load_average()},
        "devices": [describe(d) for d in devices],
        "missing_devices": missing,
        "summary": summary,
        "rows": rows,
    }, command_line("benchmarks.launch_overhead", sys.argv[1:] if argv is None else argv))
    print_table(rows)
    print()
    print_summary(summary)
    print_footer(missing, load_before, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
