"""Array operations against their peers, side by side in one run: the fused ``a*b + c*d``
(against NumPy's three passes and the device's copy bandwidth), ``x + y`` and ``x.sum()``
(against NumPy on ``cpu`` and ``pyopencl.array`` on OpenCL devices), and the per-operation
overhead on 1 Ki elements (against NumPy and ``pyopencl.array``), and ``x - x.mean(axis=0)`` on
200k x 64 (a broadcast row) against the contiguous ``x - y`` of that shape.

    python -m benchmarks.array_elementwise [--quick] [--devices cpu oneapi:0 opencl:0] [--elements N]

Part of ``python -m benchmarks.array_ops`` (which adds matmul); alone it writes
``benchmarks/results/array_elementwise.json``. Goals (reported, never enforced): fused triad
>= 2x NumPy on cpu and >= 0.9x the device's copy bandwidth everywhere; ``x + y`` and
``x.sum()`` >= 0.9x the peer; per-operation overhead <= ``pyopencl.array``'s on OpenCL and
<= 5 us on cpu; the broadcast ``x - m`` within 1.1x of the contiguous ``x - y``. Arrays are made with ``copy=True`` so hetero owns them (fusion applies).
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, Timing, command_line, compare, format_seconds, write_results
from benchmarks.kernel_bench import DEFAULT_DEVICES, choose_devices, describe, is_opencl, load_average, opencl, print_footer

MI = 1 << 20
FULL_ELEMENTS, QUICK_ELEMENTS = 64 * MI, 4 * MI
SMALL = 1024
GOALS = {"fused_vs_numpy_cpu": 2.0, "fused_vs_copy": 0.9, "vs_peer": 0.9, "overhead_cpu_s": 5e-6,
         "broadcast_vs_contiguous": 1 / 1.1}
#: ``x - x.mean(axis=0)``: rows x 64 float32 (PCA's 200k x 64; --quick a tenth).
BROADCAST_ROWS, QUICK_BROADCAST_ROWS, BROADCAST_COLUMNS = 200_000, 20_000, 64


def _rate(timing: Timing, nbytes: int) -> dict[str, Any]:
    return {**timing, "gb_per_s": nbytes / timing["median_s"] / 1e9}


class Operands:
    """Four float32 arrays of ``n`` elements on ``device``, their host copies, and the peer's."""

    def __init__(self, device: hetero.Device, n: int) -> None:
        rng = np.random.default_rng(n)
        self.device, self.n = device, n
        self.host = [rng.standard_normal(n, dtype=np.float32) for _ in range(4)]
        self.arrays = [hetero.asarray(h, device=device, copy=True) for h in self.host]
        self.peer: list[Any] | None = None
        self.queue: Any = None
        if is_opencl(device):
            import pyopencl.array as cl_array

            _, _, self.queue = opencl(device)
            self.peer = [cl_array.to_device(self.queue, h) for h in self.host]
        device.synchronize()

    def wait(self) -> None:
        self.device.synchronize()
        if self.queue is not None:
            self.queue.finish()


def _copy_rate(ops: Operands, repeats: int) -> dict[str, Any]:
    """The device's copy bandwidth (read + write) over one of the arrays' size."""
    device, n = ops.device, ops.n
    if device.runtime.host_memory:
        src, dst = ops.host[0], np.empty_like(ops.host[0])
        timing = compare({"copy": lambda: np.copyto(dst, src)}, repeats, 2)["copy"]
        how = "numpy.copyto"
    else:
        import pyopencl as cl

        target = ops.peer[1].base_data if ops.peer else None  # type: ignore[index]
        source = ops.peer[0].base_data if ops.peer else None  # type: ignore[index]

        def run() -> None:
            cl.enqueue_copy(ops.queue, target, source).wait()

        timing = compare({"copy": run}, repeats, 2)["copy"]
        how = "clEnqueueCopyBuffer (pyopencl.enqueue_copy) of one array into another"
    return {**_rate(timing, 2 * 4 * n), "method": how}


def fused_triad(ops: Operands, repeats: int) -> dict[str, Any]:
    a, b, c, d = ops.arrays
    ha, hb, hc, hd = ops.host
    want = ha * hb + hc * hd

    def run_hetero() -> None:
        (a * b + c * d)._buffer  # noqa: B018  (reading the buffer runs the fused kernel)
        ops.device.synchronize()

    candidates: dict[str, Callable[[], object]] = {"hetero": run_hetero}
    methods = {"hetero": "(a * b + c * d)._buffer; device.synchronize(): one fused kernel"}
    if ops.device.runtime.host_memory:
        candidates["numpy"] = lambda: ha * hb + hc * hd
        methods["numpy"] = "ha * hb + hc * hd (three passes, two temporaries)"
    elif ops.peer is not None:
        pa, pb, pc, pd = ops.peer

        def run_peer() -> None:
            (pa * pb + pc * pd).finish()

        candidates["pyopencl.array"] = run_peer
        methods["pyopencl.array"] = "pa * pb + pc * pd (three kernels, two temporaries)"
    correct = bool(np.array_equal((a * b + c * d).numpy(), want))
    timings = compare(candidates, repeats, 2)
    nbytes = 5 * 4 * ops.n  # four reads and one write, as STREAM counts bytes
    row: dict[str, Any] = {"bytes_per_call": nbytes, "methods": methods, "correct_bit_for_bit_vs_numpy": correct}
    for name, timing in timings.items():
        row[name] = _rate(timing, nbytes)
    row["copy"] = _copy_rate(ops, repeats)
    row["ratio_vs_copy"] = row["hetero"]["gb_per_s"] / row["copy"]["gb_per_s"]
    for peer in ("numpy", "pyopencl.array"):
        if peer in timings:
            row[f"ratio_vs_{peer}"] = timings[peer]["median_s"] / timings["hetero"]["median_s"]
    return row


def add_and_sum(ops: Operands, repeats: int) -> dict[str, Any]:
    x, y = ops.arrays[:2]
    hx, hy = ops.host[:2]

    def add() -> None:
        (x + y)._buffer  # noqa: B018
        ops.device.synchronize()

    def total() -> None:
        hetero.sum(x)._buffer  # noqa: B018
        ops.device.synchronize()

    rows: dict[str, Any] = {}
    for name, mine, nbytes in (("add", add, 3 * 4 * ops.n), ("sum", total, 4 * ops.n)):
        candidates: dict[str, Callable[[], object]] = {"hetero": mine}
        if ops.device.runtime.host_memory:
            candidates["numpy"] = (lambda: hx + hy) if name == "add" else (lambda: hx.sum())
        elif ops.peer is not None:
            import pyopencl.array as cl_array

            px, py = ops.peer[:2]
            candidates["pyopencl.array"] = (lambda: (px + py).finish()) if name == "add" else (
                lambda: cl_array.sum(px).get())
        timings = compare(candidates, repeats, 2)
        row: dict[str, Any] = {"bytes_per_call": nbytes}
        for side, timing in timings.items():
            row[side] = _rate(timing, nbytes)
        peer = next((p for p in ("numpy", "pyopencl.array") if p in timings), None)
        if peer:
            row["peer"] = peer
            row["ratio_vs_peer"] = timings[peer]["median_s"] / timings["hetero"]["median_s"]
        rows[name] = row
    got = float(hetero.sum(x))
    rows["sum"]["relative_error_vs_float64"] = abs(got - float(hx.astype(np.float64).sum())) / max(
        1.0, abs(float(hx.astype(np.float64).sum())))
    return rows


def overhead(device: hetero.Device, repeats: int) -> dict[str, Any]:
    """Seconds per ``x + y`` on 1 Ki float32, the launch not waited for (as the peers run it)."""
    rng = np.random.default_rng(1)
    hx, hy = rng.standard_normal(SMALL, dtype=np.float32), rng.standard_normal(SMALL, dtype=np.float32)
    x, y = hetero.asarray(hx, device=device, copy=True), hetero.asarray(hy, device=device, copy=True)
    candidates: dict[str, Callable[[], object]] = {"hetero": lambda: (x + y)._buffer}
    # steady state: on cpu a kernel launched often moves from its native entry to Numba's faster
    # call in a background thread (backends/cpu/kernels.py, MOVE_AFTER): timed after the move, not during it
    for _ in range(200):
        (x + y)._buffer  # noqa: B018
    wait_for_numba = getattr(sys.modules.get("hetero.backends.cpu.kernels"), "wait_for_numba", None)
    if wait_for_numba is not None:
        wait_for_numba()
    queue = None
    if device.runtime.host_memory:
        candidates["numpy"] = lambda: hx + hy
    elif is_opencl(device):
        import pyopencl.array as cl_array

        _, _, queue = opencl(device)
        px, py = cl_array.to_device(queue, hx), cl_array.to_device(queue, hy)
        candidates["pyopencl.array"] = lambda: px + py
    timings = compare(candidates, repeats, 3)
    device.synchronize()
    if queue is not None:
        queue.finish()
    row: dict[str, Any] = {"elements": SMALL, **{side: timing for side, timing in timings.items()}}
    peer = next((p for p in ("numpy", "pyopencl.array") if p in timings), None)
    if peer:
        row["peer"] = peer
        row["hetero_minus_peer_s"] = timings["hetero"]["median_s"] - timings[peer]["median_s"]
    return row


def broadcast(device: hetero.Device, rows: int, repeats: int) -> dict[str, Any]:
    """``x - m`` (m a broadcast row, ``x.mean(axis=0)``'s shape) against the contiguous ``x - y``
    of the same shape, on ``rows`` x 64 float32; NumPy's two beside them on host-memory devices,
    ``pyopencl.array``'s contiguous ``x - y`` on OpenCL devices (it does not broadcast)."""
    rng = np.random.default_rng(2)
    hx = rng.standard_normal((rows, BROADCAST_COLUMNS), dtype=np.float32)
    hy = rng.standard_normal((rows, BROADCAST_COLUMNS), dtype=np.float32)
    hm = hx.mean(axis=0)
    x, y, m = (hetero.asarray(h, device=device, copy=True) for h in (hx, hy, hm))

    def run(a: hetero.Array, b: hetero.Array) -> Callable[[], object]:
        def call() -> None:
            (a - b)._buffer  # noqa: B018
            device.synchronize()
        return call

    candidates: dict[str, Callable[[], object]] = {"hetero broadcast": run(x, m), "hetero contiguous": run(x, y)}
    methods = {"hetero broadcast": "(x - m)._buffer; device.synchronize(), m of shape (64,)",
               "hetero contiguous": "(x - y)._buffer; device.synchronize(), y of x's shape"}
    queue = None
    if device.runtime.host_memory:
        candidates["numpy broadcast"] = lambda: hx - hm
        candidates["numpy contiguous"] = lambda: hx - hy
        methods["numpy broadcast"], methods["numpy contiguous"] = "hx - hm", "hx - hy"
    elif is_opencl(device):
        import pyopencl.array as cl_array

        _, _, queue = opencl(device)
        px, py = cl_array.to_device(queue, hx), cl_array.to_device(queue, hy)
        candidates["pyopencl.array contiguous"] = lambda: (px - py).finish()
        methods["pyopencl.array contiguous"] = "(px - py).finish() (pyopencl.array does not broadcast)"
    correct = bool(np.array_equal((x - m).numpy(), hx - hm))
    timings = compare(candidates, repeats, 2)
    if queue is not None:
        queue.finish()
    row: dict[str, Any] = {"shape": [rows, BROADCAST_COLUMNS], "methods": methods,
                           "correct_bit_for_bit_vs_numpy": correct}
    nbytes = 3 * 4 * rows * BROADCAST_COLUMNS  # two reads and a write of the full shape (the row stays in cache)
    for name, timing in timings.items():
        row[name] = _rate(timing, nbytes)
    row["ratio_contiguous_over_broadcast"] = (timings["hetero contiguous"]["median_s"]
                                              / timings["hetero broadcast"]["median_s"])
    if "numpy broadcast" in timings:
        row["ratio_vs_numpy"] = timings["numpy broadcast"]["median_s"] / timings["hetero broadcast"]["median_s"]
    return row


def goals(rows: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []

    def goal(device: str, what: str, value: float | None, target: float, higher: bool = True) -> None:
        status = "not measured" if value is None else "pass" if (value >= target if higher else value <= target) else "fail"
        found.append({"device": device, "goal": what, "value": value, "target": target, "status": status})

    for row in rows:
        name = row["device"]
        fused = row["fused_triad"]
        if "ratio_vs_numpy" in fused:
            goal(name, "fused a*b+c*d vs NumPy >= 2x", fused["ratio_vs_numpy"], GOALS["fused_vs_numpy_cpu"])
        goal(name, "fused a*b+c*d vs copy bandwidth >= 0.9x", fused["ratio_vs_copy"], GOALS["fused_vs_copy"])
        for op in ("add", "sum"):
            goal(name, f"{op} vs {row[op].get('peer', 'peer')} >= 0.9x", row[op].get("ratio_vs_peer"), GOALS["vs_peer"])
        wide = row.get("broadcast")
        if wide is not None:
            goal(name, "x - mean(axis=0) within 1.1x of contiguous x - y", wide["ratio_contiguous_over_broadcast"],
                 GOALS["broadcast_vs_contiguous"])
        small = row["overhead"]
        if name == "cpu":
            goal(name, "per-op overhead <= 5 us", small["hetero"]["median_s"], GOALS["overhead_cpu_s"], higher=False)
        elif small.get("peer") == "pyopencl.array":
            goal(name, "per-op overhead <= pyopencl.array", small["pyopencl.array"]["median_s"] / small["hetero"]["median_s"],
                 1.0)
    return found


def measure_device(device: hetero.Device, n: int, repeats: int, progress: Progress,
                   rows: int = BROADCAST_ROWS) -> dict[str, Any]:
    progress.step(f"{device.name}: fused a*b + c*d, x + y, x.sum() on {n} float32; x + y on {SMALL}; "
                  f"x - mean on {rows} x {BROADCAST_COLUMNS}")
    ops = Operands(device, n)
    row = {"device": device.name, "elements": n, "fused_triad": fused_triad(ops, repeats), **add_and_sum(ops, repeats),
           "overhead": overhead(device, repeats * 2)}
    del ops
    gc.collect()
    row["broadcast"] = broadcast(device, rows, repeats)
    gc.collect()
    return row


def print_rows(rows: Sequence[dict[str, Any]], summary: Sequence[dict[str, Any]]) -> None:
    for row in rows:
        fused = row["fused_triad"]
        peers = ", ".join(f"{p} {fused[p]['gb_per_s']:.1f} GB/s" for p in ("numpy", "pyopencl.array") if p in fused)
        print(f"{row['device']:>9} fused a*b+c*d: hetero {fused['hetero']['gb_per_s']:.1f} GB/s, {peers}, "
              f"copy {fused['copy']['gb_per_s']:.1f} GB/s; x+y {format_seconds(row['add']['hetero']['median_s'])}, "
              f"sum {format_seconds(row['sum']['hetero']['median_s'])}; 1 Ki x+y "
              f"{format_seconds(row['overhead']['hetero']['median_s'])}{_broadcast_line(row)}")
    for goal in summary:
        value = "-" if goal["value"] is None else f"{goal['value']:.3g}"
        print(f"goal {goal['device']} {goal['goal']}: {value}: {goal['status'].upper()}")


def _broadcast_line(row: dict[str, Any]) -> str:
    wide = row.get("broadcast")
    if wide is None:
        return ""
    others = ", ".join(f"{side} {format_seconds(wide[side]['median_s'])}" for side in wide["methods"]
                       if not side.startswith("hetero"))
    return (f"; x - mean {format_seconds(wide['hetero broadcast']['median_s'])} vs contiguous x - y "
            f"{format_seconds(wide['hetero contiguous']['median_s'])}" + (f" ({others})" if others else ""))


def run(devices: Sequence[hetero.Device], n: int, repeats: int, progress: Progress,
        broadcast_rows: int = BROADCAST_ROWS) -> dict[str, Any]:
    rows = [measure_device(device, n, repeats, progress, broadcast_rows) for device in devices]
    return {"rows": rows, "summary": goals(rows)}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.array_elementwise", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="4 Mi elements, fewer repeats")
    parser.add_argument("--devices", nargs="+", metavar="DEVICE", default=list(DEFAULT_DEVICES))
    parser.add_argument("--elements", type=int, help="array length (default 64 Mi, --quick 4 Mi)")
    args = parser.parse_args(argv)
    n = args.elements or (QUICK_ELEMENTS if args.quick else FULL_ELEMENTS)
    repeats = 7 if args.quick else 11
    devices, missing = choose_devices(args.devices)
    load_before = load_average()
    result = run(devices, n, repeats, Progress(len(devices)), QUICK_BROADCAST_ROWS if args.quick else BROADCAST_ROWS)
    path = write_results("array_elementwise", {
        "config": {"quick": args.quick, "elements": n, "repeats": repeats, "load_average_at_start": load_before,
                   "load_average_at_end": load_average(), "fusion": hetero.arraylib.fusion.enabled()},
        "devices": [describe(d) for d in devices], "missing_devices": missing, **result,
    }, command_line("benchmarks.array_elementwise", sys.argv[1:] if argv is None else argv))
    print_rows(result["rows"], result["summary"])
    print_footer(missing, load_before, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
