"""Inference serving: what ``hetero.onnx.Pool`` and ``hetero serve`` cost over ONNX Runtime, what a
1 % device-fault rate costs a served load, and how fast a request moves off a failed device.

    python -m benchmarks.inference [--quick] [--clients 8] [--requests 400] [--rounds 4] [--failovers 20]
                                   [--batch 1] [--time-limit 60]

1. *overhead*: ``pool.run({"x": x})`` (one cpu member) against a bare
   ``onnxruntime.InferenceSession.run(None, {"x": x})`` built here, both on the CPU provider with
   ``intra_op_num_threads=1``, one caller thread, interleaved batches of calls (plus hetero's
   ``Session.run`` and ``Session.run_prepared`` between them, to show where the time goes); the MLP
   (hidden 32) at batch 1 and 64, and a wider one (hidden 256) at batch 64.
2. *serve*: ``--clients`` threads, each its own ``tritonclient.http.InferenceServerClient``, in a
   child process (so the clients do not share the server's interpreter), against
   ``hetero.serve.ServerThread`` on 127.0.0.1 over a pool on every device with an ONNX Runtime
   provider (replicas so there are >= 3 members; ``quarantine_ttl=0`` by default, so a device a
   fault hit is back as soon as its probe inference answers: the figure is the failover machinery's
   cost, not a TTL policy's; ``--quarantine-ttl 0.05`` shows what a longer stay costs), without faults and under
   ``*:infer:p=0.01,seed=S:sticky``; and in-process, the same threads calling a bare session or the
   pool directly (what HTTP costs). Rounds of each side alternate (ABBA); every answer is checked
   against NumPy.
3. *failover*: a pool over two devices, a steady stream of requests from one thread, an injected
   ``DEVICE:infer:nth=K:lost`` on the device taking the traffic: from the fault (its
   ``fault-injected`` event) to the retried request answered by the other member.

Goals (reported, never enforced): pool/bare at batch 64 (hidden 256) <= 1.1x; served throughput
under faults >= 0.95x the fault-free one, every request answered right; failover median < 100 ms.
Writes ``benchmarks/results/inference.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import numpy as np

import hetero
from benchmarks.harness import Progress, command_line, compare, format_seconds, write_results
from benchmarks.kernel_bench import load_average, print_footer
from benchmarks.onnx_mlp import Mlp, mlp
from hetero.fault import quarantine

ROOT = Path(__file__).resolve().parent.parent
GOAL_OVERHEAD_MAX_RATIO = 1.1
GOAL_FAULTY_MIN_THROUGHPUT = 0.95
GOAL_FAILOVER_MAX_MEDIAN_S = 0.100
OVERHEAD_CASES = ((32, 1), (32, 64), (256, 64))  # (hidden, batch)
GOAL_CASE = (256, 64)
RTOL, ATOL = 1e-5, 2e-5  # OpenVINO's f32 against NumPy's float64
SAMPLES = 32
WARMUP_REQUESTS = 5  # per client, before the clock starts
FAULT_RULE = "*:infer:p=0.01,seed={seed}:sticky"
SIDES = ("ort in-process", "pool in-process", "serve", "serve + 1% faults")

Caller = Callable[[np.ndarray], np.ndarray]


def bare_session(model: Mlp) -> Any:
    """The reference: ONNX Runtime alone, the CPU provider, one intra-op thread (as the pool's)."""
    import onnxruntime as ort  # here: importing the module should not load ONNX Runtime

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(model.data, sess_options=options, providers=["CPUExecutionProvider"])


def serving_devices() -> list[str]:
    """Devices ONNX Runtime can run on here: cpu, and oneapi:0 through OpenVINO when installed."""
    from hetero.onnx import providers
    from hetero.onnx.session import onnxruntime

    ort = onnxruntime()
    return [d.name for d in hetero.devices() if providers.choose(ort, d) is not None]


def right(got: np.ndarray, want: np.ndarray) -> bool:
    return bool(got.shape == want.shape and np.allclose(got, want, rtol=RTOL, atol=ATOL))


def percentiles(latencies: Sequence[float]) -> dict[str, float | None]:
    if not latencies:
        return {"p50_s": None, "p90_s": None, "p99_s": None, "max_s": None}
    p50, p90, p99 = np.percentile(latencies, [50, 90, 99]).tolist()
    return {"p50_s": p50, "p90_s": p90, "p99_s": p99, "max_s": max(latencies)}


# -- 1. overhead ------------------------------------------------------------------------------
def overhead_row(hidden: int, batch: int, repeats: int, warmup: int, min_time: float) -> dict[str, Any]:
    from hetero.onnx import Pool
    from hetero.onnx.feeds import prepare

    model = mlp(hidden=hidden)
    x = model.sample(batch)
    feeds, want = {"x": x}, model.reference(x)
    bare = bare_session(model)
    with Pool(model.data, ["cpu"], replicas=1, threads=1, name="mlp") as pool:
        session = pool.members[0].session
        ready = prepare({"x": x}, session.inputs)
        correct = {"pool": right(pool.run(feeds)["y"], want),
                   "ort": right(bare.run(None, feeds)[0], want)}
        timings = compare({"ort": lambda: bare.run(None, feeds), "Session.run_prepared": lambda: session.run_prepared(ready),
                           "Session.run": lambda: session.run(feeds), "Pool.run": lambda: pool.run(feeds)},
                          repeats, warmup, min_time)
    pool_s, ort_s = timings["Pool.run"]["median_s"], timings["ort"]["median_s"]
    return {"hidden": hidden, "batch": batch, "model": model.describe(), "correct": correct, "timings": timings,
            "ratio": pool_s / ort_s, "ratio_of_min": timings["Pool.run"]["min_s"] / timings["ort"]["min_s"],
            "added_s": pool_s - ort_s}


# -- 2. serving -------------------------------------------------------------------------------
def drive(open_caller: Callable[[], AbstractContextManager[Caller]], model: Mlp, clients: int, requests: int,
          batch: int, time_limit: float) -> dict[str, Any]:
    """``clients`` threads, each with its own caller, ``requests`` each, started together; stops
    sending at ``time_limit`` s. Answers are checked after the clock stops."""
    samples = [model.sample(batch, seed=i) for i in range(SAMPLES)]
    answers = [model.reference(x) for x in samples]
    got: list[list[tuple[int, object]]] = [[] for _ in range(clients)]
    latencies: list[list[float]] = [[] for _ in range(clients)]
    ends = [0.0] * clients
    barrier = threading.Barrier(clients + 1)

    def client(t: int) -> None:
        try:
            with open_caller() as call:
                for i in range(WARMUP_REQUESTS):  # connect and warm up, checked, not timed
                    got[t].append((i, call(samples[i])))
                barrier.wait(timeout=60)
                clock = time.perf_counter
                deadline = clock() + time_limit
                for i in range(requests):
                    if clock() > deadline:
                        break
                    k = (t * requests + i) % SAMPLES
                    started = clock()
                    try:
                        y: object = call(samples[k])
                    except Exception as error:  # noqa: BLE001 - counted as lost
                        y = error
                    latencies[t].append(clock() - started)
                    got[t].append((k, y))
                ends[t] = clock()
        except Exception as error:  # noqa: BLE001 - a client that never started: its requests are unsent
            got[t].append((-1, error))
            barrier.abort()

    threads = [threading.Thread(target=client, args=(t,), daemon=True) for t in range(clients)]
    for thread in threads:
        thread.start()
    try:
        barrier.wait(timeout=120)
    except threading.BrokenBarrierError:
        pass
    start = time.perf_counter()
    for thread in threads:
        thread.join(timeout=time_limit + 60)
    hung = sum(thread.is_alive() for thread in threads)
    results = [pair for per_client in got for pair in per_client]
    lost = [y for _, y in results if not isinstance(y, np.ndarray)]
    wrong = sum(1 for k, y in results if isinstance(y, np.ndarray) and not right(y, answers[k]))
    timed = sum(len(s) for s in latencies)
    wall = max([e - start for e in ends if e] or [float("nan")])
    return {"requests": clients * requests, "sent": timed, "unsent": clients * requests - timed, "lost": len(lost),
            "wrong": wrong, "hung_clients": hung, "first_error": repr(lost[0])[:300] if lost else None,
            "wall_s": wall, "latencies_s": [x for s in latencies for x in s]}


@contextlib.contextmanager
def http_caller(address: str) -> Iterator[Caller]:
    import tritonclient.http as triton

    with triton.InferenceServerClient(address, network_timeout=30) as client:
        def call(x: np.ndarray) -> np.ndarray:
            tensor = triton.InferInput("x", list(x.shape), "FP32")
            tensor.set_data_from_numpy(x, binary_data=True)
            result = client.infer("mlp", [tensor], outputs=[triton.InferRequestedOutput("y", binary_data=True)])
            return result.as_numpy("y")

        yield call


def _clients_child(args: argparse.Namespace) -> dict[str, Any]:
    return drive(lambda: http_caller(args.address), mlp(hidden=args.hidden), args.clients, args.requests, args.batch,
                 args.time_limit)


def serve_round(side: str, model: Mlp, devices: list[str], seed: int, args: argparse.Namespace) -> dict[str, Any]:
    from hetero.onnx import Pool
    from hetero.serve import ServerThread

    replicas = 2 if len(devices) > 1 else 3
    requests = args.requests // args.rounds
    if side == "ort in-process":
        bare = bare_session(model)
        return drive(lambda: contextlib.nullcontext(lambda x: bare.run(None, {"x": x})[0]), model, args.clients,
                     requests, args.batch, args.time_limit)
    pool = Pool(model.data, devices, replicas=replicas, threads=1, quarantine_ttl=args.quarantine_ttl, name="mlp")
    rule = FAULT_RULE.format(seed=seed) if side.endswith("faults") else None
    with contextlib.ExitStack() as stack:
        benching = stack.enter_context(hetero.fault.events(kind=["pool-member-out", "pool-member-rejoined"]))
        injection = stack.enter_context(hetero.fault.inject(rule)) if rule else None
        if side == "pool in-process":
            result = drive(lambda: contextlib.nullcontext(lambda x: pool.run({"x": x})["y"]), model, args.clients,
                           requests, args.batch, args.time_limit)
            pool.close()
        else:
            with ServerThread(pool, workers=8) as server:  # closes the pool when it stops
                result = _spawn_clients(server.address, requests, args)
        result["pool"] = pool.stats()
        result["members"] = len(pool.members)
        result["benched"] = bench_timeline(benching, len(devices))
    if injection is not None:
        result["faults_fired"] = len(injection.fired)
        result["rule"] = rule
    quarantine.forget_drill()
    return result


def bench_timeline(events: Any, devices: int) -> dict[str, Any]:
    """How long devices were out of routing: each stay (member out -> rejoined), and the time with
    every device out at once (requests wait then)."""
    out: dict[str, float] = {}
    stays: list[float] = []
    all_out = 0.0
    all_since: float | None = None
    for event in events.pending():
        name, at = event["device"], event["monotonic"]
        if event["kind"] == "pool-member-out":
            out.setdefault(name, at)
            if len(out) == devices and all_since is None:
                all_since = at
        elif name in out:
            stays.append(at - out.pop(name))
            if all_since is not None:
                all_out, all_since = all_out + at - all_since, None
    return {"stays_s": stays, "all_devices_out_s": all_out, "still_out_at_end": sorted(out)}


def _spawn_clients(address: str, requests: int, args: argparse.Namespace) -> dict[str, Any]:
    command = [sys.executable, "-m", "benchmarks.inference", "--child", "clients", "--address", address,
               "--clients", str(args.clients), "--requests", str(requests), "--batch", str(args.batch),
               "--hidden", str(args.hidden), "--time-limit", str(args.time_limit)]
    env = {**os.environ, "HETERO_LOG": "ERROR"}
    done = subprocess.run(command, cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.time_limit + 180,
                          check=False)
    if done.returncode != 0:
        raise RuntimeError(f"the client process failed ({done.returncode}):\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    report: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return report


def serve_rows(model: Mlp, devices: list[str], args: argparse.Namespace, progress: Progress) -> dict[str, Any]:
    rounds: dict[str, list[dict[str, Any]]] = {side: [] for side in SIDES}
    for round_ in range(args.rounds):
        for side in SIDES if round_ % 2 == 0 else reversed(SIDES):
            progress.step(f"{side}, round {round_ + 1}")
            rounds[side].append(serve_round(side, model, devices, 7 + round_, args))
    rows = {}
    for side, runs in rounds.items():
        latencies = [x for run in runs for x in run.pop("latencies_s")]
        wall = sum(run["wall_s"] for run in runs)
        row: dict[str, Any] = {
            "requests": sum(r["requests"] for r in runs), "sent": sum(r["sent"] for r in runs),
            **{key: sum(r[key] for r in runs) for key in ("unsent", "lost", "wrong", "hung_clients")},
            "wall_s": wall, "requests_per_s": len(latencies) / wall if wall > 0 else None, **percentiles(latencies),
            "per_round_requests_per_s": [r["sent"] / r["wall_s"] for r in runs], "first_error": next(
                (r["first_error"] for r in runs if r["first_error"]), None)}
        if "pool" in runs[0]:
            row["members"] = runs[0]["members"]
            row["pool_stats"] = [r["pool"] for r in runs]
            row["pool_totals"] = {key: sum(r["pool"][key] for r in runs) for key in ("retries", "rejoins", "probe_failures")}
            stays = [x for r in runs for x in r["benched"].pop("stays_s")]
            row["benched"] = {"stays": len(stays), "median_s": statistics.median(stays) if stays else None,
                              "max_s": max(stays) if stays else None, "total_s": sum(stays),
                              "all_devices_out_s": sum(r["benched"]["all_devices_out_s"] for r in runs),
                              "still_out_at_end": [r["benched"]["still_out_at_end"] for r in runs]}
        if "faults_fired" in runs[0]:
            row["faults_fired"] = sum(r["faults_fired"] for r in runs)
            row["rules"] = [r["rule"] for r in runs]
        rows[side] = row
    clean, faulty = rounds["serve"], rounds["serve + 1% faults"]
    # the two served sides run back to back in every round: a slow spell lands on both halves of a pair
    rows["serve + 1% faults"]["paired_ratios"] = [(f["sent"] / f["wall_s"]) / (c["sent"] / c["wall_s"])
                                                  for c, f in zip(clean, faulty)]
    return rows


# -- 3. failover ------------------------------------------------------------------------------
def failover(model: Mlp, devices: list[str], trials: int, progress: Progress) -> dict[str, Any]:
    """Each trial: a stream of back-to-back requests; the K-th on the device taking the traffic
    raises an injected ``lost``; latency = that fault -> the retried request answered elsewhere."""
    from hetero.onnx import Pool

    if len(devices) < 2:
        return {"skipped": "needs two devices with an ONNX Runtime provider (cpu replicas share one device, so a "
                           "fault on it benches them all): pip install onnxruntime-ep-openvino for oneapi:0"}
    pair = devices[:2]
    x = model.sample(1)
    feeds, want = {"x": x}, model.reference(x)
    # least-outstanding routing gives a lone caller's requests to the first member listed: one pool
    # per order, so each device is the victim in turn. Quarantine for a minute: out until released.
    pools = [Pool(model.data, order, replicas=1, threads=1, quarantine_ttl=60, name=f"failover-{i}")
             for i, order in enumerate((pair, pair[::-1]))]
    samples = []
    try:
        for pool in pools:
            for member in pool.members:  # each session's first run (one-time set-up) before the drill
                member.session.run(feeds)
        for trial in range(trials):
            pool = pools[trial % 2]
            victim, other = pool.members[0], pool.members[1]
            progress.step(f"failover {victim.device.name} -> {other.device.name}, trial {trial + 1}")
            samples.append(_failover_trial(pool, victim.name, other.name, feeds, want, nth=10 + trial % 5))
    finally:
        for pool in pools:
            pool.close()
        quarantine.forget_drill()
    latencies = [s["latency_s"] for s in samples if s["latency_s"] is not None]
    return {"devices": pair, "trials": samples, "median_s": statistics.median(latencies) if latencies else None,
            "max_s": max(latencies) if latencies else None, "min_s": min(latencies) if latencies else None,
            "out_median_s": statistics.median(s["detect_s"] for s in samples if s["detect_s"] is not None)
            if latencies else None, "measured": len(latencies)}


def _failover_trial(pool: Any, victim: str, other: str, feeds: dict[str, np.ndarray], want: np.ndarray,
                    nth: int) -> dict[str, Any]:
    device = pool.members[0].device
    kinds = ["fault-injected", "pool-member-out", "pool-member-rejoined"]
    answered_by = done = None
    correct = False
    with hetero.fault.events(kind=kinds) as sub:
        with hetero.fault.inject(f"{device.name}:infer:nth={nth}:lost") as injection:
            for _ in range(nth + 20):  # bounded: the rule fires on the nth inference on the victim
                before = pool.stats()["members"][other]["requests"]
                y = pool.run(feeds)["y"]
                finished = time.monotonic()
                if injection.fired:
                    done, correct = finished, right(y, want)
                    answered_by = other if pool.stats()["members"][other]["requests"] == before + 1 else victim
                    break
        seen: dict[str, dict[str, Any]] = {}
        while len(seen) < 2:
            event = sub.get(timeout=2)
            if event is None:
                break
            seen.setdefault(event["kind"], event)
        released = time.monotonic()
        quarantine.release(device, "benchmarks.inference: next failover trial")
        quarantine.forget_drill()
        rejoined = None
        deadline = time.monotonic() + 10
        while rejoined is None and time.monotonic() < deadline:
            event = sub.get(timeout=max(deadline - time.monotonic(), 0.01))
            if event is not None and event["kind"] == "pool-member-rejoined":
                rejoined = event["monotonic"]
    fault, out = seen.get("fault-injected"), seen.get("pool-member-out")
    latency = done - fault["monotonic"] if done is not None and fault is not None and answered_by == other else None
    return {"victim": device.name, "nth": nth, "latency_s": latency, "answered_by": answered_by, "correct": correct,
            "detect_s": out["monotonic"] - fault["monotonic"] if out and fault else None,
            "rejoined_after_release_s": rejoined - released if rejoined is not None else None}


# -- summary and output -----------------------------------------------------------------------
def _status(measured: bool, ok: bool) -> str:
    return "not measured" if not measured else "pass" if ok else "miss"


def goal_summary(overhead: Sequence[dict[str, Any]], serve: dict[str, Any], fail: dict[str, Any]) -> list[dict[str, Any]]:
    goal_row = next((r for r in overhead if (r["hidden"], r["batch"]) == GOAL_CASE), None)
    clean, faulty = serve.get("serve"), serve.get("serve + 1% faults")
    ratio = (faulty["requests_per_s"] / clean["requests_per_s"]
             if clean and faulty and clean["requests_per_s"] and faulty["requests_per_s"] else None)
    bad = sum(row["lost"] + row["wrong"] + row["unsent"] + row["hung_clients"] for row in serve.values())
    median = fail.get("median_s")
    return [
        {"goal": f"pool.run / bare session.run at batch {GOAL_CASE[1]} (hidden {GOAL_CASE[0]}) <= {GOAL_OVERHEAD_MAX_RATIO}x",
         "value": goal_row["ratio"] if goal_row else None, "added_s": goal_row["added_s"] if goal_row else None,
         "status": _status(goal_row is not None, goal_row is not None and goal_row["ratio"] <= GOAL_OVERHEAD_MAX_RATIO)},
        {"goal": f"served throughput under 1% faults >= {GOAL_FAULTY_MIN_THROUGHPUT}x the fault-free one",
         "value": ratio, "paired_median": statistics.median(faulty["paired_ratios"]) if faulty else None,
         "status": _status(ratio is not None, ratio is not None and ratio >= GOAL_FAULTY_MIN_THROUGHPUT)},
        {"goal": "every request answered, and right (lost + wrong + unsent = 0)", "value": bad,
         "status": _status(bool(serve), bad == 0)},
        {"goal": f"failover median < {GOAL_FAILOVER_MAX_MEDIAN_S * 1e3:.0f} ms", "value": median,
         "max_s": fail.get("max_s"), "reason": fail.get("skipped"),
         "status": _status(median is not None, median is not None and median < GOAL_FAILOVER_MAX_MEDIAN_S)},
    ]


def _ms(seconds: float | None) -> str:
    return f"{seconds * 1e3:.2f} ms" if seconds is not None else "-"


def print_tables(overhead: Sequence[dict[str, Any]], serve: dict[str, Any], fail: dict[str, Any]) -> None:
    layers = list(overhead[0]["timings"]) if overhead else []
    header = f"{'model':>12} | " + " ".join(f"{name:>20}" for name in layers) + f" | {'pool/ort':>8} {'(min)':>6} {'added':>9}"
    print(header)
    print("-" * len(header))
    for row in overhead:
        flags = "" if all(row["correct"].values()) else "  WRONG RESULT"
        print(f"{'h' + str(row['hidden']) + ' b' + str(row['batch']):>12} | "
              + " ".join(f"{format_seconds(row['timings'][n]['median_s']):>20}" for n in layers)
              + f" | {row['ratio']:>7.2f}x {row['ratio_of_min']:>5.2f}x {format_seconds(row['added_s']):>9}{flags}")
    print()
    header = (f"{'side':>18} | {'req/s':>8} {'p50':>9} {'p99':>9} {'max':>9} | {'sent':>5} {'lost':>4} {'wrong':>5} "
              f"{'faults':>6} {'retries':>7}")
    print(header)
    print("-" * len(header))
    for side, row in serve.items():
        rate = f"{row['requests_per_s']:.0f}" if row["requests_per_s"] else "-"
        print(f"{side:>18} | {rate:>8} {_ms(row['p50_s']):>9} {_ms(row['p99_s']):>9} {_ms(row['max_s']):>9} | "
              f"{row['sent']:>5} {row['lost']:>4} {row['wrong']:>5} {row.get('faults_fired', '-'):>6} "
              f"{row.get('pool_totals', {}).get('retries', '-'):>7}")
    for side, row in serve.items():
        benched = row.get("benched")
        if benched and benched["stays"]:
            print(f"{side}: a device out of routing {benched['stays']} times, median {_ms(benched['median_s'])}, max "
                  f"{_ms(benched['max_s'])}, {benched['total_s']:.2f} s in all; every device out at once "
                  f"{benched['all_devices_out_s']:.2f} s of the {row['wall_s']:.2f} s load")
    print()
    if "skipped" in fail:
        print(f"failover: not measured: {fail['skipped']}")
    else:
        print(f"failover {' <-> '.join(fail['devices'])}: {fail['measured']} trials, median {_ms(fail['median_s'])}, "
              f"min {_ms(fail['min_s'])}, max {_ms(fail['max_s'])} (fault -> member out: median {_ms(fail['out_median_s'])})")


def print_summary(summary: Sequence[dict[str, Any]]) -> None:
    for goal in summary:
        value = goal["value"]
        if value is None:
            shown = goal.get("reason") or "not measured"
        elif "added_s" in goal:
            shown = f"{value:.2f}x (adds {format_seconds(goal['added_s'])})"
        elif "max_s" in goal:
            shown = f"{_ms(value)} (max {_ms(goal['max_s'])})"
        elif goal.get("paired_median") is not None:
            shown = f"{value:.3f}x (median of the rounds' pairs {goal['paired_median']:.3f}x)"
        elif isinstance(value, float):
            shown = f"{value:.3f}x"
        else:
            shown = str(value)
        print(f"goal {goal['goal']}: {shown}: {goal['status'].upper()}")


@contextlib.contextmanager
def quiet_hetero_log() -> Iterator[None]:
    """Each injected fault logs warnings (fault, quarantine, member out): hundreds of lines here."""
    logger = logging.getLogger("hetero")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.inference", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer samples, requests and trials")
    parser.add_argument("--clients", type=int, default=8, help="client threads of the served load (default 8)")
    parser.add_argument("--requests", type=int, help="requests per client and side, over all rounds (default 400, --quick 100)")
    parser.add_argument("--rounds", type=int, help="rounds per side, in ABBA order (default 4, --quick 2)")
    parser.add_argument("--batch", type=int, default=1, help="rows per served request (default 1)")
    parser.add_argument("--failovers", type=int, help="failover trials (default 20, --quick 6)")
    parser.add_argument("--quarantine-ttl", type=float, default=0.0,
                        help="seconds a device a fault hit stays out before its probe (default 0: the probe decides)")
    parser.add_argument("--time-limit", type=float, default=60.0, help="seconds a load may send for (default 60)")
    parser.add_argument("--child", choices=["clients"], help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--hidden", type=int, default=32, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.requests = args.requests or (100 if args.quick else 400)
    args.rounds = args.rounds or (2 if args.quick else 4)
    args.failovers = args.failovers or (6 if args.quick else 20)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.child:
        print(json.dumps(_clients_child(args)))
        return 0
    repeats, warmup, min_time = (11, 20, 0.002) if args.quick else (41, 100, 0.005)
    load_before = load_average()
    devices = serving_devices()
    model = mlp(hidden=args.hidden)
    progress = Progress(len(OVERHEAD_CASES) + len(SIDES) * args.rounds + args.failovers)
    with quiet_hetero_log():
        overhead = []
        for hidden, batch in OVERHEAD_CASES:
            progress.step(f"overhead, hidden {hidden}, batch {batch}")
            overhead.append(overhead_row(hidden, batch, repeats, warmup, min_time))
        serve = serve_rows(model, devices, args, progress)
        fail = failover(model, devices, args.failovers, progress)
    summary = goal_summary(overhead, serve, fail)
    path = write_results("inference", {
        "config": {"quick": args.quick, "repeats": repeats, "warmup": warmup, "min_time_s": min_time,
                   "overhead_cases": [{"hidden": h, "batch": b} for h, b in OVERHEAD_CASES],
                   "serve_model": model.describe(), "serve_batch": args.batch, "clients": args.clients,
                   "requests_per_client_per_side": args.requests, "rounds": args.rounds, "devices": devices,
                   "replicas": 2 if len(devices) > 1 else 3, "threads_per_session": 1, "server_workers": 8,
                   "fault_rule": FAULT_RULE, "quarantine_ttl_s": args.quarantine_ttl, "failover_trials": args.failovers,
                   "time_limit_s": args.time_limit, "hetero_log_level": "ERROR",
                   "load_average_at_start": load_before, "load_average_at_end": load_average()},
        "summary": summary,
        "overhead": overhead,
        "serve": serve,
        "failover": fail,
    }, command_line("benchmarks.inference", sys.argv[1:] if argv is None else argv))
    print_tables(overhead, serve, fail)
    print()
    print_summary(summary)
    print_footer({}, load_before, path)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
