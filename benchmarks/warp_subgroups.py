"""CUDA's warp operations on OpenCL sub-groups against the same kernels through work-group memory,
on each device with 32-wide sub-groups (Intel's runtimes: ``oneapi:0`` here).

    python -m benchmarks.warp_subgroups [--devices oneapi:0] [--quick]

Three sides, each in a child process of its own with an empty kernel cache, one after the other:
``HETERO_SUBGROUPS=auto`` (the default: votes on sub-groups, shuffles too except on CPU devices),
``all`` (shuffles on sub-groups on CPU devices too) and ``off`` (everything through work-group
memory). The figures chose ``auto``'s rule: on Intel's CPU runtime a 32-wide shuffle is much
slower than the exchange through work-group memory, while a ballot is much faster. Kernels: a warp sum (five ``shfl_down_sync``
per element of 2^22 floats, written with ``hetero.compat.cuda``), a ballot count (one
``ballot_sync`` per element), and cuda-samples' reduce4-6, whose last steps are warp shuffles
(through the CUDA C front end; skipped where the samples are absent). Times are warm launches
including the wait, median of several. Writes ``benchmarks/results/warp_subgroups.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from typing import Any

import numpy as np

from benchmarks.harness import command_line, measure, write_results

N = 1 << 22
THREADS = 256


def _child(device: str, repeats: int) -> dict[str, Any]:
    import hetero
    from benchmarks.compat_cuda import reduction_bandwidth
    from hetero.compat import cuda

    @cuda.jit
    def warp_sum(x, out):
        i = cuda.grid(1)
        v = x[i]
        for offset in (16, 8, 4, 2, 1):
            v += cuda.shfl_down_sync(0xFFFFFFFF, v, offset)
        if cuda.laneid == 0:
            out[i // 32] = v

    @cuda.jit
    def ballot_count(x, out):
        i = cuda.grid(1)
        bits = cuda.ballot_sync(0xFFFFFFFF, x[i] > 0.5)
        if cuda.laneid == 0:
            out[i // 32] = cuda.popc(bits)

    target = hetero.device(device).runtime.kernel_target()
    result: dict[str, Any] = {"subgroups32": target is not None and "subgroups32" in target.features}
    with hetero.use_device(device):
        x = cuda.to_device(np.random.default_rng(0).random(N).astype(np.float32))
        sums = cuda.device_array(N // 32, np.float32)
        counts = cuda.device_array(N // 32, np.int32)
        blocks = N // THREADS

        def run_sum() -> object:
            warp_sum[blocks, THREADS](x, sums)
            return hetero.synchronize()

        def run_ballot() -> object:
            ballot_count[blocks, THREADS](x, counts)
            return hetero.synchronize()

        for name, fn in (("warp_sum", run_sum), ("ballot_count", run_ballot)):
            seconds = measure(fn, repeats=repeats, warmup=2)["median_s"]
            result[name] = {"seconds": seconds, "gb_per_s": N * 4 / seconds / 1e9}
        host = x.copy_to_host().reshape(-1, 32)
        result["warp_sum_correct"] = bool(np.allclose(sums.copy_to_host(), host.sum(axis=1), rtol=1e-5))
        result["ballot_count_correct"] = bool((counts.copy_to_host() == (host > 0.5).sum(axis=1)).all())
    reduction = reduction_bandwidth(device, repeats)
    result["cuda_samples_reduction"] = reduction
    return result


MODES = ("auto", "all", "off")


def _side(device: str, repeats: int, mode: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="hetero-bench-subgroups-") as cache:
        env = dict(os.environ, HETERO_CACHE_DIR=cache, HETERO_SUBGROUPS=mode)
        done = subprocess.run([sys.executable, "-m", "benchmarks.warp_subgroups", "--child", device, "--repeats", str(repeats)],
                              env=env, capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"HETERO_SUBGROUPS={mode} on {device} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def _figures(side: dict[str, Any]) -> dict[str, dict[str, float]]:
    found = {k: side[k] for k in ("warp_sum", "ballot_count")}
    if isinstance(side["cuda_samples_reduction"], dict):
        found.update({k: side["cuda_samples_reduction"][k] for k in ("reduce4", "reduce5", "reduce6")})
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="+", default=None, help="hetero devices (default: every device with 32-wide sub-groups)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--quick", action="store_true", help="3 repeats")
    parser.add_argument("--child", default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    repeats = 3 if args.quick else args.repeats
    if args.child:
        print(json.dumps(_child(args.child, repeats)))
        return 0
    import hetero

    names = args.devices or [d.name for d in hetero.devices()
                             if (t := d.runtime.kernel_target()) is not None and "subgroups32" in t.features]
    if not names:
        print("no device here has 32-wide sub-groups: nothing to compare")
    rows: dict[str, Any] = {}
    for device in names:
        sides = {}
        for mode in MODES:
            print(f"{device}: HETERO_SUBGROUPS={mode} ...", flush=True)
            sides[mode] = _side(device, repeats, mode)
        figures = {mode: _figures(side) for mode, side in sides.items()}
        speedup = {mode: {k: figures["off"][k]["seconds"] / v["seconds"] for k, v in figures[mode].items()}
                   for mode in ("auto", "all")}
        correct = all(side[f"{k}_correct"] for side in sides.values() for k in ("warp_sum", "ballot_count"))
        rows[device] = {"sides": sides, "speedup_vs_off": speedup, "correct": correct}
        print(f"  {'GB/s':13} " + "  ".join(f"{mode:>8}" for mode in MODES) + "   auto/off  all/off")
        for k in figures["off"]:
            print(f"  {k:13} " + "  ".join(f"{figures[mode][k]['gb_per_s']:8.2f}" for mode in MODES)
                  + f"   x{speedup['auto'][k]:6.2f}  x{speedup['all'][k]:6.2f}")
        if not correct:
            print("  WRONG RESULTS: see the JSON")
    path = write_results("warp_subgroups", {"n": N, "threads": THREADS, "devices": rows},
                         command_line("benchmarks.warp_subgroups", list(argv) if argv is not None else sys.argv[1:]))
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
