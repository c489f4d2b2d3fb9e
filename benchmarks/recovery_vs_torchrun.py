"""Time to recover from a worker crash: ``hetero-run`` (restarts only the failed worker, from
its checkpoint) against ``torchrun --max-restarts 1`` (restarts every worker) running the
same script. Goal: hetero-run takes at most half torchrun's time (reported, never enforced).

    python -m benchmarks.recovery_vs_torchrun [--quick] [--runs N] [--nproc N] [--state-mib M]

Each run starts ``--nproc`` workers of this file's worker mode. Every worker holds
``--state-mib`` MiB of state (a hetero array on its device), steps with a short sleep,
heartbeats, and saves a ``hetero.checkpoint.store`` every few steps. Rank 0 writes the wall time and
SIGKILLs itself once, at ``--crash-at``; the restarted rank 0 loads its newest checkpoint (onto
whatever device it is given) and logs when its first step is done. Recovery time = that
moment minus the crash time, split into: until the script starts running again (detection,
the launcher's decision, a new interpreter or a standby taking over), ``import hetero``,
opening the device, loading the checkpoint, the first step.
Also recorded: whether the ranks that did not crash were restarted too (torchrun restarts
them), and the longest pause in their steps.

``hetero-run`` restarts into a warm standby (an interpreter it started ahead, hetero already
imported: :class:`hetero.launcher.worker_main.WarmStandby`); ``hetero-run-cold`` is ``hetero-run
--no-standby``, which starts a fresh interpreter, to show what the standby is worth.

Writes ``benchmarks/results/recovery_vs_torchrun.json``.
"""

from __future__ import annotations

import os
import time

_T_IMPORTED = time.time()  # worker mode: when this module began to run

import argparse
import itertools
import json
import signal
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

GOAL_RATIO = 0.5
REPO_ROOT = Path(__file__).resolve().parent.parent
LAUNCHERS = ("hetero-run", "hetero-run-cold", "torchrun")


# -- worker mode (run by the launchers) ------------------------------------------------------
def _process_start_wall() -> float:
    """When this process was created, as wall time (from /proc; ~10 ms resolution). Falls back
    to when this module began to run."""
    try:
        fields = Path("/proc/self/stat").read_text().rpartition(")")[2].split()
        started_ticks = int(fields[19])  # field 22 of stat(5); the first two fields are cut off
        uptime = float(Path("/proc/uptime").read_text().split()[0])
        return time.time() - (uptime - started_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return _T_IMPORTED


def worker(args: argparse.Namespace) -> int:
    import numpy as np

    rank = int(os.environ.get("RANK", "0"))
    log_dir = Path(args.log_dir)
    log = open(log_dir / f"rank-{rank}.jsonl", "a", buffering=1)  # noqa: SIM115 - open until SIGKILL or exit

    def note(event: str, **fields: Any) -> None:
        log.write(json.dumps({"event": event, "time": time.time(), "pid": os.getpid(), **fields}) + "\n")

    note("start", process_start=_process_start_wall(), module_start=_T_IMPORTED)
    import hetero

    note("imported")
    device = hetero.device()
    directory = os.environ.get("HETERO_CHECKPOINT_DIR") or str(Path(args.ckpt_dir) / f"worker-{rank}")
    note("device", device=device.name)
    loaded = hetero.checkpoint.store.load(directory, device=device)
    if loaded is None:
        elements = args.state_mib * (1 << 20) // 4
        state: dict[str, Any] = {"w": hetero.asarray(np.full(elements, rank, np.float32), device=device), "step": -1}
    else:
        state = loaded[0]
    note("loaded", step=state["step"], mib=state["w"].nbytes / (1 << 20))
    for step in range(state["step"] + 1, args.steps):
        time.sleep(args.step_time)
        state["step"] = step
        hetero.heartbeat(step)
        if (step + 1) % args.ckpt_every == 0:
            hetero.checkpoint.store.save(state, step, directory, keep=2)
        note("step", step=step)
        if rank == 0 and step == args.crash_at:
            try:
                os.close(os.open(log_dir / "crashed", os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                continue  # crashed once already: this is the restarted worker
            note("crash", step=step)
            os.kill(os.getpid(), signal.SIGKILL)
    return 0


# -- driver ------------------------------------------------------------------------------------
def launcher_command(kind: str, nproc: int, run_dir: Path, worker_args: list[str]) -> list[str]:
    script = str(Path(__file__).resolve())
    if kind.startswith("hetero-run"):
        cold = ["--no-standby"] if kind == "hetero-run-cold" else []
        return [sys.executable, "-m", "hetero.launcher.cli", "--nproc", str(nproc), "--max-restarts", "1", *cold,
                "--run-dir", str(run_dir), script, *worker_args]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(nproc),
            "--max-restarts", "1", script, *worker_args]


def run_once(kind: str, args: argparse.Namespace, workdir: Path) -> dict[str, Any]:
    log_dir, run_dir = workdir / "logs", workdir / "run"
    log_dir.mkdir(parents=True)
    worker_args = ["--worker", "--log-dir", str(log_dir), "--ckpt-dir", str(workdir / "ckpt"),
                   "--steps", str(args.steps), "--crash-at", str(args.crash_at), "--ckpt-every", str(args.ckpt_every),
                   "--state-mib", str(args.state_mib), "--step-time", str(args.step_time)]
    env = {**os.environ, "HETERO_STATE_DIR": str(workdir / "state"), "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")]))}
    env.pop("HETERO_CHECKPOINT_DIR", None)
    started = time.time()
    proc = subprocess.run(launcher_command(kind, args.nproc, run_dir, worker_args), env=env, cwd=workdir,
                          capture_output=True, text=True, timeout=args.timeout, check=False)
    wall = time.time() - started
    if proc.returncode != 0:
        raise RuntimeError(f"{kind} exited with {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}")
    events = {rank: [json.loads(line) for line in (log_dir / f"rank-{rank}.jsonl").read_text().splitlines()]
              for rank in range(args.nproc)}
    return {"launcher": kind, "wall_s": wall, **analyse(events, args.steps)}


def analyse(events: dict[int, list[dict[str, Any]]], steps: int) -> dict[str, Any]:
    """Recovery time and its parts, from the ranks' event logs."""
    rank0 = events[0]
    crash = next(i for i, e in enumerate(rank0) if e["event"] == "crash")
    after = rank0[crash + 1:]
    start = next(e for e in after if e["event"] == "start")
    first_step = next(e for e in after if e["event"] == "step")
    moment = {name: next(e for e in after if e["event"] == name)["time"] for name in ("imported", "device", "loaded")}
    t_crash = rank0[crash]["time"]
    result: dict[str, Any] = {
        "recovery_s": first_step["time"] - t_crash,
        "parts_s": {
            "detect_and_start": start["module_start"] - t_crash,
            "import_hetero": moment["imported"] - start["module_start"],
            "device_open": moment["device"] - moment["imported"],
            "checkpoint_load": moment["loaded"] - moment["device"],
            "first_step": first_step["time"] - moment["loaded"],
        },
        "warm_start": start["process_start"] < t_crash,  # the new incarnation's process existed before the crash
        "resumed_from_step": next(e for e in after if e["event"] == "loaded")["step"],
        "crashed_at_step": rank0[crash]["step"],
        "device_before": next(e for e in reversed(rank0[:crash]) if e["event"] == "device")["device"],
        "device_after": next(e for e in after if e["event"] == "device")["device"],
    }
    others = {}
    for rank, log in events.items():
        if rank == 0:
            continue
        times = [e["time"] for e in log if e["event"] == "step"]
        gaps = [b - a for a, b in itertools.pairwise(times)]
        others[str(rank)] = {"restarted": sum(e["event"] == "start" for e in log) > 1,
                             "longest_pause_s": max(gaps, default=0.0),
                             "finished": any(e["event"] == "step" and e["step"] == steps - 1 for e in log)}
    result["other_ranks"] = others
    return result


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--log-dir", help=argparse.SUPPRESS)
    parser.add_argument("--ckpt-dir", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true", help="2 runs of each launcher")
    parser.add_argument("--runs", type=int, default=5, help="runs of each launcher, alternating (default 5)")
    parser.add_argument("--nproc", type=int, default=2, help="workers per run (default 2)")
    parser.add_argument("--state-mib", type=int, default=64, help="state per worker in MiB (default 64)")
    parser.add_argument("--steps", type=int, default=30, help="steps per worker (default 30)")
    parser.add_argument("--crash-at", type=int, default=20,
                        help="step after which rank 0 crashes (default 20: a few seconds in, in steady state)")
    parser.add_argument("--ckpt-every", type=int, default=5, help="checkpoint every N steps (default 5)")
    parser.add_argument("--step-time", type=float, default=0.1, help="seconds one step sleeps (default 0.1)")
    parser.add_argument("--timeout", type=float, default=300, help="seconds one launcher run may take")
    parser.add_argument("--launchers", nargs="+", choices=LAUNCHERS, default=list(LAUNCHERS))
    args = parser.parse_args(argv)
    if args.worker:
        return worker(args)
    if args.nproc < 1 or not 0 <= args.crash_at < args.steps - 1:
        parser.error("need --nproc >= 1 and 0 <= --crash-at < --steps - 1")
    return drive(args)


def drive(args: argparse.Namespace) -> int:
    from benchmarks.harness import Progress, command_line, write_results

    runs = 2 if args.quick else args.runs
    progress = Progress(runs * len(args.launchers))
    results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in args.launchers}
    with tempfile.TemporaryDirectory(prefix="hetero-recovery-") as scratch:
        for round_ in range(runs):
            order = args.launchers if round_ % 2 == 0 else list(reversed(args.launchers))
            for kind in order:
                progress.step(f"{kind} run {round_ + 1}/{runs}")
                results[kind].append(run_once(kind, args, Path(scratch) / f"{kind}-{round_}"))
    summary = {kind: _summarise(samples) for kind, samples in results.items()}
    ratios = {}
    if "torchrun" in summary:
        torchrun = summary["torchrun"]["recovery_median_s"]
        ratios = {f"{kind}/torchrun": row["recovery_median_s"] / torchrun for kind, row in summary.items()
                  if kind != "torchrun"}
    ratio = ratios.get("hetero-run/torchrun")
    _print_table(summary, ratios, args)
    payload = {
        "description": "seconds from a worker's SIGKILL to its first step done after the restart",
        "settings": {k: getattr(args, k) for k in ("nproc", "state_mib", "steps", "crash_at", "ckpt_every", "step_time")}
                    | {"runs": runs},
        "summary": summary, "ratios": ratios, "ratio_hetero_over_torchrun": ratio, "goal_ratio": GOAL_RATIO,
        "goal_met": None if ratio is None else ratio <= GOAL_RATIO, "runs": results,
    }
    path = write_results("recovery_vs_torchrun", payload,
                         command_line("benchmarks.recovery_vs_torchrun", sys.argv[1:]))
    print(f"\nwrote {path.relative_to(REPO_ROOT)}")
    return 0


def _summarise(samples: list[dict[str, Any]]) -> dict[str, Any]:
    recovery = [s["recovery_s"] for s in samples]
    parts = {name: statistics.median(s["parts_s"][name] for s in samples) for name in samples[0]["parts_s"]}
    return {"recovery_median_s": statistics.median(recovery), "recovery_min_s": min(recovery),
            "recovery_max_s": max(recovery), "parts_median_s": parts,
            "other_ranks_restarted": any(o["restarted"] for s in samples for o in s["other_ranks"].values()),
            "other_ranks_longest_pause_median_s": statistics.median(
                max((o["longest_pause_s"] for o in s["other_ranks"].values()), default=0.0) for s in samples),
            "wall_median_s": statistics.median(s["wall_s"] for s in samples),
            "devices": sorted({f"{s['device_before']} -> {s['device_after']}" for s in samples}),
            "warm_starts": sum(s["warm_start"] for s in samples)}


def _print_table(summary: dict[str, dict[str, Any]], ratios: dict[str, float], args: argparse.Namespace) -> None:
    print(f"\nTime to recover: rank 0 of {args.nproc} SIGKILLed with {args.state_mib} MiB of state (median)")
    names = list(next(iter(summary.values()))["parts_median_s"])
    widths = {n: max(len(n), 6) + 2 for n in names}
    print(f"{'launcher':<16}{'recovery':>10}" + "".join(f"{n:>{widths[n]}}" for n in names) + f"{'others restarted':>18}")
    for kind, row in summary.items():
        parts = "".join(f"{row['parts_median_s'][n]:>{widths[n] - 1}.3f}s" for n in names)
        print(f"{kind:<16}{row['recovery_median_s']:>9.3f}s{parts}{row['other_ranks_restarted']!s:>18}")
    for name, value in ratios.items():
        goal = ""
        if name == "hetero-run/torchrun":
            goal = f" (goal <= {GOAL_RATIO}: {'met' if value <= GOAL_RATIO else 'NOT met'})"
        print(f"{name} = {value:.2f}{goal}")


if __name__ == "__main__":
    sys.exit(main())
