"""Numba-CUDA kernels through ``hetero.compat.cuda`` against the same kernels under Numba's CUDA
simulator (``NUMBA_ENABLE_CUDASIM=1``: the only way Numba runs a CUDA kernel without a GPU), and
what the front end costs per kernel.

    python -m benchmarks.compat_cuda [--devices cpu oneapi:0 opencl:0] [--quick]

The kernels are :mod:`benchmarks.compat_cuda_kernels` (vector add, numba-cuda's shared-memory
matmul), one source for both: the simulator runs in a child process with the variable set; hetero
runs them with ``numba.cuda`` naming :mod:`hetero.compat.cuda`. Times are warm (compiled) launches
including the wait for the result, median of several. Front-end cost: ``frontend`` is Python ->
IR (lowering), ``first launch`` a process's first launch of the kernel (lowering, code generation,
the vendor compiler, the wait), each in a fresh process: ``cold`` with an empty compile cache,
``cached`` once the disk cache holds the kernel. The CUDA C front end's cost is libclang's parse
plus the lowering to IR, per cuda-samples kernel (``cuda_c_front_end``). cuda-samples' reduce0-6
run through it on each device: GB/s of one pass over 2^22 ints, each against the best of them
(reduce4-6 end with warp shuffles, emulated through work-group memory off CUDA and HIP; the GPU
comparison with the same source under NVRTC needs a lent GPU). Writes
``benchmarks/results/compat_cuda.json``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from benchmarks.harness import command_line, measure, write_results

VECADD_N = 4096
MATMUL_N = 48


def _inputs() -> dict[str, Any]:
    rng = np.random.default_rng(0)
    return {"a": rng.random(VECADD_N), "b": rng.random(VECADD_N),
            "x": rng.random((MATMUL_N, MATMUL_N)).astype(np.float32), "y": rng.random((MATMUL_N, MATMUL_N)).astype(np.float32)}


def _cases(cuda: Any, kernels: Any, data: dict[str, Any]) -> dict[str, Callable[[], object]]:
    a, b = cuda.to_device(data["a"]), cuda.to_device(data["b"])
    c = cuda.device_array_like(a)
    x, y = cuda.to_device(data["x"]), cuda.to_device(data["y"])
    z = cuda.device_array((MATMUL_N, MATMUL_N), dtype=np.float32)
    blocks = math.ceil(MATMUL_N / kernels.TPB)

    def vecadd() -> object:
        kernels.vecadd[(VECADD_N + 127) // 128, 128](a, b, c)
        return c.copy_to_host()

    def matmul() -> object:
        kernels.fast_matmul[(blocks, blocks), (kernels.TPB, kernels.TPB)](x, y, z)
        return z.copy_to_host()

    return {"vecadd": vecadd, "fast_matmul": matmul}


def simulator_times(repeats: int) -> dict[str, float]:
    """In a child process under NUMBA_ENABLE_CUDASIM=1: the warm median of each case."""
    env = {**os.environ, "NUMBA_ENABLE_CUDASIM": "1"}
    out = subprocess.run([sys.executable, "-m", "benchmarks.compat_cuda", "--simulator", "--repeats", str(repeats)],
                         env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _simulator_main(repeats: int) -> None:
    from numba import cuda

    from benchmarks import compat_cuda_kernels as kernels

    cases = _cases(cuda, kernels, _inputs())
    print(json.dumps({name: measure(fn, repeats=repeats, warmup=1)["median_s"] for name, fn in cases.items()}))


def front_end_costs(device: str) -> dict[str, dict[str, float]]:
    """Per kernel, each in a fresh process: lowering alone and the first launch, with an empty
    compile cache (``cold``) and again once the disk cache holds the kernel (``cached``)."""
    out: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="hetero-compat-bench-") as cache:
        env = {**os.environ, "HETERO_CACHE_DIR": cache}
        for run in ("cold", "cached"):
            done = subprocess.run([sys.executable, "-m", "benchmarks.compat_cuda", "--front-end", device], env=env,
                                  capture_output=True, text=True, check=True)
            for name, costs in json.loads(done.stdout.strip().splitlines()[-1]).items():
                out.setdefault(name, {}).update({f"{run}_{key}": value for key, value in costs.items()})
    return out


def _front_end_main(device: str) -> None:
    from benchmarks.numba_cuda_alias import install

    install()
    import hetero
    from benchmarks import compat_cuda_kernels as kernels
    from hetero.compat import cuda
    from hetero.compiler.frontend import python as frontend

    results: dict[str, dict[str, float]] = {}
    with hetero.use_device(device):
        cases = _cases(cuda, kernels, _inputs())
        for name, run in cases.items():
            start = time.perf_counter()
            frontend.lower_kernel(getattr(kernels, name).py_func, _types(name))
            lowered = time.perf_counter() - start
            start = time.perf_counter()
            run()
            results[name] = {"frontend_s": lowered, "first_launch_s": time.perf_counter() - start}
    print(json.dumps(results))


#: cuda-samples kernels for the CUDA C front end's cost: (file under Samples/, kernel name).
C_SAMPLES = {
    "vectorAdd": ("0_Introduction/vectorAdd/vectorAdd.cu", "vectorAdd"),
    "matrixMul<32>": ("0_Introduction/matrixMul/matrixMul.cu", "MatrixMulCUDA<32>"),
    "simpleAtomicIntrinsics": ("0_Introduction/simpleAtomicIntrinsics/simpleAtomicIntrinsics.cu", "testKernel"),
    "transposeDiagonal": ("6_Performance/transpose/transpose.cu", "transposeDiagonal"),
}
SAMPLES_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "..", "shared", "peers",
                           "cuda-samples", "Samples")


def c_front_end_costs() -> dict[str, dict[str, float]] | str:
    """Per cuda-samples kernel: libclang's parse plus the lowering to IR, the first time in this
    process and again (the front end keeps nothing between two parses: both are its whole cost)."""
    from hetero.compiler.frontend import cuda_c

    if not os.path.isdir(SAMPLES_DIR):
        return f"skipped: cuda-samples are not at {SAMPLES_DIR}"
    try:
        cuda_c._clang()
    except Exception as exc:  # noqa: BLE001 (reported, not fatal: the rest of the benchmark stands)
        return f"skipped: {exc}"
    out: dict[str, dict[str, float]] = {}
    for label, (relative, name) in C_SAMPLES.items():
        path = os.path.join(SAMPLES_DIR, relative)
        with open(path) as source:
            code = source.read()
        times = []
        for _ in range(2):
            start = time.perf_counter()
            cuda_c.Source(code, path).kernel(name)
            times.append(time.perf_counter() - start)
        out[label] = {"parse_and_lower_first_s": times[0], "parse_and_lower_again_s": times[1]}
    return out


REDUCTION_N = 1 << 22


def reduction_bandwidth(device: str, repeats: int) -> dict[str, Any] | str:
    """cuda-samples' reduce0-6<int> through the CUDA C front end on ``device``: GB/s of one pass
    over REDUCTION_N ints (the sample's launch sizes and template instances), and each against
    the best of them."""
    import hetero
    from hetero.compat.cuda import RawKernel

    path = os.path.join(SAMPLES_DIR, "2_Concepts_and_Techniques/reduction/reduction_kernel.cu")
    if not os.path.exists(path):
        return f"skipped: cuda-samples are not at {SAMPLES_DIR}"
    with open(path) as source:
        code = source.read()
    n, threads = REDUCTION_N, 256
    out: dict[str, Any] = {}
    with hetero.use_device(device):
        data = hetero.asarray(np.random.default_rng(0).integers(0, 256, n).astype(np.int32))
        for which in range(7):
            arguments = {4: f"int, {threads}", 5: f"int, {threads}", 6: f"int, {threads}, true"}.get(which, "int")
            kernel = RawKernel(code, f"reduce{which}<{arguments}>", path=path)
            blocks = (n + threads - 1) // threads if which < 3 else (n + threads * 2 - 1) // (threads * 2)
            if which == 6:
                blocks = min(64, blocks)  # reduction.cpp's maxBlocks
            partial = hetero.zeros(blocks, hetero.i32)

            def run(kernel: Any = kernel, blocks: int = blocks, partial: Any = partial) -> object:
                kernel((blocks,), (threads,), (data, partial, np.uint32(n)), shared_mem=threads * 4)
                return hetero.synchronize()

            seconds = measure(run, repeats=repeats, warmup=2)["median_s"]
            out[f"reduce{which}"] = {"seconds": seconds, "gb_per_s": n * 4 / seconds / 1e9}
    best = max(v["gb_per_s"] for v in out.values())
    for value in out.values():
        value["vs_best"] = value["gb_per_s"] / best
    return out


def _types(name: str) -> tuple[Any, ...]:
    from hetero.core.types import ArrayType, f32, f64

    if name == "vecadd":
        return (ArrayType(f64, 1),) * 3
    return (ArrayType(f32, 2),) * 3


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="+", default=None, help="hetero devices (default: every device that runs kernels)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 repeats")
    parser.add_argument("--simulator", action="store_true", help=argparse.SUPPRESS)  # the child processes
    parser.add_argument("--front-end", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else args.repeats
    if args.simulator:
        _simulator_main(repeats)
        return 0
    if args.front_end:
        _front_end_main(args.front_end)
        return 0
    from benchmarks.numba_cuda_alias import install

    install()
    import hetero
    from benchmarks import compat_cuda_kernels as kernels
    from hetero.compat import cuda

    print("Numba's CUDA simulator (child process) ...", flush=True)
    simulated = simulator_times(max(1, repeats // 2))
    names = args.devices or [d.name for d in hetero.devices() if d.runtime.kernel_target() is not None]
    rows: dict[str, Any] = {}
    for device in names:
        print(f"hetero.compat.cuda on {device} ...", flush=True)
        with hetero.use_device(device):
            cases = _cases(cuda, kernels, _inputs())
            warm = {name: measure(fn, repeats=repeats, warmup=2)["median_s"] for name, fn in cases.items()}
        rows[device] = {
            "warm_s": warm, "speedup_vs_simulator": {k: simulated[k] / warm[k] for k in warm},
            "front_end": front_end_costs(device), "cuda_samples_reduction": reduction_bandwidth(device, repeats),
        }
        reduction = rows[device]["cuda_samples_reduction"]
        if isinstance(reduction, dict):
            print("  cuda-samples reduction (int, 2^22): " + ", ".join(
                f"{k} {v['gb_per_s']:.2f} GB/s ({v['vs_best']:.2f}x best)" for k, v in reduction.items()))
        for name in warm:
            costs = rows[device]["front_end"][name]
            print(f"  {name:12} {warm[name] * 1e3:9.3f} ms  simulator {simulated[name] * 1e3:10.1f} ms  "
                  f"x{simulated[name] / warm[name]:8.0f}   frontend {costs['cold_frontend_s'] * 1e3:6.1f} ms, first launch "
                  f"cold {costs['cold_first_launch_s'] * 1e3:7.1f} ms, cached {costs['cached_first_launch_s'] * 1e3:6.1f} ms")
    c_costs = c_front_end_costs()
    print("CUDA C front end (libclang parse + lowering to IR):")
    if isinstance(c_costs, str):
        print(f"  {c_costs}")
    else:
        for label, costs in c_costs.items():
            print(f"  {label:24} first {costs['parse_and_lower_first_s'] * 1e3:7.1f} ms, "
                  f"again {costs['parse_and_lower_again_s'] * 1e3:7.1f} ms")
    path = write_results("compat_cuda", {
        "sizes": {"vecadd_n": VECADD_N, "matmul_n": MATMUL_N}, "simulator_warm_s": simulated, "devices": rows,
        "cuda_c_front_end": c_costs,
    }, command_line("benchmarks.compat_cuda", list(argv) if argv is not None else sys.argv[1:]))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
