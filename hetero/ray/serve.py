"""ONNX models served across a Ray cluster: Ray Serve replicas over :class:`hetero.onnx.Pool`\\ s on
the nodes' hetero devices, behind the KServe v2 protocol (``tritonclient.http`` works unchanged).

    import hetero.ray.serve
    served = hetero.ray.serve.deploy("model.onnx", name="mlp", num_replicas=2, backend="cpu", port=8000)
    # POST http://127.0.0.1:8000/v2/models/mlp/infer, as to `hetero serve`
    served.delete()

Two deployments make the application:

- ``<name>-replicas``: :class:`~hetero.ray.serve_replica.PoolReplica`, each asking Ray for
  ``devices_per_replica`` units of ``hetero_device`` (``hetero_<backend>`` too when a backend is
  named), so replicas land on nodes that offer such devices; each runs a pool on its node's matching
  devices that have an ONNX Runtime provider, reading the cluster's quarantine. A replica whose
  devices are all quarantined or unhealthy fails Ray Serve's health check and is replaced; a hold on
  the quarantined devices (:mod:`hetero.ray.quarantine_hold`) keeps the replacement off that node.
- ``<name>-ingress``: :class:`~hetero.ray.serve_ingress.KServeIngress` on the head node (beside Ray
  Serve's proxy, which listens there only), handing each request's body to a replica (which decodes
  and encodes it) and moving it to another replica when one fails for a device or dies with its node.

Ray and Ray Serve are imported when :func:`deploy` is called (``pip install 'hetero[ray]'``).
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from hetero.core.optional import require
from hetero.onnx.model_file import ModelSource, read_model
from hetero.ray.placement import Request

#: Ray Serve's health check of a replica: every HEALTH_PERIOD seconds, failing after HEALTH_TIMEOUT.
HEALTH_PERIOD = 2.0
HEALTH_TIMEOUT = 10.0
HEAD_RESOURCE = "node:__internal_head__"
#: Ray Serve's settings for this application's actors (ingress and replicas), those of its
#: "throughput optimized" mode that touch only the actor they are set in: the user code and the
#: router on the actor's event loop rather than a thread and a loop of their own (no hand-off per
#: request: these methods are short), and the access log written in batches to the replica's log
#: file, not flushed per request, and not copied to stderr (which Ray ships, line by line, to the driver).
SERVE_ENV = {"RAY_SERVE_RUN_USER_CODE_IN_SEPARATE_THREAD": "0", "RAY_SERVE_RUN_ROUTER_IN_SEPARATE_LOOP": "0",
             "RAY_SERVE_REQUEST_PATH_LOG_BUFFER_SIZE": "1000", "RAY_SERVE_LOG_TO_STDERR": "0"}


@dataclasses.dataclass
class ServedModel:
    """A model deployed by :func:`deploy`: its ``url`` (``http://host:port``), the Ray Serve
    ``app_name`` and the ``handle`` of its ingress."""

    name: str
    app_name: str
    url: str
    handle: Any

    @property
    def replicas_deployment(self) -> str:
        return f"{self.name}-replicas"

    def replica_nodes(self) -> list[str]:
        """The Ray node id of each live replica (from the GCS's actor table)."""
        from ray._private import state  # the GCS's actor table: the state API needs the dashboard

        wanted = f"ServeReplica:{self.app_name}:{self.replicas_deployment}"
        return sorted(str(actor["Address"]["NodeID"]) for actor in state.actors().values()
                      if actor.get("ActorClassName") == wanted and actor.get("State") == "ALIVE")

    def replicas(self) -> Any:
        """A Ray Serve handle to the replicas (``describe``, ``ready``, ``infer``), for inspection."""
        from ray import serve

        return serve.get_deployment_handle(self.replicas_deployment, self.app_name)

    def delete(self) -> None:
        """Take the application down (its replicas' pools close; holds stay with their quarantine)."""
        from ray import serve

        serve.delete(self.app_name)


def _model_argument(model: ModelSource) -> bytes | str:
    """What the replicas load: the model's bytes, or its absolute path when its weights lie in files
    beside it (every node must then see that path)."""
    read = read_model(model)
    if read.has_external_data and isinstance(model, (str, os.PathLike)):
        return os.path.abspath(os.fspath(model))
    return read.data


def _head_node() -> str | None:
    import ray

    for node in ray.nodes():
        if node.get("Alive") and HEAD_RESOURCE in (node.get("Resources") or {}):
            return str(node["NodeID"])
    return None


def deploy(model: ModelSource, *, name: str = "model", num_replicas: int = 2, backend: str | None = None,
           kind: str | None = None, vendor: str | None = None, devices_per_replica: float = 1.0,
           host: str = "127.0.0.1", port: int = 8000, retries: int = 8, max_batch: int | None = None,
           max_body_bytes: int = 64 << 20, pool_retries: int = 3, pool_timeout: float = 0.25,
           quarantine_ttl: float | None = None, threads: int | None = None, app_name: str | None = None,
           health_check_period: float = HEALTH_PERIOD, health_check_timeout: float = HEALTH_TIMEOUT,
           grpc: bool = True) -> ServedModel:
    """Serve ``model`` (a path, bytes or an ``onnx.ModelProto``) on the Ray cluster this process is
    connected to (``ray.init`` first; a local Ray is started otherwise), over KServe v2 at
    ``http://host:port`` (Ray Serve's HTTP proxy, on the head node; ``127.0.0.1`` unless told).

    ``num_replicas`` replicas, each asking Ray for ``devices_per_replica`` of the devices that
    ``backend``/``kind``/``vendor`` name (None: any hetero device; name a backend whose devices have
    an ONNX Runtime provider where some nodes have others, such as ``opencl``). ``retries``: further
    replicas the ingress asks when one fails for a device. ``pool_retries``, ``pool_timeout``,
    ``quarantine_ttl``, ``threads``: each replica's :class:`hetero.onnx.Pool`'s (its timeout is short:
    a replica with no device left gives the request back to the ingress, which has other replicas). ``max_batch``,
    ``max_body_bytes``: as ``hetero serve``'s. ``grpc``: the ingress reaches the replicas over Ray
    Serve's inter-deployment gRPC channel (False: Ray actor calls, through the object store). Returns once every replica is up.

    Raises :class:`~hetero.core.errors.MissingDependencyError` without Ray Serve, ``FileNotFoundError``
    / :class:`~hetero.onnx.errors.ModelError` for a model that cannot be read, and
    :class:`~hetero.ray.errors.NoDeviceError` when no node of the cluster has such a device that is
    not quarantined.
    """
    if num_replicas < 1 or devices_per_replica <= 0 or retries < 0:
        raise ValueError(f"num_replicas must be >= 1, devices_per_replica > 0 and retries >= 0; got {num_replicas}, "
                         f"{devices_per_replica}, {retries}")
    argument = _model_argument(model)  # a missing or unsafe model fails here, before any cluster work
    ray = require("ray", extra="ray", feature="hetero.ray.serve")
    serve = require("ray.serve", extra="ray", feature="hetero.ray.serve", package="ray[serve]")
    from hetero.ray import cluster_quarantine
    from hetero.ray.placement import ray_options
    from hetero.ray.serve_ingress import KServeIngress
    from hetero.ray.serve_replica import PoolReplica

    if not ray.is_initialized():
        ray.init()
    cluster_quarantine.attach()
    request = Request(backend, kind, vendor)
    ray_options(request)  # NoDeviceError now, naming why, rather than replicas pending forever
    resources = {request.resource(): float(devices_per_replica)}
    if backend:
        resources["hetero_device"] = float(devices_per_replica)
    serve.start(http_options={"host": host, "port": port}, proxy_location="HeadOnly")
    pool_options = {"retries": pool_retries, "timeout": pool_timeout, "quarantine_ttl": quarantine_ttl,
                    "threads": threads}
    from ray.serve.config import RequestRouterConfig

    from hetero.ray.serve_router import PATH, STATS_PERIOD

    router = RequestRouterConfig(request_router_class=PATH, request_routing_stats_period_s=STATS_PERIOD,
                                 request_routing_stats_timeout_s=max(STATS_PERIOD, health_check_timeout))
    replicas = serve.deployment(PoolReplica, name=f"{name}-replicas").options(
        num_replicas=num_replicas, ray_actor_options={"num_cpus": 0, "resources": resources,
                                                   "runtime_env": {"env_vars": SERVE_ENV}},
        request_router_config=router,
        health_check_period_s=health_check_period, health_check_timeout_s=health_check_timeout,
    ).bind(argument, name, request, pool_options)
    ingress_options: dict[str, Any] = {"num_cpus": 0, "runtime_env": {"env_vars": SERVE_ENV}}
    head = _head_node()
    if head is not None:  # beside the proxy: no hop across nodes, and it goes only with the head
        ingress_options["label_selector"] = {"ray.io/node-id": head}
    ingress = serve.deployment(KServeIngress, name=f"{name}-ingress").options(
        num_replicas=1, ray_actor_options=ingress_options,
    ).bind(replicas, name, retries, max_batch, max_body_bytes, grpc)
    app = app_name or name
    handle = serve.run(ingress, name=app, route_prefix="/")
    return ServedModel(name, app, f"http://{host}:{port}", handle)


__all__ = ["ServedModel", "deploy"]
