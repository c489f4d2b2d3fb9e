"""How fast hetero.guard resumes after a device fault, beside restarting the process and reloading
the same state from a disk checkpoint (what torchrun users do today).

    python -m benchmarks.guard_recovery [--quick] [--sizes 1MiB 64MiB 512MiB] [--runs N]
                                        [--from oneapi:0] [--to opencl:0] [--replayed 2]

Both sides run in fresh interpreters, one trial each, and do the same work after the fault:
put the state (one float32 array of SIZE) on the device ``--to``, replay ``--replayed`` steps
and run the failed step (a kernel that touches the whole state), then synchronize.

- *guard*: a training loop under ``hetero.guard(snapshot_every=10)`` on ``--from``, its standby
  (the failover device prepared in the background) ready when the fault comes; an injected
  ``lost`` fault (``FROM:launch:nth=K:lost``, the backend's own device-lost error) fails step
  ``10 + replayed``; latency = from the guard's detection (the recovery event's
  ``detected_monotonic``) to that step done on ``--to`` (classify, quarantine, pick, restore the
  host snapshot, replay, run).
- *guard-cold*: the same with ``standby=False``: the recovery also discovers the other
  backends, opens ``--to`` and loads its libraries (Numba, for ``cpu``).
- *restart*: from spawning a new Python process (what a launcher does once it has seen the
  crash: its detection time is not counted) to the same step done: interpreter start, imports,
  device open, ``np.load`` of the checkpoint (written beforehand; the page cache is warm, which
  favours this side), upload, replay, run.

Goal: guard at least 10x faster than restart-and-reload at 64 MiB.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, format_bytes, parse_bytes, write_results
from benchmarks.kernel_bench import load_average

ROOT = Path(__file__).resolve().parent.parent
SNAPSHOT_EVERY = 10
GOAL_SIZE, GOAL_RATIO = 64 << 20, 10.0



@hetero.kernel
def step_kernel(w):
    """One training step's worth of work: touch the whole state."""
    i = hetero.global_id(0)
    if i < w.shape[0]:
        w[i] = w[i] * 0.999 + 0.001


def _guard_child(args: argparse.Namespace) -> dict[str, Any]:
    source, target = hetero.device(args.source), hetero.device(args.target)
    n = args.size // 4
    state = {"w": hetero.asarray(np.full(n, 0.5, np.float32), device=source, copy=True)}
    fault_step = SNAPSHOT_EVERY + args.replayed

    def train_step() -> None:
        w = state["w"]
        step_kernel[w.shape[0]](w)

    resumed = snapshot_s = None
    standby = args.child == "guard"
    with hetero.guard(state, snapshot_every=SNAPSHOT_EVERY, devices=[source, target], standby=standby) as g, \
            hetero.fault.inject(f"{source.name}:launch:nth={fault_step + 1}:lost"):
        if standby and g.wait_standby() is not target:  # a fault some time into the run: the standby is ready
            raise RuntimeError(f"the standby did not prepare {target.name}")
        for step in range(fault_step + 1):
            g.run(train_step)
            if step == fault_step:
                g.device.synchronize()
                resumed = time.monotonic()
                snapshot_s = g.last_snapshot.seconds if g.last_snapshot is not None else None
    (event,) = g.recoveries
    assert resumed is not None and event["device"] == target.name
    return {"latency_s": resumed - event["detected_monotonic"], "recovery_event_s": event["recovery_seconds"],
            "steps_replayed": event["steps_replayed"], "snapshot_s": snapshot_s}


def _restart_child(args: argparse.Namespace) -> dict[str, Any]:
    device = hetero.device(args.target)
    w = hetero.asarray(np.load(args.checkpoint), device=device, copy=True)
    for _ in range(args.replayed + 1):
        step_kernel[w.shape[0]](w)
    device.synchronize()
    return {"done_monotonic": time.monotonic()}


def _spawn(args: argparse.Namespace, role: str, size: int, extra: list[str], env: dict[str, str]) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.guard_recovery", "--child", role, "--sizes", str(size),
               "--from", args.source, "--to", args.target, "--replayed", str(args.replayed), *extra]
    start = time.monotonic()
    result = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=900, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"{role} child failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    report: dict[str, Any] = json.loads(result.stdout.strip().splitlines()[-1])
    if role == "restart":
        report["latency_s"] = report.pop("done_monotonic") - start
    return report


def _warm_child(args: argparse.Namespace) -> dict[str, Any]:
    """Build the step kernel for both devices once (disk cache), so neither side pays a cold compile."""
    for name in (args.source, args.target):
        w = hetero.asarray(np.ones(4, np.float32), device=name, copy=True)
        step_kernel[4](w)
        w.numpy()
    return {}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 MiB and 64 MiB, 2 runs each")
    parser.add_argument("--sizes", nargs="+", default=["1MiB", "64MiB", "512MiB"])
    parser.add_argument("--runs", type=int, default=3, help="trials per side and size (default 3)")
    parser.add_argument("--from", dest="source", default="oneapi:0", help="device that fails (default oneapi:0)")
    parser.add_argument("--to", dest="targets", nargs="+", default=["opencl:0", "cpu"],
                        help="devices the work moves to, one series each (default opencl:0 cpu)")
    parser.add_argument("--replayed", type=int, default=2, help="steps since the snapshot when the fault hits")
    parser.add_argument("--child", choices=["guard", "guard-cold", "restart", "warm"], help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        args.size, args.target = parse_bytes(args.sizes[0]), args.targets[0]
        report = {"guard": _guard_child, "guard-cold": _guard_child, "restart": _restart_child,
                  "warm": _warm_child}[args.child](args)
        print(json.dumps(report))
        return 0
    if args.quick:
        args.sizes, args.runs = ["1MiB", "64MiB"], 2
    sizes = [parse_bytes(s) for s in args.sizes]
    load_before = load_average()
    work = Path(tempfile.mkdtemp(prefix="hetero-guard-bench-"))
    env = {**os.environ, "HETERO_STATE_DIR": str(work / "state"), "HETERO_LOG": "ERROR"}
    roles = ("guard", "guard-cold", "restart")
    progress = Progress(len(sizes) * len(args.targets) * args.runs * len(roles))
    rows = []
    for size in sizes:
        checkpoint = work / f"state-{size}.npy"
        np.save(checkpoint, np.full(size // 4, 0.5, np.float32))
        for target in args.targets:
            spawn = argparse.Namespace(**{**vars(args), "target": target})
            _spawn(spawn, "warm", 4, [], env)
            samples: dict[str, list[dict[str, Any]]] = {role: [] for role in roles}
            for run in range(args.runs):
                for role in roles if run % 2 == 0 else reversed(roles):
                    progress.step(f"{role} {args.source} -> {target} {format_bytes(size)} run {run + 1}")
                    samples[role].append(_spawn(spawn, role, size, ["--checkpoint", str(checkpoint)], env))
            median = {role: statistics.median(s["latency_s"] for s in samples[role]) for role in roles}
            guard_s, cold_s, restart_s = median["guard"], median["guard-cold"], median["restart"]
            rows.append({"target": target, "size_bytes": size, "guard_median_s": guard_s,
                         "guard_cold_median_s": cold_s, "restart_median_s": restart_s, "speedup": restart_s / guard_s,
                         "speedup_cold": restart_s / cold_s, "runs": samples})
            print(f"{args.source} -> {target:<9} {format_bytes(size):>8}  guard {guard_s * 1e3:7.1f} ms "
                  f"(no standby {cold_s * 1e3:7.1f} ms)   restart+reload {restart_s * 1e3:7.1f} ms   "
                  f"{restart_s / guard_s:5.1f}x ({restart_s / cold_s:4.1f}x) faster")
        checkpoint.unlink()
    verdicts = {}
    for target in args.targets:
        row = next((r for r in rows if r["size_bytes"] == GOAL_SIZE and r["target"] == target), None)
        verdicts[target] = ("not measured (64 MiB not in --sizes)" if row is None
                            else f"{'pass' if row['speedup'] >= GOAL_RATIO else 'FAIL'} ({row['speedup']:.1f}x)")
    print(f"goal: guard >= {GOAL_RATIO:.0f}x faster than restart+reload at 64 MiB: "
          + ", ".join(f"-> {target} {verdict}" for target, verdict in verdicts.items()))
    path = write_results("guard_recovery", {
        "source": args.source, "targets": args.targets, "snapshot_every": SNAPSHOT_EVERY, "replayed": args.replayed,
        "runs": args.runs, "rows": rows, "goal": {"size_bytes": GOAL_SIZE, "min_speedup": GOAL_RATIO,
                                                  "verdicts": verdicts}, "load_average_start": load_before,
    })
    print(f"load average at start {load_before}, results: {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
