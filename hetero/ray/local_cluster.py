"""A Ray cluster of several nodes on this machine, each given its share of the machine's devices:
what the tests and benchmarks run on, and a way to try a cluster without one.

    with hetero.ray.LocalCluster(["cpu,oneapi", "opencl"]) as cluster:   # HETERO_BACKENDS per node
        ...                                # ray is initialised; cluster.nodes[1] is the opencl node
        cluster.remove_node(cluster.nodes[1])

``separate_hosts=True`` makes each node a machine of its own for the cluster's quarantine (its
``HETERO_RAY_HOST``): a device quarantined on one node then stays usable on the others, as on a real
cluster, where the nodes' ``cpu`` devices are different CPUs. By default the nodes share this
machine's quarantine, as they share its devices.

Every node listens on 127.0.0.1 only and starts no dashboard. A node's resources and labels are what
``hetero ray resources`` / ``hetero ray labels`` print in that node's environment (run as a
subprocess with its ``HETERO_BACKENDS``), so the test exercises the same path as ``ray start``.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from hetero.core.errors import HeteroError
from hetero.ray.node_share import HOST_ENV, host_id


@dataclasses.dataclass
class Node:
    """One node of a :class:`LocalCluster`: the backends it was given, its Ray node, its share."""

    backends: str
    resources: dict[str, float]
    labels: dict[str, str]
    handle: Any = None
    env: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def node_id(self) -> str:
        return str(self.handle.node_id)


def share_for(backends: str, env: Mapping[str, str] | None = None) -> tuple[dict[str, float], dict[str, str]]:
    """``hetero ray share --json`` run with ``HETERO_BACKENDS=backends``: (resources, labels)."""
    environ = {**os.environ, **(env or {}), "HETERO_BACKENDS": backends}
    done = subprocess.run([sys.executable, "-m", "hetero", "ray", "share", "--json"], env=environ,
                          capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        raise HeteroError(f"hetero ray share for a node with backends {backends!r} failed: {done.stderr.strip()}")
    data = json.loads(done.stdout)
    return {k: float(v) for k, v in data["resources"].items()}, {k: str(v) for k, v in data["labels"].items()}


def loopback_only() -> None:
    """Make Ray give every node of this machine 127.0.0.1 (not the machine's network address): Ray does
    so where clusters are off (``RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0``, inherited by the nodes it
    starts), and ``Cluster`` still starts several nodes. Also no usage reporting."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    if "ray" in sys.modules:  # imported before: its constant was read then
        from ray._private import ray_constants

        ray_constants.ENABLE_RAY_CLUSTER = False


class LocalCluster:
    """``ray.cluster_utils.Cluster`` with hetero's device shares; a context manager that connects this
    process (``ray.init``) and adds the cluster's quarantine to it."""

    def __init__(self, shares: Sequence[str], *, num_cpus: int = 1, env: Mapping[str, str] | None = None,
                 object_store_memory: int = 128 << 20, separate_hosts: bool = False) -> None:
        if not shares:
            raise ValueError("a LocalCluster needs at least one node (a HETERO_BACKENDS string per node)")
        self.shares = list(shares)
        self.num_cpus = num_cpus
        self.env = dict(env or {})
        self.object_store_memory = object_store_memory
        self.separate_hosts = separate_hosts
        self.nodes: list[Node] = []
        self._cluster: Any = None
        self._added = 0

    def _node_args(self, node: Node) -> dict[str, Any]:
        return {"num_cpus": self.num_cpus, "resources": node.resources, "labels": node.labels,
                "include_dashboard": False,
                "object_store_memory": self.object_store_memory,
                "env_vars": {**self.env, **node.env, "HETERO_BACKENDS": node.backends}}

    def add_node(self, backends: str, env: Mapping[str, str] | None = None) -> Node:
        """Start a node with ``HETERO_BACKENDS=backends`` (its share of this machine's devices); ``env``:
        more environment for this node's processes only (``HETERO_FAULTS`` for a drill there)."""
        own = {HOST_ENV: f"{host_id()}-node{self._added}"} if self.separate_hosts else {}
        own.update(env or {})
        self._added += 1
        resources, labels = share_for(backends, {**self.env, **own})
        node = Node(backends, resources, labels, env=own)
        if self._cluster is None:
            from ray.cluster_utils import Cluster

            args = self._node_args(node)
            self._cluster = Cluster(initialize_head=True, head_node_args=args)
            node.handle = self._cluster.head_node
        else:
            node.handle = self._cluster.add_node(wait=True, **self._node_args(node))
        self.nodes.append(node)
        return node

    def remove_node(self, node: Node) -> None:
        """Take a node away (its processes killed, as a machine lost)."""
        self._cluster.remove_node(node.handle, allow_graceful=False)
        self.nodes.remove(node)

    @property
    def address(self) -> str:
        return str(self._cluster.address)

    def __enter__(self) -> LocalCluster:
        loopback_only()
        import ray

        from hetero.ray import cluster_quarantine

        try:
            for backends in self.shares:
                self.add_node(backends)
            self._cluster.wait_for_nodes()
            ray.init(address=self.address, include_dashboard=False, logging_level="WARNING",
                     log_to_driver=False, namespace="hetero")
            cluster_quarantine.attach()
        except BaseException:
            self.shutdown()
            raise
        return self

    def shutdown(self) -> None:
        import ray

        from hetero.ray import cluster_quarantine

        cluster_quarantine.detach()
        if ray.is_initialized():
            ray.shutdown()
        if self._cluster is not None:
            self._cluster.shutdown()
            self._cluster = None

    def __exit__(self, *exc: object) -> None:
        self.shutdown()
