"""Joining a Ray cluster for a training run, and telling whether one of its nodes is gone: what
:mod:`hetero.ray.train` needs of the cluster besides placing actors."""

from __future__ import annotations

import os

from hetero.launcher.assign import OptionError
from hetero.launcher.config import LaunchConfig


def connect(address: str | None) -> bool:
    """Connect this process to Ray: the cluster it is connected to already, else ``address`` (``auto``:
    the one Ray finds on this machine), else ``RAY_ADDRESS``, else a new one-node cluster on 127.0.0.1
    offering this machine's devices (never one found by chance: another user's cluster on this machine
    is not this run's). Joins the cluster's quarantine. True when it started Ray (:func:`run_config`
    shuts it down at the end)."""
    import ray

    from hetero.ray import cluster_quarantine
    from hetero.ray.local_cluster import loopback_only

    started = False
    if not ray.is_initialized():
        address = address or os.environ.get("RAY_ADDRESS") or None
        if address is None:
            from hetero.ray.node_share import healthy_devices, node_share

            loopback_only()
            share = node_share(healthy_devices())
            ray.init(address="local", resources=share.resources, labels=share.labels, include_dashboard=False,
                     logging_level="WARNING", namespace="hetero")
            started = True
        else:
            ray.init(address=address, logging_level="WARNING", namespace="hetero")
    cluster_quarantine.attach()
    return started


def node_gone(node_id: str, timeout: float = 1.0) -> str | None:
    """Why the node ``node_id`` is gone (Ray's control store says it died, or its raylet does not take a
    connection within ``timeout`` seconds), or None while it is there. Asking the raylet tells a lost
    machine at once, where Ray's health checks take several periods to declare it dead."""
    import socket

    import ray

    node = next((n for n in ray.nodes() if str(n.get("NodeID")) == node_id), None)
    if node is None or not node.get("Alive"):
        return "Ray marks it dead"
    address, port = node.get("NodeManagerAddress"), node.get("NodeManagerPort")
    if not address or not port:
        return None
    try:
        with socket.create_connection((str(address), int(port)), timeout=timeout):
            return None
    except OSError as exc:
        return f"its raylet at {address}:{port} does not answer ({exc.strerror or type(exc).__name__})"


def check_shared_storage(config: LaunchConfig) -> None:
    """A cluster of several machines needs a checkpoint folder every node reads; the default (under this
    machine's run directory) is one only when every node is on this machine."""
    from hetero.ray.placement import cluster_devices

    hosts = {node.host for node in cluster_devices()}
    if len(hosts) > 1 and config.checkpoint_dir == config.run_dir / "checkpoints" and not config.checkpoint_dir.exists():
        raise OptionError(f"the cluster has nodes on {len(hosts)} machines: give a checkpoint folder every node reads "
                          "(checkpoint_dir='/shared/ckpt', hetero-run --checkpoint-dir), since a worker restarted on "
                          "another machine resumes from it")
