"""Holds on quarantined devices: Ray keeps a node's resources as the node started with them, so a
device quarantined since still counts as free there, and Ray would send new work to it (a Ray Serve
replica replacing one that failed its health check lands, most often, on the node it left). A hold
is a detached actor pinned to the node that takes that device's units (``hetero_device`` and
``hetero_<backend>``) for as long as the quarantine lasts: Ray's own scheduler then places nothing
new on the device, whoever asks (Ray Serve's controller, a task, an actor). It leaves when the
device's entry is released or expires.

    hold(device)        # inside a task or actor on the node: this device takes no new Ray work

A hold asks for units still held by the work that found the device faulty; Ray grants them to the
hold, queued first on that node, when that work ends. Holds are named per node and device (one
each; asking again returns the same one) in the ``hetero`` namespace, and go with their node.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import Any

from hetero.core.device import Device
from hetero.ray.node_share import DEVICE_RESOURCE, backend_resource

log = logging.getLogger("hetero.ray.hold")

NAMESPACE = "hetero"
#: Seconds between a hold's looks at its device's quarantine entry.
POLL = 0.25


def hold_name(node_id: str, stable_id: str) -> str:
    """The hold's actor name: one per node and device."""
    return f"hetero-hold-{node_id}-{stable_id}"


def held_resources(backend: str) -> dict[str, float]:
    """The Ray resources one device of ``backend`` stands for on its node (see :mod:`hetero.ray.node_share`)."""
    return {DEVICE_RESOURCE: 1.0, backend_resource(backend): 1.0}


class QuarantineHold:
    """Holds one quarantined device's units on its node until the quarantine ends, then exits."""

    def __init__(self, stable_id: str, device_name: str) -> None:
        from hetero.ray import cluster_quarantine

        cluster_quarantine.attach()
        self.stable_id = stable_id
        self.device_name = device_name
        self._done = threading.Event()
        threading.Thread(target=self._watch, daemon=True, name="hetero-hold").start()

    def _watch(self) -> None:
        import ray

        from hetero.fault import quarantine

        while not self._done.wait(POLL):
            if self.stable_id not in quarantine.quarantined_ids():
                log.info("hetero hold: %s left quarantine; its Ray resources are free again", self.device_name)
                ray.kill(ray.get_runtime_context().current_actor, no_restart=True)
                return

    def device(self) -> str:
        """The device held (for ``ray.get_actor`` users and tests)."""
        return self.device_name


def hold(devices: Iterable[Device]) -> list[Any]:
    """Hold each of these devices of this node (call inside a task or actor there): their Ray
    resources go to a hold while they are quarantined. Returns the holds' actor handles."""
    import ray
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    node_id = ray.get_runtime_context().get_node_id()
    actor = ray.remote(QuarantineHold)
    handles = []
    for device in devices:
        handles.append(actor.options(
            name=hold_name(node_id, device.stable_id), namespace=NAMESPACE, get_if_exists=True, lifetime="detached",
            num_cpus=0, resources=held_resources(device.backend), max_restarts=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node_id, soft=False),
        ).remote(device.stable_id, device.name))
        log.info("hetero hold: %s on node %s takes no new Ray work while quarantined", device.name, node_id)
    return handles


__all__ = ["NAMESPACE", "QuarantineHold", "held_resources", "hold", "hold_name"]
