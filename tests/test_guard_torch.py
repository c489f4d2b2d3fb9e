"""hetero.guard with torch state: module and optimizer snapshots, an injected out-of-memory fault
retried in place, and the final state equal to a fault-free run (examples/train_digits_torch.py)."""

from __future__ import annotations

import importlib
import sys
from typing import Any

import pytest
from conftest import ROOT

import hetero
from hetero.fault import snapshot

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


def test_torch_device_names() -> None:
    cpu = hetero.device("cpu")
    assert snapshot.torch_device(cpu) == "cpu"

    class Fake:
        def __init__(self, backend: str, kind: str, index: int) -> None:
            self.backend, self.kind, self.index = backend, kind, index

    assert snapshot.torch_device(Fake("cuda", "gpu", 1)) == "cuda:1"  # type: ignore[arg-type]
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
