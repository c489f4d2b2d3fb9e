"""hetero.guard over a whole torch training loop, as PyTorch's MNIST example writes it (a small
convolutional Net with Dropout, Adadelta, a StepLR schedule) on scikit-learn's digits: with
injected device faults the final model is bit-identical to a fault-free run, because the
snapshot keeps the scheduler and the random generators; and the snapshot of a scheduler and a
GradScaler on their own."""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.recovery import snapshot, snapshot_rng

torch = pytest.importorskip("torch")
from torch_training import DigitsNet, assert_same_training  # noqa: E402
datasets = pytest.importorskip("sklearn.datasets")
nn, F = torch.nn, torch.nn.functional

DEVICES = [d.name for d in hetero.devices()]
BATCH, STEPS, STEPS_PER_EPOCH, SNAPSHOT_EVERY = 32, 30, 6, 4

pytestmark = pytest.mark.usefixtures("state_dir", "deterministic_torch")  # quarantine entries go to a private store



@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    x, y = datasets.load_digits(return_X_y=True)  # ships with scikit-learn: no download
    return (x / 16.0).astype(np.float32).reshape(-1, 1, 8, 8), y.astype(np.int64)



@dataclasses.dataclass
class Run:
    model: Any
    optimizer: Any
    scheduler: Any
    guard: Any


def train(data: tuple[np.ndarray, np.ndarray], rules: list[str], **options: Any) -> Run:
    """STEPS steps; a batch goes to the guard's device through hetero, so hetero's fault rules
    (alloc) reach the loop. Seeded once, at the start: dropout draws from torch's generator."""
    x_all, y_all = data
    torch.manual_seed(1)
    model = DigitsNet()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)

    def step(k: int) -> float:
        epoch, position = divmod(k, STEPS_PER_EPOCH)
        index = np.random.default_rng([7, epoch]).permutation(len(x_all))[position * BATCH:(position + 1) * BATCH]
        batch = hetero.asarray(x_all[index], device=hetero.device(), copy=True)  # the faults fire here
        where = snapshot.torch_device(hetero.device())
        x = batch.torch() if batch.device.backend == "cpu" else torch.from_numpy(batch.numpy())
        model.train()
        optimizer.zero_grad()
        loss = F.nll_loss(model(x.to(where)), torch.from_numpy(y_all[index]).to(where))
        loss.backward()
        optimizer.step()
        if position == STEPS_PER_EPOCH - 1:  # the end of an "epoch": the schedule moves on
            scheduler.step()
        return float(loss.detach())

    state = {"model": model, "optimizer": optimizer, "scheduler": scheduler}
    with hetero.guard(state, snapshot_every=SNAPSHOT_EVERY, standby=False, max_recoveries=5, **options) as g, \
            (hetero.fault.inject(rules) if rules else contextlib.nullcontext()):
        for k in range(STEPS):
            g.run(step, k)
    return Run(model, optimizer, scheduler, g)



@pytest.fixture(scope="module")
def fault_free(digits: tuple[np.ndarray, np.ndarray]) -> Run:
    run = train(digits, [], device="cpu", devices=["cpu"])
    assert run.guard.recoveries == [] and run.scheduler.last_epoch == STEPS // STEPS_PER_EPOCH
    return run


def test_faults_retried_in_place_end_bit_identical_to_a_fault_free_run(digits: Any, fault_free: Run) -> None:
    # one allocation a step, replays included; each rule counts those the others did not fail:
    # steps 6 (just after a StepLR step), 12 (a snapshot step: nothing to replay) and 19
    rules = ["cpu:alloc:nth=7:oom", "cpu:alloc:nth=15:oom", "cpu:alloc:nth=22:oom"]
    run = train(digits, rules, device="cpu", devices=["cpu"])
    assert [(r["step"], r["in_place"], r["steps_replayed"]) for r in run.guard.recoveries] == [
        (6, True, 2), (12, True, 0), (19, True, 3)]
    assert_same_training(run, fault_free)


def test_a_fault_that_moves_the_work_ends_bit_identical(digits: Any, fault_free: Run) -> None:
    others = [d for d in DEVICES[1:] if snapshot.torch_device(hetero.device(d)) == "cpu"]
    if not others:
        pytest.skip("needs a second device whose torch device is the CPU (an OpenCL CPU device)")
    run = train(digits, ["cpu:alloc:nth=11:lost"], device="cpu", devices=["cpu", others[0]])
    (event,) = run.guard.recoveries
    assert (event["step"], event["device"], event["steps_replayed"]) == (10, others[0], 2)
    assert_same_training(run, fault_free)


def test_without_rng_restore_the_replayed_dropout_diverges(digits: Any, fault_free: Run) -> None:
    """The check the two tests above stand on: the replay draws other dropout masks when the
    generators are not restored (rng=False), and the final model differs."""
    run = train(digits, ["cpu:alloc:nth=7:oom"], device="cpu", devices=["cpu"], rng=False)
    (event,) = run.guard.recoveries
    assert event["steps_replayed"] == 2
    assert not all(torch.equal(a, b) for a, b in zip(run.model.parameters(), fault_free.model.parameters(),
                                                     strict=True))
    assert run.scheduler.state_dict() == fault_free.scheduler.state_dict()  # the schedule is state: kept


def test_scheduler_snapshot_restores_its_schedule() -> None:
    model = nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=2, gamma=0.5)
    state: dict[str, Any] = {"model": model, "optimizer": optimizer, "scheduler": scheduler}
    for _ in range(3):
        optimizer.step()
        scheduler.step()
    taken = snapshot.take(state, 3)
    want_sched, want_lr = scheduler.state_dict(), scheduler.get_last_lr()
    for _ in range(4):
        optimizer.step()
        scheduler.step()
    assert scheduler.last_epoch == 7 and optimizer.param_groups[0]["lr"] != want_lr[0]
    snapshot.restore(taken, state, hetero.device("cpu"))
    assert state["scheduler"] is scheduler  # restored into the scheduler the loop holds
    assert scheduler.state_dict() == want_sched and scheduler.get_last_lr() == want_lr == [0.5]
    assert optimizer.param_groups[0]["lr"] == 0.5  # the optimizer's param_groups carry the lr
    optimizer.step()
    scheduler.step()  # epoch 4: the next halving, as a run that never faulted has it
    assert scheduler.get_last_lr() == [0.25]


def test_grad_scaler_snapshot_restores_its_scale() -> None:
    try:
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=1)
    except (RuntimeError, TypeError, AttributeError) as exc:
        pytest.skip(f"this torch has no CPU GradScaler: {exc}")
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)

    def train_once() -> None:
        optimizer.zero_grad()
        scaler.scale(model(torch.ones(2, 3)).sum()).backward()
        scaler.step(optimizer)
        scaler.update()  # growth_interval=1: the scale doubles after each clean step

    train_once()
    state: dict[str, Any] = {"model": model, "optimizer": optimizer, "scaler": scaler}
    taken = snapshot.take(state, 1)
    want = scaler.state_dict()
    train_once()
    train_once()
    assert scaler.get_scale() == want["scale"] * 4
    snapshot.restore(taken, state, hetero.device("cpu"))
    assert state["scaler"] is scaler and scaler.state_dict() == want and scaler.get_scale() == want["scale"]


def test_torch_generator_in_state_and_the_global_ones_are_restored() -> None:
    generator = torch.Generator().manual_seed(3)
    torch.manual_seed(4)
    with hetero.guard({"gen": generator}, device="cpu", devices=["cpu"], standby=False) as g:
        g.run(lambda: None)  # the snapshot
        want = (torch.rand(3, generator=generator), torch.rand(3))
        assert g.last_snapshot is not None and g.last_snapshot.rng is not None
        snapshot.restore(g.last_snapshot, g.state, g.device)
        got_own = torch.rand(3, generator=generator)
        snapshot_rng.restore(g.last_snapshot.rng, "cpu")
        got_global = torch.rand(3)
    assert torch.equal(got_own, want[0]) and torch.equal(got_global, want[1])
