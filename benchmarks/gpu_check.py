"""The GPU checklist of issue 5, in one run on a machine with an NVIDIA GPU (cuda:0):

1. the device as hetero sees it (UUID, compute capability, memory, SMs, driver/runtime, NVML health);
2. the kernel corpus on cuda:0 against NumPy (tests/test_kernels.py, plus the stream and interop
   tests, restricted to cuda devices, in a subprocess);
3. a bundle built with ``sm_90`` on a machine without a GPU (``--prepare``), loaded and launched
   with NVRTC and CuPy's RawModule blocked (so nothing compiles at run time);
4. torch interop without copies (pointer equality both ways) and ``__cuda_array_interface__``;
5. STREAM triad GB/s: hetero's kernel vs the same kernel as a CuPy RawKernel vs a CuPy
   ElementwiseKernel, against the device's copy bandwidth; host<->device copies (pinned staging)
   vs CuPy's; launch overhead of a 1-element kernel, hetero vs RawKernel (goal <= 1.2x, issue 19),
   and the bare CuPy Function call hetero makes; host<->device copies by size,
   hetero vs CuPy and its two paths (pinned staging, direct) alone (goal: d2h >= 0.9x CuPy's get);
6. a kernel writing far out of bounds: hetero raises ContextCorruptedError with code 700 and the
   device reports unhealthy for the process (last: it poisons the CUDA context).

    python -m benchmarks.gpu_check [--quick]          # on the GPU machine
    python -m benchmarks.gpu_check --prepare          # here: build the sm_90 bundle with nvcc

Prints everything; writes ``benchmarks/results/gpu_check.json`` (and ``$OUT/gpu_check.json`` when
``$OUT`` is set). Without a CUDA device it says why and exits 0 having checked nothing.
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("HETERO_CACHE_DIR", tempfile.mkdtemp(prefix="hetero-gpu-check-"))  # nothing cached before
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the kernel corpus

import numpy as np

import hetero
from benchmarks.harness import command_line, write_results
from hetero import f32, i64

BUNDLE = ROOT / "benchmarks" / "results" / "gpu_check_sm90.hbundle"
BUNDLED = {"triad": "f32[:], f32[:], f32[:], f32", "saxpy": "f32, f32[:], f32[:]"}
TRIAD_CUDA = """extern "C" __global__ void triad(float* a, const float* b, const float* c, float s, long long n) {
    long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) a[i] = b[i] + s * c[i];
}
extern "C" __global__ void touch(float* x) { x[0] += 1.0f; }
"""
LAUNCH_GOAL = 1.2  # issue 19 (it was 1.5)
D2H_GOAL = 0.9  # hetero's device->host copy at least 0.9x CuPy's get (issue 19)
COPY_SIZES_MIB = (1, 4, 16, 64, 256)


@hetero.kernel
def touch(x):
    x[0] += 1.0


@hetero.kernel
def scribble(x, offset: i64):  # type: ignore[valid-type]
    i = hetero.global_id(0)
    x[i + offset] = f32(1.0)


def check(results: dict[str, Any], name: str, fn: Callable[[], dict[str, Any]]) -> None:
    """Run one check; record pass/fail and what it found (a failure never stops the others)."""
    print(f"\n== {name}", flush=True)
    started = time.perf_counter()
    try:
        found = fn()
        found.setdefault("status", "pass")
    except Exception as exc:  # noqa: BLE001 - every failure is data for the report
        found = {"status": "fail", "error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    found["seconds"] = round(time.perf_counter() - started, 2)
    results["checks"][name] = found
    for key, value in found.items():
        if key != "traceback":
            print(f"   {key}: {value}")


def device_facts(dev: hetero.Device) -> dict[str, Any]:
    runtime: Any = dev.runtime
    free, total = runtime.memory_info()
    events = runtime.drain_health_events()  # starts the Xid listener thread
    return {"name": dev.name, "model": dev.model, "uuid": dev.stable_id, "compute_capability":
            dev.info.extra.get("compute_capability"), "sms": dev.compute_units, "memory_total": total,
            "memory_free": free, "driver": dev.driver_version, "extra": dict(dev.info.extra),
            "health": str(dev.health()), "nvml_fields": runtime.health_fields(), "xid_events_so_far": events,
            "xid_listener_error": getattr(runtime._listener, "error", None)}

def corpus_tests(quick: bool) -> dict[str, Any]:
    files = ["tests/test_kernels.py", "tests/test_cuda_stream.py", "tests/test_interop.py"]
    command = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "cuda", *files]
    # a kernel cache of their own: the bundle check after them must find triad in the bundle, not in
    # a cache the tests filled (the suite's conftest honours HETERO_CACHE_DIR)
    env = {**os.environ, "HETERO_CACHE_DIR": tempfile.mkdtemp(prefix="hetero-gpu-check-tests-")}
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=240 if quick else 480,
                          check=False, env=env)
    tail = (done.stdout + done.stderr).strip().splitlines()[-25:]
    return {"status": "pass" if done.returncode == 0 else "fail", "command": " ".join(command[2:]),
            "summary": tail[-1] if tail else "", "output_tail": tail}


def prebuilt_bundle(dev: hetero.Device) -> dict[str, Any]:
    from kernels import corpus

    from hetero.backends.cupy import runtime as cupy_runtime, nvrtc_compile
    from hetero.compiler.build.stats import stats

    if not BUNDLE.exists():
        return {"status": "skip", "reason": f"{BUNDLE} missing: run 'python -m benchmarks.gpu_check --prepare' "
                "where nvcc is installed, and ship the file"}
    manifest = hetero.load_bundle(BUNDLE)

    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a run-time compile happened although the bundle has the kernel")

    saved = (nvrtc_compile.compile_cuda, cupy_runtime.CuPyRuntime._raw_module)
    nvrtc_compile.compile_cuda, cupy_runtime.CuPyRuntime._raw_module = refuse, refuse  # type: ignore[assignment]
    stats.reset()
    try:
        n = 1 << 20
        rng = np.random.default_rng(0)
        b, c = rng.standard_normal(n, dtype=np.float32), rng.standard_normal(n, dtype=np.float32)
        a = hetero.empty(n, device=dev)
        corpus.triad[(n,), (256,)](a, hetero.asarray(b, device=dev), hetero.asarray(c, device=dev), 3.0)
        # rtol/atol of a few ulp: nvcc contracts b + s*c into one FMA, NumPy rounds twice
        correct = bool(np.allclose(a.numpy(), b + 3.0 * c, rtol=1e-5, atol=1e-6))
    finally:
        nvrtc_compile.compile_cuda, cupy_runtime.CuPyRuntime._raw_module = saved  # type: ignore[assignment]
    ok = correct and stats.bundle_hits >= 1 and stats.builds == 0
    return {"status": "pass" if ok else "fail", "correct": correct, "bundle_hits": stats.bundle_hits,
            "builds": stats.builds, "entries": [e.target for e in manifest.entries]}


def torch_interop(dev: hetero.Device) -> dict[str, Any]:
    import torch

    if not torch.cuda.is_available():
        return {"status": "skip", "reason": f"torch {torch.__version__} has no CUDA here"}
    a = hetero.arange(1024, dtype=np.float32, device=dev)
    t = a.torch()
    t_ptr, a_ptr = t.data_ptr(), int(a.buffer.ptr)
    t += 1  # torch writes, hetero reads the same memory
    torch.cuda.synchronize()
    shared = bool(np.array_equal(a.numpy(), np.arange(1024, dtype=np.float32) + 1))
    source = torch.arange(512, dtype=torch.float32, device=f"cuda:{dev.index}")
    back = hetero.asarray(source)
    cai = a.__cuda_array_interface__["data"][0]
    ok = t_ptr == a_ptr and shared and int(back.buffer.ptr) == source.data_ptr() and cai == a_ptr
    return {"status": "pass" if ok else "fail", "hetero_to_torch_same_pointer": t_ptr == a_ptr,
            "torch_to_hetero_same_pointer": int(back.buffer.ptr) == source.data_ptr(),
            "writes_visible": shared, "cuda_array_interface_pointer": cai == a_ptr}


def timed(cupy: Any, fn: Callable[[], object], iters: int) -> float:
    """Seconds per call of ``fn`` on the device: CUDA events around ``iters`` calls."""
    start, end = cupy.cuda.Event(), cupy.cuda.Event()
    fn()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    end.synchronize()
    return cupy.cuda.get_elapsed_time(start, end) / 1e3 / iters


def interleaved(cupy: Any, candidates: dict[str, Callable[[], object]], iters: int, rounds: int) -> dict[str, float]:
    samples: dict[str, list[float]] = {k: [] for k in candidates}
    names = list(candidates)
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else reversed(names):
            samples[name].append(timed(cupy, candidates[name], iters))
    return {name: statistics.median(values) for name, values in samples.items()}


def bandwidth(dev: hetero.Device, quick: bool) -> dict[str, Any]:
    import cupy
    from kernels import corpus

    n = (16 if quick else 64) << 20
    a, b, c = (hetero.empty(n, device=dev) for _ in range(3))
    hetero.copyto(b, np.ones(n, np.float32))
    hetero.copyto(c, np.full(n, 2.0, np.float32))
    ca, cb, cc = (cupy.ndarray((n,), np.float32, memptr=x.buffer) for x in (a, b, c))  # the same memory
    raw = cupy.RawModule(code=TRIAD_CUDA)
    raw_triad = raw.get_function("triad")
    elementwise = cupy.ElementwiseKernel("float32 b, float32 c, float32 s", "float32 a", "a = b + s * c", "triad_ew")
    blocks = (n + 255) // 256
    times = interleaved(cupy, {
        "hetero": lambda: corpus.triad[(n,), (256,)](a, b, c, 3.0),
        "cupy_rawkernel": lambda: raw_triad((blocks,), (256,), (ca, cb, cc, np.float32(3.0), np.int64(n))),
        "cupy_elementwise": lambda: elementwise(cb, cc, np.float32(3.0), ca),
        "device_copy": lambda: ca.data.copy_from_device_async(cb.data, 4 * n),
    }, iters=10 if quick else 30, rounds=5 if quick else 11)
    ca.fill(0)
    corpus.triad[(n,), (256,)](a, b, c, 3.0)  # the timing rounds end with other kernels writing `a`
    correct = bool(cupy.allclose(ca, cb + 3.0 * cc))
    gbs = {k: (2 if k == "device_copy" else 3) * 4 * n / t / 1e9 for k, t in times.items()}
    host = np.ones(n, np.float32)
    copies = {"hetero_h2d": lambda: hetero.copyto(a, host), "cupy_h2d": lambda: ca.set(host),
              "hetero_d2h": lambda: hetero.copyto(host, a), "cupy_d2h": lambda: ca.get(out=host)}
    copy_times = {k: statistics.median(_host_timed(fn, 5 if quick else 11)) for k, fn in copies.items()}
    return {"elements": n, "correct": correct, "seconds": times, "GB_per_s": {k: round(v, 1) for k, v in gbs.items()},
            "hetero_vs_rawkernel": round(gbs["hetero"] / gbs["cupy_rawkernel"], 3),
            "hetero_vs_copy": round(gbs["hetero"] / gbs["device_copy"], 3),
            "host_copy_GB_per_s": {k: round(4 * n / t / 1e9, 2) for k, t in copy_times.items()},
            "status": "pass" if correct else "fail"}


def _host_timed(fn: Callable[[], object], rounds: int) -> list[float]:
    fn()
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        fn()
        hetero.synchronize()
        samples.append(time.perf_counter() - start)
    return samples


def launch_overhead(dev: hetero.Device, quick: bool) -> dict[str, Any]:
    """A 1-element kernel launched back to back: hetero, CuPy's RawKernel (the goal's peer), and the
    bare CuPy Function call hetero makes for its kernel (what hetero adds is the difference)."""
    import cupy

    x = hetero.zeros(1, device=dev)
    raw_touch = cupy.RawModule(code=TRIAD_CUDA).get_function("touch")
    pointer = np.uint64(x.buffer.ptr)
    launcher = touch[1]
    launcher(x)
    function = next(iter(touch._dispatch.values())).loaded  # CuPy's Function of hetero's touch
    extent = np.int64(1)  # touch's parameters: the array's pointer and its extent
    launchers = {"hetero": lambda: launcher(x), "cupy_rawkernel": lambda: raw_touch((1,), (1,), (pointer,)),
                 "hetero_function_call": lambda: function((1,), (1,), (pointer, extent))}
    calls = 2000 if quick else 20000
    per_call: dict[str, list[float]] = {k: [] for k in launchers}
    for name, fn in launchers.items():
        fn()
    dev.synchronize()
    for round_ in range(7):
        for name in launchers if round_ % 2 == 0 else reversed(list(launchers)):
            fn = launchers[name]
            start = time.perf_counter()
            for _ in range(calls):
                fn()
            per_call[name].append((time.perf_counter() - start) / calls)
            dev.synchronize()
    medians = {k: statistics.median(v) for k, v in per_call.items()}
    ratio = medians["hetero"] / medians["cupy_rawkernel"]
    expected = float(1 + len(launchers) + 7 * calls * len(launchers))
    counter = float(x.numpy()[0])
    return {"us_per_launch": {k: round(v * 1e6, 2) for k, v in medians.items()}, "ratio": round(ratio, 2),
            "hetero_added_us": round((medians["hetero"] - medians["hetero_function_call"]) * 1e6, 2),
            "goal": f"<= {LAUNCH_GOAL}x", "counter": counter, "counter_expected": expected,
            "status": "pass" if ratio <= LAUNCH_GOAL and counter == expected else "fail"}


def copy_paths(dev: hetero.Device, quick: bool) -> dict[str, Any]:
    """Host<->device copies by size: hetero's public copy (``hetero.copyto``) against CuPy's
    ``set``/``get``, and hetero's two paths alone (its pinned staging, the driver's direct copy
    from pageable memory), so the sizes where each wins are measured, not guessed."""
    import cupy

    runtime = dev.runtime
    staging = runtime._pinned()
    rows = []
    for mib in COPY_SIZES_MIB[:3] if quick else COPY_SIZES_MIB:
        n = (mib << 20) // 4
        a = hetero.empty(n, device=dev)
        ca = cupy.ndarray((n,), np.float32, memptr=a.buffer)
        host = np.ones(n, np.float32)

        def direct_d2h() -> None:
            a.buffer.copy_to_host_async(host.ctypes.data, host.nbytes)
            cupy.cuda.get_current_stream().synchronize()

        def direct_h2d() -> None:
            a.buffer.copy_from_host_async(host.ctypes.data, host.nbytes)
            cupy.cuda.get_current_stream().synchronize()

        def staged_h2d() -> None:
            staging.upload(a.buffer, host, 0, None)
            cupy.cuda.get_current_stream().synchronize()

        candidates = {"hetero_d2h": lambda: hetero.copyto(host, a), "cupy_d2h": lambda: ca.get(out=host),
                      "direct_d2h": direct_d2h, "staged_d2h": lambda: staging.download(host, a.buffer, 0, None),
                      "hetero_h2d": lambda: hetero.copyto(a, host), "cupy_h2d": lambda: ca.set(host),
                      "direct_h2d": direct_h2d, "staged_h2d": staged_h2d}
        rounds = 3 if mib >= 64 else 7
        seconds = {k: statistics.median(_host_timed(fn, rounds)) for k, fn in candidates.items()}
        hetero.copyto(a, np.arange(n, dtype=np.float32))
        back = np.zeros(n, np.float32)
        hetero.copyto(back, a)
        rows.append({"MiB": mib, "GB_per_s": {k: round(4 * n / t / 1e9, 2) for k, t in seconds.items()},
                     "hetero_d2h_vs_cupy": round(seconds["cupy_d2h"] / seconds["hetero_d2h"], 3),
                     "hetero_h2d_vs_cupy": round(seconds["cupy_h2d"] / seconds["hetero_h2d"], 3),
                     "round_trip_correct": bool(np.array_equal(back, np.arange(n, dtype=np.float32)))})
        del a, ca
    largest = rows[-1]
    ok = largest["hetero_d2h_vs_cupy"] >= D2H_GOAL and all(r["round_trip_correct"] for r in rows)
    return {"rows": rows, "goal": f"hetero d2h >= {D2H_GOAL}x CuPy get at {largest['MiB']} MiB",
            "status": "pass" if ok else "fail"}


def sticky_fault(dev: hetero.Device) -> dict[str, Any]:
    x = hetero.zeros(16, device=dev)
    try:
        scribble[16](x, 1 << 40)  # 4 TiB past the array: an unmapped address
        dev.synchronize()
        x.numpy()
    except hetero.ContextCorruptedError as exc:
        health = dev.health()
        ok = exc.code == 700 and health.state is hetero.HealthState.UNHEALTHY
        return {"status": "pass" if ok else "fail", "error": str(exc), "code": exc.code, "code_name": exc.code_name,
                "health": str(health)}
    except hetero.DeviceError as exc:
        return {"status": "fail", "error": f"{type(exc).__name__}: {exc}", "code": exc.code}
    return {"status": "fail", "error": "no error: the out-of-bounds write went unnoticed"}


def prepare() -> int:
    """Build the sm_90 bundle with nvcc on this (GPU-less) machine."""
    from kernels import corpus

    from hetero.compiler.build.bundle_build import KernelSpec, build_bundle, parse_targets
    from hetero.compiler.frontend.signature import parse_signature

    specs = [KernelSpec(getattr(corpus, k).py_func, (parse_signature(s)[1],)) for k, s in BUNDLED.items()]
    report = build_bundle(specs, parse_targets("cuda:sm_90"), BUNDLE, cache=None)
    print(f"wrote {BUNDLE}: {[e.signature + ' ' + e.target for e in report.manifest.entries]}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="smaller sizes and fewer rounds")
    parser.add_argument("--prepare", action="store_true", help="build the sm_90 bundle (needs nvcc, not a GPU)")
    args = parser.parse_args(argv)
    if args.prepare:
        return prepare()
    results: dict[str, Any] = {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                               "quick": args.quick, "checks": {}}
    try:
        dev = hetero.device("cuda:0")
    except hetero.HeteroError as exc:
        print(f"gpu_check: no CUDA device here, nothing checked: {exc}")
        results.update(status="no-cuda-device", reason=str(exc))
        _write(results, argv)
        return 0
    check(results, "device", lambda: device_facts(dev))
    check(results, "corpus_vs_numpy", lambda: corpus_tests(args.quick))
    check(results, "bundle_sm90_without_nvrtc", lambda: prebuilt_bundle(dev))
    check(results, "torch_interop_zero_copy", lambda: torch_interop(dev))
    check(results, "stream_triad_and_copies", lambda: bandwidth(dev, args.quick))
    check(results, "launch_overhead", lambda: launch_overhead(dev, args.quick))
    check(results, "copy_paths", lambda: copy_paths(dev, args.quick))
    check(results, "sticky_fault_700", lambda: sticky_fault(dev))  # last: it corrupts the context
    statuses = [c["status"] for c in results["checks"].values()]
    results["status"] = "fail" if "fail" in statuses else "pass"
    summary = ", ".join(f"{name}={found['status']}" for name, found in results["checks"].items())
    print(f"\ngpu_check: {results['status']} ({summary})")
    _write(results, argv)
    return 0 if results["status"] == "pass" else 1


def _write(results: dict[str, Any], argv: list[str] | None) -> None:
    """``$OUT/gpu_check.json`` when ``$OUT`` is set (the lent machine's output folder), else
    ``benchmarks/results/gpu_check.json``."""
    out = os.environ.get("OUT")
    if out:
        target = Path(out) / "gpu_check.json"
        target.write_text(json.dumps({"command": command_line("benchmarks.gpu_check", argv or sys.argv[1:]),
                                      **results}, indent=2, default=str))
    else:
        target = write_results("gpu_check", json.loads(json.dumps(results, default=str)),
                               command_line("benchmarks.gpu_check", argv or sys.argv[1:]))
    print(f"results: {target}")

if __name__ == "__main__":
    sys.exit(main())
