"""hetero on a Ray cluster (``pip install hetero[ray]``): a node's devices as Ray resources and
labels, tasks and actors on hetero devices, one quarantine for the whole cluster, ONNX serving
across nodes, and training workers that survive a node.

- :mod:`hetero.ray.node_share`: what a node offers (``hetero ray resources``, ``hetero ray labels``);
- :func:`remote`: ``@hetero.ray.remote(backend="oneapi")`` tasks and actors (:mod:`hetero.ray.placement`
  chooses where, :mod:`hetero.ray.lease` which device);
- :mod:`hetero.ray.cluster_quarantine`: the quarantine in Ray's key-value store;
- :func:`run`: training workers as actors across nodes with ``hetero-run``'s policy (only a failed
  worker restarts, on a healthy device of any node, from its checkpoint): :mod:`hetero.ray.train`
  (:mod:`hetero.ray.train_run` the driver's loop, :mod:`hetero.ray.train_worker` the worker's actor);
- :class:`LocalCluster`: several nodes on this machine, each with its share of the devices;
- :mod:`hetero.ray.serve`: ``deploy(model, ...)``, an ONNX model on Ray Serve replicas over hetero pools,
  behind KServe v2 (:mod:`~hetero.ray.serve_replica`, :mod:`~hetero.ray.serve_ingress`,
  :mod:`~hetero.ray.serve_router`), with :mod:`~hetero.ray.quarantine_hold` keeping new work off
  quarantined devices.

Nothing here is imported by ``import hetero``; Ray is imported when first needed.
"""

from __future__ import annotations

from typing import Any

_LAZY = {
    "remote": ("hetero.ray.remote", "remote"),
    "LocalCluster": ("hetero.ray.local_cluster", "LocalCluster"),
    "node_share": ("hetero.ray.node_share", "node_share"),
    "cluster_entries": ("hetero.ray.cluster_quarantine", "cluster_entries"),
    "cluster_devices": ("hetero.ray.placement", "cluster_devices"),
    "NoDeviceError": ("hetero.ray.errors", "NoDeviceError"),
    "run": ("hetero.ray.train", "run"),
    "RayRunResult": ("hetero.ray.train", "RayRunResult"),
}

__all__ = sorted(_LAZY)


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'hetero.ray' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value
