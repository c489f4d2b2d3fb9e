"""Resuming a torch training loop after its worker is killed mid-epoch: ``hetero-run`` with
``hetero.resumable`` (``examples/mnist_digits_hetero.py``: checkpoints between batches, resumed at
the batch) against ``torchrun --max-restarts 1`` with the epoch snapshots torchrun's guide
describes (``benchmarks/mnist_torchrun.py``: resumed at the start of the epoch). Part of
``python -m benchmarks.torch_guard``; alone:

    python -m benchmarks.torch_resume [--resume-runs N] [--resume-repeat R] [--resume-epochs E] [--kill-at F]

Each run trains the digits Net for ``--resume-epochs`` epochs of ``24 * --resume-repeat`` batches; this driver
watches the run's trace (one line per trained batch) and SIGKILLs the training process when it
has trained ``--kill-at`` of epoch 2 (as the OOM killer or a segfault would), once. Reported per
launcher, median over ``--resume-runs`` alternating runs: *time lost*, from the kill until the restarted
worker has trained the batch it was killed after (restart + load + the batches trained again);
*to first batch* (restart + load alone); and the batches trained twice. Also: a checkpoint's size
on disk and how long saving one takes (the loop's wait for ``save_async``, and a whole
synchronous ``hetero.checkpoint.store.save``), beside ``torch.save`` of the epoch snapshot. Goal: hetero-run's
time lost at most half torchrun's (reported, never asserted).
"""

from __future__ import annotations

import argparse
import difflib
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

GOAL_RATIO = 0.5
ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "mnist_digits_hetero.py"
GUARD_EXAMPLE = ROOT / "examples" / "mnist_digits_guard.py"
PEER = ROOT / "benchmarks" / "mnist_torchrun.py"
LAUNCHERS = ("hetero-run", "torchrun")


def command(kind: str, workdir: Path, trace: Path, args: argparse.Namespace) -> list[str]:
    common = ["--epochs", str(args.epochs), "--repeat", str(args.repeat), "--log-interval", "100000",
              "--trace", str(trace)]
    if kind == "hetero-run":
        # --preload: the warm standby a restart goes into has torch and the data set's loader imported
        return [sys.executable, "-m", "hetero.launcher.cli", "--devices", "cpu", "--max-restarts", "1",
                "--preload", "torch,torch.utils.data,sklearn.datasets", "--run-dir", str(workdir / "run"), str(EXAMPLE),
                *common, "--checkpoint-every", str(args.every)]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "1", "--max-restarts",
            "1", str(PEER), *common, "--snapshot", str(workdir / "snapshot.pt")]


def rows_of(trace: Path) -> list[dict[str, Any]]:
    try:
        text = trace.read_text()
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines() if line.endswith("}")]


def run_once(kind: str, workdir: Path, args: argparse.Namespace) -> dict[str, Any]:
    workdir.mkdir(parents=True)
    trace = workdir / "trace.jsonl"
    kill_batch = int(24 * args.repeat * args.kill_at)
    env = {**os.environ, "HETERO_STATE_DIR": str(workdir / "state"), "PYTHONUNBUFFERED": "1"}
    for name in ("HETERO_CHECKPOINT_DIR", "HETERO_FAULTS"):
        env.pop(name, None)
    proc = subprocess.Popen(command(kind, workdir, trace, args), env=env, cwd=workdir, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline, killed = time.monotonic() + args.timeout, None
    try:
        while killed is None and proc.poll() is None and time.monotonic() < deadline:
            for row in rows_of(trace):
                if (row["epoch"], row["batch"]) == (2, kill_batch):
                    os.kill(row["pid"], signal.SIGKILL)
                    killed = {"time": time.time(), "pid": row["pid"]}
                    break
            time.sleep(0.005)
        _, err = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    if proc.returncode != 0 or killed is None:
        raise RuntimeError(f"{kind}: exit {proc.returncode}, killed {killed}:\n{err[-3000:]}")
    rows = rows_of(trace)
    before = [r for r in rows if r["pid"] == killed["pid"]]
    after = [r for r in rows if r["pid"] != killed["pid"] and r["time"] > killed["time"]]
    at = (before[-1]["epoch"], before[-1]["batch"])  # the last batch the killed worker trained
    caught_up = next(r for r in after if (r["epoch"], r["batch"]) >= at)
    return {"launcher": kind, "killed_after": list(at), "time_lost_s": caught_up["time"] - killed["time"],
            "to_first_batch_s": after[0]["time"] - killed["time"], "resumed_at": [after[0]["epoch"], after[0]["batch"]],
            "trained_twice": sum((r["epoch"], r["batch"]) <= at for r in after), "batches": len(rows),
            "checkpoint_bytes": _checkpoint_bytes(kind, workdir)}


def _checkpoint_bytes(kind: str, workdir: Path) -> int | None:
    if kind == "torchrun":
        snapshot = workdir / "snapshot.pt"
        return snapshot.stat().st_size if snapshot.exists() else None
    found = sorted((workdir / "run" / "checkpoints").glob("*/step-*.hckpt"))
    return sum(f.stat().st_size for f in found[-1].iterdir()) if found else None


def save_times(repeats: int = 20) -> dict[str, Any]:
    """One checkpoint of the example's model, optimizer and scheduler (after a step, so the optimizer
    has state): hetero.resumable's wait between batches, a whole hetero.checkpoint.store.save, torch.save."""
    import torch

    sys.path.insert(0, str(ROOT / "examples"))
    from mnist_digits import Net

    import hetero

    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    torch.nn.functional.nll_loss(model(torch.randn(4, 1, 8, 8)), torch.tensor([0, 1, 2, 3])).backward()
    optimizer.step()
    state = {"model": model, "optimizer": optimizer, "scheduler": scheduler}
    with tempfile.TemporaryDirectory(prefix="hetero-torch-resume-") as scratch:
        run = hetero.resumable(state, every=1, directory=Path(scratch) / "resumable")
        for _ in run.range(1):
            for _ in run.enumerate(range(repeats + 1)):
                pass
        hetero.checkpoint.store.wait()
        tree = {key: value.state_dict() for key, value in state.items()}
        sync, torch_save = [], []
        for step in range(repeats):
            began = time.perf_counter()
            hetero.checkpoint.store.save(tree, step, Path(scratch) / "sync")
            sync.append(time.perf_counter() - began)
            began = time.perf_counter()
            torch.save(tree, Path(scratch) / "snapshot.pt")
            torch_save.append(time.perf_counter() - began)
    return {"resumable_wait_s": run.save_seconds / run.saves, "checkpoint_save_s": statistics.median(sync),
            "torch_save_s": statistics.median(torch_save), "saves": run.saves}


def loop_overhead(pairs: int = 9, every: int = 50, epochs: int = 3) -> dict[str, Any]:
    """``epochs`` epochs of the example's loop (24 batches of 64, one torch thread) with ``enumerate``
    against ``hetero.resumable``'s ``run.enumerate`` checkpointing every ``every`` batches (none
    within these short epochs at the default 50) and at each epoch's end, the last background write waited for inside the sample: median of
    back-to-back pairs (benchmarks.harness.paired_ratios)."""
    import torch
    import torch.nn.functional as F

    from benchmarks.harness import paired_ratios

    sys.path.insert(0, str(ROOT / "examples"))
    from mnist_digits import Net, datasets

    import hetero

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    model = Net()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    loader = torch.utils.data.DataLoader(datasets(1)[0], batch_size=64, shuffle=True)

    def step(data: Any, target: Any) -> None:
        optimizer.zero_grad()
        F.nll_loss(model(data), target).backward()
        optimizer.step()

    def plain() -> None:
        for _ in range(epochs):
            for _, (data, target) in enumerate(loader):
                step(data, target)

    try:
        with tempfile.TemporaryDirectory(prefix="hetero-torch-resume-") as scratch:
            run = hetero.resumable({"model": model, "optimizer": optimizer, "scheduler": scheduler}, every=every,
                                   directory=scratch)
            numbers = iter(run.range(1, 10**9))

            def resumable() -> None:
                for _ in range(epochs):
                    next(numbers)
                    for _, (data, target) in run.enumerate(loader):
                        step(data, target)
                hetero.checkpoint.store.wait()

            plain(), resumable()  # warm-up
            ratios = paired_ratios(plain, resumable, pairs)
    finally:
        torch.set_num_threads(threads)
    return {"overhead_paired_median": statistics.median(ratios) - 1.0, "pairs": pairs, "every": every, "epochs": epochs,
            "batches_per_epoch": len(loader), "saves_per_epoch": len(loader) // every + 1}


def lines_changed(before: Path = ROOT / "examples" / "mnist_digits.py", after: Path = EXAMPLE) -> dict[str, Any]:
    """How many lines of the plain script the hetero one changes, below their docstrings (difflib:
    a changed line counts once, as in a review)."""
    def body(path: Path) -> list[str]:
        lines = path.read_text().splitlines()
        end = next(i for i, line in enumerate(lines) if i and line.endswith('"""'))  # the module docstring's end
        return [line for line in lines[end + 1:] if line.strip()]

    old, new = body(before), body(after)
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    changed = sum(max(i2 - i1, j2 - j1) for tag, i1, i2, j1, j2 in matcher.get_opcodes() if tag != "equal")
    return {"changed": changed, "lines_before": len(old), "lines_after": len(new),
            "files": [str(before.relative_to(ROOT)), str(after.relative_to(ROOT))]}


def measure(args: argparse.Namespace) -> dict[str, Any]:
    results: dict[str, list[dict[str, Any]]] = {kind: [] for kind in LAUNCHERS}
    with tempfile.TemporaryDirectory(prefix="hetero-torch-resume-") as scratch:
        for round_ in range(args.runs):
            for kind in LAUNCHERS if round_ % 2 == 0 else tuple(reversed(LAUNCHERS)):
                print(f"  resume: {kind} run {round_ + 1}/{args.runs}", file=sys.stderr, flush=True)
                results[kind].append(run_once(kind, Path(scratch) / f"{kind}-{round_}", args))
    summary = {kind: {key: statistics.median(r[key] for r in runs)
                      for key in ("time_lost_s", "to_first_batch_s", "trained_twice")}
               | {"checkpoint_bytes": runs[-1]["checkpoint_bytes"]} for kind, runs in results.items()}
    ratio = summary["hetero-run"]["time_lost_s"] / summary["torchrun"]["time_lost_s"]
    return {"settings": {k: getattr(args, k) for k in ("runs", "repeat", "epochs", "every", "kill_at")}
            | {"batches_per_epoch": 24 * args.repeat},
            "summary": summary, "ratio_time_lost": ratio, "goal_ratio": GOAL_RATIO, "goal_met": ratio <= GOAL_RATIO,
            "save": save_times(), "loop_overhead": loop_overhead(every=args.every),
            "lines_changed": {"resumable": lines_changed(), "guard": lines_changed(after=GUARD_EXAMPLE)},
            "runs": results}


def report(found: dict[str, Any]) -> list[str]:
    lines = [f"mid-epoch kill ({found['settings']['batches_per_epoch']} batches an epoch, killed after "
             f"{found['settings']['kill_at']:.0%} of epoch 2; median of {found['settings']['runs']} runs):"]
    for kind, row in found["summary"].items():
        lines.append(f"  {kind:<10} time lost {row['time_lost_s']:.2f} s, to first batch {row['to_first_batch_s']:.2f} s, "
                     f"{row['trained_twice']:.0f} batch(es) trained twice, checkpoint {row['checkpoint_bytes'] or 0} bytes")
    save = found["save"]
    lines.append(f"  saving one checkpoint: resumable waits {save['resumable_wait_s'] * 1e3:.1f} ms between batches "
                 f"(written in the background); hetero.checkpoint.store.save {save['checkpoint_save_s'] * 1e3:.1f} ms; "
                 f"torch.save {save['torch_save_s'] * 1e3:.1f} ms")
    over = found["loop_overhead"]
    lines.append(f"  run.enumerate against enumerate, {over['epochs']} epochs of {over['batches_per_epoch']} batches with "
                 f"{over['saves_per_epoch']} checkpoints each, written: {over['overhead_paired_median'] * 100:+.1f}% "
                 f"(median of {over['pairs']} pairs, 1 torch thread)")
    for diff in found["lines_changed"].values():
        lines.append(f"  lines changed: {diff['changed']} of {diff['lines_before']} non-blank lines below the docstring "
                     f"({diff['files'][0]} -> {diff['files'][1]})")
    lines.append(f"goal: hetero-run's time lost <= {GOAL_RATIO}x torchrun's: "
                 f"{'PASS' if found['goal_met'] else 'FAIL'} ({found['ratio_time_lost']:.2f}x)")
    return lines


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--resume-runs", dest="runs", type=int, default=3,
                        help="mid-epoch resume: runs of each launcher, alternating (default 3)")
    parser.add_argument("--resume-repeat", dest="repeat", type=int, default=20,
                        help="mid-epoch resume: epochs of 24 * R batches (default 20: a few seconds an epoch, so the "
                             "work lost, not the restart, is what the epoch checkpoint costs)")
    parser.add_argument("--resume-epochs", dest="epochs", type=int, default=3)
    parser.add_argument("--resume-every", dest="every", type=int, default=50,
                        help="hetero.resumable's batches between checkpoints (default 50)")
    parser.add_argument("--kill-at", type=float, default=0.75, help="fraction of epoch 2 trained when killed (0.75)")
    parser.add_argument("--resume-timeout", dest="timeout", type=float, default=300, help="seconds one run may take")


def main(argv: list[str] | None = None) -> int:
    from benchmarks.harness import write_results

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    found = measure(parser.parse_args(argv))
    print("\n".join(report(found)))
    print(f"results: {write_results('torch_resume', found)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
