"""hetero on a Ray cluster, the serving part: an ONNX model served through ``hetero.ray.serve``
against plain Ray Serve running ONNX Runtime directly, side by side in one run, and the time from a
node's loss to the answers coming from elsewhere.

    python -m benchmarks.ray_cluster [--seconds 6] [--rounds 2] [--clients 4] [--merge]

The cluster is :class:`hetero.ray.LocalCluster` with two nodes of one CPU each on 127.0.0.1 (each a
machine of its own for the quarantine), so both sides share this machine's cores with the client:
the ratio, not the absolute rate, is the figure to read.

- **throughput**: ``--clients`` tritonclient threads (binary tensors, the test MLP, batch 2) for
  ``--seconds`` against each side, alternated ``--rounds`` times. hetero: the KServe v2 ingress
  (on the head node) and two replicas, each a ``hetero.onnx.Pool`` on its node's ``cpu``. Plain:
  one Ray Serve deployment of two replicas, each an ``onnxruntime.InferenceSession`` decoding and
  encoding with the same ``hetero.serve.protocol`` functions, no ingress hop, no pool, no retries.
- **node loss**: two clients send requests back to back; the second node (one of the two
  replicas) is removed. ``first_answer_after_loss_s``: from the removal's start to the first answer
  after it; ``longest_gap_after_loss_s``: the longest time without an answer after it;
  ``longest_request_s``: the slowest request in flight at the loss, ``slowest_request_after_loss_s``
  the slowest sent after it (those sent to the lost node's replica are answered elsewhere, after the
  ingress's retries); ``failed``: requests not answered (0 is the claim).

Writes the ``serving`` section of ``benchmarks/results/ray_cluster.json``; ``--merge`` keeps the
file's other sections (other parts of the Ray benchmark).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from typing import Any

import numpy as np

from benchmarks.harness import RESULTS_DIR, command_line, write_results

PORT = 18471
NAME = "mlp"


class PlainReplica:
    """Plain Ray Serve: ONNX Runtime on the CPU, the KServe v2 codec, nothing else."""

    def __init__(self, model: bytes) -> None:
        import onnxruntime

        from hetero.onnx.spec import from_node_arg

        self.session = onnxruntime.InferenceSession(model, providers=["CPUExecutionProvider"])
        self.inputs = tuple(from_node_arg(a) for a in self.session.get_inputs())
        self.outputs = tuple(from_node_arg(a, output=True) for a in self.session.get_outputs())

    async def __call__(self, request: Any) -> Any:
        from starlette.responses import Response

        from hetero.serve.protocol import check_inputs, decode_request, encode_response, select_outputs

        if request.method == "GET":  # readiness: the replica is up
            return Response(b"", status_code=200)
        body = await request.body()
        decoded = decode_request(body, request.headers.get("inference-header-content-length"))
        check_inputs(NAME, decoded.inputs, self.inputs, None)
        wanted = select_outputs(NAME, decoded, self.outputs)
        values = self.session.run([o.name for o in wanted], dict(decoded.inputs))
        payload, json_length = encode_response(NAME, [(o.name, v, o.binary) for o, v in zip(wanted, values)], decoded.id)
        headers = {} if json_length is None else {"Inference-Header-Content-Length": str(json_length)}
        return Response(payload, headers=headers, media_type="application/octet-stream")


def _client_loop(stop: threading.Event, x: np.ndarray, expected: np.ndarray, log: list[tuple[float, float, bool]]) -> None:
    import tritonclient.http as triton

    with triton.InferenceServerClient(f"127.0.0.1:{PORT}", network_timeout=60) as client:
        tensor = triton.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        wanted = [triton.InferRequestedOutput("y")]
        while not stop.is_set():
            start = time.perf_counter()
            try:
                y = client.infer(NAME, [tensor], outputs=wanted).as_numpy("y")
                ok = bool(np.allclose(y, expected, rtol=1e-5, atol=2e-5))
            except Exception:  # noqa: BLE001 - counted as not answered
                ok = False
            log.append((start, time.perf_counter(), ok))


def _drive(clients: int, seconds: float, x: np.ndarray, expected: np.ndarray,
           during: Any = None) -> list[tuple[float, float, bool]]:
    log: list[tuple[float, float, bool]] = []
    stop = threading.Event()
    threads = [threading.Thread(target=_client_loop, args=(stop, x, expected, log)) for _ in range(clients)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)  # connections up
    begin = len(log)
    if during is not None:
        time.sleep(1.0)  # answers before the event, to compare with
        during()
    time.sleep(seconds)
    stop.set()
    for thread in threads:
        thread.join(60)
    return log[begin:]


def _wait_ready(seconds: float = 60.0) -> None:
    import tritonclient.http as triton

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            with triton.InferenceServerClient(f"127.0.0.1:{PORT}") as client:
                if client.is_model_ready(NAME):
                    return
        except Exception:  # noqa: BLE001 - not up yet
            time.sleep(0.2)
            continue
        time.sleep(0.2)
    raise TimeoutError(f"model {NAME!r} not ready on 127.0.0.1:{PORT} within {seconds:.0f} s")


def _deploy_plain(model: bytes) -> None:
    from ray import serve

    app = serve.deployment(PlainReplica, name="plain").options(num_replicas=2, ray_actor_options={
        "num_cpus": 0, "resources": {"hetero_cpu": 1.0}}).bind(model)
    serve.run(app, name="plain", route_prefix="/")
    _wait_ready()


def _rate(log: list[tuple[float, float, bool]], seconds: float) -> float:
    return sum(ok for _, _, ok in log) / seconds


def measure(seconds: float, rounds: int, clients: int) -> dict[str, Any]:
    from ray import serve

    import hetero.ray.serve as hserve
    from hetero.ray import LocalCluster
    from tests.onnx_models import mlp, mlp_reference

    model = mlp()
    x = model.sample(2, seed=1)
    expected = mlp_reference(model, x)
    rates: dict[str, list[float]] = {"hetero": [], "plain": []}
    failed = {"hetero": 0, "plain": 0}
    with LocalCluster(["cpu,oneapi", "cpu,opencl"], separate_hosts=True) as cluster:
        serve.start(http_options={"host": "127.0.0.1", "port": PORT}, proxy_location="HeadOnly")
        for _ in range(rounds):
            for side in ("hetero", "plain"):
                if side == "hetero":
                    served = hserve.deploy(model.data, name=NAME, backend="cpu", port=PORT, threads=1)
                    _wait_ready()
                else:
                    _deploy_plain(model.data)
                log = _drive(clients, seconds, x, expected)
                rates[side].append(_rate(log, seconds))
                failed[side] += sum(not ok for _, _, ok in log)
                serve.delete(served.app_name if side == "hetero" else "plain")
                print(f"{side:<7} {rates[side][-1]:8.1f} requests/s", flush=True)
        # a node's loss, under load: the second node holds one of the two replicas
        served = hserve.deploy(model.data, name=NAME, backend="cpu", port=PORT, threads=1)
        _wait_ready()
        victim = cluster.nodes[1]
        assert victim.node_id in served.replica_nodes(), "a replica on the node to lose"
        lost_at: list[float] = []

        def lose() -> None:
            lost_at.append(time.perf_counter())
            cluster.remove_node(victim)

        log = _drive(2, max(seconds, 4.0), x, expected, during=lose)
        t0 = lost_at[0]
        before = [end - start for start, end, ok in log if end < t0 and ok]
        caught = [end - start for start, end, ok in log if start < t0 < end]
        after = sorted(end for start, end, ok in log if end > t0 and ok)
        gaps = [b - a for a, b in zip([t0, *after], after)]
        loss = {"first_answer_after_loss_s": round(after[0] - t0, 4) if after else None,
                "longest_gap_after_loss_s": round(max(gaps), 4) if gaps else None,
                "longest_request_s": round(max(caught + [0.0]), 4),
                "slowest_request_after_loss_s": round(max([end - start for start, end, ok in log if start >= t0] + [0.0]), 4),
                "median_request_before_s": round(statistics.median(before), 4) if before else None,
                "requests": len(log), "failed": sum(not ok for _, _, ok in log)}
        print(f"node loss: {loss}", flush=True)
        serve.shutdown()
    hetero_rate, plain_rate = statistics.median(rates["hetero"]), statistics.median(rates["plain"])
    return {"throughput": {"hetero_requests_per_s": round(hetero_rate, 1), "plain_requests_per_s": round(plain_rate, 1),
                           "ratio_hetero_to_plain": round(hetero_rate / plain_rate, 3),
                           "rounds": {k: [round(v, 1) for v in vs] for k, vs in rates.items()},
                           "failed": failed, "clients": clients, "seconds_per_round": seconds,
                           "model": "tests/onnx_models.mlp (16-32-4), batch 2, binary tensors",
                           "cluster": "LocalCluster: 2 nodes x num_cpus=1 on 127.0.0.1, 2 replicas each side"},
            "node_loss": loss}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=6.0, help="load per side and round")
    parser.add_argument("--rounds", type=int, default=2, help="hetero/plain alternations")
    parser.add_argument("--clients", type=int, default=4, help="client threads")
    parser.add_argument("--merge", action="store_true", help="keep the results file's other sections")
    args = parser.parse_args(argv)
    serving = measure(args.seconds, args.rounds, args.clients)
    command = command_line("benchmarks.ray_cluster", sys.argv[1:] if argv is None else argv)
    payload: dict[str, Any] = {}
    path = RESULTS_DIR / "ray_cluster.json"
    if args.merge and path.is_file():
        reserved = {"benchmark", "command", "timestamp_utc", "machine", "versions"}
        payload = {k: v for k, v in json.loads(path.read_text()).items() if k not in reserved}
    import onnxruntime
    import ray

    payload["serving"] = {**serving, "command": command, "ray": ray.__version__, "onnxruntime": onnxruntime.__version__}
    write_results("ray_cluster", payload, command)
    print(json.dumps(serving, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
