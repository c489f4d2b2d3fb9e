"""``hetero serve`` over real HTTP on 127.0.0.1: the official ``tritonclient.http`` client (binary
and JSON tensors, concurrency), bad requests answered with protocol error bodies, metrics, a
graceful shutdown that answers every request in flight, and the ``hetero serve`` command's wiring."""

from __future__ import annotations

import argparse
import inspect
import json
import socket
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.http as triton
from tests.fakes.servable import NumpyServable
from tritonclient.utils import InferenceServerException

from hetero.cli import serve as cli_serve
from hetero.core.exit_status import UsageError
from hetero.onnx.errors import InputError
from hetero.serve import ServerThread
from hetero.serve.app import STATE

MAX_BODY = 64 * 1024
MAX_BATCH = 16


@pytest.fixture(scope="module")
def model() -> NumpyServable:
    return NumpyServable()


@pytest.fixture(scope="module")
def server(model: NumpyServable) -> Iterator[ServerThread]:
    with ServerThread(model, max_batch=MAX_BATCH, max_body_bytes=MAX_BODY, workers=4) as running:
        yield running


@pytest.fixture
def client(server: ServerThread) -> Iterator[triton.InferenceServerClient]:
    with triton.InferenceServerClient(server.address, network_timeout=20) as c:
        yield c


def rows(n: int, seed: int = 1) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, 4)).astype(np.float32)


def http(server: ServerThread, path: str, body: bytes | Iterator[bytes] | None = None, headers: dict[str, str] | None = None,
         method: str | None = None) -> tuple[int, dict[str, str], bytes]:
    """One raw HTTP request: status, headers, body (error statuses included)."""
    request = urllib.request.Request(server.url + path, data=body, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(request, timeout=20) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def infer_json(server: ServerThread, request: Any, path: str = "/v2/models/linear/infer",
               headers: dict[str, str] | None = None) -> tuple[int, Any]:
    body = request if isinstance(request, bytes) else json.dumps(request).encode()
    status, response_headers, payload = http(server, path, body, headers)
    assert response_headers["Content-Type"].startswith("application/json"), response_headers
    return status, json.loads(payload)


def x_entry(x: np.ndarray, datatype: str = "FP32") -> dict[str, Any]:
    return {"name": "x", "shape": list(x.shape), "datatype": datatype, "data": x.ravel().tolist()}


def assert_serves(server: ServerThread, model: NumpyServable) -> None:
    x = rows(3, seed=9)
    status, response = infer_json(server, {"inputs": [x_entry(x)]})
    assert status == 200, response
    np.testing.assert_array_equal(np.array(response["outputs"][0]["data"], np.float32).reshape(3, 3), model.expected(x))


def test_health_and_metadata_through_tritonclient(client: triton.InferenceServerClient) -> None:
    assert client.is_server_live() and client.is_server_ready()
    assert client.is_model_ready("linear") and client.is_model_ready("linear", model_version="1")
    assert not client.is_model_ready("other")
    assert client.get_server_metadata() == {"name": "hetero", "version": client.get_server_metadata()["version"],
                                            "extensions": ["binary_tensor_data"]}
    metadata = client.get_model_metadata("linear")
    assert metadata == {"name": "linear", "versions": ["1"], "platform": "onnxruntime_onnx",
                        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
                        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 3]}]}
    with pytest.raises(InferenceServerException, match="unknown model 'other'; this server serves 'linear'"):
        client.get_model_metadata("other")


@pytest.mark.parametrize("binary_in", [True, False], ids=["binary-in", "json-in"])
@pytest.mark.parametrize("binary_out", [True, False, None], ids=["binary-out", "json-out", "default-out"])
def test_infer_through_tritonclient_matches_numpy_exactly(client: triton.InferenceServerClient, model: NumpyServable,
                                                          binary_in: bool, binary_out: bool | None) -> None:
    x = rows(5)
    feed = triton.InferInput("x", list(x.shape), "FP32")
    feed.set_data_from_numpy(x, binary_data=binary_in)
    outputs = None if binary_out is None else [triton.InferRequestedOutput("y", binary_data=binary_out)]
    result = client.infer("linear", [feed], outputs=outputs, request_id="req-1")
    y = result.as_numpy("y")
    assert y.dtype == np.float32 and y.tobytes() == model.expected(x).tobytes()
    response = result.get_response()
    assert response["id"] == "req-1" and response["model_name"] == "linear"
    assert ("binary_data_size" in response["outputs"][0].get("parameters", {})) == (binary_out is not False)


def test_versioned_and_compressed_infer(client: triton.InferenceServerClient, model: NumpyServable) -> None:
    x = rows(2)
    feed = triton.InferInput("x", list(x.shape), "FP32").set_data_from_numpy(x)
    for algorithm in ("gzip", "deflate"):
        result = client.infer("linear", [feed], model_version="1", request_compression_algorithm=algorithm,
                              response_compression_algorithm=algorithm)
        assert result.as_numpy("y").tobytes() == model.expected(x).tobytes()
    with pytest.raises(InferenceServerException, match="model 'linear' has no version '2'"):
        client.infer("linear", [feed], model_version="2")


def test_binary_responses_are_octet_streams_with_the_header_length(server: ServerThread, model: NumpyServable) -> None:
    x = rows(2)
    head = json.dumps({"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}],
                       "outputs": [{"name": "y", "parameters": {"binary_data": True}}]}).encode()
    status, headers, body = http(server, "/v2/models/linear/infer", head + x.tobytes(),
                                 {"Inference-Header-Content-Length": str(len(head))})
    assert status == 200 and headers["Content-Type"] == "application/octet-stream"
    length = int(headers["Inference-Header-Content-Length"])
    header = json.loads(body[:length])
    assert header["outputs"][0]["parameters"]["binary_data_size"] == 24 == len(body) - length
    assert np.frombuffer(body[length:], "<f4").reshape(2, 3).tobytes() == model.expected(x).tobytes()


def test_concurrent_clients_all_get_correct_answers(server: ServerThread, model: NumpyServable) -> None:
    threads, requests = 8, 50
    wrong: list[str] = []
    done = [0] * threads

    def work(index: int) -> None:
        try:
            with triton.InferenceServerClient(server.address, network_timeout=20) as c:
                for i in range(requests):
                    x = rows(1 + (index + i) % 8, seed=index * 1000 + i)
                    feed = triton.InferInput("x", list(x.shape), "FP32").set_data_from_numpy(x, binary_data=i % 2 == 0)
                    y = c.infer("linear", [feed]).as_numpy("y")
                    if y.tobytes() != model.expected(x).tobytes():
                        wrong.append(f"thread {index} request {i}")
                    done[index] += 1
        except Exception as exc:  # reported below, not lost in the thread
            wrong.append(f"thread {index}: {type(exc).__name__}: {exc}")

    workers = [threading.Thread(target=work, args=(i,), daemon=True) for i in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=120)
    assert not any(worker.is_alive() for worker in workers), f"requests still running; done per thread: {done}"
    assert not wrong, wrong[:5]
    assert done == [requests] * threads


@pytest.mark.parametrize(("request_body", "message"), [
    (b'{"inputs": [', "request body is not valid JSON"),
    ({"inputs": [{"name": "w", "shape": [1, 4], "datatype": "FP32", "data": [1, 2, 3, 4]}]},
     "model 'linear' has no input 'w' (its inputs: x: float32[?, 4])"),
    ({"inputs": [x_entry(rows(1).astype(np.float64), "FP64")]}, "input 'x' must be FP32 (x: float32[?, 4]), got FP64"),
    ({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [0] * 6}]},
     "input 'x' has shape [2, 3], but model 'linear' takes x: float32[?, 4]"),
    ({"inputs": [{"name": "x", "shape": [2, 4], "datatype": "FP32", "data": [0] * 7}]},
     "input 'x': shape [2, 4] needs 8 elements, 'data' has 7"),
    ({"inputs": [x_entry(rows(1))], "outputs": [{"name": "z"}]}, "model 'linear' has no output 'z' (its outputs: y: float32[?, 3])"),
    ({"inputs": [x_entry(rows(MAX_BATCH + 1))]}, f"batch of {MAX_BATCH + 1} (its first dimension), over the limit of {MAX_BATCH}"),
    ({"inputs": [{"name": "x", "shape": [1, 4], "datatype": "BYTES", "data": ["a"] * 4}]}, "datatype BYTES is not supported"),
], ids=["malformed-json", "wrong-name", "wrong-dtype", "wrong-shape", "shape-data-mismatch", "unknown-output", "over-max-batch",
        "bytes"])
def test_bad_requests_get_400_with_a_protocol_error_body(server: ServerThread, model: NumpyServable,
                                                         request_body: Any, message: str) -> None:
    status, response = infer_json(server, request_body)
    assert status == 400 and message in response["error"], response
    assert set(response) == {"error"}
    assert_serves(server, model)


def test_oversized_bodies_get_413(server: ServerThread, model: NumpyServable) -> None:
    status, response = infer_json(server, b" " * (MAX_BODY + 1))
    assert status == 413
    assert response == {"error": f"request body of {MAX_BODY + 1} bytes exceeds the limit of {MAX_BODY} bytes "
                                 "(hetero serve --max-body-mb)"}
    chunks = iter([b" " * 40000, b" " * 40000])  # no Content-Length: chunked, refused once the body passes the limit
    status, headers, body = http(server, "/v2/models/linear/infer", chunks, {"Content-Type": "application/json"})
    assert status == 413 and json.loads(body) == {
        "error": f"request body of more than {MAX_BODY} bytes exceeds the limit of {MAX_BODY} bytes (hetero serve --max-body-mb)"}
    assert_serves(server, model)


def test_unknown_models_routes_and_methods_get_json_errors(server: ServerThread, model: NumpyServable) -> None:
    status, response = infer_json(server, {"inputs": [x_entry(rows(1))]}, path="/v2/models/other/infer")
    assert status == 404 and response["error"] == "unknown model 'other'; this server serves 'linear'"
    status, _, body = http(server, "/v2/nothing/here")
    assert status == 404 and "no route GET /v2/nothing/here" in json.loads(body)["error"]
    status, _, body = http(server, "/v2/models/linear/infer", method="GET")
    assert status == 405 and "GET is not allowed on /v2/models/linear/infer" in json.loads(body)["error"]
    assert_serves(server, model)


def test_model_errors_map_to_400_503_and_500(caplog: pytest.LogCaptureFixture) -> None:
    request = {"inputs": [x_entry(rows(2))]}
    with ServerThread(NumpyServable(fail_first=1), workers=2) as server:
        status, response = infer_json(server, request)
        assert status == 503 and "fail_first=1 (test tool)" in response["error"] and "try 1: cpu#0 (cpu)" in response["error"]
        assert infer_json(server, request)[0] == 200  # the next one is answered
    with ServerThread(NumpyServable(error=InputError("x holds NaN", name="x")), workers=2) as server:
        assert infer_json(server, request) == (400, {"error": "x holds NaN"})
    with ServerThread(NumpyServable(error=ZeroDivisionError("boom")), workers=2) as server:
        status, response = infer_json(server, request)
        assert status == 500 and "ZeroDivisionError: boom" in response["error"]
        assert "ZeroDivisionError" in caplog.text  # logged, with its traceback
        assert http(server, "/v2/health/live")[0] == 200  # and the server lives on


def test_readiness_follows_the_model() -> None:
    model = NumpyServable()
    with ServerThread(model, workers=1) as server:
        model.healthy = False
        status, _, body = http(server, "/v2/health/ready")
        assert status == 503 and "not ready" in json.loads(body)["error"]
        assert http(server, "/v2/models/linear/ready")[0] == 503
        assert http(server, "/v2/health/live")[0] == 200
        model.healthy = True
        assert http(server, "/v2/health/ready")[0] == 200


def test_metrics_count_requests_and_read_the_pool(server: ServerThread, model: NumpyServable) -> None:
    assert_serves(server, model)
    infer_json(server, b"{")
    status, headers, body = http(server, "/metrics")
    text = body.decode()
    assert status == 200 and headers["Content-Type"].startswith("text/plain")
    assert 'hetero_serve_requests_total{model="linear",outcome="ok"}' in text
    assert 'hetero_serve_requests_total{model="linear",outcome="invalid"}' in text
    assert 'hetero_serve_request_seconds_count{model="linear"}' in text
    assert 'hetero_serve_inflight{model="linear"} 0.0' in text
    assert f'hetero_pool_requests_total{{device="cpu",member="cpu#0"}} {float(model.started)}' in text
    assert 'hetero_pool_failures_total{device="cpu",member="cpu#0"} 0.0' in text
    assert "hetero_pool_retries_total 0.0" in text
    assert 'hetero_pool_member_healthy{device="cpu",member="cpu#0"} 1.0' in text


def test_shutdown_answers_every_request_in_flight() -> None:
    model = NumpyServable(delay=0.3)
    server = ServerThread(model, workers=8).start()
    answers: list[tuple[int, Any]] = []
    inputs = [rows(2, seed=i) for i in range(6)]

    def call(x: np.ndarray) -> None:
        answers.append(infer_json(server, {"inputs": [x_entry(x)]}))

    callers = [threading.Thread(target=call, args=(x,), daemon=True) for x in inputs]
    for caller in callers:
        caller.start()
    deadline = time.monotonic() + 10
    while server.app[STATE].inflight < len(callers) and time.monotonic() < deadline:
        time.sleep(0.01)
    assert server.app[STATE].inflight == len(callers)
    server.stop(timeout=20)  # returns after the requests were answered and the model closed
    for caller in callers:
        caller.join(timeout=20)
    assert len(answers) == len(callers) and all(status == 200 for status, _ in answers), answers
    expected = sorted(model.expected(x).ravel().tolist() for x in inputs)
    assert sorted(response["outputs"][0]["data"] for _, response in answers) == expected
    assert model.closed and model.finished == len(callers)
    with pytest.raises(OSError):  # no longer listening
        urllib.request.urlopen(server.url + "/v2/health/live", timeout=5)


def test_a_taken_port_is_an_error_that_names_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        model = NumpyServable()
        with pytest.raises(OSError, match=f"hetero serve cannot listen on 127.0.0.1:{port}: .*pick another --port"):
            ServerThread(model, port=port).start()
        assert model.closed


# -- the hetero serve command -------------------------------------------------------------------

def serve_parser() -> tuple[argparse.ArgumentParser, dict[str, Any]]:
    parser = argparse.ArgumentParser(prog="hetero")
    handlers = cli_serve.add_commands(parser.add_subparsers(dest="command"))
    return parser, handlers


def test_serve_command_builds_the_pool_and_serves_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import hetero.onnx.pool
    import hetero.serve.runner

    model_file = tmp_path / "resnet.onnx"
    model_file.write_bytes(b"not read: the pool is replaced")
    made: dict[str, Any] = {}
    served: dict[str, Any] = {}
    signature = inspect.signature(hetero.onnx.pool.Pool)

    def fake_pool(*args: Any, **kwargs: Any) -> NumpyServable:
        signature.bind(*args, **kwargs)  # the real Pool takes these arguments
        made.update(kwargs, path=args[0])
        return NumpyServable(kwargs["name"])

    def fake_serve(pool: NumpyServable, **kwargs: Any) -> None:
        served.update(kwargs, pool=pool)

    monkeypatch.setattr(hetero.onnx.pool, "Pool", fake_pool)
    monkeypatch.setattr(hetero.serve.runner, "serve", fake_serve)
    parser, handlers = serve_parser()
    args = parser.parse_args(["serve", str(model_file), "--devices", "cpu,oneapi:0", "--port", "9001", "--host", "0.0.0.0",
                              "--max-batch", "32", "--max-body-mb", "2", "--replicas", "2", "--policy", "round-robin",
                              "--fallback-cpu", "--allow-partial"])
    assert handlers["serve"](args) == 0
    assert made == {"path": str(model_file), "devices": ["cpu", "oneapi:0"], "policy": "round-robin", "replicas": 2,
                    "fallback": "cpu", "partial": "allow", "name": "resnet"}
    assert served["pool"].name == "resnet"
    assert {k: v for k, v in served.items() if k != "pool"} == {
        "host": "0.0.0.0", "port": 9001, "max_batch": 32, "max_body_bytes": 2 * 2**20, "workers": None,
        "max_json_bytes": None, "max_inflight_bytes": None, "max_concurrent": 64, "header_timeout": 10.0,
        "body_timeout": 30.0, "shutdown_timeout": 5.0}
    made.clear()
    assert handlers["serve"](parser.parse_args(["serve", str(model_file), "--name", "clf"])) == 0
    assert made["devices"] == "all" and made["fallback"] is None and made["name"] == "clf" and made["partial"] == "refuse"
    assert made["policy"] == "least-outstanding" and made["replicas"] == 1
    assert served["port"] == 8000 and served["host"] == "127.0.0.1" and served["max_body_bytes"] == 64 * 2**20
    made.clear()
    limits = ["--max-json-mb", "1", "--max-inflight-mb", "100", "--max-concurrent", "3", "--header-timeout", "2",
              "--body-timeout", "4", "--drain-timeout", "0"]
    assert handlers["serve"](parser.parse_args(["serve", str(model_file), *limits])) == 0
    assert {k: served[k] for k in ("max_json_bytes", "max_inflight_bytes", "max_concurrent", "header_timeout",
                                   "body_timeout", "shutdown_timeout")} == {
        "max_json_bytes": 2**20, "max_inflight_bytes": 100 * 2**20, "max_concurrent": 3, "header_timeout": 2.0,
        "body_timeout": 4.0, "shutdown_timeout": 0.0}


def test_serve_command_refuses_a_missing_model_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    parser, handlers = serve_parser()
    missing = tmp_path / "absent.onnx"
    # the handler raises; hetero's main says it in one line ("hetero: error: ...") and exits 2
    with pytest.raises(UsageError, match=f"model file {missing} does not exist"):
        handlers["serve"](parser.parse_args(["serve", str(missing)]))
    from hetero.cli.main import main

    assert main(["serve", str(missing)]) == 2
    assert f"hetero: error: model file {missing} does not exist" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["--port", "70000"], ["--max-batch", "0"], ["--replicas", "0"], ["--max-body-mb", "-1"],
                                  ["--devices", ","]])
def test_serve_command_rejects_bad_options(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    parser, _ = serve_parser()
    with pytest.raises(SystemExit) as caught:
        parser.parse_args(["serve", "m.onnx", *argv])
    assert caught.value.code == 2 and argv[0] in capsys.readouterr().err
