"""Reductions over 64 Mi float32 against their peers and the device's read bandwidth, side by
side in one run: ``sum``, ``mean``, ``max``, ``argmax`` of the whole array, and ``sum`` /
``argmax`` along each axis of the same data as an 8192 x 8192 matrix.

    python -m benchmarks.array_reductions [--quick] [--devices cpu oneapi:0 opencl:0] [--elements N]

The peers: NumPy on ``cpu`` (the same host memory), ``pyopencl.array`` on OpenCL devices
(``sum``, ``max``; ``mean`` as its sum over n). The read bandwidth of an OpenCL device is a
read-only kernel (each work-item compares one ``float16`` vector with a value never present,
so every byte is read once and nothing is written) timed on the same buffer; on ``cpu``
NumPy's ``sum`` is the reference. Goals (issue 46, reported, never enforced): full ``sum``,
``mean`` and ``max`` >= 0.9x NumPy on cpu and >= 0.9x the read bandwidth on OpenCL; the axis
reductions and ``argmax`` within 1.2x of the full ``sum``'s time per byte. Part of
``python -m benchmarks.array_ops``; alone it writes ``benchmarks/results/array_reductions.json``.
"""

from __future__ import annotations

import argparse
import gc
import math
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, Timing, command_line, compare, format_seconds, write_results
from benchmarks.kernel_bench import (
    DEFAULT_DEVICES,
    build_opencl,
    choose_devices,
    cl_buffer,
    describe,
    is_opencl,
    load_average,
    opencl,
    print_footer,
)

MI = 1 << 20
FULL_ELEMENTS, QUICK_ELEMENTS = 64 * MI, 4 * MI
GOAL_VS_PEER, GOAL_VS_READ, GOAL_AXIS = 0.9, 0.9, 1.2
FULL = ("sum", "mean", "max", "argmax")
AXES = (("sum", 0), ("sum", 1), ("argmax", 1))
_READ_KERNEL = """
__kernel void read_all(__global const float16 *src, __global int *found, const float needle) {
    float16 v = src[get_global_id(0)];
    if (any(v == (float16)(needle))) found[0] = 1;
}
"""


def _rate(timing: Timing, nbytes: int) -> dict[str, Any]:
    return {**timing, "gb_per_s": nbytes / timing["median_s"] / 1e9}


def _waited(device: hetero.Device, call: Callable[[], hetero.Array]) -> Callable[[], object]:
    def run() -> object:
        out = call()
        out._buffer  # noqa: B018  (a recorded result is computed when its buffer is read)
        device.synchronize()
        return out
    return run


def _read_bandwidth(device: hetero.Device, x: hetero.Array, repeats: int) -> dict[str, Any] | None:
    """The read-only kernel's rate over ``x`` (OpenCL devices; None elsewhere)."""
    if not is_opencl(device) or x.size % 16:
        return None
    cl, context, queue = opencl(device)
    program = build_opencl(device, _READ_KERNEL)
    kernel = cl.Kernel(program, "read_all")
    found = cl.Buffer(context, cl.mem_flags.READ_WRITE, 4)
    kernel.set_args(cl_buffer(x), found, np.float32(1e30))

    def run() -> None:
        cl.enqueue_nd_range_kernel(queue, kernel, (x.size // 16,), None).wait()

    timing = compare({"read": run}, repeats, 2)["read"]
    return {**_rate(timing, 4 * x.size), "method": "a read-only OpenCL kernel, one float16 per work-item, nothing written"}


def _peers(device: hetero.Device, host: np.ndarray) -> tuple[dict[str, Callable[[], object]], str | None]:
    """The peer's callables for the full reductions (by name) and the peer's name."""
    if device.runtime.host_memory:
        return {"sum": host.sum, "mean": host.mean, "max": host.max, "argmax": host.argmax}, "numpy"
    if is_opencl(device):
        import pyopencl.array as cl_array

        _, _, queue = opencl(device)
        px = cl_array.to_device(queue, host)
        queue.finish()
        return {"sum": lambda: cl_array.sum(px).get(), "mean": lambda: cl_array.sum(px).get() / px.size,
                "max": lambda: cl_array.max(px).get()}, "pyopencl.array"
    return {}, None


def _check(op: str, got: hetero.Array, host: np.ndarray, axis: int | None = None) -> bool:
    ours = got.numpy()
    if op == "argmax":
        return bool(np.array_equal(ours, np.argmax(host, axis=axis)))
    if op == "max":
        return bool(np.array_equal(ours, np.max(host, axis=axis)))
    want = getattr(np, op)(host.astype(np.float64), axis=axis)
    return bool(np.allclose(ours, want, rtol=1e-4, atol=1e-2))


def measure_device(device: hetero.Device, n: int, repeats: int) -> dict[str, Any]:
    rng = np.random.default_rng(n)
    host = rng.standard_normal(n, dtype=np.float32)
    x = hetero.asarray(host, device=device, copy=True)
    nbytes = 4 * n
    row: dict[str, Any] = {"device": device.name, "elements": n, "bytes": nbytes, "full": {}, "axes": {}}
    read = _read_bandwidth(device, x, repeats)
    if read is not None:
        row["read"] = read
    peers, peer = _peers(device, host)
    row["peer"] = peer
    for op in FULL:
        mine = _waited(device, lambda op=op: getattr(hetero, op)(x))
        candidates: dict[str, Callable[[], object]] = {"hetero": mine}
        if op in peers:
            candidates[peer or "peer"] = peers[op]
        entry: dict[str, Any] = {"correct": _check(op, getattr(hetero, op)(x), host)}
        for side, timing in compare(candidates, repeats, 2).items():
            entry[side] = _rate(timing, nbytes)
        if peer in entry:
            entry["ratio_vs_peer"] = entry[peer]["median_s"] / entry["hetero"]["median_s"]
        if read is not None:
            entry["ratio_vs_read"] = entry["hetero"]["gb_per_s"] / read["gb_per_s"]
        row["full"][op] = entry
    side_len = math.isqrt(n)
    if side_len * side_len == n:
        matrix, host_matrix = x.reshape(side_len, side_len), host.reshape(side_len, side_len)
        full_sum = row["full"]["sum"]["hetero"]["median_s"]
        for op, axis in AXES:
            mine = _waited(device, lambda op=op, axis=axis: getattr(hetero, op)(matrix, axis=axis))
            candidates = {"hetero": mine}
            if peer == "numpy":
                candidates["numpy"] = lambda op=op, axis=axis: getattr(np, op)(host_matrix, axis=axis)
            entry = {"shape": [side_len, side_len], "axis": axis,
                     "correct": _check(op, getattr(hetero, op)(matrix, axis=axis), host_matrix, axis)}
            for side, timing in compare(candidates, repeats, 2).items():
                entry[side] = _rate(timing, nbytes)
            entry["time_vs_full_sum"] = entry["hetero"]["median_s"] / full_sum
            if "numpy" in entry:
                entry["ratio_vs_peer"] = entry["numpy"]["median_s"] / entry["hetero"]["median_s"]
            row["axes"][f"{op}(axis={axis})"] = entry
    return row


def goals(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def goal(device: str, what: str, value: float | None, target: float, higher: bool = True) -> None:
        status = "not measured" if value is None else "pass" if (value >= target if higher else value <= target) else "fail"
        found.append({"device": device, "goal": what, "value": value, "target": target, "status": status})

    for row in rows:
        name = row["device"]
        for op in ("sum", "mean", "max"):
            entry = row["full"][op]
            if row["peer"] == "numpy":
                goal(name, f"{op} vs NumPy >= {GOAL_VS_PEER}x", entry.get("ratio_vs_peer"), GOAL_VS_PEER)
            else:
                goal(name, f"{op} vs read bandwidth >= {GOAL_VS_READ}x", entry.get("ratio_vs_read"), GOAL_VS_READ)
        goal(name, f"argmax time / sum time <= {GOAL_AXIS}", row["full"]["argmax"]["hetero"]["median_s"]
             / row["full"]["sum"]["hetero"]["median_s"], GOAL_AXIS, higher=False)
        for what, entry in row["axes"].items():
            goal(name, f"{what} time / sum time <= {GOAL_AXIS}", entry["time_vs_full_sum"], GOAL_AXIS, higher=False)
    return found


def print_rows(rows: Sequence[dict[str, Any]], summary: Sequence[dict[str, Any]]) -> None:
    for row in rows:
        read = row.get("read")
        print(f"{row['device']:>9}: {row['elements']} float32" + (f", read bandwidth {read['gb_per_s']:.1f} GB/s" if read else ""))
        for what, entry in [*row["full"].items(), *row["axes"].items()]:
            peer = row["peer"] if row["peer"] in entry else None
            beside = f"{peer} {format_seconds(entry[peer]['median_s'])} ({entry[peer]['gb_per_s']:.1f} GB/s)" if peer else ""
            flag = "" if entry["correct"] else "  WRONG RESULT"
            print(f"{'':>11}{what:<18} hetero {format_seconds(entry['hetero']['median_s']):>9} "
                  f"({entry['hetero']['gb_per_s']:5.1f} GB/s)  {beside}{flag}")
    for goal in summary:
        value = "-" if goal["value"] is None else f"{goal['value']:.3g}"
        print(f"goal {goal['device']} {goal['goal']}: {value}: {goal['status'].upper()}")


def run(devices: Sequence[hetero.Device], n: int, repeats: int, progress: Progress) -> dict[str, Any]:
    rows = []
    for device in devices:
        progress.step(f"{device.name}: reductions of {n} float32")
        rows.append(measure_device(device, n, repeats))
        gc.collect()
    return {"rows": rows, "summary": goals(rows)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.array_reductions", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 Mi elements, fewer repeats")
    parser.add_argument("--devices", nargs="+", metavar="DEVICE", default=list(DEFAULT_DEVICES))
    parser.add_argument("--elements", type=int, help="array length (default 64 Mi, --quick 4 Mi; a square keeps the axis rows)")
    args = parser.parse_args(argv)
    n = args.elements or (QUICK_ELEMENTS if args.quick else FULL_ELEMENTS)
    repeats = 5 if args.quick else 11
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    result = run(devices, n, repeats, Progress(len(devices)))
    path = write_results("array_reductions", {
        "config": {"quick": args.quick, "elements": n, "dtype": "float32", "repeats": repeats,
                   "load_average_at_start": load_before, "load_average_at_end": load_average()},
        "devices": [describe(d) for d in devices], "missing_devices": missing, **result,
    }, command_line("benchmarks.array_reductions", sys.argv[1:] if argv is None else argv))
    print_rows(result["rows"], result["summary"])
    print_footer(missing, load_before, path)
    return 0


__all__ = ["goals", "main", "measure_device", "run"]

if __name__ == "__main__":
    raise SystemExit(main())
