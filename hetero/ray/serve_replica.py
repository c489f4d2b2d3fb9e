"""A Ray Serve replica of :mod:`hetero.ray.serve`: a :class:`hetero.onnx.Pool` on its node's devices.

The replica's devices are those of its node that match the deployment's request (backend, kind,
vendor) and have an ONNX Runtime provider. It reads the cluster's quarantine
(:func:`hetero.ray.cluster_quarantine.attach`), so a fault recorded anywhere reaches its pool.

- It refuses to start (:class:`~hetero.ray.errors.ReplicaUnavailableError`) on a node where all of
  them are quarantined or unhealthy.
- Its ``check_health`` raises the same error once they all are; Ray Serve then replaces it.
- Before either raises, the replica puts a hold on the quarantined devices
  (:mod:`hetero.ray.quarantine_hold`), so Ray's scheduler places the replacement on another node,
  or keeps it pending until a device is free. A refusal alone is not enough: Ray would offer the
  freed units of the same node to the replacement first, and it would refuse again.
- ``infer`` (tensors) and ``infer_http`` (a KServe v2 body, decoded and encoded here) answer through the pool. The pool fails a request over between the node's devices; the
  ingress (:mod:`hetero.ray.serve_ingress`) then moves it to another replica.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from typing import Any

from hetero.core.device import Device, HealthState
from hetero.ray.errors import ReplicaUnavailableError
from hetero.ray.placement import Request

#: Seconds between two reads of the cluster's quarantine on the request path (the pool polls too).
QUARANTINE_POLL = 0.1


def usable(devices: Iterable[Device], quarantined: Collection[str]) -> list[Device]:
    """The devices that may answer now: not quarantined (by stable id) and not unhealthy."""
    found = []
    for device in devices:
        if device.stable_id in quarantined:
            continue
        try:
            state: HealthState | None = device.health().state
        except Exception:  # noqa: BLE001 - a health source that raises is not healthy
            state = None
        if state is not None and state is not HealthState.UNHEALTHY:
            found.append(device)
    return found


def serving_devices(request: Request) -> list[Device]:
    """This node's devices that match ``request`` and that ONNX Runtime can run a model on."""
    import hetero
    from hetero.onnx import providers
    from hetero.onnx.session import onnxruntime

    ort = onnxruntime()
    return [d for d in hetero.devices() if request.matches(d.info) and providers.choose(ort, d) is not None]


class PoolReplica:
    """One replica: ``infer(feeds, outputs)``, ``specs()``, ``check_health()``, ``describe()``."""

    def __init__(self, model: bytes | str, name: str, request: Request, pool_options: Mapping[str, Any]) -> None:
        import ray

        from hetero.onnx.pool import Pool
        from hetero.ray import cluster_quarantine

        cluster_quarantine.attach()
        self.name = name
        self.request = request
        self.node_id = str(ray.get_runtime_context().get_node_id())
        self.devices = serving_devices(request)
        if not self.devices:
            import hetero

            have = ", ".join(d.name for d in hetero.devices()) or "none"
            raise ReplicaUnavailableError(
                f"model {name!r}: node {self.node_id} has no device for {request} with an ONNX Runtime provider "
                f"(its devices: {have}); deploy with backend= naming one that has a provider (cpu, cuda, rocm, "
                "oneapi with OpenVINO)")
        self._refuse_unless_usable("cannot start")
        self.pool = Pool(model, self.devices, name=name, **pool_options)
        self._quarantine_read = float("-inf")
        self._all_quarantined = False

    def _refuse_unless_usable(self, what: str) -> list[Device]:
        """The usable devices, or hold the quarantined ones and raise ReplicaUnavailableError."""
        from hetero.fault import quarantine

        held = quarantine.quarantined_ids()
        found = usable(self.devices, held)
        if found:
            return found
        from hetero.ray.quarantine_hold import hold

        hold([d for d in self.devices if d.stable_id in held])
        states = ", ".join(f"{d.name} ({'quarantined' if d.stable_id in held else 'unhealthy'})" for d in self.devices)
        raise ReplicaUnavailableError(f"replica of model {self.name!r} on node {self.node_id} {what}: none of its "
                                      f"devices may answer: {states} ('hetero quarantine list --cluster' shows why)")

    def check_health(self) -> None:
        """Ray Serve's health check: raises once every device of the pool is quarantined or unhealthy."""
        self._refuse_unless_usable("is unhealthy")

    def _refuse_when_quarantined(self) -> None:
        """:class:`ReplicaUnavailableError` at once when every device is quarantined (read at most every
        :data:`QUARANTINE_POLL` seconds: between two reads the pool's own checks stand)."""
        now = time.monotonic()
        if now - self._quarantine_read >= QUARANTINE_POLL:
            from hetero.fault import quarantine

            held = quarantine.quarantined_ids()
            self._all_quarantined = not any(d.stable_id not in held for d in self.devices)
            self._quarantine_read = now
        if self._all_quarantined:
            self._refuse_unless_usable("takes no requests")

    def infer(self, feeds: dict[str, Any], outputs: Sequence[str] | None = None) -> dict[str, Any]:
        """The pool's answer; :class:`ReplicaUnavailableError` at once when no device may answer (the
        ingress then asks another replica)."""
        self._refuse_when_quarantined()
        return self.pool.run(feeds, outputs)

    def infer_http(self, body: bytes, header_length: str | None, max_batch: int | None,
                   max_body_bytes: int) -> tuple[bytes, int | None]:
        """One KServe v2 infer request's body in, the answer's body and its JSON header's length out
        (None: all JSON), decoded and encoded here with :mod:`hetero.serve.protocol`, so only bytes
        cross Ray between the ingress and the replica. Bad input raises
        :class:`~hetero.serve.protocol.ProtocolError` / :class:`~hetero.onnx.errors.InputError` (the
        ingress answers 400 and does not retry)."""
        import numpy as np

        from hetero.serve.protocol import check_inputs, decode_request, encode_response, select_outputs

        request = decode_request(body, header_length, max_body_bytes)
        inputs, outputs = self.pool.inputs, self.pool.outputs
        check_inputs(self.name, request.inputs, inputs, max_batch)
        wanted = select_outputs(self.name, request, outputs)
        self._refuse_when_quarantined()
        results = self.pool.run(request.inputs, None if request.outputs is None else [o.name for o in wanted])
        specs = {spec.name: spec for spec in outputs}
        answers = []
        for o in wanted:
            spec, value = specs.get(o.name), results[o.name]
            answers.append((o.name, value if spec is not None and not spec.is_tensor else np.asarray(value), o.binary))
        return encode_response(self.name, answers, request.id)

    def record_routing_stats(self) -> dict[str, Any]:
        """What the ingress's router reads (:mod:`hetero.ray.serve_router`): whether a device may answer."""
        from hetero.fault import quarantine
        from hetero.ray.serve_router import USABLE

        return {USABLE: bool(usable(self.devices, quarantine.quarantined_ids()))}

    def specs(self) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
        """The model's input and output :class:`~hetero.onnx.spec.TensorSpec`\\ s."""
        return self.pool.inputs, self.pool.outputs

    def ready(self) -> bool:
        return bool(self.pool.ready())

    def describe(self) -> dict[str, Any]:
        """Where this replica runs and how its pool fares: node, devices, the pool's stats."""
        from hetero.ray.node_share import host_id

        return {"node_id": self.node_id, "host": host_id(), "devices": [d.name for d in self.devices],
                "stats": self.pool.stats()}

    def __del__(self) -> None:
        pool = getattr(self, "pool", None)
        if pool is not None:
            pool.close()


__all__ = ["PoolReplica", "serving_devices", "usable"]
