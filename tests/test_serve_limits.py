"""``hetero serve`` under hostile or careless clients, on 127.0.0.1 with few sockets and short
limits: a half-sent head or body is cut off by its timeout, requests over the concurrency cap or
the body-memory budget get 503 at once, a JSON part over its cap is refused before it is parsed,
tensors whose shape and datatype would take more memory than allowed are refused before they are
made, every malformed body is a 400 (never a 500), and SIGTERM stops within the drain timeout
while a client sits silent."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from hetero.serve import ServerThread
from hetero.serve.app import STATE
from tests.fakes.servable import NumpyServable

PATH = "/v2/models/linear/infer"


def _connect(server: ServerThread) -> socket.socket:
    sock = socket.create_connection((server.host, server.port), timeout=10)
    sock.settimeout(10)
    return sock


def _head(length: int | None, extra: str = "") -> bytes:
    size = "" if length is None else f"Content-Length: {length}\r\n"
    return f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n{size}{extra}\r\n".encode()


def _answer(sock: socket.socket, limit: float = 10.0) -> tuple[int, dict[str, str], bytes]:
    """The status, headers and body of the one response on ``sock`` (the server closes or sends a length)."""
    sock.settimeout(limit)
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            raise ConnectionError(f"closed before a response head: {data!r}")
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode().split("\r\n")
    headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    length = int(headers.get("content-length", "0"))
    while len(body) < length:
        chunk = sock.recv(65536)
        if not chunk:
            break
        body += chunk
    return int(lines[0].split()[1]), headers, body


def _closed_within(sock: socket.socket, seconds: float) -> bool:
    """Whether the server closes ``sock`` (EOF or reset) within ``seconds``, any bytes it sends first read."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            if not sock.recv(65536):
                return True
        except (ConnectionResetError, BrokenPipeError):
            return True
        except TimeoutError:
            return False
    return False


def _body(x: np.ndarray) -> bytes:
    return json.dumps({"inputs": [{"name": "x", "shape": list(x.shape), "datatype": "FP32",
                                   "data": x.ravel().tolist()}]}).encode()


def _post(server: ServerThread, body: bytes, extra: str = "") -> tuple[int, dict[str, str], bytes]:
    with _connect(server) as sock:
        sock.sendall(_head(len(body), extra) + body)
        return _answer(sock)


def _serves(server: ServerThread, model: NumpyServable) -> None:
    x = np.ones((2, 4), np.float32)
    status, _, body = _post(server, _body(x))
    assert status == 200, body
    np.testing.assert_array_equal(np.array(json.loads(body)["outputs"][0]["data"], np.float32).reshape(2, 3),
                                  model.expected(x))


@pytest.fixture
def model() -> NumpyServable:
    return NumpyServable()


@pytest.fixture
def server(model: NumpyServable) -> Iterator[ServerThread]:
    with ServerThread(model, workers=2, header_timeout=0.5, body_timeout=0.5, max_concurrent=2,
                      max_body_bytes=64 * 1024, max_json_bytes=8 * 1024, max_inflight_bytes=128 * 1024,
                      shutdown_timeout=2.0) as running:
        yield running


def test_silent_and_half_sent_heads_are_closed_after_the_header_timeout(server: ServerThread, model: NumpyServable) -> None:
    silent = [_connect(server) for _ in range(4)]
    half = _connect(server)
    half.sendall(f"POST {PATH} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-".encode())
    try:
        assert all(_closed_within(sock, 5.0) for sock in [*silent, half])
    finally:
        for sock in [*silent, half]:
            sock.close()
    _serves(server, model)


def test_a_half_sent_body_gets_408_after_the_body_timeout(server: ServerThread, model: NumpyServable) -> None:
    with _connect(server) as sock:
        sock.sendall(_head(1000) + b'{"inputs": [')
        started = time.monotonic()
        status, _, body = _answer(sock, limit=5.0)
        assert status == 408 and time.monotonic() - started < 4.0
        assert "--body-timeout" in json.loads(body)["error"]
        assert _closed_within(sock, 3.0)  # after at most a second of lingering for the rest of the body
    assert server.app[STATE].inflight == 0
    _serves(server, model)


def test_requests_over_the_concurrency_cap_get_503_at_once(server: ServerThread, model: NumpyServable) -> None:
    slow = [_connect(server) for _ in range(2)]
    try:
        for sock in slow:  # two requests still sending their bodies: the cap (2) is reached
            sock.sendall(_head(100) + b"{")
        deadline = time.monotonic() + 5
        while server.app[STATE].inflight < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        status, headers, body = _post(server, _body(np.ones((1, 4), np.float32)))
        assert status == 503 and headers.get("retry-after") == "1"
        assert "--max-concurrent" in json.loads(body)["error"]
    finally:
        for sock in slow:
            sock.close()
    deadline = time.monotonic() + 5
    while server.app[STATE].inflight and time.monotonic() < deadline:
        time.sleep(0.01)
    _serves(server, model)


def test_bodies_over_the_memory_budget_get_503(model: NumpyServable) -> None:
    with ServerThread(model, workers=2, body_timeout=5.0, max_concurrent=8, max_body_bytes=64 * 1024,
                      max_inflight_bytes=100 * 1024) as server:
        holding = _connect(server)
        try:
            holding.sendall(_head(60 * 1024) + b"{")  # 60 KiB announced: held until the request ends
            deadline = time.monotonic() + 5
            while server.app[STATE].inflight < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
            status, headers, body = _post(server, b" " * (50 * 1024))
            assert status == 503 and headers.get("retry-after") == "1"
            assert "--max-inflight-mb" in json.loads(body)["error"]
        finally:
            holding.close()
        deadline = time.monotonic() + 5
        while server.app[STATE].inflight and time.monotonic() < deadline:
            time.sleep(0.01)
        _serves(server, model)


def test_a_json_part_over_its_cap_is_refused_before_it_is_parsed(server: ServerThread, model: NumpyServable) -> None:
    status, _, body = _post(server, b"[" * (9 * 1024))  # not JSON at all: a parse would say 400
    assert status == 413
    message = json.loads(body)["error"]
    assert "--max-json-mb" in message and "binary" in message
    # the same tensor sent binary is fine: the cap is on the JSON part
    x = np.ones((600, 4), np.float32)  # 9.6 KiB of raw bytes
    head = json.dumps({"inputs": [{"name": "x", "shape": [600, 4], "datatype": "FP32",
                                   "parameters": {"binary_data_size": x.nbytes}}]}).encode()
    status, _, body = _post(server, head + x.tobytes(), f"Inference-Header-Content-Length: {len(head)}\r\n")
    assert status == 200, body


@pytest.mark.parametrize("entry, needle", [
    ({"data": None}, "'data' must be a list"),
    ({"data": {"a": 1}}, "'data' must be a list"),
    ({"data": "1,2,3,4"}, "'data' must be a list"),
    ({"data": [1, 2, 3, {"a": 1}]}, "must hold numbers"),
    ({"data": [1, 2, None, 4]}, "must hold numbers"),
    ({"data": [[1, 2], [3, [4]]]}, "'data' must be a list of numbers"),
    ({"shape": [0, 2**62], "data": []}, "over the limit"),
    ({"shape": [2**62, 0], "data": []}, "over the limit"),
    ({"shape": [2**40, 2**40], "data": [1]}, "over the limit"),
    ({"datatype": "INT64", "data": [1, 2, None, 4]}, "must hold integers"),
    ({"datatype": "INT64", "data": [1, 2, {"a": 1}, 4]}, "must hold integers"),
    ({"datatype": "INT64", "data": [1, 2, 2**70, 4]}, "outside the range of INT64"),
    ({"datatype": "BOOL", "data": [True, None, True, False]}, "must hold true or false"),
], ids=["null", "object", "string", "object-inside", "null-inside", "ragged", "zero-then-huge", "huge-then-zero",
        "huge", "int-null", "int-object", "int-overflow", "bool-null"])
def test_malformed_tensors_get_400_never_500(server: ServerThread, model: NumpyServable, entry: dict[str, Any],
                                             needle: str) -> None:
    tensor = {"name": "x", "shape": [1, 4], "datatype": "FP32", **entry}
    status, _, body = _post(server, json.dumps({"inputs": [tensor]}).encode())
    assert status == 400, body
    assert needle in json.loads(body)["error"], body
    _serves(server, model)


def test_a_zero_dimension_next_to_sane_ones_still_decodes(server: ServerThread) -> None:
    status, _, body = _post(server, json.dumps({"inputs": [{"name": "x", "shape": [0, 4], "datatype": "FP32",
                                                            "data": []}]}).encode())
    assert status == 200, body
    assert json.loads(body)["outputs"][0]["shape"] == [0, 3]


@pytest.mark.parametrize("argv, message", [
    (["--max-inflight-mb", "1", "--max-body-mb", "2"], "--max-inflight-mb"),
    (["--header-timeout", "0"], "--header-timeout"),
    (["--max-concurrent", "0"], "--max-concurrent"),
])
def test_limit_flags_are_checked(argv: list[str], message: str, capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from hetero.cli.main import main

    model_file = tmp_path / "m.onnx"
    model_file.write_bytes(b"unused")
    try:
        code = main(["serve", str(model_file), *argv])
    except SystemExit as exit_:  # argparse's own check
        code = exit_.code
    assert code == 2
    assert message in capsys.readouterr().err


def test_sigterm_stops_within_the_drain_timeout_while_clients_sit_silent(tmp_path: Path) -> None:
    """The command itself: a silent socket and a request whose body never comes must not hold the
    shutdown for aiohttp's 60 s."""
    pytest.importorskip("onnxruntime")
    from tests.onnx_models import mlp

    model_file = tmp_path / "mlp.onnx"
    model_file.write_bytes(mlp().data)
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(Path(__file__).resolve().parent.parent),
                                                        os.environ.get("PYTHONPATH", "")])}
    process = subprocess.Popen([sys.executable, "-m", "hetero", "serve", str(model_file), "--devices", "cpu",
                                "--port", str(port), "--drain-timeout", "1", "--body-timeout", "60",
                                "--header-timeout", "60"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    sockets: list[socket.socket] = []
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            try:
                sockets.append(socket.create_connection(("127.0.0.1", port), timeout=1))
                break
            except OSError:
                assert process.poll() is None, process.stdout.read().decode() if process.stdout else ""
                time.sleep(0.2)
        assert sockets, "hetero serve did not listen within 60 s"
        half = socket.create_connection(("127.0.0.1", port), timeout=5)
        sockets.append(half)
        half.sendall(_head(1000).replace(PATH.encode(), b"/v2/models/mlp/infer") + b"{")
        time.sleep(0.3)
        started = time.monotonic()
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=15)
        except subprocess.TimeoutExpired:
            pytest.fail("hetero serve still running 15 s after SIGTERM with a silent client")
        assert time.monotonic() - started < 8
        assert process.returncode == 0, process.stdout.read().decode() if process.stdout else ""
    finally:
        for sock in sockets:
            sock.close()
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)


def test_a_client_leaving_mid_body_is_not_logged_as_a_server_bug(server: ServerThread, model: NumpyServable,
                                                                 caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level("ERROR", logger="hetero.serve"):
        with _connect(server) as sock:
            sock.sendall(_head(1000) + b'{"inputs": [')
            deadline = time.monotonic() + 5
            while server.app[STATE].inflight < 1 and time.monotonic() < deadline:
                time.sleep(0.01)
        deadline = time.monotonic() + 5
        while server.app[STATE].inflight and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.app[STATE].inflight == 0
    assert not [r for r in caplog.records if r.levelname == "ERROR"], [r.getMessage() for r in caplog.records]
    _serves(server, model)
