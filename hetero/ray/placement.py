"""Where a task or actor that asks for a hetero device may go: the nodes whose labels name a matching
device that is not quarantined anywhere in the cluster.

:func:`ray_options` turns a request (``backend``, ``kind``, ``vendor``) into Ray options: the
resources (``hetero_device`` and, with a backend, ``hetero_<backend>``: Ray's own accounting keeps two
tasks off one device) and, when some nodes that have such devices are out (every matching device of
theirs quarantined), a hard node affinity to the allowed node with the most of that resource free.
Ray's scheduler chooses otherwise. It is computed for each submission, so a device quarantined a
moment ago gets nothing new.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from typing import Any

from hetero.ray.errors import NoDeviceError
from hetero.ray.node_share import DEVICE_RESOURCE, HOST_LABEL, LabelledDevice, backend_resource, devices_of

log = logging.getLogger("hetero.ray.placement")


@dataclasses.dataclass(frozen=True)
class Request:
    """What a task asks for: a device of this backend, kind (``gpu``, ``cpu``) and vendor; None: any."""

    backend: str | None = None
    kind: str | None = None
    vendor: str | None = None

    def matches(self, device: LabelledDevice | Any) -> bool:
        return ((self.backend is None or device.backend == self.backend)
                and (self.kind is None or str(device.kind).lower() == self.kind.lower())
                and (self.vendor is None or self.vendor.lower() in str(device.vendor).lower()))

    def resource(self) -> str:
        return backend_resource(self.backend) if self.backend else DEVICE_RESOURCE

    def __str__(self) -> str:
        parts = [f"{k}={v}" for k, v in (("backend", self.backend), ("kind", self.kind), ("vendor", self.vendor)) if v]
        return "a hetero device" + (f" ({', '.join(parts)})" if parts else "")


@dataclasses.dataclass(frozen=True)
class NodeDevices:
    """One alive node and its devices (from its labels), each with whether the cluster quarantines it."""

    node_id: str
    host: str
    devices: tuple[tuple[LabelledDevice, bool], ...]


def cluster_devices(nodes: Iterable[Mapping[str, Any]] | None = None,
                    quarantined: Iterable[tuple[str, str]] | None = None) -> list[NodeDevices]:
    """Every alive node's hetero devices, marked quarantined or not (``ray.nodes()`` and the cluster's
    store unless given)."""
    import ray

    from hetero.ray.cluster_quarantine import cluster_entries

    nodes = ray.nodes() if nodes is None else nodes
    held = set(cluster_entries()) if quarantined is None else set(quarantined)
    found: list[NodeDevices] = []
    for node in nodes:
        if not node.get("Alive", False):
            continue
        labels = node.get("Labels") or {}
        host = str(labels.get(HOST_LABEL, ""))
        found.append(NodeDevices(str(node["NodeID"]), host, tuple(
            (d, (host, d.stable_id) in held) for d in devices_of(labels))))
    return found


def allowed_nodes(request: Request, nodes: list[NodeDevices]) -> tuple[list[str], list[str]]:
    """(nodes with a matching healthy device, nodes whose matching devices are all quarantined)."""
    allowed, out = [], []
    for node in nodes:
        matching = [held for device, held in node.devices if request.matches(device)]
        if matching:
            (allowed if not all(matching) else out).append(node.node_id)
    return allowed, out


def _free(node_id: str, resource: str) -> float:
    try:
        from ray._private.state import available_resources_per_node

        return float(available_resources_per_node().get(node_id, {}).get(resource, 0.0))
    except Exception:  # noqa: BLE001 - a private API that moved: every allowed node counts as free
        return 1.0


def ray_options(request: Request, count: int = 1, nodes: list[NodeDevices] | None = None,
                exclude: Iterable[str] = ()) -> dict[str, Any]:
    """Ray options (``resources``, maybe ``scheduling_strategy``) for ``count`` devices of ``request``.
    ``exclude``: ids of nodes to leave out too (a node the caller saw lost before Ray's health checks
    did: Ray still offers its resources until then). :class:`~hetero.ray.errors.NoDeviceError` when no
    node has a matching device that is not quarantined."""
    nodes = cluster_devices() if nodes is None else nodes
    left_out = set(exclude)
    allowed, out = allowed_nodes(request, [n for n in nodes if n.node_id not in left_out])
    out += [n.node_id for n in nodes if n.node_id in left_out]
    if not allowed:
        why = (f"every matching device is quarantined (on {len(out)} node(s); 'hetero quarantine list --cluster' "
               "shows them)" if out else "no node of the cluster offers one (start nodes with "
               "'ray start --resources \"$(hetero ray resources)\" --labels \"$(hetero ray labels)\"')")
        raise NoDeviceError(f"no node can take a task that asks for {request}: {why}")
    resources = {DEVICE_RESOURCE: float(count)}
    if request.backend:
        resources[request.resource()] = float(count)
    options: dict[str, Any] = {"resources": resources}
    narrowed = request.kind is not None or request.vendor is not None
    if out or narrowed:
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        best = max(allowed, key=lambda n: _free(n, request.resource()))
        options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(best, soft=False)
        log.debug("%s: node %s (left out: %s)", request, best, out)
    return options
