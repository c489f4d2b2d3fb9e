"""Training recovery across a Ray cluster: a node lost mid-run -> training going again, under
``hetero.ray.run``'s policy (only the lost node's worker restarts, elsewhere, from its checkpoint)
against the restart-every-worker policy that Ray Train applies on any worker failure.

    python -m benchmarks.ray_train                 # 3 rounds of each policy (about 3 minutes here)
    python -m benchmarks.ray_train --rounds 1

A two-node :class:`hetero.ray.LocalCluster` on 127.0.0.1 (``cpu,oneapi`` on the head node, ``opencl``
on the other) runs examples/train_digits.py as two workers, one per node; once the worker on the
second node has checkpointed step 1000 of 3000 (the run in its steady state: its spare actor placed),
that node is removed (its processes killed, as a machine lost) and
added back for the next round. The policies alternate (ABAB), so a slow spell of the machine lands on
both. Times are wall clock from the node's removal to:

- ``detect_s``: the failure seen (``fault_detected``);
- ``failed_worker_step_s``: the lost worker's first step on its new device (its ``recovered`` event);
- ``training_again_s``: every worker training again: the lost worker's first step under ``worker``
  (the other never stopped), the last restarted worker's first step under ``group``;
- ``worker_seconds_lost``: the sum over the restarted workers of the time from the loss to their first
  step (steps redone from a checkpoint not counted).

Both policies run with the same options: a spare actor (``standby``, the default) and ``--preload`` of
what the script imports at its start (default: scikit-learn's loader).

The baseline is Ray Train's policy, not Ray Train: ``ray.train`` does not import here (its extra
packages are absent: the reason is in the results), so the restart-everyone policy is this same runner
with ``restart="group"`` (each worker stopped and restarted from its own newest checkpoint). That is a
lower bound on Ray Train's recovery: its restart also tears down and re-creates the worker group's
placement group and re-runs its backend set-up. Goal: ``training_again_s`` of ``worker`` <= 0.5 x
``group``'s (issue 49).

Writes ``benchmarks/results/ray_train.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import threading
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks.harness import command_line, write_results

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "train_digits.py"
STEPS = 3000
EVERY = 50
#: The lost worker's newest checkpoint when its node goes: a run in its steady state (spare placed).
LOSE_AT = 1000
#: What train_digits.py imports at its start (scikit-learn's loader: ~2.5 s of a cold start here), for the
#: warm interpreters to import ahead: hetero-run's --preload, given to both policies alike.
PRELOAD = "sklearn.datasets,sklearn.model_selection"
GOAL = 0.5


def ray_train_status() -> str:
    """Whether ``ray.train`` imports here ('importable'), else why not."""
    try:
        import ray.train  # noqa: F401
    except ImportError as exc:
        return f"not importable: {exc}"
    return "importable"


def wait_until_idle(seconds: float = 30.0) -> None:
    """Until every hetero device of the cluster is free (the previous round's actors, killed
    asynchronously, may hold theirs a moment longer, and Ray would then place both workers on one node)."""
    import ray

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if ray.available_resources().get("hetero_device") == ray.cluster_resources().get("hetero_device"):
            return
        time.sleep(0.1)


def one_round(cluster: Any, policy: str, folder: Path, preload: Sequence[str]) -> dict[str, Any]:
    """One run under ``policy`` with the second node lost mid-run; the times from the loss."""
    import hetero.ray
    from hetero.checkpoint.store import CheckpointWarning, latest_step

    events_file = folder / "events.jsonl"
    head = cluster.nodes[0].node_id
    removed: dict[str, Any] = {}

    def events() -> list[dict[str, Any]]:
        return [json.loads(line) for line in events_file.read_text().splitlines()] if events_file.exists() else []

    def lose_the_other_node() -> None:
        warnings.filterwarnings("ignore", category=CheckpointWarning)  # one pruned while read here: harmless
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            started = {e["worker"]: e for e in events() if e["event"] == "worker_started"}
            away = [rank for rank, e in started.items() if e["node"] != head]
            if len(started) == 2 and away:
                step = latest_step(folder / "ckpt" / f"worker-{away[0]}")
                if step is not None and step >= LOSE_AT:
                    removed.update(rank=away[0], step=step, time=time.time())
                    cluster.remove_node(cluster.nodes[1])
                    return
            time.sleep(0.02)

    wait_until_idle()
    killer = threading.Thread(target=lose_the_other_node, daemon=True)
    killer.start()
    result = hetero.ray.run(EXAMPLE, ["--steps", str(STEPS), "--checkpoint-every", str(EVERY)], num_workers=2,
                            checkpoint_dir=folder / "ckpt", run_dir=folder, restart=policy, preload=preload, quiet=True)
    killer.join(5)
    if not removed or result.exit_code != 0:
        raise RuntimeError(f"round under {policy!r} did not go as planned: removed={removed}, exit "
                           f"{result.exit_code} ({result.reason}); events in {events_file}")
    log = events()
    seen = next(e["time"] for e in log if e["event"] == "fault_detected")
    recovered = {e["worker"]: e["time"] for e in log if e["event"] == "recovered"}
    return {
        "policy": policy, "lost_worker": removed["rank"], "lost_at_step": removed["step"],
        "restarted_workers": sorted(recovered),
        "detect_s": round(seen - removed["time"], 3),
        "failed_worker_step_s": round(recovered[removed["rank"]] - removed["time"], 3),
        "training_again_s": round(max(recovered.values()) - removed["time"], 3),
        "worker_seconds_lost": round(sum(t - removed["time"] for t in recovered.values()), 3),
        "restarts": {str(rank): w.restarts for rank, w in result.workers.items()},
        "warm": [e.get("warm") for e in log if e["event"] == "restart"],
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of each policy (default 3)")
    parser.add_argument("--preload", default=PRELOAD,
                        help=f"modules the workers' warm interpreters import ahead (default {PRELOAD!r}: what "
                             "train_digits.py imports at its start; '' for none)")
    args = parser.parse_args(argv)
    from hetero.ray import LocalCluster

    preload = [m for m in args.preload.split(",") if m]
    load_before = os.getloadavg()
    rounds: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="hetero-bench-ray-train-") as tmp, \
            LocalCluster(["cpu,oneapi", "opencl"]) as cluster:
        for index in range(args.rounds * 2):
            policy = ("worker", "group")[index % 2]
            folder = Path(tmp) / f"round-{index}-{policy}"
            row = one_round(cluster, policy, folder, preload)
            rounds.append(row)
            print(f"{policy:6s} lost worker {row['lost_worker']} at step {row['lost_at_step']}: seen "
                  f"{row['detect_s']:.2f} s, its first step {row['failed_worker_step_s']:.2f} s, every worker "
                  f"training again {row['training_again_s']:.2f} s after the loss", flush=True)
            cluster.add_node("opencl")
            cluster._cluster.wait_for_nodes()
    summary: dict[str, Any] = {}
    for policy in ("worker", "group"):
        rows = [r for r in rounds if r["policy"] == policy]
        summary[policy] = {key: statistics.median(r[key] for r in rows)
                           for key in ("detect_s", "failed_worker_step_s", "training_again_s", "worker_seconds_lost")}
    ratio = summary["worker"]["training_again_s"] / summary["group"]["training_again_s"]
    ratio_failed = summary["worker"]["failed_worker_step_s"] / summary["group"]["failed_worker_step_s"]
    ratio_lost = summary["worker"]["worker_seconds_lost"] / summary["group"]["worker_seconds_lost"]
    print(f"median: training again after {summary['worker']['training_again_s']:.2f} s (only the lost worker) vs "
          f"{summary['group']['training_again_s']:.2f} s (every worker): {ratio:.2f}x (goal <= {GOAL}x); the lost "
          f"worker's first step {ratio_failed:.2f}x; worker-seconds lost {ratio_lost:.2f}x")
    write_results("ray_train", {
        "workload": f"examples/train_digits.py --steps {STEPS} --checkpoint-every {EVERY}, 2 workers on a 2-node "
                    f"LocalCluster (cpu,oneapi | opencl), the second node removed once its worker checkpointed step "
                    f"{LOSE_AT}",
        "baseline": "restart every worker (Ray Train's policy on a worker failure), as hetero.ray.run(restart='group'); "
                    "ray.train " + ray_train_status(),
        "rounds": rounds, "median": summary, "ratio_training_again": round(ratio, 3),
        "ratio_failed_worker_step": round(ratio_failed, 3), "ratio_worker_seconds_lost": round(ratio_lost, 3),
        "preload": preload, "load_average_1_5_15": {"before": [round(x, 2) for x in load_before],
                                                    "after": [round(x, 2) for x in os.getloadavg()]},
        "goal_ratio": GOAL, "goal_met": ratio <= GOAL,
    }, command_line("benchmarks.ray_train", sys.argv[1:] if argv is None else list(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
