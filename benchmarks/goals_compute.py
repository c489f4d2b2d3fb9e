"""The goals of the compute benchmarks (copies, launches, kernels, arrays, compilation, the GPU
checklist), read from their results files: one adapter per file, each a function from the
file's JSON to :class:`~benchmarks.goal.Goal` rows. ``goals.py`` holds the registry.

The thresholds are the ones each benchmark's docstring states; where a results file records
its threshold, that one is used.
"""

from __future__ import annotations

from typing import Any

from benchmarks.goal import (
    PERFORMANCE,
    Goal,
    Status,
    at_least,
    at_most,
    below,
    count,
    duration,
    from_flag,
    median,
    missing_devices,
    ratio,
    size,
    worst,
)

Results = dict[str, Any]

LAUNCH_ONEAPI_MAX_RATIO = 1.3
LAUNCH_CPU_MAX_ADDED_S = 3e-6
TRIAD_MIN_RATIO = 0.9
TRIAD_MIN_VS_COPY = 0.85
DISK_HIT_MAX_S = 0.005
FIRST_CPU_KERNEL_MAX_S = 0.100
ARRAY_FUSED_VS_NUMPY = 2.0
ARRAY_MIN_RATIO = 0.9
ARRAY_CPU_OVERHEAD_MAX_S = 5e-6
ARRAY_BROADCAST_VS_CONTIGUOUS = 1 / 1.1  # x - x.mean(axis=0) within 1.1x of a contiguous x - y (issue 46)
GPU_TRIAD_MIN_RATIO = 0.9
GPU_LAUNCH_MAX_RATIO = 1.2  # issue 19 (it was 1.5)
GPU_D2H_MIN_RATIO = 0.9  # device->host vs CuPy's get at the largest size (issue 19)


def _gbs(timing: dict[str, Any]) -> str:
    return f"{timing['gb_per_s']:.1f}"


def _gflops(timing: dict[str, Any]) -> str:
    value = float(timing["gflop_per_s"])
    return f"{value:.1f}" if value < 100 else f"{value:.0f}"


def copy_bandwidth(data: Results) -> list[Goal]:
    rows = []
    for entry in data["summary"]:
        ratios: dict[str, float] = entry.get("ratios") or {}
        limit = float(entry["goal_max_ratio"])
        routes = " / ".join(ratios) or "host<->oneapi:0"
        rows.append(Goal("copy_bandwidth", f"{entry['size']} copy {routes}, `hetero.copyto` vs PyOpenCL `enqueue_copy` + wait",
                         " / ".join(ratio(v) for v in ratios.values()) or "not measured", f"<= {limit:g}x",
                         at_most(max(ratios.values()), limit) if ratios else "N/A"))
    return rows


def import_time(data: Results) -> list[Goal]:
    summary = data["summary"]
    added = summary.get("hetero_minus_numpy_median_s")
    limit = float(summary.get("goal_max_s", 0.3))
    rows = [Goal("import_time", "`import hetero` over `import numpy` (medians, fresh interpreters)",
                 duration(added, signed=True), f"< {limit:g} s", below(added, limit))]
    first = data.get("hetero", {}).get("first_devices_call")
    if first:
        rows.append(Goal("import_time", "first `hetero.devices()` call of a process", duration(median(first)), "", "INFO"))
    return rows


def launch_overhead(data: Results) -> list[Goal]:
    rows = []
    for row in data["rows"]:
        device, value = row["device"], row.get("ratio")
        hetero_s, raw_s = median(row.get("hetero")), median(row.get("raw"))
        if device == "cpu":
            added = row.get("added_s")
            rows.append(Goal("launch_overhead", "1-element kernel launch + wait on cpu, over a hand-written Numba call",
                             f"{duration(added, signed=True)} ({duration(hetero_s)} vs {duration(raw_s)})",
                             f"<= {LAUNCH_CPU_MAX_ADDED_S * 1e6:g} us", at_most(added, LAUNCH_CPU_MAX_ADDED_S), PERFORMANCE))
        elif device.startswith("oneapi"):
            rows.append(Goal("launch_overhead", f"1-element kernel launch + wait on {device}, vs a hand-written PyOpenCL enqueue",
                             f"{ratio(value)} ({duration(hetero_s)} vs {duration(raw_s)})", f"<= {LAUNCH_ONEAPI_MAX_RATIO:g}x",
                             at_most(value, LAUNCH_ONEAPI_MAX_RATIO)))
        else:
            rows.append(Goal("launch_overhead", f"1-element kernel launch + wait on {device}, vs a hand-written PyOpenCL enqueue",
                             f"{ratio(value)} ({duration(hetero_s)} vs {duration(raw_s)})", "", "INFO"))
    return rows + missing_devices("launch_overhead", "1-element kernel launch on {device}", data.get("missing_devices"))


def stream_triad(data: Results) -> list[Goal]:
    elements = count(int(data["config"]["elements"]))
    minimum = {entry["device"]: float(entry.get("goal_min_ratio") or TRIAD_MIN_RATIO) for entry in data.get("summary", [])}
    ceiling = data.get("copy_ceiling") or {}
    ceiling_gbs = ceiling.get("gb_per_s_read_plus_write")
    rows = []
    for row in data["rows"]:
        device, value = row["device"], row.get("ratio")
        limit = minimum.get(device, TRIAD_MIN_RATIO)
        hand = "Numba `prange`" if device == "cpu" else "OpenCL C (PyOpenCL)"
        shown = f"{ratio(value)} ({_gbs(row['hetero'])} vs {_gbs(row['raw'])} GB/s)" if value is not None else "no reference"
        issue = PERFORMANCE if device == "cpu" else None  # issue 19: hetero's generated CPU code
        rows.append(Goal("stream_triad", f"STREAM triad {elements} f32, {device} vs hand-written {hand}", shown,
                         f">= {limit:g}x", at_least(value, limit), issue))
        if ceiling_gbs:
            vs_copy = row.get("ratio_vs_copy", row["hetero"]["gb_per_s"] / ceiling_gbs)
            rows.append(Goal("stream_triad", f"STREAM triad {elements} f32, {device} vs `numpy.copyto` bandwidth "
                             f"({size(int(ceiling.get('bytes', 0)))}, read + write)",
                             f"{ratio(vs_copy)} ({_gbs(row['hetero'])} vs {ceiling_gbs:.1f} GB/s)", f">= {TRIAD_MIN_VS_COPY:g}x",
                             at_least(vs_copy, TRIAD_MIN_VS_COPY), issue))
    return rows + missing_devices("stream_triad", "STREAM triad on {device}", data.get("missing_devices"))


def sgemm(data: Results) -> list[Goal]:
    n = data["config"]["n"]
    by_device = {row["device"]: row for row in data["rows"]}
    rows = []
    for entry in data["summary"]:
        device, value, limit = entry["device"], entry.get("ratio"), entry.get("goal_min_ratio")
        row = by_device.get(device)
        shown = f"{ratio(value)} ({_gflops(row['hetero'])} vs {_gflops(row['raw'])} GFLOP/s)" if row and value is not None else ratio(value)
        if limit is None:
            rows.append(Goal("sgemm", f"SGEMM {n}² f32, {device}: hetero's tiled kernel vs {entry['reference']} "
                             "(a tiled kernel is not a BLAS)", shown, "", "INFO"))
        else:
            rows.append(Goal("sgemm", f"SGEMM {n}² f32, {device}: hetero's tiled kernel vs the same in {entry['reference']}",
                             shown, f">= {limit:g}x", at_least(value, float(limit))))
    return rows + missing_devices("sgemm", "SGEMM on {device}", data.get("missing_devices"))


def array_ops(data: Results) -> list[Goal]:
    elementwise = data["elementwise"]
    n = count(int(elementwise["elements"]))
    rows = []
    for row in elementwise["rows"]:
        device, fused = row["device"], row["fused_triad"]
        # issue 19 holds the generated CPU code's elementwise kernels to the bandwidth limit
        elementwise_issue = PERFORMANCE if device == "cpu" else None
        if "ratio_vs_numpy" in fused:
            value = fused["ratio_vs_numpy"]
            rows.append(Goal("array_ops", f"fused `a*b + c*d`, {n} f32, {device} vs NumPy's three passes",
                             f"{ratio(value)} ({_gbs(fused['hetero'])} vs {_gbs(fused['numpy'])} GB/s)",
                             f">= {ARRAY_FUSED_VS_NUMPY:g}x", at_least(value, ARRAY_FUSED_VS_NUMPY)))
        value = fused.get("ratio_vs_copy")
        rows.append(Goal("array_ops", f"fused `a*b + c*d`, {n} f32, {device} vs the device's copy bandwidth",
                         f"{ratio(value)} ({_gbs(fused['hetero'])} vs {_gbs(fused['copy'])} GB/s)", f">= {ARRAY_MIN_RATIO:g}x",
                         at_least(value, ARRAY_MIN_RATIO), elementwise_issue))
        for op, text in (("add", "x + y"), ("sum", "x.sum()")):
            entry = row[op]
            value = entry.get("ratio_vs_peer")
            rows.append(Goal("array_ops", f"`{text}`, {n} f32, {device} vs {entry['peer']}",
                             f"{ratio(value)} ({_gbs(entry['hetero'])} vs {_gbs(entry[entry['peer']])} GB/s)",
                             f">= {ARRAY_MIN_RATIO:g}x", at_least(value, ARRAY_MIN_RATIO), elementwise_issue if op == "add" else None))
        wide = row.get("broadcast")
        if wide is not None:  # issue 46: a broadcast row costs what a second full operand does, or less
            value = wide["ratio_contiguous_over_broadcast"]
            shape = " x ".join(count(int(n)) for n in wide["shape"])
            rows.append(Goal("array_ops", f"`x - x.mean(axis=0)` on {shape} f32, {device}, vs a contiguous `x - y` "
                             "(time of the contiguous over the broadcast)",
                             f"{ratio(value)} ({duration(median(wide['hetero broadcast']))} vs "
                             f"{duration(median(wide['hetero contiguous']))})",
                             f">= {ARRAY_BROADCAST_VS_CONTIGUOUS:.2f}x (within 1.1x)",
                             at_least(value, ARRAY_BROADCAST_VS_CONTIGUOUS)))
        small = row["overhead"]
        peer = small["peer"]
        hetero_s, peer_s = median(small["hetero"]), median(small[peer])
        what = f"one `x + y` on {count(int(small['elements']))} f32, {device} (per-operation cost)"
        if device == "cpu":
            rows.append(Goal("array_ops", what, f"{duration(hetero_s)} ({peer} {duration(peer_s)})",
                             f"<= {ARRAY_CPU_OVERHEAD_MAX_S * 1e6:g} us", at_most(hetero_s, ARRAY_CPU_OVERHEAD_MAX_S)))
        else:
            rows.append(Goal("array_ops", what, f"{duration(hetero_s)} ({peer} {duration(peer_s)})", f"<= {peer}",
                             at_most(hetero_s, peer_s) if peer_s is not None else "N/A"))
    n_matmul = data.get("config", {}).get("n")
    by_device = {row["device"]: row for row in data["matmul"]["rows"]}
    for entry in data["matmul"]["summary"]:
        device, value, limit, vs = entry["device"], entry.get("ratio"), entry.get("goal_min_ratio"), entry.get("vs")
        row = by_device.get(device)
        against = "`numpy.matmul` on the same memory" if vs == "numpy" else "hetero's tiled kernel (vendor BLAS off)"
        shown = f"{ratio(value)} ({_gflops(row['hetero'])} vs {_gflops(row[vs])} GFLOP/s)" if row and vs in row else ratio(value)
        rows.append(Goal("array_ops", f"`hetero.matmul` {n_matmul}² f32, {device} vs {against}", shown,
                         "" if limit is None else f">= {limit:g}x", "INFO" if limit is None else at_least(value, float(limit))))
    return rows + missing_devices("array_ops", "array operations on {device}", data.get("missing_devices"))


def digits_arrays(data: Results) -> list[Goal]:
    rows = data["rows"]
    if not rows:
        return []
    devices = " / ".join(row["device"]["name"] for row in rows)
    return [Goal("digits_arrays", f"digits MLP SGD step in array expressions vs hand-written kernels, {devices}",
                 " / ".join(ratio(row["arrays_over_kernels"]) for row in rows) + " the step time", "", "INFO")]


def array_jit(data: Results) -> list[Goal]:
    """hetero.jit's digits step against the hand-written kernels (goal <= 1.2x), eager's (<= 2x), and
    on the CPU against PyTorch eager and jax.jit (the aim: ahead of torch eager)."""
    rows: list[Goal] = []
    for row in data["rows"]:
        device, r, s = row["device"]["name"], row["ratios"], row["step_s"]
        same = "bit-identical to eager" if row.get("jit_bit_identical_to_eager") else "NOT bit-identical to eager"
        rows.append(Goal("array_jit", f"digits SGD step under `hetero.jit` vs hand-written kernels, {device} ({same})",
                         f"{ratio(r['jit_over_kernels'], 1.2)} ({duration(s['jit'])} vs {duration(s['kernels'])})",
                         "<= 1.2x", at_most(r["jit_over_kernels"], 1.2) if row.get("jit_bit_identical_to_eager") else "MISS"))
        rows.append(Goal("array_jit", f"digits SGD step in eager array expressions vs hand-written kernels, {device}",
                         f"{ratio(r['eager_over_kernels'], 2.0)} ({duration(s['eager'])})", "<= 2x",
                         at_most(r["eager_over_kernels"], 2.0)))
        for peer, label in (("torch", "PyTorch eager"), ("jax", "`jax.jit`")):
            if f"jit_over_{peer}" in r:
                rows.append(Goal("array_jit", f"digits SGD step under `hetero.jit` vs the same step in {label}, {device}",
                                 f"{ratio(r[f'jit_over_{peer}'])} ({duration(s['jit'])} vs {duration(s[peer])})",
                                 "<= 1x" if peer == "torch" else "",
                                 at_most(r[f"jit_over_{peer}"], 1.0) if peer == "torch" else "INFO"))
    return rows + missing_devices("array_jit", "the jitted digits step on {device}", data.get("missing_devices"))


def compile_time(data: Results) -> list[Goal]:
    details = {entry["device"]: entry for entry in data.get("devices_detail", [])}
    rows = []
    for entry in data["summary"]:
        device, worst_s, median_s = entry["device"], entry.get("warm_max_s"), entry.get("warm_median_s")
        limit = float(entry.get("goal_max_s", DISK_HIT_MAX_S))
        kernels = len(details.get(device, {}).get("kernels", [])) or "the"
        what = f"disk-cache hit per kernel in a fresh process, {device} ({kernels} corpus kernels)"
        if worst_s is None:
            rows.append(Goal("compile_time", what, "not measured", f"< {limit * 1e3:g} ms every kernel", "N/A", PERFORMANCE))
            continue
        over = entry.get("kernels_over_goal") or []
        paths_ok = entry.get("paths_as_expected", True)
        shown = f"median {duration(median_s)}, worst {duration(worst_s)}" + (f" ({len(over)} over)" if over else "")
        if not paths_ok:
            shown += "; not every warm launch hit the disk cache"
        rows.append(Goal("compile_time", what, shown, f"< {limit * 1e3:g} ms every kernel",
                         below(worst_s, limit) if paths_ok else "MISS", PERFORMANCE))
        if device == "cpu":
            rows.extend(_first_kernel({**details.get(device, {}), **entry}))
    startups = {device: detail["startup_s"]["warm"] for device, detail in details.items() if detail.get("startup_s")}
    if startups:
        rows.append(Goal("compile_time", "backend start-up in a fresh process (device open + one kernel, warm cache), "
                         + " / ".join(startups), " / ".join(duration(median(timing)) for timing in startups.values()), "", "INFO"))
    return rows + missing_devices("compile_time", "disk-cache hit per kernel, {device}", data.get("missing_devices"))


def _first_kernel(entry: dict[str, Any]) -> list[Goal]:
    """The goal on a process's first cpu kernel, its artifacts cached (device already open), where the
    file has it: ``first_kernel_s`` is ``{"warm": timing, "cold": timing}``, a timing, or seconds."""
    first = entry.get("first_kernel_s")
    warm_s = cold_s = None
    if isinstance(first, dict):
        if "median_s" in first:
            warm_s = median(first)
        else:  # per cache state; {} when not measured
            warm_s, cold_s = median(first.get("warm")), median(first.get("cold"))
    elif first is not None:
        warm_s = float(first)
    if warm_s is None:
        return []
    limit = float(entry.get("first_kernel_goal_s", FIRST_CPU_KERNEL_MAX_S))
    shown = duration(warm_s) + (f" (empty cache {duration(cold_s)})" if cold_s is not None else "")
    return [Goal("compile_time", "a process's first kernel on cpu, its artifacts cached (device already open)", shown,
                 f"< {limit * 1e3:g} ms", below(warm_s, limit), PERFORMANCE)]


def compile_bundle(data: Results) -> list[Goal]:
    build = data["build"]
    rows = [Goal("compile_bundle", f"`hetero compile`, {len(build['kernels'])} kernels x {len(build['targets'])} targets, "
                 f"{build['jobs']} jobs", f"{duration(median(build['parallel_s']))} parallel vs "
                 f"{duration(median(build['sequential_sum_s']))} one target at a time ({ratio(build.get('speedup'))})", "", "INFO")]
    for row in data.get("launch", []):
        modes = row["modes"]
        shown = " / ".join(duration(median(modes[mode]["load_plus_first_launches_s"])) for mode in ("jit", "bundle", "bundle_warm")
                           if mode in modes)
        rows.append(Goal("compile_bundle", f"first launches of {len(row['kernels'])} kernels in a fresh process, {row['device']}: "
                         "JIT / bundle / bundle with the cache filled", shown, "", "INFO"))
    return rows


def compat_cuda(data: Results) -> list[Goal]:
    sizes = data.get("sizes", {})
    names = {"vecadd": f"vector add, {sizes.get('vecadd_n', '?')} f64",
             "fast_matmul": f"shared-memory matmul, {sizes.get('matmul_n', '?')}² f32"}
    devices = data["devices"]
    rows = []
    for kernel in data["simulator_warm_s"]:
        found = {device: part["speedup_vs_simulator"][kernel] for device, part in devices.items() if kernel in part["speedup_vs_simulator"]}
        rows.append(Goal("compat_cuda", f"Numba-CUDA {names.get(kernel, kernel)} through `hetero.compat.cuda` vs Numba's CUDA "
                         f"simulator, {' / '.join(found)}", " / ".join(ratio(v) for v in found.values()) + " faster", "", "INFO"))
    return rows


def gpu_check(data: Results) -> list[Goal]:
    checks = data.get("checks") or {}
    if data.get("status") == "no-cuda-device" or not checks:
        return [Goal("gpu_check", "GPU checklist (`python -m benchmarks.gpu_check` on a machine with an NVIDIA GPU)",
                     str(data.get("reason") or "no CUDA device").splitlines()[0], "", "N/A")]
    device = checks.get("device", {})
    where = f"{device.get('model', 'GPU')} ({device.get('name', 'cuda:0')}, {str(data.get('date', ''))[:10]})"
    rows = []
    triad = checks.get("stream_triad_and_copies")
    if triad:
        not_run = from_flag(triad.get("status", "pass")) == "N/A"
        value = None if not_run else triad.get("hetero_vs_rawkernel")
        gbs = triad.get("GB_per_s", {})
        elements = count(int(triad.get("elements", 0)))
        rows.append(Goal("gpu_check", f"{where}: STREAM triad {elements} f32 vs the same kernel as a CuPy RawKernel",
                         f"{ratio(value)} ({gbs.get('hetero', '-')} vs {gbs.get('cupy_rawkernel', '-')} GB/s)",
                         f">= {GPU_TRIAD_MIN_RATIO:g}x", at_least(value, GPU_TRIAD_MIN_RATIO)))
        if not not_run and triad.get("hetero_vs_copy") is not None:
            rows.append(Goal("gpu_check", f"{where}: STREAM triad vs the device's copy bandwidth", f"{ratio(triad['hetero_vs_copy'])} "
                             f"({gbs.get('hetero', '-')} vs {gbs.get('device_copy', '-')} GB/s)", "", "INFO"))
    launch = checks.get("launch_overhead")
    if launch:
        value = None if from_flag(launch.get("status", "pass")) == "N/A" else launch.get("ratio")
        us = launch.get("us_per_launch", {})
        rows.append(Goal("gpu_check", f"{where}: 1-element kernel launch vs a CuPy RawKernel", f"{ratio(value)} "
                         f"({us.get('hetero', '-')} vs {us.get('cupy_rawkernel', '-')} us)", f"<= {GPU_LAUNCH_MAX_RATIO:g}x",
                         at_most(value, GPU_LAUNCH_MAX_RATIO), PERFORMANCE))
    copies = checks.get("copy_paths")
    if copies and copies.get("rows"):
        largest = copies["rows"][-1]
        value = largest.get("hetero_d2h_vs_cupy")
        speeds = largest.get("GB_per_s", {})
        every = ", ".join(f"{row['MiB']} MiB {ratio(row['hetero_d2h_vs_cupy'])}" for row in copies["rows"])
        rows.append(Goal("gpu_check", f"{where}: device->host copy, `hetero.copyto` vs CuPy's `get`, {largest['MiB']} MiB "
                         f"(and by size)", f"{ratio(value)} ({speeds.get('hetero_d2h', '-')} vs {speeds.get('cupy_d2h', '-')} "
                         f"GB/s; {every})", f">= {GPU_D2H_MIN_RATIO:g}x", at_least(value, GPU_D2H_MIN_RATIO), PERFORMANCE))
    others = {name: from_flag(check.get("status")) for name, check in checks.items()
              if name not in ("stream_triad_and_copies", "launch_overhead", "copy_paths")}
    if others:
        missed = [name for name, status in others.items() if status == "MISS"]
        skipped = [name for name, status in others.items() if status == "N/A"]
        shown = (f"missed: {', '.join(missed)}" if missed else f"{len(others) - len(skipped)} of {len(others)} pass") + \
            (f" (skipped: {', '.join(skipped)})" if skipped else "")
        statuses: list[Status] = list(others.values())
        rows.append(Goal("gpu_check", f"{where}: checklist ({', '.join(others)})", shown, "every check passes", worst(statuses)))
    return rows
