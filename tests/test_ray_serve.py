"""hetero.ray.serve on a real two-node Ray cluster on 127.0.0.1 (LocalCluster, each node a machine of
its own for the quarantine): tritonclient's answers match ONNX Runtime's; bounded loads while a
node's device is failed and while a node is removed are each answered once and right; a replica
whose devices are all quarantined is replaced on another node, never on its own. Then the pure
parts (routes, which failures move to another replica, the statuses) without Ray."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np
import pytest

from hetero.onnx.errors import Attempt, InferenceFailedError, InputError
from hetero.ray.node_share import HOST_ENV
from hetero.ray.errors import ReplicaUnavailableError
from hetero.ray.serve_ingress import HttpError, Route, backoff, retryable, route, status_of
from hetero.serve.protocol import ProtocolError
from tests.onnx_models import mlp, mlp_reference

THREADS, REQUESTS = 4, 50
LOAD_BOUND = 60.0  # seconds a load may take in all (a few here)
TOLERANCE = {"rtol": 1e-5, "atol": 2e-5}
PORT = 18431
MODEL = mlp()
SAMPLES = [MODEL.sample(2, seed=i) for i in range(16)]
ANSWERS = [mlp_reference(MODEL, x) for x in SAMPLES]


# -- the pure parts -------------------------------------------------------------------------------
def test_routes_are_hetero_serves() -> None:
    assert route("GET", "/v2/health/live") == Route("live")
    assert route("GET", "/v2/health/ready/") == Route("ready")
    assert route("GET", "/v2") == Route("server")
    assert route("GET", "/v2/models/mlp") == Route("model", "mlp")
    assert route("GET", "/v2/models/mlp/versions/1/ready") == Route("model_ready", "mlp", "1")
    assert route("POST", "/v2/models/mlp/infer") == Route("infer", "mlp")
    with pytest.raises(HttpError) as missing:
        route("GET", "/v1/models")
    assert missing.value.status == 404 and "/v2/health/live" in missing.value.message
    with pytest.raises(HttpError) as wrong:
        route("GET", "/v2/models/mlp/infer")
    assert wrong.value.status == 405 and "POST" in wrong.value.message


def _failed(*classes: str) -> InferenceFailedError:
    return InferenceFailedError("failed", [Attempt("cpu#0", "cpu", 0.1, "boom", c, "quarantine") for c in classes])


def test_only_device_failures_move_to_another_replica() -> None:
    assert retryable(ReplicaUnavailableError("every device quarantined"))
    assert retryable(_failed("device-lost"))
    assert retryable(InferenceFailedError("no healthy member within the timeout", []))
    assert not retryable(_failed("none"))          # a model bug fails the same everywhere
    assert not retryable(InputError("bad feed"))
    assert not retryable(ProtocolError("bad body"))
    assert not retryable(ValueError("a bug"))
    ray_exceptions = pytest.importorskip("ray.exceptions")
    assert retryable(ray_exceptions.ActorDiedError())
    assert [backoff(i) for i in range(6)] == [0.05, 0.1, 0.2, 0.4, 0.8, 1.0]


def test_statuses_are_hetero_serves() -> None:
    assert status_of(ProtocolError("no inputs"))[0] == 400
    assert status_of(InputError("bad dtype"))[0] == 400
    assert status_of(HttpError(404, "unknown model"))[0] == 404
    assert status_of(ReplicaUnavailableError("all quarantined"))[0] == 503
    assert status_of(_failed("device-lost"))[0] == 503
    assert status_of(KeyError("y")) == (500, "KeyError: 'y'")


def test_usable_devices_leave_out_quarantined_and_unhealthy() -> None:
    from hetero.core.device import HealthState
    from hetero.ray.serve_replica import usable

    class Fake:
        def __init__(self, stable_id: str, state: HealthState) -> None:
            self.stable_id, self.state = stable_id, state

        def health(self) -> Any:
            return type("H", (), {"state": self.state})()

    ok, held, sick = Fake("a", HealthState.OK), Fake("b", HealthState.OK), Fake("c", HealthState.UNHEALTHY)
    assert usable([ok, held, sick], {"b"}) == [ok]
    assert usable([held, sick], {"b"}) == []


def test_a_hold_stands_for_one_device_on_one_node() -> None:
    from hetero.ray.quarantine_hold import held_resources, hold_name

    assert held_resources("cpu") == {"hetero_device": 1.0, "hetero_cpu": 1.0}
    assert hold_name("n1", "cpu-1") != hold_name("n2", "cpu-1")


def test_host_env_names_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.ray.node_share import HOST_ENV, host_id

    machine = host_id()
    monkeypatch.setenv(HOST_ENV, "rack 3/node 7")
    assert host_id() == "rack-3-node-7"
    monkeypatch.delenv(HOST_ENV)
    assert host_id() == machine


# -- on a cluster ---------------------------------------------------------------------------------
try:
    import ray
    import tritonclient.http as triton
except ImportError:  # the cluster fixture skips, naming what to install
    ray = triton = None


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    pytest.importorskip("ray", reason="hetero.ray.serve needs Ray (pip install 'hetero[ray]')")
    pytest.importorskip("ray.serve", reason="hetero.ray.serve needs Ray Serve (pip install 'hetero[ray]')")
    pytest.importorskip("onnxruntime", reason="the replicas run ONNX Runtime (pip install 'hetero[ray]')")
    pytest.importorskip("tritonclient.http", reason="the KServe v2 client: pip install 'tritonclient[http]'")
    from hetero.ray import LocalCluster
    from hetero.ray.serve import deploy

    with LocalCluster(["cpu,oneapi", "cpu,opencl"], separate_hosts=True) as made:
        made.served = deploy(MODEL.data, name="mlp", num_replicas=2, backend="cpu", port=PORT, threads=1,
                             health_check_period=0.5, health_check_timeout=5.0)
        try:
            yield made
        finally:
            from ray import serve

            serve.shutdown()


def _infer(client: Any, x: np.ndarray, binary: bool = True) -> np.ndarray:
    tensor = triton.InferInput("x", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x, binary_data=binary)
    return client.infer("mlp", [tensor], outputs=[triton.InferRequestedOutput("y", binary_data=binary)]).as_numpy("y")


def _drill(node_id: str, *, release: bool = False) -> None:
    """Fail (or give back) the CPU of that node, in a task there: its quarantine is that node's
    machine's, and the cluster's store carries it, marked a drill."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    def on_node() -> None:  # defined here: Ray pickles it by value (workers cannot import a test module)
        import hetero
        from hetero.fault import quarantine
        from hetero.ray import cluster_quarantine

        cluster_quarantine.attach()
        if release:
            quarantine.release("cpu", "drill over")
        else:
            quarantine.add(hetero.device("cpu"), "drill: the node's CPU failed", "device-lost", ttl=600, injected=True)

    task = ray.remote(on_node).options(num_cpus=0, scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False))
    ray.get(task.remote(), timeout=60)


def _load(event_at: int, event: Callable[[], None]) -> list[list[object]]:
    """THREADS x REQUESTS requests; ``event`` runs once thread 0 has sent ``event_at``. Each slot holds
    what its request got: one answer, or the error."""
    results: list[list[object]] = [[] for _ in range(THREADS * REQUESTS)]
    deadline = time.monotonic() + LOAD_BOUND

    def client(t: int) -> None:
        with triton.InferenceServerClient(f"127.0.0.1:{PORT}", network_timeout=30) as c:
            for i in range(REQUESTS):
                if time.monotonic() > deadline:
                    return
                if t == 0 and i == event_at:
                    event()
                k = t * REQUESTS + i
                try:
                    results[k].append(_infer(c, SAMPLES[k % len(SAMPLES)], binary=k % 2 == 0))
                except Exception as error:  # noqa: BLE001 - counted below
                    results[k].append(error)

    threads = [threading.Thread(target=client, args=(t,)) for t in range(THREADS)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(LOAD_BOUND + 30)
    return results


def _wait(predicate: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def _hold_alive(node_id: str) -> bool:
    from ray._private import state

    return any(a.get("ActorClassName") == "QuarantineHold" and a.get("State") == "ALIVE"
               and a["Address"]["NodeID"] == node_id for a in state.actors().values())


def _check_answers(results: list[list[object]]) -> None:
    errors = [r[0] for r in results if r and not isinstance(r[0], np.ndarray)]
    assert not errors, f"{len(errors)} requests failed: {sorted({str(e) for e in errors})}"
    assert all(len(r) == 1 for r in results), "every request answered exactly once, in time"
    for k, r in enumerate(results):
        np.testing.assert_allclose(r[0], ANSWERS[k % len(SAMPLES)], **TOLERANCE)


def test_tritonclient_gets_onnxruntimes_answers(cluster: Any) -> None:
    import onnxruntime as ort

    session = ort.InferenceSession(MODEL.data, providers=["CPUExecutionProvider"])
    assert sorted(cluster.served.replica_nodes()) == sorted(n.node_id for n in cluster.nodes)
    with triton.InferenceServerClient(f"127.0.0.1:{PORT}") as client:
        assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("mlp")
        assert client.get_model_metadata("mlp")["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
        for k, binary in enumerate((True, False)):
            expected = session.run(["y"], {"x": SAMPLES[k]})[0]
            np.testing.assert_allclose(_infer(client, SAMPLES[k], binary), expected, **TOLERANCE)
        with pytest.raises(Exception, match="must be FP32|FP64"):
            tensor = triton.InferInput("x", [1, 16], "FP64")
            tensor.set_data_from_numpy(np.zeros((1, 16)), binary_data=False)
            client.infer("mlp", [tensor])
        with pytest.raises(Exception, match="unknown model"):
            client.get_model_metadata("nope")


def test_load_while_a_device_fails_and_its_replica_is_replaced_elsewhere(cluster: Any) -> None:
    served, (head, other) = cluster.served, cluster.nodes
    failed = threading.Event()

    def fail() -> None:
        _drill(other.node_id)
        failed.set()

    _check_answers(_load(10, fail))
    assert failed.is_set()
    # The replica on the failed node fails its health check and goes. A hold takes the node's CPU from
    # Ray while it is quarantined, so the replacement lands elsewhere (one started there before the
    # hold won the unit refuses to start: it never serves). The head is full: it waits for room.
    assert _wait(lambda: _hold_alive(other.node_id), 30), "a hold on the quarantined node's CPU"
    assert _wait(lambda: other.node_id not in served.replica_nodes(), 30)
    # the third node's CPU fails on its replica's 30th inference (an injected fault: a drill)
    third = cluster.add_node("cpu", env={"HETERO_FAULTS": "cpu:infer:nth=30:lost"})
    assert _wait(lambda: sorted(served.replica_nodes()) == sorted([head.node_id, third.node_id]), 40)
    with triton.InferenceServerClient(f"127.0.0.1:{PORT}") as client:
        np.testing.assert_allclose(_infer(client, SAMPLES[0]), ANSWERS[0], **TOLERANCE)
    _drill(other.node_id, release=True)


def test_a_device_error_inside_a_replicas_inference_is_answered_by_another(cluster: Any) -> None:
    from hetero.ray import cluster_entries

    third = cluster.nodes[-1]
    _check_answers(_load(REQUESTS, lambda: None))  # the third node's replica fails at its 30th inference
    drills = [entry for (host, _), entry in cluster_entries().items() if host == third.env[HOST_ENV]]
    assert drills and all(entry.drill for entry in drills), "the injected fault quarantined that node's CPU, as a drill"


def test_load_while_a_node_is_removed(cluster: Any) -> None:
    served, head = cluster.served, cluster.nodes[0]
    # the third node's replica went with its CPU; its replacement runs on the second node again
    assert _wait(lambda: len(served.replica_nodes()) == 2 and head.node_id in served.replica_nodes(), 40)
    victim = next(n for n in cluster.nodes if n is not head and n.node_id in served.replica_nodes())
    _check_answers(_load(10, lambda: cluster.remove_node(victim)))
    assert _wait(lambda: victim.node_id not in served.replica_nodes(), 30)  # once Ray has seen the node die


def test_the_router_leaves_out_replicas_without_a_usable_device() -> None:
    pytest.importorskip("ray.serve", reason="the router is Ray Serve's (pip install 'hetero[ray]')")
    from hetero.ray.serve_router import USABLE, usable_replicas

    stats = {"a": {USABLE: True}, "b": {USABLE: False}, "c": {}}
    assert usable_replicas(["a", "b", "c"], stats.__getitem__) == ["a", "c"]
    assert usable_replicas(["b"], stats.__getitem__) == ["b"]  # all out: the ingress gets their refusal


def test_deploy_names_a_missing_model_and_bad_arguments_before_touching_ray(tmp_path: Any) -> None:
    from hetero.ray.serve import deploy

    with pytest.raises(FileNotFoundError, match="no ONNX model at"):
        deploy(tmp_path / "missing.onnx")
    with pytest.raises(ValueError, match="num_replicas must be >= 1"):
        deploy(MODEL.data, num_replicas=0)
