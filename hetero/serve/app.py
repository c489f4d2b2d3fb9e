"""The aiohttp application of ``hetero serve``: the KServe v2 routes over one servable model.

The model's blocking ``run`` goes to a thread pool; every failure becomes a protocol error body
``{"error": message}`` (400 for a request that does not fit, 404 for an unknown model, 413 for a
body over the limit, 408 for a body that did not arrive in time, 503 when no device could answer or
the server is full, 500 for a bug, which is logged). What a client may take, time and memory, is
bounded by :class:`hetero.serve.limits.ServeLimits`. On shutdown the application answers the
requests being run (within the drain timeout), then stops the pool and closes the model.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import os
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np
from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.typedefs import Handler
from aiohttp.web_protocol import RequestPayloadError
from prometheus_client import CONTENT_TYPE_LATEST

from hetero._version import __version__
from hetero.onnx.errors import InferenceFailedError, InputError
from hetero.onnx.spec import TensorSpec
from hetero.serve.limits import DEFAULT_MAX_BODY_BYTES, BodyBudget, ServeError, ServeLimits, read_body
from hetero.serve.metrics import ServeMetrics
from hetero.serve.protocol import (
    ProtocolError,
    check_inputs,
    decode_request,
    encode_error,
    encode_response,
    select_outputs,
    tensor_metadata,
)
from hetero.serve.servable import Servable

log = logging.getLogger(__name__)

VERSION = "1"
ROUTES_HINT = "/v2, /v2/health/live, /v2/health/ready, /v2/models/NAME[/ready|/infer], /metrics"


def default_workers() -> int:
    """Threads that run the model: twice the CPU count, at most 32."""
    return min(32, 2 * (os.cpu_count() or 1))


@dataclasses.dataclass
class ServeState:
    """What the handlers share: the model, its thread pool, metrics, limits, the bodies held and
    the in-flight count (requests being read or run)."""

    model: Servable
    executor: ThreadPoolExecutor
    metrics: ServeMetrics
    max_batch: int | None
    limits: ServeLimits
    inflight: int = 0
    idle: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    stopping: asyncio.Event = dataclasses.field(default_factory=asyncio.Event)
    closing: bool = False
    budget: BodyBudget = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.idle.set()
        self.budget = BodyBudget(self.limits)

    @property
    def max_body_bytes(self) -> int:
        return self.limits.max_body_bytes

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
    headers: dict[str, str] = {}
    if isinstance(exc, ServeError):
        status, message, headers = exc.status, exc.message, exc.headers
    elif isinstance(exc, (RequestPayloadError, HttpProcessingError)):  # a broken chunked or compressed body
        status, message = 400, f"the request body could not be read: {exc}"
    elif isinstance(exc, ConnectionError):  # the client left mid-body: no one reads this answer, no bug to log
        status, message = 400, f"the client closed the connection before its request body arrived ({exc})"
    elif isinstance(exc, (ProtocolError, InputError)):
        status, message = 400, str(exc)
    elif isinstance(exc, InferenceFailedError):
        status, message = 503, str(exc)
    elif isinstance(exc, web.HTTPRequestEntityTooLarge):
        status, message = 413, request.app[STATE].limits.too_large(None).message
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
    response = web.Response(body=encode_error(message), status=status, content_type="application/json", headers=headers)
    if status in (408, 413) or headers.get("Retry-After"):
        response.force_close()  # the rest of the body is not read (aiohttp would drain it for a while)
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


def answer(model: Servable, body: bytes, header_length: str | None, max_batch: int | None,
           max_tensor_bytes: int | None = None) -> tuple[bytes, int | None]:
    """Decode, check, run and encode one inference request (in a worker thread): the response body and
    the length of its JSON part when raw tensor bytes follow. ``max_tensor_bytes``: what the decoded
    inputs may take."""
    request = decode_request(body, header_length, max_tensor_bytes)
    check_inputs(model.name, request.inputs, model.inputs, max_batch)
    wanted = select_outputs(model.name, request, model.outputs)
    results = model.run(request.inputs, None if request.outputs is None else [output.name for output in wanted])
    missing = [output.name for output in wanted if output.name not in results]
    if missing:
        raise RuntimeError(f"model {model.name!r} returned no {', '.join(missing)} (it returned {', '.join(results) or 'nothing'})")
    specs = {spec.name: spec for spec in model.outputs}
    return encode_response(model.name, [(o.name, _value(results[o.name], specs.get(o.name)), o.binary) for o in wanted],
                           request.id)


def _value(result: Any, spec: TensorSpec | None) -> Any:
    """A numeric tensor output as an array; any other (a list of dicts) as it is."""
    return result if spec is not None and not spec.is_tensor else np.asarray(result)


async def infer(request: web.Request) -> web.Response:
    state = request.app[STATE]
    model = _model(request)
    if state.closing:
        raise ServeError(503, "hetero serve is shutting down (retry elsewhere)", {"Retry-After": "1"})
    if state.inflight >= state.limits.max_concurrent:
        state.metrics.observe(503, 0.0)
        raise state.limits.busy()
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


def _check_announced(request: web.Request, limits: ServeLimits, header_length: str | None) -> None:
    """Refuse, before reading a byte of the body, what its headers already say is too large."""
    length = request.content_length
    if length is not None and length > limits.max_body_bytes:
        raise limits.too_large(length)
    if header_length is not None:
        try:
            json_part: int | None = int(header_length)
        except ValueError:
            json_part = None  # the decoder answers 400 for it
    else:
        json_part = None if "Content-Encoding" in request.headers else length
    if json_part is not None and json_part > limits.max_json_bytes:
        raise limits.json_too_large(json_part)


async def _infer(request: web.Request, state: ServeState, model: Servable) -> web.Response:
    limits = state.limits
    header_length = request.headers.get("Inference-Header-Content-Length")
    _check_announced(request, limits, header_length)
    hold = state.budget.hold()
    try:
        hold.grow(request.content_length or 0)  # what the request says it will send: refused before it is read
        body = await read_body(request, limits, hold, header_length is None, state.stopping)
        loop = asyncio.get_running_loop()
        payload, json_length = await loop.run_in_executor(state.executor, answer, model, body, header_length,
                                                          state.max_batch, limits.max_body_bytes)
    finally:
        hold.release()
    if json_length is None:
        response = web.Response(body=payload, content_type="application/json")
    else:
        response = web.Response(body=payload, content_type="application/octet-stream",
                                headers={"Inference-Header-Content-Length": str(json_length)})
    if any(coding in request.headers.get("Accept-Encoding", "") for coding in ("gzip", "deflate")):
        response.enable_compression()
    return response


async def _drain(app: web.Application) -> None:
    """On shutdown (the listening socket already closed): cut short the requests still sending
    their bodies (503), and wait up to the drain timeout for those being run."""
    state = app[STATE]
    state.closing = True
    state.stopping.set()
    if state.inflight:
        log.info("hetero serve: finishing %d request(s) in flight (at most %g s, --drain-timeout)", state.inflight,
                 state.limits.drain_timeout)
    try:
        await asyncio.wait_for(state.idle.wait(), state.limits.drain_timeout)
    except TimeoutError:
        log.warning("hetero serve: %d request(s) still running after %g s (--drain-timeout); stopping without them",
                    state.inflight, state.limits.drain_timeout)


async def _close(app: web.Application) -> None:
    """On cleanup (every connection closed): stop the worker threads, then close the model."""
    state = app[STATE]
    state.executor.shutdown(wait=state.inflight == 0, cancel_futures=True)
    try:
        state.model.close()
    except Exception:
        log.exception("hetero serve: closing model %r failed", state.model.name)


def make_app(model: Servable, *, max_batch: int | None = None, max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
             workers: int | None = None, shutdown_timeout: float | None = None, max_json_bytes: int | None = None,
             max_inflight_bytes: int | None = None, max_concurrent: int | None = None,
             header_timeout: float | None = None, body_timeout: float | None = None) -> web.Application:
    """The KServe v2 application serving ``model``. ``max_batch``: the largest first (batch) dimension
    a free-batch input takes (None: any); ``workers``: threads that run the model (default: twice
    the CPU count, at most 32); ``shutdown_timeout``: seconds a shutdown waits for requests in
    flight (``--drain-timeout``). The other limits are :class:`~hetero.serve.limits.ServeLimits`'
    (None: its default)."""
    if max_batch is not None and max_batch < 1:
        raise ValueError(f"max_batch must be at least 1 (or None for no limit), got {max_batch}")
    given = {"drain_timeout": shutdown_timeout, "max_concurrent": max_concurrent, "header_timeout": header_timeout,
             "body_timeout": body_timeout}
    limits = ServeLimits.build(max_body_bytes, max_json_bytes, max_inflight_bytes,
                               **{k: v for k, v in given.items() if v is not None})
    workers = default_workers() if workers is None else workers
    if workers < 1:
        raise ValueError(f"workers must be at least 1, got {workers}")
    app = web.Application(client_max_size=max_body_bytes, middlewares=[error_bodies])
    executor = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="hetero-serve")
    app[STATE] = ServeState(model, executor, ServeMetrics(model), max_batch, limits)
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
