"""Inside a task or actor: which of the node's devices it holds.

Ray counts ``hetero_<backend>`` units but does not say which device a task got (it does for GPUs,
through ``CUDA_VISIBLE_DEVICES``). :func:`acquire` picks one: the node's devices that match the
request and are not quarantined (the cluster's entries included), each guarded by an exclusive
``flock`` on ``<tmp>/hetero-ray-leases/<node id>/<device>.lock``. The lock is the lease: it goes with
the process if the process dies, and :meth:`Lease.release` gives it back when a task ends.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from pathlib import Path

from hetero.core.device import Device
from hetero.core.files import let_go, try_hold
from hetero.ray.errors import NoDeviceError
from hetero.ray.placement import Request

#: Seconds a task waits for a lease when every matching device is held (Ray's counts make this rare).
WAIT = 30.0


@dataclasses.dataclass
class Lease:
    """A device held by this process until :meth:`release` (or its exit)."""

    device: Device
    fd: int

    def release(self) -> None:
        if self.fd >= 0:
            fd, self.fd = self.fd, -1
            let_go(fd)


def lease_dir(node_id: str) -> Path:
    path = Path(tempfile.gettempdir()) / "hetero-ray-leases" / node_id
    path.mkdir(parents=True, exist_ok=True, mode=0o700)
    return path


def _node_id() -> str:
    import ray

    return str(ray.get_runtime_context().get_node_id())


def acquire(request: Request, wait: float = WAIT) -> Lease:
    """A lease on one of this node's devices that matches ``request``; :class:`~hetero.ray.errors.NoDeviceError`
    when the node has none that is not quarantined, or none comes free within ``wait`` seconds."""
    import hetero
    from hetero.fault import quarantine

    directory = lease_dir(_node_id())
    deadline = time.monotonic() + wait
    while True:
        matching = [d for d in hetero.devices() if request.matches(d.info)]
        held = quarantine.quarantined_ids()
        healthy = [d for d in matching if d.stable_id not in held]
        if not healthy:
            why = ("every one is quarantined: " + ", ".join(d.name for d in matching)) if matching else (
                f"this node has none (its devices: {', '.join(d.name for d in hetero.devices()) or 'none'})")
            raise NoDeviceError(f"{request} for a Ray task on node {_node_id()}: {why}")
        for device in healthy:
            fd = try_hold(directory / (device.name.replace(":", "-") + ".lock"))
            if fd is not None:
                return Lease(device, fd)
        if time.monotonic() >= deadline:
            raise NoDeviceError(f"{request} for a Ray task on node {_node_id()}: all of "
                                      f"{', '.join(d.name for d in healthy)} stayed held by other tasks for {wait:.0f} s")
        time.sleep(0.05)
