"""The KServe v2 ingress of :mod:`hetero.ray.serve`: the routes and encodings of ``hetero serve``
(:mod:`hetero.serve.protocol`, the same functions), in front of the replicas' pools.

A request is routed here and its body goes, as bytes, to a replica, which decodes, checks, runs and
encodes it (:meth:`~hetero.ray.serve_replica.PoolReplica.infer_http`): this hop stays light. When a replica
cannot answer because of a device (every device of its pool quarantined: :class:`ReplicaUnavailableError`;
its pool gave up on device faults: :class:`~hetero.onnx.errors.InferenceFailedError` with a device
fault in its history; the replica or its node died: Ray's actor errors), the ingress asks again,
up to ``retries`` more times with a short backoff, and Ray Serve's router picks a replica each time.
Nothing is answered twice: the ingress writes the one HTTP answer, and an attempt that raised gave
none (an inference has no side effects to undo). Nothing is answered wrong: an error that is not a
device's (bad input, a model bug) is not retried, and goes to the client with its status.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
from typing import Any

from hetero.core.errors import HeteroError
from hetero.onnx.errors import InferenceFailedError, InputError
from hetero.ray.errors import ReplicaUnavailableError
from hetero.serve.protocol import (
    ProtocolError,
    encode_error,
    tensor_metadata,
)

log = logging.getLogger("hetero.ray.serve")

VERSION = "1"
ROUTES_HINT = "/v2, /v2/health/live, /v2/health/ready, /v2/models/NAME[/versions/1][/ready|/infer]"
_MODEL_PATH = re.compile(r"/v2/models/(?P<name>[^/]+)(?:/versions/(?P<version>[^/]+))?(?P<tail>/ready|/infer)?/?")


class HttpError(HeteroError):
    """An answer other than 200: ``status`` and the protocol's ``{"error": message}``."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclasses.dataclass(frozen=True)
class Route:
    """What a request asks: ``live``, ``ready``, ``server``, ``model``, ``model_ready`` or ``infer``."""

    action: str
    model: str | None = None
    version: str = VERSION


def route(method: str, path: str) -> Route:
    """The route of ``method path``, or :class:`HttpError` 404 (no such route) / 405 (wrong method)."""
    path = path.rstrip("/") or "/"
    fixed = {"/v2/health/live": "live", "/v2/health/ready": "ready", "/v2": "server"}
    if path in fixed:
        found, wanted = Route(fixed[path]), "GET"
    else:
        match = _MODEL_PATH.fullmatch(path)
        if match is None:
            raise HttpError(404, f"no route {method} {path}; hetero.ray.serve answers {ROUTES_HINT}")
        tail = match.group("tail")
        action = {None: "model", "/ready": "model_ready", "/infer": "infer"}[tail]
        found = Route(action, match.group("name"), match.group("version") or VERSION)
        wanted = "POST" if action == "infer" else "GET"
    if method.upper() != wanted:
        raise HttpError(405, f"{method} is not allowed on {path} (allowed: {wanted})")
    return found


def _cause(error: BaseException) -> BaseException:
    """The replica's own error inside Ray's wrapper (a RayTaskError is also an instance of its cause)."""
    cause = getattr(error, "cause", None)
    return cause if isinstance(cause, BaseException) else error


def retryable(error: BaseException) -> bool:
    """Whether another replica may answer where this attempt failed: a device's fault or a lost replica,
    never bad input or a model bug (those fail the same everywhere)."""
    cause = _cause(error)
    if isinstance(error, ReplicaUnavailableError) or isinstance(cause, ReplicaUnavailableError):
        return True
    failed = cause if isinstance(cause, InferenceFailedError) else error
    if isinstance(failed, InferenceFailedError):
        history = getattr(failed, "history", None) or []
        # no attempt: no healthy member within the pool's timeout, a device matter too
        return not history or any(a.fault_class not in (None, "none") for a in history)
    if isinstance(cause, (InputError, ProtocolError)):
        return False
    try:
        from ray import exceptions as rex
    except ImportError:  # pragma: no cover - the ingress runs in Ray
        return False
    lost = tuple(getattr(rex, n) for n in ("ActorDiedError", "ActorUnavailableError", "RayActorError",
                                            "NodeDiedError", "WorkerCrashedError", "ObjectLostError") if hasattr(rex, n))
    return isinstance(error, lost) or isinstance(cause, lost)


def backoff(attempt: int) -> float:
    """Seconds to wait before retry ``attempt`` (0-based): 0.05, 0.1, 0.2 ... at most 1."""
    return min(1.0, 0.05 * (2 ** attempt))


def status_of(error: BaseException) -> tuple[int, str]:
    """The HTTP status and message for an error (as ``hetero serve`` answers it)."""
    cause = _cause(error)
    if isinstance(error, HttpError):
        return error.status, error.message
    if isinstance(cause, (ProtocolError, InputError)):
        return 400, str(cause)
    if isinstance(cause, (InferenceFailedError, ReplicaUnavailableError)):
        return 503, str(cause).strip().splitlines()[0]
    return 500, f"{type(cause).__name__}: {str(cause).strip().splitlines()[0] if str(cause).strip() else ''}"


class KServeIngress:
    """The ingress deployment: KServe v2 over HTTP (through Ray Serve's proxy) to the model's replicas."""

    def __init__(self, replicas: Any, name: str, retries: int = 8, max_batch: int | None = None,
                 max_body_bytes: int = 64 << 20, grpc: bool = True) -> None:
        # grpc: Ray Serve's inter-deployment gRPC channel straight to the replica (the handle's
        # ``_by_reference=False``) rather than a Ray actor call through the object store: a lighter hop.
        # A replica lost mid-request fails the call with UNAVAILABLE, which Ray Serve raises as
        # ActorUnavailableError (retried here like an actor's death).
        self._replicas = replicas.options(_by_reference=False) if grpc else replicas
        self._methods: dict[str, Any] = {}  # a handle per method, made once (options() builds a new handle)
        self.name = name
        self.retries = retries
        self.max_batch = max_batch
        self.max_body_bytes = max_body_bytes
        self._specs: tuple[tuple[Any, ...], tuple[Any, ...]] | None = None

    async def _call(self, method: str, *args: Any, retries: int | None = None) -> Any:
        """``method`` on some replica, again on another while the failure is a device's (bounded)."""
        retries = self.retries if retries is None else retries
        failures: list[str] = []
        for attempt in range(retries + 1):
            try:
                handle = self._methods.get(method)
                if handle is None:
                    handle = self._methods[method] = getattr(self._replicas, method)
                return await handle.remote(*args)
            except Exception as error:
                if not retryable(error):
                    raise
                cause = _cause(error)
                failures.append(f"{type(cause).__name__}: {str(cause).strip().splitlines()[0] if str(cause).strip() else ''}")
                log.info("model %r: attempt %d of %s failed on a replica (%s); asking another", self.name,
                         attempt + 1, method, failures[-1])
                if attempt < retries:
                    await asyncio.sleep(backoff(attempt))
        raise InferenceFailedError(f"model {self.name!r}: no replica could answer in {len(failures)} attempts "
                                   f"(the ingress's retry budget, retries={retries}); last: {failures[-1]}", [])

    async def specs(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        if self._specs is None:
            self._specs = await self._call("specs")
        return self._specs

    def _check_model(self, found: Route) -> None:
        if found.model != self.name:
            raise HttpError(404, f"unknown model {found.model!r}; this server serves {self.name!r}")
        if found.version != VERSION:
            raise HttpError(404, f"model {found.model!r} has no version {found.version!r} (it serves version {VERSION})")

    async def answer(self, method: str, path: str, headers: dict[str, str], body: bytes) -> tuple[int, bytes, dict[str, str]]:
        """(status, body, headers) for one HTTP request; every failure becomes the protocol's error body."""
        try:
            return await self._answer(route(method, path), headers, body)
        except Exception as error:
            status, message = status_of(error)
            if status == 500:
                log.exception("model %r: %s %s failed", self.name, method, path, exc_info=error)
            return status, encode_error(message), {"Content-Type": "application/json"}

    async def _answer(self, found: Route, headers: dict[str, str], body: bytes) -> tuple[int, bytes, dict[str, str]]:
        import json

        from hetero._version import __version__

        as_json = {"Content-Type": "application/json"}
        if found.action == "live":
            return 200, b"", {}
        if found.action == "server":
            return 200, json.dumps({"name": "hetero", "version": __version__,
                                    "extensions": ["binary_tensor_data"]}).encode(), as_json
        if found.action == "ready":
            return await self._ready()
        self._check_model(found)
        if found.action == "model_ready":
            return await self._ready()
        inputs, outputs = await self.specs()
        if found.action == "model":
            return 200, json.dumps({"name": self.name, "versions": [VERSION], "platform": "onnxruntime_onnx",
                                    "inputs": [tensor_metadata(s) for s in inputs],
                                    "outputs": [tensor_metadata(s) for s in outputs]}).encode(), as_json
        if len(body) > self.max_body_bytes:
            raise HttpError(413, f"the request body has {len(body)} bytes, over the limit of {self.max_body_bytes}")
        # the replica decodes, checks, runs and encodes: only bytes cross Ray, and this hop stays light
        payload, json_length = await self._call("infer_http", body, headers.get("inference-header-content-length"),
                                                self.max_batch, self.max_body_bytes)
        if json_length is None:
            return 200, payload, as_json
        return 200, payload, {"Content-Type": "application/octet-stream",
                              "Inference-Header-Content-Length": str(json_length)}

    async def _ready(self) -> tuple[int, bytes, dict[str, str]]:
        try:
            if await self._call("ready", retries=1):  # a health probe: answered fast
                return 200, b"", {}
        except Exception as error:
            raise HttpError(503, f"model {self.name!r} is not ready: {status_of(error)[1]}") from error
        raise HttpError(503, f"model {self.name!r} is not ready: no device of the replica asked is healthy")

    async def __call__(self, request: Any) -> Any:
        """Ray Serve's HTTP entry (a Starlette request)."""
        from starlette.responses import Response

        length = request.headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body_bytes:
            status, body, headers = 413, encode_error(f"the request body has {length} bytes, over the limit of "
                                                      f"{self.max_body_bytes}"), {"Content-Type": "application/json"}
        else:
            body = await request.body()
            headers = {k.lower(): v for k, v in request.headers.items()}
            status, body, headers = await self.answer(request.method, request.url.path, headers, body)
        media = headers.pop("Content-Type", None)
        return Response(content=body, status_code=status, headers=headers, media_type=media)


__all__ = ["HttpError", "KServeIngress", "Route", "backoff", "retryable", "route", "status_of"]
