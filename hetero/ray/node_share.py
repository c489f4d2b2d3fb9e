"""A node's hetero devices as Ray custom resources and node labels.

Ray counts custom resources and matches labels; it knows nothing of vendors. A node started with
:func:`node_share` (``ray start --resources "$(hetero ray resources)" --labels "$(hetero ray labels)"``,
or :class:`hetero.ray.LocalCluster`) offers:

- resources: ``hetero_device`` (every healthy, unquarantined device of the node, vendor-neutral) and
  one count per backend, ``hetero_<backend>`` (``hetero_cpu``, ``hetero_oneapi``, ``hetero_opencl``,
  ``hetero_cuda``, ``hetero_rocm``);
- labels (Ray's label syntax: 63 characters of ``[A-Za-z0-9._-]``): ``hetero.dev/host`` (a hash of
  the machine's id: the quarantine's scope), ``hetero.dev/<backend>`` (how many devices of it), and
  per device ``hetero.dev/<backend>-<index>`` (its stable id), ``...-name``, ``...-vendor``, ``...-kind``,
  ``...-model``, ``...-memory-mib``.

Labels are how :mod:`hetero.ray.placement` finds a node's devices (and their stable ids, the keys of
the cluster's quarantine) without running anything on the node.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import platform
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from hetero.core.device import Device, DeviceInfo

#: The vendor-neutral resource: one unit per device.
DEVICE_RESOURCE = "hetero_device"
LABEL_PREFIX = "hetero.dev/"
HOST_LABEL = LABEL_PREFIX + "host"
#: Names this node's machine in the cluster's quarantine instead of ``/etc/machine-id``: set by
#: :class:`hetero.ray.LocalCluster` (``separate_hosts=True``) so nodes on one machine act as machines.
HOST_ENV = "HETERO_RAY_HOST"

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def backend_resource(backend: str) -> str:
    """The Ray resource that counts a node's devices of ``backend``: ``hetero_oneapi``."""
    return f"hetero_{backend}"


def device_label(backend: str, index: int) -> str:
    """The label key of one device: ``hetero.dev/oneapi-0`` (the cpu device, named ``cpu``: ``hetero.dev/cpu-0``)."""
    return f"{LABEL_PREFIX}{backend}-{index}"


def label_value(text: str) -> str:
    """``text`` as a Ray label value: runs of other characters become ``-``, at most 63, alphanumeric ends."""
    cleaned = _UNSAFE.sub("-", text).strip("-._")[:63].rstrip("-._")
    return cleaned or "unknown"


def host_id() -> str:
    """This machine's id as the quarantine keys it: a hash of ``/etc/machine-id`` (else the host name).
    Several Ray nodes on one machine share it, as they share its devices; ``HETERO_RAY_HOST`` overrides it."""
    given = os.environ.get(HOST_ENV, "").strip()
    if given:
        return label_value(given)
    for path in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        try:
            text = Path(path).read_text().strip()
        except OSError:
            continue
        if text:
            return hashlib.sha1(text.encode()).hexdigest()[:16]
    return hashlib.sha1(platform.node().encode()).hexdigest()[:16]


@dataclasses.dataclass(frozen=True)
class NodeShare:
    """What a node offers Ray: ``resources`` (``--resources``) and ``labels`` (``--labels``)."""

    resources: dict[str, float]
    labels: dict[str, str]
    devices: tuple[str, ...]

    def resources_arg(self) -> str:
        """``ray start --resources`` takes JSON."""
        import json

        return json.dumps(self.resources, sort_keys=True)

    def labels_arg(self) -> str:
        """``ray start --labels`` takes ``key=value`` pairs joined by commas."""
        return ",".join(f"{k}={v}" for k, v in sorted(self.labels.items()))


def node_share(devices: Iterable[Device | DeviceInfo], host: str | None = None) -> NodeShare:
    """The resources and labels for these devices (the caller leaves out quarantined ones)."""
    resources: dict[str, float] = {}
    labels: dict[str, str] = {HOST_LABEL: host or host_id()}
    names: list[str] = []
    for device in devices:
        info = device.info if isinstance(device, Device) else device
        names.append(info.name)
        resources[DEVICE_RESOURCE] = resources.get(DEVICE_RESOURCE, 0.0) + 1.0
        key = backend_resource(info.backend)
        resources[key] = resources.get(key, 0.0) + 1.0
        labels[LABEL_PREFIX + info.backend] = str(int(resources[key]))
        base = device_label(info.backend, info.index)
        labels[base] = label_value(info.stable_id)
        labels[base + "-name"] = label_value(info.name.replace(":", "."))
        labels[base + "-vendor"] = label_value(info.vendor)
        labels[base + "-kind"] = label_value(str(info.kind))
        labels[base + "-model"] = label_value(info.model)
        labels[base + "-memory-mib"] = str(int(info.memory) // (1 << 20))
    return NodeShare(resources, labels, tuple(names))


@dataclasses.dataclass(frozen=True)
class LabelledDevice:
    """One device of a node as its labels describe it."""

    name: str
    backend: str
    stable_id: str
    vendor: str
    kind: str
    model: str
    memory_mib: int


def devices_of(labels: Mapping[str, str]) -> list[LabelledDevice]:
    """A node's devices, read back from its labels (see :func:`node_share`)."""
    found: list[LabelledDevice] = []
    for key, value in labels.items():
        if not key.startswith(LABEL_PREFIX):
            continue
        match = re.fullmatch(r"([a-z][a-z0-9_]*)-(\d+)", key[len(LABEL_PREFIX):])
        if match is None:
            continue
        backend, index = match.group(1), int(match.group(2))
        base = key

        def field(suffix: str) -> str:
            return str(labels.get(base + suffix, ""))

        memory = field("-memory-mib")
        name = field("-name").replace(".", ":") or f"{backend}:{index}"
        found.append(LabelledDevice(name, backend, value, field("-vendor"), field("-kind"),
                                    field("-model"), int(memory) if memory.isdigit() else 0))
    return sorted(found, key=lambda d: (d.backend, d.name))


def healthy_devices() -> list[Device]:
    """This node's devices that may take work: not quarantined (the drill's and the cluster's entries
    included) and not unhealthy."""
    import hetero
    from hetero.core.device import HealthState
    from hetero.fault import quarantine

    held = quarantine.quarantined_ids()
    found = []
    for device in hetero.devices():
        try:
            state = device.health().state
        except Exception:  # noqa: BLE001 - a raising health source is not healthy
            continue
        if device.stable_id not in held and state is not HealthState.UNHEALTHY:
            found.append(device)
    return found
