"""Training recovery across a Ray cluster: a node lost mid-run -> training going again, under
``hetero.ray.run``'s policy (only the lost node's worker restarts, elsewhere, from its checkpoint)
against the restart-every-worker policy that Ray Train applies on any worker failure.

    python -m benchmarks.ray_train                 # 2 rounds of each policy (about 8 minutes here)
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

The baseline is Ray Train itself (``ray[train]``, a dev dependency): a ``ray.train.torch.TorchTrainer``
with ``ScalingConfig(num_workers=2, resources_per_worker={"hetero_device": 1}, placement_strategy="SPREAD")``
(one worker per node; each leases a hetero device of its node, as hetero.ray's actors do, and runs
train_digits.py's training under ``hetero.guard``), ``FailureConfig(max_failures=2)`` and
``RunConfig(storage_path=<the round's tmp dir>)``; every ``EVERY`` steps each rank's weights go into the
checkpoint given to ``ray.train.report``, and a restarted worker resumes from ``ray.train.get_checkpoint()``.
Its ``detect_s`` is the worker group torn down (the surviving worker's process gone), its
``worker_seconds_lost`` counts both workers (Ray Train restarts both). The three policies alternate
(worker, group, ray_train, ...). Where ``ray.train`` does not import, only the first two run, and the
restart-everyone policy of this runner (``restart="group"``) is the baseline (the reason is in the
results). Goal: ``training_again_s`` of ``worker`` <= 0.5 x Ray Train's (issue 49).

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
#: What a Ray Train worker asks for: one hetero device of its node (no CPU slot: the nodes have one CPU each,
#: and after the loss both workers must fit on the head node, as under the other policies).
RAY_TRAIN_RESOURCES = {"CPU": 0, "hetero_device": 1}


def ray_train_status() -> str:
    """Whether ``ray.train`` imports here ('importable'), else why not."""
    try:
        import ray.train  # noqa: F401
    except ImportError as exc:
        return f"not importable: {exc}"
    return "importable"


def ray_version() -> str:
    import ray

    return str(ray.__version__) + (", Train V2" if os.environ.get("RAY_TRAIN_V2_ENABLED", "1") != "0" else "")


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


# --- The Ray Train baseline: the same training under ray.train.torch.TorchTrainer ------------------------------

#: Restarts Ray Train may make of the worker group in one run (one node loss needs one).
RAY_TRAIN_MAX_FAILURES = 2


def _note(path: str, **event: Any) -> None:
    """Append one event (a line of JSON) to the round's events file, from a Ray Train worker."""
    with open(path, "a") as file:
        file.write(json.dumps({**event, "time": time.time()}) + "\n")


def ray_train_loop(config: dict[str, Any]) -> None:
    """One Ray Train worker: examples/train_digits.py's training (its model, steps, seed and
    ``hetero.guard``), on a hetero device of the worker's node (leased as hetero.ray leases one: the node's
    ``HETERO_BACKENDS`` says which it has), checkpointing every ``every`` steps through
    ``ray.train.report(..., checkpoint=...)`` (each rank's weights in the one checkpoint directory) and
    resuming from ``ray.train.get_checkpoint()``."""
    import ray
    import ray.train

    import hetero
    from hetero.ray.lease import acquire
    from hetero.ray.placement import Request

    sys.path.insert(0, str(ROOT / "examples"))
    from digits_model import Trainer, initial_weights, load_digits, to_device

    context = ray.train.get_context()
    rank = context.get_world_rank()
    lease = acquire(Request())  # held for the process's life (the flock goes with it)
    os.environ["HETERO_DEVICE"] = lease.device.name
    device = lease.device
    node = str(ray.get_runtime_context().get_node_id())
    events, steps, every, seed = config["events"], config["steps"], config["every"], config.get("seed", 0)
    data = load_digits(seed)
    checkpoint = ray.train.get_checkpoint()
    first = 0
    state: dict[str, Any] | None = None
    if checkpoint is not None:
        with checkpoint.as_directory() as folder:
            saved = Path(folder) / f"rank-{rank}.npz"
            if saved.exists():
                with np_load(saved) as arrays:
                    first = int(arrays["__step__"])
                    state = {k: hetero.asarray(arrays[k], device=device) for k in arrays.files if k != "__step__"}
    if state is None:
        state = to_device(initial_weights(seed), device)
    _note(events, event="worker_started", worker=rank, node=node, pid=os.getpid(), device=device.name,
          resume_step=first if checkpoint is not None else None)
    trainer = Trainer(data, state, seed=seed, lr=0.2, batch=64)
    with hetero.guard(state, snapshot_every=10, device=device, start_step=first) as guard:
        for step in range(first, steps):
            guard.run(trainer.step, step)
            if step == first and checkpoint is not None:
                _note(events, event="recovered", worker=rank, step=step + 1)
            if (step + 1) % every == 0:
                with tempfile.TemporaryDirectory() as folder:
                    np_save(Path(folder) / f"rank-{rank}.npz", __step__=step + 1,
                            **{k: v.numpy() for k, v in state.items()})
                    ray.train.report({"step": step + 1},
                                     checkpoint=ray.train.Checkpoint.from_directory(folder))
                _note(events, event="checkpointed", worker=rank, step=step + 1)
        hetero.synchronize()


def np_load(path: Path) -> Any:
    import numpy as np

    return np.load(path)


def np_save(path: Path, **arrays: Any) -> None:
    import numpy as np

    np.savez(path, **arrays)


def ray_train_config(folder: Path) -> dict[str, Any]:
    return {"events": str(folder / "events.jsonl"), "steps": STEPS, "every": EVERY}


def ray_train_round(cluster: Any, folder: Path) -> dict[str, Any]:
    """One run under Ray Train (``TorchTrainer``, ``FailureConfig(max_failures=...)``) with the second node
    lost once its worker reported the checkpoint of step ``LOSE_AT``; the same times from the loss."""
    from ray.train import CheckpointConfig, FailureConfig, RunConfig, ScalingConfig
    from ray.train.torch import TorchTrainer

    folder.mkdir(parents=True, exist_ok=True)
    events_file = folder / "events.jsonl"
    head = cluster.nodes[0].node_id
    removed: dict[str, Any] = {}

    def events() -> list[dict[str, Any]]:
        return [json.loads(line) for line in events_file.read_text().splitlines()] if events_file.exists() else []

    def gone(pid: int) -> bool:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            return False
        return False

    def lose_the_other_node() -> None:
        deadline = time.monotonic() + 180
        while time.monotonic() < deadline:
            log = events()
            started = {e["worker"]: e for e in log if e["event"] == "worker_started"}
            away = [rank for rank, e in started.items() if e["node"] != head]
            if len(started) == 2 and away:
                done = [e["step"] for e in log if e["event"] == "checkpointed" and e["worker"] == away[0]]
                if done and max(done) >= LOSE_AT:
                    survivor = next(e for rank, e in started.items() if rank != away[0])
                    removed.update(rank=away[0], step=max(done), time=time.time())
                    cluster.remove_node(cluster.nodes[1])
                    # The failure seen: Ray Train tears the worker group down (the survivor's process ends).
                    while time.monotonic() < deadline and not gone(survivor["pid"]):
                        time.sleep(0.01)
                    removed["seen"] = time.time()
                    return
            time.sleep(0.02)

    wait_until_idle()
    killer = threading.Thread(target=lose_the_other_node, daemon=True)
    killer.start()
    trainer = TorchTrainer(
        ray_train_loop, train_loop_config=ray_train_config(folder),
        scaling_config=ScalingConfig(num_workers=2, use_gpu=False, resources_per_worker=RAY_TRAIN_RESOURCES,
                                     placement_strategy="SPREAD"),
        run_config=RunConfig(name="digits", storage_path=str(folder / "storage"),
                             failure_config=FailureConfig(max_failures=RAY_TRAIN_MAX_FAILURES),
                             checkpoint_config=CheckpointConfig(num_to_keep=2)))
    error = None
    try:
        result = trainer.fit()
        error = result.error
    except Exception as exc:  # noqa: BLE001 - reported below
        error = exc
    killer.join(5)
    log = events()
    starts = [e for e in log if e["event"] == "worker_started"]
    if not removed or error is not None or len(starts) < 4:
        raise RuntimeError(f"Ray Train round did not go as planned: removed={removed}, error={error!r}; "
                           f"events in {events_file}")
    recovered = {e["worker"]: e["time"] for e in log if e["event"] == "recovered" and e["time"] > removed["time"]}
    again = [e for e in starts if e["time"] > removed["time"]]
    return {
        "policy": "ray_train", "lost_worker": removed["rank"], "lost_at_step": removed["step"],
        "restarted_workers": sorted(recovered),
        "detect_s": round(removed["seen"] - removed["time"], 3),
        "failed_worker_step_s": round(recovered[removed["rank"]] - removed["time"], 3),
        "training_again_s": round(max(recovered.values()) - removed["time"], 3),
        "worker_seconds_lost": round(sum(t - removed["time"] for t in recovered.values()), 3),
        "resumed_at_step": sorted({e["resume_step"] for e in again}),
        "devices_after": sorted(e["device"] for e in again),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=2, help="rounds of each policy (default 2)")
    parser.add_argument("--preload", default=PRELOAD,
                        help=f"modules the workers' warm interpreters import ahead (default {PRELOAD!r}: what "
                             "train_digits.py imports at its start; '' for none)")
    args = parser.parse_args(argv)
    from hetero.ray import LocalCluster

    preload = [m for m in args.preload.split(",") if m]
    status = ray_train_status()
    policies = ("worker", "group", "ray_train") if status == "importable" else ("worker", "group")
    load_before = os.getloadavg()
    rounds: list[dict[str, Any]] = []
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="hetero-bench-ray-train-") as tmp, \
            LocalCluster(["cpu,oneapi", "opencl"]) as cluster:
        for index in range(args.rounds * len(policies)):
            policy = policies[index % len(policies)]
            folder = Path(tmp) / f"round-{index}-{policy}"
            row = (ray_train_round(cluster, folder) if policy == "ray_train"
                   else one_round(cluster, policy, folder, preload))
            rounds.append(row)
            print(f"{policy:9s} lost worker {row['lost_worker']} at step {row['lost_at_step']}: seen "
                  f"{row['detect_s']:.2f} s, its first step {row['failed_worker_step_s']:.2f} s, every worker "
                  f"training again {row['training_again_s']:.2f} s after the loss", flush=True)
            cluster.add_node("opencl")
            cluster._cluster.wait_for_nodes()
    keys = ("detect_s", "failed_worker_step_s", "training_again_s", "worker_seconds_lost")
    summary = {policy: {key: statistics.median(r[key] for r in rounds if r["policy"] == policy) for key in keys}
               for policy in policies}
    baseline = "ray_train" if "ray_train" in policies else "group"
    described = {
        "ray_train": f"Ray Train: ray.train.torch.TorchTrainer (Ray {ray_version()}), ScalingConfig(num_workers=2, "
                     f"resources_per_worker={RAY_TRAIN_RESOURCES}, placement_strategy='SPREAD'), "
                     f"FailureConfig(max_failures={RAY_TRAIN_MAX_FAILURES}), RunConfig(storage_path=<tmp dir>), "
                     "checkpoints through ray.train.report, resumed from ray.train.get_checkpoint()",
        "group": "restart every worker (Ray Train's policy on a worker failure), as hetero.ray.run(restart='group')",
    }
    comparisons = []
    for against in ([baseline, "group"] if baseline == "ray_train" else [baseline]):
        row = {"policy": "worker", "baseline": against, "baseline_is": described[against]}
        for key, name in (("training_again_s", "ratio_training_again"), ("failed_worker_step_s", "ratio_failed_worker_step"),
                          ("worker_seconds_lost", "ratio_worker_seconds_lost")):
            row[name] = round(summary["worker"][key] / summary[against][key], 3)
        comparisons.append(row)
    if "ray_train" in policies:  # the restart-group policy of this runner against Ray Train's own restart
        row = {"policy": "group", "baseline": "ray_train", "baseline_is": described["ray_train"]}
        for key, name in (("training_again_s", "ratio_training_again"), ("failed_worker_step_s", "ratio_failed_worker_step"),
                          ("worker_seconds_lost", "ratio_worker_seconds_lost")):
            row[name] = round(summary["group"][key] / summary["ray_train"][key], 3)
        comparisons.append(row)
    ratio = comparisons[0]["ratio_training_again"]
    for row in comparisons:
        print(f"median: {row['policy']} vs {row['baseline']}: training again {summary[row['policy']]['training_again_s']:.2f}"
              f" vs {summary[row['baseline']]['training_again_s']:.2f} s: {row['ratio_training_again']:.2f}x; the lost "
              f"worker's first step {row['ratio_failed_worker_step']:.2f}x; worker-seconds lost "
              f"{row['ratio_worker_seconds_lost']:.2f}x")
    print(f"goal (only the lost worker vs {baseline}): {ratio:.2f}x <= {GOAL}x: {ratio <= GOAL}; "
          f"{time.monotonic() - started:.0f} s in all")
    write_results("ray_train", {
        "workload": f"examples/train_digits.py's training, {STEPS} steps, a checkpoint every {EVERY}, 2 workers on a "
                    f"2-node LocalCluster (cpu,oneapi | opencl), the second node removed once its worker checkpointed "
                    f"step {LOSE_AT}; policies alternate ({', '.join(policies)})",
        "policies": {"worker": "hetero.ray.run(restart='worker'): only the lost worker restarts (warm spare, --preload)",
                     "group": described["group"] + " (warm spare, --preload)", "ray_train": described["ray_train"]}
        if "ray_train" in policies else {"worker": "hetero.ray.run(restart='worker')", "group": described["group"]},
        "baseline": baseline, "ray_train": status,
        "ray_train_detect_s": "the worker group torn down: the surviving worker's process gone (Ray Train stops every "
                              "worker once it sees the failure)",
        "rounds": rounds, "median": summary, "comparisons": comparisons,
        "ratio_training_again": ratio, "ratio_failed_worker_step": comparisons[0]["ratio_failed_worker_step"],
        "ratio_worker_seconds_lost": comparisons[0]["ratio_worker_seconds_lost"],
        "preload": preload, "load_average_1_5_15": {"before": [round(x, 2) for x in load_before],
                                                    "after": [round(x, 2) for x in os.getloadavg()]},
        "seconds": round(time.monotonic() - started, 1),
        "goal_ratio": GOAL, "goal_against": baseline, "goal_met": ratio <= GOAL,
    }, command_line("benchmarks.ray_train", sys.argv[1:] if argv is None else list(argv)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
