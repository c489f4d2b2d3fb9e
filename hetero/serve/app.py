"""The aiohttp application of ``hetero serve``: the KServe v2 routes over one servable model.

The model's blocking ``run`` goes to a thread pool; every failure becomes a protocol error body
``{"error": message}`` (400 for a request that does not fit, 404 for an unknown model, 413 for a
body over the limit, 503 when no device could answer, 500 for a bug, which is logged). On shutdown
the application answers every request in flight, then stops the pool and closes the model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
from aiohttp import web
from aiohttp.typedefs import Handler
from prometheus_client import CONTENT_TYPE_LATEST

from hetero._version import __version__
from hetero.onnx.errors import InferenceFailedError, InputError
from hetero.serve.metrics import ServeMetrics
from hetero.serve.protocol import (
    ProtocolError, check_inputs, decode_request, encode_error, encode_response, select_outputs, tensor_metadata,
)
from hetero.serve.servable import Servable

log = logging.getLogger(__name__)

MIB = 2**20
DEFAULT_MAX_BODY_BYTES = 64 * MIB
VERSION = "1"
ROUTES_HINT = "/v2, /v2/health/live, /v2/health/ready, /v2/models/NAME[/ready|/infer], /metrics"


def default_workers() -> int:
    """Threads that run the model: twice the CPU count, at most 32."""
    return min(32, 2 * (os.cpu_count() or 1))


class ServeError(Exception):
    """An answer other than 200 with its message (unknown model, body too large, not ready)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclasses.dataclass
class ServeState:
    """What the handlers share: the model, its thread pool, metrics, limits and the in-flight count."""

    model: Servable
    executor: ThreadPoolExecutor
    metrics: ServeMetrics
    max_batch: int | None
    max_body_bytes: int
    shutdown_timeout: float
    inflight: int = 0
    idle: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    closing: bool = False

    def __post_init__(self) -> None:
        self.idle.set()

    def begin(self) -> None:
        self.inflight += 1
        self.idle.clear()
        self.metrics.set_inflight(self.inflight)

    def end(self) -> None:
        self.inflight -= 1
        self.metrics.set_inflight(self.inflight)
        if self.inflight == 0:
            self.idle.set()


STATE = web.AppKey("hetero_serve", ServeState)


def _json(payload: object, status: int = 200) -> web.Response:
    return web.json_response(payload, status=status)


def error_response(request: web.Request, exc: Exception) -> web.Response:
    """The protocol's answer to ``exc``: its status and ``{"error": message}``."""
    if isinstance(exc, ServeError):
        status, message = exc.status, exc.message
    elif isinstance(exc, (ProtocolError, InputError)):
        status, message = 400, str(exc)
    elif isinstance(exc, InferenceFailedError):
        status, message = 503, str(exc)
    elif isinstance(exc, web.HTTPRequestEntityTooLarge):
        status, message = 413, _too_large(None, request.app[STATE].max_body_bytes)
    elif isinstance(exc, web.HTTPMethodNotAllowed):
        status, message = 405, f"{request.method} is not allowed on {request.path} (allowed: {', '.join(sorted(exc.allowed_methods))})"
    elif isinstance(exc, web.HTTPNotFound):
        status, message = 404, f"no route {request.method} {request.path}; hetero serve answers {ROUTES_HINT}"
    elif isinstance(exc, web.HTTPException):
        status, message = exc.status, exc.text or exc.reason
    else:
        log.exception("hetero serve: %s %s failed", request.method, request.path, exc_info=exc)
        status, message = 500, (f"hetero serve failed on {request.method} {request.path}: {type(exc).__name__}: {exc} "
                                "(the server log has the traceback)")
    response = web.Response(body=encode_error(message), status=status, content_type="application/json")
    if status == 413:
        response.force_close()  # the rest of the body is not read (aiohttp drains it for a while, then closes)
    return response


@web.middleware
async def error_bodies(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Every exception a handler raises becomes a protocol error body; redirects pass through."""
    try:
        return await handler(request)
    except web.HTTPException as exc:
        if exc.status < 400:
            raise
        return error_response(request, exc)
    except Exception as exc:
        return error_response(request, exc)


def _too_large(size: int | None, limit: int) -> str:
    what = f"of {size} bytes" if size is not None else f"of more than {limit} bytes"
    return f"request body {what} exceeds the limit of {limit} bytes (hetero serve --max-body-mb)"


def _model(request: web.Request) -> Servable:
    """The model a ``/v2/models/{name}[/versions/{version}]`` path names, or 404."""
    model = request.app[STATE].model
    name = request.match_info["name"]
    if name != model.name:
        raise ServeError(404, f"unknown model {name!r}; this server serves {model.name!r}")
    version = request.match_info.get("version", VERSION)
    if version != VERSION:
        raise ServeError(404, f"model {name!r} has no version {version!r} (it serves version {VERSION})")
    return model


async def live(request: web.Request) -> web.Response:
    return web.Response(status=200)


async def ready(request: web.Request) -> web.Response:
    model = request.app[STATE].model
    if not model.ready():
        raise ServeError(503, f"model {model.name!r} is not ready: no pool member is healthy "
                              "(GET /metrics: hetero_pool_member_healthy)")
    return web.Response(status=200)


async def model_ready(request: web.Request) -> web.Response:
    _model(request)
    return await ready(request)


async def server_metadata(request: web.Request) -> web.Response:
    return _json({"name": "hetero", "version": __version__, "extensions": ["binary_tensor_data"]})


async def model_metadata(request: web.Request) -> web.Response:
    model = _model(request)
    return _json({"name": model.name, "versions": [VERSION], "platform": getattr(model, "platform", "onnxruntime_onnx"),
                  "inputs": [tensor_metadata(spec) for spec in model.inputs],
                  "outputs": [tensor_metadata(spec) for spec in model.outputs]})


async def metrics(request: web.Request) -> web.Response:
    return web.Response(body=request.app[STATE].metrics.exposition(), headers={"Content-Type": CONTENT_TYPE_LATEST})


def answer(model: Servable, body: bytes, header_length: str | None, max_batch: int | None) -> tuple[bytes, int | None]:
    """Decode, check, run and encode one inference request (in a worker thread): the response body and
    the length of its JSON part when raw tensor bytes follow."""
    request = decode_request(body, header_length)
    check_inputs(model.name, request.inputs, model.inputs, max_batch)
    wanted = select_outputs(model.name, request, model.outputs)
    results = model.run(request.inputs, None if request.outputs is None else [output.name for output in wanted])
    missing = [output.name for output in wanted if output.name not in results]
    if missing:
        raise RuntimeError(f"model {model.name!r} returned no {', '.join(missing)} (it returned {', '.join(results) or 'nothing'})")
    return encode_response(model.name, [(o.name, np.asarray(results[o.name]), o.binary) for o in wanted], request.id)


async def infer(request: web.Request) -> web.Response:
    state = request.app[STATE]
    model = _model(request)
    state.begin()
    start = time.perf_counter()
    status = 500
    try:
        try:
            response = await _infer(request, state, model)
        except Exception as exc:
            response = error_response(request, exc)
        status = response.status
        if state.closing:
            response.force_close()
        return response
    finally:
        state.metrics.observe(status, time.perf_counter() - start)
        state.end()


async def _infer(request: web.Request, state: ServeState, model: Servable) -> web.Response:
    if request.content_length is not None and request.content_length > state.max_body_bytes:
        raise ServeError(413, _too_large(request.content_length, state.max_body_bytes))
    body = await request.read()
    header_length = request.headers.get("Inference-Header-Content-Length")
    loop = asyncio.get_running_loop()
    payload, json_length = await loop.run_in_executor(state.executor, answer, model, body, header_length, state.max_batch)
    if json_length is None:
        response = web.Response(body=payload, content_type="application/json")
    else:
        response = web.Response(body=payload, content_type="application/octet-stream",
                                headers={"Inference-Header-Content-Length": str(json_length)})
    if any(coding in request.headers.get("Accept-Encoding", "") for coding in ("gzip", "deflate")):
        response.enable_compression()
    return response


async def _drain(app: web.Application) -> None:
    """On shutdown (the listening socket already closed): wait for every request in flight."""
    state = app[STATE]
    state.closing = True
    if state.inflight:
        log.info("hetero serve: finishing %d request(s) in flight", state.inflight)
    try:
        await asyncio.wait_for(state.idle.wait(), state.shutdown_timeout)
    except TimeoutError:
        log.warning("hetero serve: %d request(s) still running after %.0f s; stopping without them",
                    state.inflight, state.shutdown_timeout)


async def _close(app: web.Application) -> None:
    """On cleanup (every connection closed): stop the worker threads, then close the model."""
    state = app[STATE]
    state.executor.shutdown(wait=state.inflight == 0, cancel_futures=True)
    try:
        state.model.close()
    except Exception:
        log.exception("hetero serve: closing model %r failed", state.model.name)


def make_app(model: Servable, *, max_batch: int | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
             workers: int | None = None, shutdown_timeout: float = 30.0) -> web.Application:
    """The KServe v2 application serving ``model``. ``max_batch``: the largest first (batch) dimension
    a free-batch input takes (None: any); ``max_body_bytes``: the largest request body; ``workers``:
    threads that run the model (default: twice the CPU count, at most 32); ``shutdown_timeout``:
    seconds shutdown waits for requests in flight."""
    if max_batch is not None and max_batch < 1:
        raise ValueError(f"max_batch must be at least 1 (or None for no limit), got {max_batch}")
    if max_body_bytes < 1:
        raise ValueError(f"max_body_bytes must be at least 1, got {max_body_bytes}")
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    app = web.Application(client_max_size=max_body_bytes, middlewares=[error_bodies])
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hetero-serve")
    app[STATE] = ServeState(model, executor, ServeMetrics(model), max_batch, max_body_bytes, shutdown_timeout)
    models = "/v2/models/{name}"
    versions = "/v2/models/{name}/versions/{version}"
    app.add_routes([
        web.get("/v2/health/live", live), web.get("/v2/health/ready", ready), web.get("/v2", server_metadata),
        web.get(models, model_metadata), web.get(versions, model_metadata),
        web.get(models + "/ready", model_ready), web.get(versions + "/ready", model_ready),
        web.post(models + "/infer", infer), web.post(versions + "/infer", infer),
        web.get("/metrics", metrics),
    ])
    app.on_shutdown.append(_drain)
    app.on_cleanup.append(_close)
    return app


__all__ = ["DEFAULT_MAX_BODY_BYTES", "STATE", "ServeError", "ServeState", "make_app"]
