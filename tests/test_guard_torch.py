"""hetero.guard with torch state: module and optimizer snapshots, an injected out-of-memory fault
retried in place, and the final state equal to a fault-free run (examples/train_digits_torch.py)."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import numpy as np
import pytest
from conftest import ROOT

import hetero
from hetero.recovery import snapshot

torch = pytest.importorskip("torch")
EXAMPLES = ROOT / "examples"


pytestmark = pytest.mark.usefixtures("state_dir")  # quarantine entries go to a private store


@pytest.fixture(scope="module")
def example() -> Any:
    sys.path.insert(0, str(EXAMPLES))
    try:
        yield importlib.import_module("train_digits_torch")
    finally:
        sys.path.remove(str(EXAMPLES))


def tensors(run: Any) -> dict[str, Any]:
    """Every tensor of the model and of the optimizer's state (momentum buffers)."""
    out = {f"model.{k}": v for k, v in run.model.state_dict().items()}
    for index, per_param in run.optimizer.state_dict()["state"].items():
        out.update({f"opt.{index}.{k}": v for k, v in per_param.items() if isinstance(v, torch.Tensor)})
    return out


def test_injected_oom_is_retried_in_place_and_matches_fault_free(example: Any) -> None:
    clean, clean_summary = example.train(example.parse_args(["--steps", "40", "--snapshot-every", "8"]))
    faulty, summary = example.train(example.parse_args(["--steps", "40", "--snapshot-every", "8",
                                                        "--inject", "cpu:alloc:nth=21:oom"]))
    assert clean_summary["recoveries"] == []
    (event,) = summary["recoveries"]
    assert event["injected"] and event["in_place"] and event["fault_class"] == "recoverable"
    assert (event["step"], event["snapshot_step"], event["steps_replayed"]) == (20, 16, 4)
    assert summary["final_device"] == "cpu"
    want, got = tensors(clean), tensors(faulty)
    assert want.keys() == got.keys() and any(k.startswith("opt.") for k in got)
    for name in want:
        assert torch.equal(got[name], want[name]), name


def test_module_optimizer_and_tensor_snapshot_round_trip() -> None:
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    extra = torch.arange(3.0, requires_grad=True)
    state: dict[str, Any] = {"optimizer": optimizer, "model": model, "extra": extra}

    def train_once() -> None:
        optimizer.zero_grad()
        model(torch.ones(1, 4)).sum().backward()
        optimizer.step()
        with torch.no_grad():
            extra.add_(1.0)

    train_once()
    taken = snapshot.take(state, 1)
    weight = model.weight
    before = {k: v.clone() for k, v in model.state_dict().items()}
    exp_avg = optimizer.state_dict()["state"][0]["exp_avg"].clone()
    train_once()
    train_once()
    snapshot.restore(taken, state, hetero.device("cpu"))
    assert model.weight is weight  # restored into the same parameters: the optimizer still holds them
    for k, v in model.state_dict().items():
        assert torch.equal(v, before[k])
    assert torch.equal(optimizer.state_dict()["state"][0]["exp_avg"], exp_avg)
    assert optimizer.state_dict()["state"][0]["step"] == 1
    assert state["extra"] is extra and torch.equal(extra, torch.arange(3.0) + 1)
    assert taken.nbytes >= sum(v.numel() * 4 for v in before.values())


def test_snapshot_does_not_share_memory_with_the_live_state() -> None:
    model = torch.nn.Linear(3, 3)
    taken = snapshot.take({"model": model}, 0)
    with torch.no_grad():
        model.weight.fill_(5.0)
    assert not torch.equal(taken.values["model"].data["weight"], model.weight)


def test_torch_device_names(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = hetero.device("cpu")
    assert snapshot.torch_device(cpu) == "cpu"

    class Fake:
        def __init__(self, backend: str, kind: str, index: int) -> None:
            self.backend, self.kind, self.index = backend, kind, index

    # the names torch has for GPUs where it has their backend (hetero.torch_device checks: a CUDA
    # build with a GPU, a ROCm build with one, a torch with XPU; tests/test_torch_devices.py)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.xpu, "is_available", lambda: True)
    monkeypatch.setattr(torch.version, "cuda", "12.8")
    monkeypatch.setattr(torch.version, "hip", None)
    assert snapshot.torch_device(Fake("cuda", "gpu", 1)) == "cuda:1"  # type: ignore[arg-type]
    monkeypatch.setattr(torch.version, "cuda", None)
    monkeypatch.setattr(torch.version, "hip", "7.0")
    assert snapshot.torch_device(Fake("rocm", "gpu", 0)) == "cuda:0"  # type: ignore[arg-type]
    assert snapshot.torch_device(Fake("oneapi", "gpu", 0)) == "xpu:0"  # type: ignore[arg-type]
    assert snapshot.torch_device(Fake("oneapi", "cpu", 0)) == "cpu"  # type: ignore[arg-type]


def test_restore_onto_another_device_never_reads_the_old_one() -> None:
    """After a sticky error the old device's memory cannot be read: restoring a module and its
    optimizer must not copy from it. A module on torch's "meta" device (no data at all) stands in."""
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    optimizer.zero_grad()
    model(torch.randn(5, 4)).sum().backward()
    optimizer.step()
    taken = snapshot.take({"model": model, "optimizer": optimizer}, 0)
    want = {k: v.clone() for k, v in model.state_dict().items()}
    model.to("meta")  # the "failed device": reading it raises
    optimizer.param_groups[0]["params"] = list(model.parameters())  # as it holds a GPU model's parameters
    state: dict[str, Any] = {"model": model, "optimizer": optimizer}
    snapshot.restore(taken, state, hetero.device("cpu"))
    params = list(model.parameters())
    assert all(p.device.type == "cpu" for p in params)
    # torch makes new Parameter objects off "meta": the optimizer must now hold those
    assert all(a is b for a, b in zip(optimizer.param_groups[0]["params"], params, strict=True))
    for k, v in model.state_dict().items():
        assert torch.equal(v, want[k]), k
    buffers = [s["momentum_buffer"] for s in optimizer.state_dict()["state"].values()]
    assert buffers and all(b.device.type == "cpu" for b in buffers)


# -- torch's own device errors, raised by the step (not by hetero) ---------------------------------
CUDA_SUFFIX = ("\nCUDA kernel errors might be asynchronously reported at some other API call, so the stacktrace below "
               "might be incorrect.\nFor debugging consider passing CUDA_LAUNCH_BLOCKING=1\n"
               "Compile with `TORCH_USE_CUDA_DSA` to enable device-side assertions.\n")
TORCH_OOM = ("CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.10 GiB of which "
             "1.25 GiB is free. Of the allocated memory 75.12 GiB is allocated by PyTorch, and 1.20 GiB is reserved "
             "by PyTorch but unallocated.")
ILLEGAL_ADDRESS = "CUDA error: an illegal memory access was encountered" + CUDA_SUFFIX


class RaisesOnce:
    """A step that adds ``step`` to the state's tensor and count, then raises ``make()`` when it runs
    at ``at`` on a device named in ``on`` (each once)."""

    def __init__(self, state: dict[str, Any], at: int, on: set[str], make: Any) -> None:
        self.state, self.at, self.on, self.make = state, at, set(on), make

    def __call__(self, step: int) -> float:
        with torch.no_grad():
            self.state["w"].add_(float(step))
        self.state["count"] += 1
        name = hetero.device().name
        if step == self.at and name in self.on:
            self.on.discard(name)
            raise self.make()
        return float(step)


def torch_state() -> dict[str, Any]:
    return {"w": torch.zeros(4), "count": 0}


def guarded(state: dict[str, Any], steps: int, step_fn: Any, **options: Any) -> hetero.recovery.guard.Guard:
    with hetero.guard(state, snapshot_every=4, standby=False, **options) as g:
        for step in range(steps):
            assert g.run(step_fn, step) == float(step)
    return g


def test_a_real_torch_out_of_memory_error_is_retried_in_place() -> None:
    cpu = hetero.device("cpu")
    state = torch_state()
    g = guarded(state, 7, RaisesOnce(state, 5, {"cpu"}, lambda: torch.OutOfMemoryError(TORCH_OOM)), devices=[cpu])
    (event,) = g.recoveries
    assert event["in_place"] and event["device"] == "cpu" and event["fault_class"] == "recoverable"
    assert (event["snapshot_step"], event["steps_replayed"]) == (4, 1)
    assert g.history[0]["error_type"] == "OutOfMemoryError" and "CUDA out of memory" in g.history[0]["message"]
    assert not hetero.fault.quarantine.is_quarantined(cpu.stable_id)
    assert torch.equal(state["w"], torch.full((4,), float(sum(range(7))))) and state["count"] == 7


def test_a_torch_illegal_address_moves_the_work_and_quarantines_the_device(monkeypatch: pytest.MonkeyPatch) -> None:
    names = [d.name for d in hetero.devices()]
    if len(names) < 2:
        pytest.skip("needs two devices")
    a, b = hetero.device(names[0]), hetero.device(names[1])
    noted: list[BaseException] = []
    monkeypatch.setattr(a.runtime, "note_error", noted.append)  # what a CUDA device's backend is told
    state = {"w": np.zeros(4), "count": 0}

    def step_fn(step: int) -> float:
        state["w"] += step
        state["count"] += 1
        if step == 2 and hetero.device() is a:
            raise torch.AcceleratorError(ILLEGAL_ADDRESS)
        return float(step)

    g = guarded(state, 6, step_fn, devices=[a, b])
    (event,) = g.recoveries
    assert (event["failed_device"], event["device"], event["in_place"]) == (a.name, b.name, False)
    assert event["fault_class"] == "context-corrupting" and event["action"] == "migrate" and not event["injected"]
    entry = hetero.fault.quarantine.entry(a)
    assert entry is not None and entry.fault_class == "context-corrupting"
    assert "AcceleratorError" in entry.reason and "illegal memory access" in entry.reason
    assert [type(e).__name__ for e in noted] == ["ContextCorruptedError"] and noted[0].code == 700  # type: ignore[attr-defined]
    np.testing.assert_array_equal(state["w"], np.full(4, float(sum(range(6)))))
    assert state["count"] == 6


def test_a_torch_error_that_is_no_device_fault_propagates_unchanged() -> None:
    raised = RuntimeError("CUDA error: no kernel image is available for execution on the device" + CUDA_SUFFIX)
    state = torch_state()
    with pytest.raises(RuntimeError) as caught:
        guarded(state, 3, RaisesOnce(state, 1, {"cpu"}, lambda: raised), devices=["cpu"])
    assert caught.value is raised


def cupy_gpu() -> hetero.Device:
    """A ``cuda:0`` hetero device over CuPy's real runtime class, whose CUDA device is a stand-in (no
    GPU here) and whose NVML reads "ok": what is exercised is the backend's own sticky-error path."""
    cupy = pytest.importorskip("cupy", reason="CuPy is not installed (pip install 'hetero[cuda]')")
    import contextlib
    import types

    from hetero.backends.cupy.runtime import CuPyRuntime
    from hetero.core.device import Device, DeviceInfo, Health, HealthState, Kind

    info = DeviceInfo("cuda:0", "cuda", 0, "NVIDIA", Kind.GPU, "test", 1 << 30, 1, 1, True, "0",
                      "7d3c1f0a-0b6e-4d7e-9a31-5c2b8e4f9a10", {"arch": "sm_90"})
    stand_in = types.SimpleNamespace(cuda=types.SimpleNamespace(
        Device=lambda index: contextlib.nullcontext(), runtime=cupy.cuda.runtime, driver=cupy.cuda.driver,
        memory=cupy.cuda.memory))
    ok = types.SimpleNamespace(read=lambda stable_id: types.SimpleNamespace(health=Health(HealthState.OK), fields={}))
    return Device(info, CuPyRuntime(stand_in, info, "test", nvml=ok))  # type: ignore[arg-type]


def test_a_torch_sticky_error_leaves_the_cuda_device_unhealthy_for_the_process() -> None:
    from hetero.core.device import HealthState

    gpu, cpu = cupy_gpu(), hetero.device("cpu")
    assert gpu.health().state is HealthState.OK
    state = {"w": np.zeros(4), "count": 0}

    def step_fn(step: int) -> float:
        state["w"] += step
        state["count"] += 1
        if step == 1 and hetero.device() is gpu:
            raise torch.AcceleratorError("CUDA error: device-side assert triggered" + CUDA_SUFFIX)
        return float(step)

    g = guarded(state, 3, step_fn, devices=[gpu, cpu], device=gpu)
    assert g.device is cpu and g.recoveries[0]["fault_class"] == "context-corrupting"
    health = gpu.health()  # as after hetero's own cudaErrorAssert: the context is gone in this process
    assert health.state is HealthState.UNHEALTHY and "cudaErrorAssert" in health.reason
    assert hetero.fault.quarantine.is_quarantined(gpu.stable_id)
    np.testing.assert_array_equal(state["w"], np.full(4, 3.0))


def test_fingerprint_reads_optimizer_state_tensors_and_other_values_and_the_attributes_beside_an_object() -> None:
    """The fingerprint reads an optimizer's state tensors in one pass when they are all plain tensors,
    each value otherwise (a float someone stored there), and a schedule's plain attributes beside
    the optimizer it holds (an object it skips, by type once seen): a change to any of them between
    two readings is seen."""
    from hetero.recovery import fingerprint

    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    schedule = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    state = {"model": model, "optimizer": optimizer, "schedule": schedule}
    before = fingerprint.of(state)
    assert fingerprint.of(state) == before
    weight = next(iter(model.parameters()))
    with torch.no_grad():
        optimizer.state[weight]["momentum_buffer"].add_(1.0)  # all tensors: the one-pass read
    changed = fingerprint.of(state)
    assert changed != before
    optimizer.state[weight]["seen"] = 1.0  # a value that is no tensor: read value by value
    mixed = fingerprint.of(state)
    assert mixed != changed and fingerprint.of(state) == mixed
    optimizer.state[weight]["seen"] = 2.0
    assert fingerprint.of(state) != mixed
    for _ in range(2):  # the second reading meets the optimizer's type as one already skipped
        last = fingerprint.of(state)
        schedule.step()
        assert fingerprint.of(state) != last
