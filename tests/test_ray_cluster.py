"""hetero.ray on a real local Ray cluster of two nodes (``LocalCluster``: 127.0.0.1, each node given its
share of this machine's devices through ``HETERO_BACKENDS``): resources and labels per node, tasks and
actors on the device they ask for, and one quarantine for the cluster. The pure parts without Ray."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.core.device import DeviceInfo, Kind
from hetero.ray.node_share import DEVICE_RESOURCE, HOST_LABEL, devices_of, label_value, node_share
from hetero.ray.placement import NodeDevices, Request, allowed_nodes, ray_options

ray = pytest.importorskip("ray", reason="hetero.ray needs Ray: pip install 'hetero[ray]'")

#: Each node's share of this machine: node A gets cpu and Intel's runtime, node B PoCL.
SHARES = ("cpu,oneapi", "opencl")
#: How soon every node must see a quarantine recorded on another (the issue's bound).
BOUND = 2.0


def _info(name: str, backend: str, index: int, stable_id: str, vendor: str = "Intel(R) Corporation",
          model: str = "Intel(R) Xeon(R) Gold 6430 @ 2.10GHz") -> DeviceInfo:
    return DeviceInfo(name=name, backend=backend, index=index, vendor=vendor, kind=Kind.CPU, model=model,
                      memory=8 << 30, compute_units=4, max_work_group_size=256, fp64=True, driver_version="1",
                      stable_id=stable_id)


# -- without Ray's processes -------------------------------------------------------------------------
def test_a_share_counts_devices_per_backend_and_labels_each_with_ray_s_syntax() -> None:
    from ray._private.label_utils import validate_node_label_syntax

    infos = [_info("cpu", "cpu", 0, "cpu-aa"), _info("oneapi:0", "oneapi", 0, "oneapi-bb"),
             _info("oneapi:1", "oneapi", 1, "oneapi-cc", model="x" * 100 + " (a long model name: with odd chars)")]
    share = node_share(infos, host="h1")
    assert share.resources == {DEVICE_RESOURCE: 3.0, "hetero_cpu": 1.0, "hetero_oneapi": 2.0}
    validate_node_label_syntax(share.labels)  # what `ray start --labels` checks
    assert share.labels[HOST_LABEL] == "h1" and share.labels["hetero.dev/oneapi"] == "2"
    back = devices_of(share.labels)
    assert [(d.name, d.stable_id) for d in back] == [("cpu", "cpu-aa"), ("oneapi:0", "oneapi-bb"), ("oneapi:1", "oneapi-cc")]
    assert back[1].model == "Intel-R-Xeon-R-Gold-6430-2.10GHz" and back[1].memory_mib == 8192
    assert json.loads(share.resources_arg()) == share.resources
    assert "hetero.dev/oneapi-1=" in share.labels_arg()
    assert len(label_value("é" * 5 + "a" * 80)) <= 63 and label_value("::") == "unknown"


def _node(node_id: str, *devices: tuple[str, str, bool]) -> NodeDevices:
    infos = [_info(n, n.split(":")[0], int(n.split(":")[1]) if ":" in n else 0, sid) for n, sid, _ in devices]
    labelled = devices_of(node_share(infos, host="h").labels)
    held = {sid for _, sid, q in devices if q}
    return NodeDevices(node_id, "h", tuple((d, d.stable_id in held) for d in labelled))


def test_placement_leaves_out_nodes_whose_matching_devices_are_all_quarantined() -> None:
    A, B = "a" * 56, "b" * 56  # noqa: N806 - node ids, as Ray writes them
    a = _node(A, ("cpu", "cpu-1", False), ("oneapi:0", "oneapi-1", True))
    b = _node(B, ("opencl:0", "opencl-1", False), ("oneapi:0", "oneapi-2", False))
    assert allowed_nodes(Request("oneapi"), [a, b]) == ([B], [A])
    assert allowed_nodes(Request(), [a, b]) == ([A, B], [])  # A still has its cpu
    assert allowed_nodes(Request("opencl"), [a, b]) == ([B], [])
    options = ray_options(Request("oneapi"), nodes=[a, b])
    assert options["resources"] == {DEVICE_RESOURCE: 1.0, "hetero_oneapi": 1.0}
    assert options["scheduling_strategy"].node_id == B and options["scheduling_strategy"].soft is False
    assert "scheduling_strategy" not in ray_options(Request("opencl"), nodes=[a, b])  # nothing left out: Ray chooses
    from hetero.ray.errors import NoDeviceError

    with pytest.raises(NoDeviceError, match="every matching device is quarantined"):
        ray_options(Request("oneapi"), nodes=[a, _node(B, ("oneapi:0", "oneapi-2", True))])
    with pytest.raises(NoDeviceError, match="no node of the cluster offers one.*hetero ray resources"):
        ray_options(Request("cuda"), nodes=[a, b])


# -- a real cluster ----------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    present = {d.backend for d in hetero.devices()}
    if not {"cpu", "oneapi", "opencl"} <= present:
        pytest.skip(f"the two-node cluster needs cpu, oneapi and opencl devices here; this machine has {sorted(present)}")
    state = tmp_path_factory.mktemp("ray-state")
    from hetero.ray import LocalCluster

    with LocalCluster(SHARES, env={"HETERO_STATE_DIR": str(state)}) as running:
        yield running


def _node_of(cluster: Any, backends: str) -> Any:
    return next(n for n in cluster.nodes if n.backends == backends)


def test_each_node_offers_its_share_as_resources_and_labels(cluster: Any) -> None:
    nodes = {n["NodeID"]: n for n in ray.nodes() if n["Alive"]}
    a, b = _node_of(cluster, "cpu,oneapi"), _node_of(cluster, "opencl")
    assert nodes[a.node_id]["Resources"]["hetero_oneapi"] == 1 and nodes[a.node_id]["Resources"]["hetero_cpu"] == 1
    assert nodes[a.node_id]["Resources"][DEVICE_RESOURCE] == 2 and "hetero_opencl" not in nodes[a.node_id]["Resources"]
    assert nodes[b.node_id]["Resources"]["hetero_opencl"] == 1 and nodes[b.node_id]["Resources"][DEVICE_RESOURCE] == 1
    assert [d.name for d in devices_of(nodes[b.node_id]["Labels"])] == ["opencl:0"]
    assert sorted(d.name for d in devices_of(nodes[a.node_id]["Labels"])) == ["cpu", "oneapi:0"]


def test_a_task_lands_where_its_backend_is_and_hetero_device_is_the_one_it_holds(cluster: Any) -> None:
    @hetero.ray.remote(backend="oneapi")
    def where(values: list[float]) -> tuple[str, str, float]:
        x = hetero.asarray(np.asarray(values, dtype=np.float32))
        return hetero.device().name, ray.get_runtime_context().get_node_id(), float(hetero.sum(x * 2))

    name, node, total = ray.get(where.remote([1.0, 2.0, 3.0]), timeout=120)
    assert (name, node, total) == ("oneapi:0", _node_of(cluster, "cpu,oneapi").node_id, 12.0)
    name, node, _ = ray.get(where.options(num_cpus=0).remote([1.0]), timeout=120)
    assert name == "oneapi:0"
    with pytest.raises(TypeError, match=r"call where.remote\(...\)"):
        where([1.0])

    @hetero.ray.remote(backend="opencl")
    class Holder:
        def device(self) -> tuple[str, str]:
            return hetero.device().name, ray.get_runtime_context().get_node_id()

    holder = Holder.remote()
    assert ray.get(holder.device.remote(), timeout=120) == ("opencl:0", _node_of(cluster, "opencl").node_id)
    assert ray.get(holder.hetero_device_name.remote(), timeout=60) == "opencl:0"
    ray.kill(holder)


def _wait_for(condition: Any, bound: float) -> float:
    start = time.monotonic()
    while not condition():
        if time.monotonic() - start > bound:
            raise AssertionError(f"not within {bound} s")
        time.sleep(0.02)
    return time.monotonic() - start


def test_a_fault_on_one_node_quarantines_the_device_for_the_whole_cluster_until_released(cluster: Any) -> None:
    from hetero.fault import quarantine
    from hetero.ray.errors import NoDeviceError

    @hetero.ray.remote(backend="oneapi", num_cpus=0)
    class Watcher:  # a process on node A: does it see node B's fault?
        def sees(self, stable_id: str) -> bool:
            from hetero.fault import quarantine as q

            return stable_id in q.quarantined_ids()

    @hetero.ray.remote(backend="opencl")
    def faulty_step() -> dict[str, Any]:  # a guarded step on node B whose device is lost (an injected fault)
        state = {"x": hetero.asarray(np.arange(16, dtype=np.float32), device=hetero.device())}
        stable_id = hetero.device().stable_id
        float(hetero.sum(state["x"]))  # made on the device before the fault rule is on

        def step() -> float:
            state["x"] = state["x"] * 2
            return float(hetero.sum(state["x"]))

        try:
            with hetero.fault.inject(f"{hetero.device().name}:launch:nth=1:lost"):
                with hetero.guard(state, devices=[hetero.device().name]) as g:
                    g.run(step)
        except hetero.RecoveryFailedError as exc:  # the node has no other device to move to
            return {"error": type(exc).__name__, "stable_id": stable_id}
        return {"error": None, "stable_id": stable_id}

    @hetero.ray.remote()
    def anywhere() -> str:
        return hetero.device().name

    watcher = Watcher.remote()
    store = Path(ray.get(watcher.__ray_call__.remote(lambda self: str(hetero.get_config().state_dir)), timeout=60))
    before = (store / "quarantine.json").read_bytes() if (store / "quarantine.json").exists() else b""
    result = ray.get(faulty_step.remote(), timeout=180)
    recorded = time.monotonic()
    sid = result["stable_id"]
    assert result["error"] == "RecoveryFailedError"
    entries = hetero.ray.cluster_entries()
    ((host, stable_id), entry), = entries.items()
    assert stable_id == sid and entry.drill and entry.fault_class == "device-lost"
    seen_after = _wait_for(lambda: ray.get(watcher.sees.remote(sid), timeout=30), BOUND)
    assert time.monotonic() - recorded <= BOUND, seen_after
    with pytest.raises(NoDeviceError, match="every matching device is quarantined"):
        faulty_step.remote()  # nothing new is placed on it
    assert ray.get([anywhere.remote() for _ in range(4)], timeout=120) and all(
        name in ("cpu", "oneapi:0") for name in ray.get([anywhere.remote() for _ in range(4)], timeout=120))
    assert sid in quarantine.quarantined_ids()  # the driver's machine shares it too
    listing = subprocess.run([sys.executable, "-m", "hetero", "quarantine", "list", "--cluster", "--address",
                              cluster.address, "--json"], capture_output=True, text=True, timeout=120)
    assert listing.returncode == 0, listing.stderr
    (listed,) = json.loads(listing.stdout)["entries"]
    assert listed["stable_id"] == sid and listed["drill"] and listed["machine"] == host
    # a drill stays a drill: no node's persistent store has it
    assert ((store / "quarantine.json").read_bytes() if (store / "quarantine.json").exists() else b"") == before
    assert quarantine.release(sid)
    assert hetero.ray.cluster_entries() == {}
    _wait_for(lambda: not ray.get(watcher.sees.remote(sid), timeout=30), BOUND)

    @hetero.ray.remote(backend="opencl")
    def healthy_again() -> str:
        return hetero.device().name

    assert ray.get(healthy_again.remote(), timeout=120) == "opencl:0"
    ray.kill(watcher)
