"""``hetero serve`` over a real hetero.onnx.Pool, driven by the official tritonclient on 127.0.0.1:
correct outputs, a bounded load under a 1 % injected fault rate, a device killed mid-load, and bad
requests answered 400 with the protocol's error body."""

from __future__ import annotations

import json
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from tests.onnx_models import cnn, cnn_reference, mlp, mlp_reference

pytest.importorskip("onnxruntime", reason="hetero serve needs onnxruntime (pip install 'hetero[serve]')")
triton = pytest.importorskip("tritonclient.http", reason="the KServe v2 client: pip install 'tritonclient[http]'")
import onnxruntime as ort  # noqa: E402

from hetero.onnx import Pool, providers  # noqa: E402
from hetero.serve import ServerThread  # noqa: E402

CLIENTS, REQUESTS = 16, 300
BOUND_SECONDS = 300  # the load's time bound (about 15 s here)
TOLERANCE = {"rtol": 1e-5, "atol": 2e-5}
MODEL = mlp()
SAMPLES = [MODEL.sample(2, seed=i) for i in range(32)]
ANSWERS = [mlp_reference(MODEL, x) for x in SAMPLES]


def _devices() -> list[str]:
    return [d.name for d in hetero.devices() if providers.choose(ort, d) is not None]


@pytest.fixture
def pool() -> Iterator[Pool]:
    devices = _devices()
    with Pool(MODEL.data, devices, replicas=2 if len(devices) > 1 else 3, threads=1, quarantine_ttl=0.05,
              retries=6, name="mlp") as made:
        yield made


def _infer(client, x: np.ndarray, binary: bool = True) -> np.ndarray:
    tensor = triton.InferInput("x", list(x.shape), "FP32")
    tensor.set_data_from_numpy(x, binary_data=binary)
    result = client.infer("mlp", [tensor], outputs=[triton.InferRequestedOutput("y", binary_data=binary)])
    return result.as_numpy("y")


def test_tritonclient_gets_the_models_answers(pool: Pool) -> None:
    with ServerThread(pool) as server, triton.InferenceServerClient(server.address) as client:
        assert client.is_server_live() and client.is_server_ready() and client.is_model_ready("mlp")
        meta = client.get_model_metadata("mlp")
        assert meta["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 16]}]
        for binary in (True, False):
            np.testing.assert_allclose(_infer(client, SAMPLES[0], binary), ANSWERS[0], **TOLERANCE)


def test_a_cnn_through_the_server() -> None:
    model = cnn()
    x = model.sample(3)
    with Pool(model.data, "cpu", name="cnn") as cnn_pool, ServerThread(cnn_pool) as server, \
            triton.InferenceServerClient(server.address) as client:
        tensor = triton.InferInput("x", list(x.shape), "FP32")
        tensor.set_data_from_numpy(x)
        y = client.infer("cnn", [tensor]).as_numpy("y")
    np.testing.assert_allclose(y, cnn_reference(model, x), **TOLERANCE)


def _load(server: ServerThread, results: list[list[object]], started: threading.Event | None = None) -> list[threading.Thread]:
    def client_thread(t: int) -> None:
        with triton.InferenceServerClient(server.address, network_timeout=60) as client:
            for i in range(REQUESTS):
                k = t * REQUESTS + i
                if started is not None and i == 20:
                    started.set()
                try:
                    results[k].append(_infer(client, SAMPLES[k % 32]))
                except Exception as error:  # noqa: BLE001 - counted as lost below
                    results[k].append(error)

    threads = [threading.Thread(target=client_thread, args=(t,), daemon=True) for t in range(CLIENTS)]
    for thread in threads:
        thread.start()
    return threads


def _check_all_answered(results: list[list[object]], threads: list[threading.Thread]) -> None:
    for thread in threads:
        thread.join(timeout=BOUND_SECONDS)
    assert not any(thread.is_alive() for thread in threads), f"the load did not finish within {BOUND_SECONDS} s"
    assert all(len(r) == 1 for r in results)
    lost = [r[0] for r in results if not isinstance(r[0], np.ndarray)]
    assert not lost, f"{len(lost)} requests lost, first: {lost[0]!r}"
    wrong = [k for k, r in enumerate(results) if not np.allclose(r[0], ANSWERS[k % 32], **TOLERANCE)]
    assert not wrong, f"{len(wrong)} wrong answers"


def test_bounded_load_under_one_percent_faults_answers_every_request(pool: Pool) -> None:
    results: list[list[object]] = [[] for _ in range(CLIENTS * REQUESTS)]
    with hetero.fault.inject("*:infer:p=0.01,seed=5:sticky") as injection, ServerThread(pool, workers=8) as server:
        _check_all_answered(results, _load(server, results))
    assert len(injection.fired) > 10
    stats = pool.stats()
    assert stats["retries"] + stats["probe_failures"] == len(injection.fired)  # a rejoin probe is an inference too


def test_killing_a_device_mid_load_loses_nothing(pool: Pool) -> None:
    devices = _devices()
    if len(devices) < 2:
        pytest.skip("needs two devices with an ONNX Runtime provider (pip install onnxruntime-ep-openvino)")
    victim = devices[0]
    results: list[list[object]] = [[] for _ in range(CLIENTS * REQUESTS)]
    started = threading.Event()
    with ServerThread(pool, workers=8) as server:
        threads = _load(server, results, started)
        assert started.wait(60)
        with hetero.fault.inject(f"{victim}:infer:every=1:lost") as injection:  # from now on the device is gone
            time.sleep(0.5)
            served_before = pool.stats()["members"][f"{victim}#0"]["requests"]
            _check_all_answered(results, threads)
            assert not any(h["healthy"] for h in pool.health() if h["device"] == victim)
        assert len(injection.fired) >= 1
    members = pool.stats()["members"]
    assert members[f"{victim}#0"]["requests"] == served_before  # nothing answered on it after the kill


@pytest.mark.parametrize("body, needle", [
    (b"{not json", "JSON"),
    (json.dumps({"inputs": [{"name": "x", "shape": [1, 15], "datatype": "FP32", "data": [0.0] * 15}]}).encode(), "shape"),
    (json.dumps({"inputs": [{"name": "x", "shape": [1, 16], "datatype": "FP64", "data": [0.0] * 16}]}).encode(), "FP32"),
    (json.dumps({"inputs": [{"name": "q", "shape": [1, 16], "datatype": "FP32", "data": [0.0] * 16}]}).encode(), "'q'"),
])
def test_bad_requests_get_400_and_the_protocol_error_body(pool: Pool, body: bytes, needle: str) -> None:
    with ServerThread(pool) as server:
        request = urllib.request.Request(f"{server.url}/v2/models/mlp/infer", data=body,
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=20)
        assert info.value.code == 400
        error = json.loads(info.value.read())["error"]
        assert needle in error
        with triton.InferenceServerClient(server.address) as client:  # still serving
            np.testing.assert_allclose(_infer(client, SAMPLES[1]), ANSWERS[1], **TOLERANCE)
