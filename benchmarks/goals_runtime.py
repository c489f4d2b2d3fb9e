"""The goals of the runtime benchmarks (placement, splitting, fault injection, the guard, the
launcher, inference, torch), read from their results files: one adapter per file, each a
function from the file's JSON to :class:`~benchmarks.goal.Goal` rows. ``goals.py`` holds the
registry.

The thresholds are the ones each benchmark's docstring states; where a results file records
its threshold, that one is used.
"""

from __future__ import annotations

import dataclasses

from typing import Any

from benchmarks.goal import PERFORMANCE, Goal, Status, at_least, at_most, below, count, duration, missing_devices, percent, ratio, size, worst

Results = dict[str, Any]

PLACEMENT_MAX_S = 20e-6
SPLIT_MIN_RATIO = 0.95  # "no loss": a split at least as fast as the best device alone, within noise
INJECTION_ARMED_MAX_S = 1e-6
GUARD_MAX_OVERHEAD = 0.05
#: state size -> minimum restart/guard ratio (benchmarks/guard_recovery.py's GOALS)
GUARD_RECOVERY_MIN = {64 << 20: 10.0, 512 << 20: 5.0}
LAUNCHER_MAX_ADDED_S = 0.5
TORCHRUN_MAX_RATIO = 0.5
INFERENCE_MAX_RATIO = 1.1
INFERENCE_GOAL_CASE = (256, 64)  # hidden, batch
INFERENCE_MIN_THROUGHPUT = 0.95
INFERENCE_FAILOVER_MAX_S = 0.100


def placement(data: Results) -> list[Goal]:
    decide = [row for row in data["rows"] if str(row["case"]).startswith("decide/")]
    devices = data.get("config", {}).get("devices", 16)
    what = f"placement decision, {devices} devices, each policy"
    if not decide:
        return [Goal("placement", what, "not measured", f"<= {PLACEMENT_MAX_S * 1e6:g} us", "N/A", PERFORMANCE)]
    slowest = max(decide, key=lambda row: row["median_s"])
    fastest = min(row["median_s"] for row in decide)
    shown = f"median {fastest * 1e6:.1f}-{slowest['median_s'] * 1e6:.1f} us (slowest: {slowest['case'].split('/', 1)[1]})"
    rows = [Goal("placement", f"{what} ({len(decide)} policies)", shown, f"<= {PLACEMENT_MAX_S * 1e6:g} us",
                 at_most(slowest["median_s"], PLACEMENT_MAX_S), PERFORMANCE)]
    for row in data["rows"]:
        if row["case"] == "model/fastest":  # the same decision asking hetero's own calibrated CostModel
            rows.append(Goal("placement", f"the `fastest` decision asking hetero's own calibrated `CostModel` ({devices} devices)",
                             f"median {row['median_s'] * 1e6:.1f} us", "", "INFO"))
    return rows


def split_elsewhere(data: Results) -> list[Goal]:
    """``benchmarks.split`` run on a GPU machine (``split_h200.json``): its rows, named by where they ran."""
    machine = data.get("machine") or {}
    where = f"on the GPU machine ({machine.get('cpu_model', '?')}, {str(data.get('timestamp_utc', ''))[:10]})"
    # named split_h200, so the verdicts that leave out what ran elsewhere (RUN_ELSEWHERE) leave these out
    return [dataclasses.replace(goal, benchmark="split_h200", what=f"{goal.what}, {where}") for goal in split(data)]


def split(data: Results) -> list[Goal]:
    devices = [device["name"] for device in data.get("devices", [])]
    what = f"`split` triad {count(int(data['elements']))} f32 over {' + '.join(devices)} vs the best single device"
    medians = data.get("split_over_best_alone")
    if len(devices) < 2 or medians is None:
        return [Goal("split", what, "needs two devices", "no loss (>= 0.95x, noise)", "N/A", PERFORMANCE)]
    # round by round where the results have it (the ratio of two samples of the same moment, steadier
    # than the ratio of two medians on a machine whose speed swings between spells); older files: medians
    paired = data.get("split_over_best_alone_paired")
    value = medians if paired is None else paired
    shown = ratio(value, SPLIT_MIN_RATIO) + ("" if paired is None else f" round by round ({ratio(medians)} of the medians)")
    rows = [Goal("split", f"{what} ({data['best_alone']})", shown, f"no loss (>= {SPLIT_MIN_RATIO:g}x, noise)",
                 at_least(value, SPLIT_MIN_RATIO), PERFORMANCE)]
    forced = data.get("split_always_over_best_alone")
    if forced is not None:
        parts = data.get("split_always_rows") or {}
        shown = ratio(forced) + (f" (rows {', '.join(f'{d} {int(n) / 1e6:.1f} M' for d, n in parts.items())})" if parts else "")
        rows.append(Goal("split", "the same with `adaptive=False` (every launch split as the cost model plans)", shown, "", "INFO"))
    return rows


def injection_overhead(data: Results) -> list[Goal]:
    off: dict[str, list[str]] = {}
    armed: dict[str, float] = {}
    for entry in data["goals"]:
        if isinstance(entry["value"], list):
            off[entry["device"]] = entry["value"]
        else:
            armed[entry["device"]] = float(entry["value"])
    rows = []
    if off:
        wrapped = {device: methods for device, methods in off.items() if methods}
        shown = ("wrapped on " + "; ".join(f"{d}: {', '.join(m)}" for d, m in wrapped.items()) if wrapped
                 else f"no wrapper on {', '.join(off)}")
        rows.append(Goal("injection_overhead", "fault injection off: what it costs a launch", shown, "no wrapper at all",
                         "MISS" if wrapped else "PASS"))
    if armed:
        statuses: list[Status] = [at_most(v, INJECTION_ARMED_MAX_S) for v in armed.values()]
        rows.append(Goal("injection_overhead", f"fault injection armed (a rule that never fires), per wrapped call, {' / '.join(armed)}",
                         " / ".join(duration(v, signed=True) for v in armed.values()), f"<= {INJECTION_ARMED_MAX_S * 1e6:g} us",
                         worst(statuses)))
    return rows + missing_devices("injection_overhead", "fault injection on {device}", data.get("missing_devices"))


def guard_overhead(data: Results) -> list[Goal]:
    limit = float(data.get("goal", {}).get("max_overhead", GUARD_MAX_OVERHEAD))
    rows = []
    for row in data["rows"]:
        paired, parts = row["overhead_paired_median"], row["estimated_overhead"]
        rows.append(Goal("guard_overhead", f"`hetero.guard` snapshots every {row['snapshot_every']} steps, digits MLP on "
                         f"{row['device']['name']}", f"{percent(paired)} paired, {percent(parts, signed=False)} by parts",
                         f"<= {limit:.0%}", at_most(max(paired, parts), limit)))
        if "snapshot_share_paired" in row:  # the snapshots' own share, apart from g.run's bookkeeping
            shared, alone = row["snapshot_share_paired"], row["snapshot_share_parts"]
            rows.append(Goal("guard_overhead", f"`hetero.guard` snapshots alone (every {row['snapshot_every']} steps, copies "
                             f"not waited for), digits MLP on {row['device']['name']}, share of step time",
                             f"{percent(shared)} paired, {percent(alone, signed=False)} by parts",
                             f"<= {limit:.0%}", at_most(max(shared, alone), limit), PERFORMANCE))
    return rows + missing_devices("guard_overhead", "`hetero.guard` overhead on {device}", data.get("missing"))


def guard_recovery(data: Results) -> list[Goal]:
    minimums = dict(GUARD_RECOVERY_MIN)
    minimums.update({int(goal["size_bytes"]): float(goal["min_speedup"]) for goal in data.get("goals", [])})
    source = data.get("source", "?")
    rows = []
    for nbytes, minimum in sorted(minimums.items()):
        for target in data["targets"]:
            row = next((r for r in data["rows"] if r["target"] == target and r["size_bytes"] == nbytes), None)
            for cache in ("cold", "warm"):
                what = f"`hetero.guard` fault -> resumed, {source} -> {target}, {size(nbytes)} state, {cache} caches, vs restart + reload"
                part = row.get(cache) if row else None
                if not part:
                    rows.append(Goal("guard_recovery", what, "not measured", f">= {minimum:g}x", "N/A",
                                     PERFORMANCE if cache == "cold" else None))
                    continue
                value = part["speedup"]
                measured = f"{ratio(value)} ({duration(part['guard_median_s'])} vs {duration(part['restart_median_s'])})"
                if cache == "warm":  # the goal is the cold move, kernel builds included (issue 19): warm is reported
                    rows.append(Goal("guard_recovery", what, measured, "", "INFO"))
                    continue
                rows.append(Goal("guard_recovery", what, measured, f">= {minimum:g}x", at_least(value, minimum), PERFORMANCE))
    return rows


def launcher_overhead(data: Results) -> list[Goal]:
    summary = data["summary"]
    added = summary.get("hetero_run_minus_python_median_s")
    limit = float(summary.get("goal_max_s", LAUNCHER_MAX_ADDED_S))
    shown = duration(added, signed=True)
    if summary.get("with_devices_cpu_s") is not None:
        shown += f" (`--devices cpu` {duration(summary['with_devices_cpu_s'], signed=True)})"
    return [Goal("launcher_overhead", "`hetero-run` of a trivial script, over plain `python`", shown, f"<= {limit:g} s",
                 at_most(added, limit))]


def recovery_vs_torchrun(data: Results) -> list[Goal]:
    settings, summary = data.get("settings", {}), data["summary"]
    limit = float(data.get("goal_ratio", TORCHRUN_MAX_RATIO))
    ours, theirs = summary.get("hetero-run"), summary.get("torchrun")
    what = (f"`hetero-run` recovery after a SIGKILL, {settings.get('state_mib', '?')} MiB/worker, {settings.get('nproc', '?')} "
            "workers, vs `torchrun --max-restarts 1`")
    if not ours or not theirs:
        return [Goal("recovery_vs_torchrun", what, "not measured", f"<= {limit:g}x", "N/A")]
    value = ours["recovery_median_s"] / theirs["recovery_median_s"]
    rows = [Goal("recovery_vs_torchrun", what, f"{duration(ours['recovery_median_s'])} vs {duration(theirs['recovery_median_s'])} "
                 f"({ratio(value)})", f"<= {limit:g}x", at_most(value, limit))]
    cold = summary.get("hetero-run-cold")
    if cold:
        rows.append(Goal("recovery_vs_torchrun", "the same without the warm standby (`--no-standby`)",
                         f"{duration(cold['recovery_median_s'])} ({ratio(cold['recovery_median_s'] / theirs['recovery_median_s'])})",
                         "", "INFO"))
    return rows


def inference(data: Results) -> list[Goal]:
    hidden, batch = INFERENCE_GOAL_CASE
    case = next((r for r in data.get("overhead", []) if (r["hidden"], r["batch"]) == INFERENCE_GOAL_CASE), None)
    rows = [Goal("inference", f"`hetero.onnx.Pool.run` vs a bare `InferenceSession.run`, MLP hidden {hidden}, batch {batch}, cpu",
                 f"{ratio(case['ratio'])} ({duration(case['added_s'], signed=True)})" if case else "not measured",
                 f"<= {INFERENCE_MAX_RATIO:g}x", at_most(case["ratio"], INFERENCE_MAX_RATIO) if case else "N/A")]
    serve = data.get("serve") or {}
    clean, faulty = serve.get("serve"), serve.get("serve + 1% faults")
    what = "`hetero serve` via tritonclient, 8 clients: throughput under 1% injected sticky faults vs none"
    if clean and faulty and clean["requests_per_s"]:
        value = faulty["requests_per_s"] / clean["requests_per_s"]
        rows.append(Goal("inference", what, f"{ratio(value)} ({faulty['requests_per_s']:.0f} vs {clean['requests_per_s']:.0f} req/s)",
                         f">= {INFERENCE_MIN_THROUGHPUT:g}x", at_least(value, INFERENCE_MIN_THROUGHPUT)))
    else:
        rows.append(Goal("inference", what, "not measured", f">= {INFERENCE_MIN_THROUGHPUT:g}x", "N/A"))
    if serve:
        bad = {key: sum(int(side.get(key, 0)) for side in serve.values()) for key in ("lost", "wrong", "unsent", "hung_clients")}
        rows.append(Goal("inference", f"every served request answered, and right ({sum(int(s['requests']) for s in serve.values())} "
                         "requests)", ", ".join(f"{n} {key.replace('_', ' ')}" for key, n in bad.items()), "none lost or wrong",
                         "PASS" if not any(bad.values()) else "MISS"))
    failover = data.get("failover") or {}
    median_s = failover.get("median_s")
    pool = ", ".join(failover.get("devices", []))
    rows.append(Goal("inference", f"a device's failure -> first request answered elsewhere (pool over {pool})",
                     f"median {duration(median_s)}, max {duration(failover.get('max_s'))}" if median_s is not None
                     else str(failover.get("skipped") or "not measured"),
                     f"< {INFERENCE_FAILOVER_MAX_S * 1e3:g} ms", below(median_s, INFERENCE_FAILOVER_MAX_S)))
    return rows


def torch_guard(data: Results) -> list[Goal]:
    overhead = data["overhead"]
    limit = float(data.get("goal", {}).get("max_overhead", GUARD_MAX_OVERHEAD))
    paired, parts = overhead["overhead_paired_median"], overhead["estimated_overhead"]
    rows = [Goal("torch_guard", f"`hetero.guard` on PyTorch's MNIST example (digits), snapshots every {overhead['snapshot_every']} "
                 "steps", f"{percent(paired)} paired, {percent(parts, signed=False)} by parts", f"<= {limit:.0%}",
                 at_most(max(paired, parts), limit))]
    for row in data.get("recovery", []):
        timing = row.get("recovery")
        shown = (f"median {duration(timing['median_s'])} ({row['recovered']}/{row['runs']} recovered, on {', '.join(row['resumed_on'])})"
                 if timing else f"no recovery recorded in {row['runs']} runs")
        rows.append(Goal("torch_guard", f"`hetero.guard` recovery from an injected torch `{row['kind']}` ({row['rule']})", shown, "",
                         "INFO" if timing else "MISS"))
    if data.get("lost_skipped"):
        rows.append(Goal("torch_guard", "`hetero.guard` recovery from an injected torch `lost`", str(data["lost_skipped"]), "", "N/A"))
    resume = data.get("resume")
    if resume:
        summary, value = resume["summary"], resume["ratio_time_lost"]
        resume_limit = float(resume.get("goal_ratio", TORCHRUN_MAX_RATIO))
        rows.append(Goal("torch_guard", "time lost to a killed worker mid-epoch, `hetero-run` vs `torchrun` (MNIST example)",
                         f"{duration(summary['hetero-run']['time_lost_s'])} vs {duration(summary['torchrun']['time_lost_s'])} "
                         f"({ratio(value)})", f"<= {resume_limit:g}x", at_most(value, resume_limit)))
    return rows


#: Issue 49 ("beyond one machine"): served throughput through the cluster against plain Ray Serve running
#: ONNX Runtime directly, and a lost node's training recovery against Ray Train's restart of every worker.
RAY_SERVE_MIN_RATIO = 0.9
RAY_TRAIN_MAX_RATIO = 0.5
RAY_ISSUE = 49


def ray_cluster(data: Results) -> list[Goal]:
    serving = data.get("serving") or {}
    through, loss = serving.get("throughput") or {}, serving.get("node_loss") or {}
    value = through.get("ratio_hetero_to_plain")
    rows = [Goal("ray_cluster", "`hetero.ray.serve` throughput vs plain Ray Serve running ONNX Runtime (tritonclient, "
                 "2 nodes)", f"{ratio(value)} ({through['hetero_requests_per_s']:.0f} vs {through['plain_requests_per_s']:.0f}"
                 " req/s)" if value is not None else "not measured", f">= {RAY_SERVE_MIN_RATIO:g}x",
                 at_least(value, RAY_SERVE_MIN_RATIO), RAY_ISSUE)]
    if loss:
        rows.append(Goal("ray_cluster", f"a node lost under load: requests failed ({loss['requests']} sent), first answer "
                         "from elsewhere", f"{loss['failed']} failed, {duration(loss.get('first_answer_after_loss_s'))}",
                         "none failed", "PASS" if not loss["failed"] else "MISS", RAY_ISSUE))
    return rows


def ray_train(data: Results) -> list[Goal]:
    value = data.get("ratio_training_again")
    against = data.get("goal_against", data.get("baseline", "the restart-all policy"))
    median = data.get("median") or {}
    worker, base = median.get("worker") or {}, median.get(str(against)) or {}
    shown = (f"{ratio(value)} ({duration(worker.get('training_again_s'))} vs {duration(base.get('training_again_s'))})"
             if value is not None else "not measured")
    return [Goal("ray_train", f"a node's loss -> every worker training again: only the lost worker restarts vs {against} "
                 "restarting all", shown, f"<= {RAY_TRAIN_MAX_RATIO:g}x", at_most(value, RAY_TRAIN_MAX_RATIO), RAY_ISSUE)]
