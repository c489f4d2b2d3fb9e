"""hetero.guard over the unmodified structure of PyTorch's MNIST example: epochs, a shuffling
``DataLoader``, ``model.train()`` each epoch and ``scheduler.step()`` each epoch, outside ``g.run``.
Work between steps (the loader's draws from torch's generator at each epoch start, the scheduler
moving the learning rate) is not replayed; the guard must still end bit-identical to a fault-free
run after any recovery: it keeps each step's random generators at its entry, and takes a snapshot
at a step whose state changed since the last one ended. Faults come from torch drill rules
(``cpu:torch:nth=N:oom``), raised at a torch op as torch's own error type; N is found by a
calibration run that counts the torch ops up to each step (the loader's ops between steps count too).
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.recovery import fingerprint, snapshot

torch = pytest.importorskip("torch")
from torch_training import DigitsNet, assert_same_training  # noqa: E402
datasets = pytest.importorskip("sklearn.datasets")
nn, F = torch.nn, torch.nn.functional
DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset

DEVICES = [d.name for d in hetero.devices()]
OTHERS = [d for d in DEVICES[1:] if snapshot.torch_device(hetero.device(d)) == "cpu"]
SAMPLES, BATCH, EPOCHS, SNAPSHOT_EVERY = 240, 48, 4, 4  # 5 steps an epoch, 20 steps
STEPS_PER_EPOCH = SAMPLES // BATCH
COUNTER = "cpu:torch:nth=1000000000:oom"  # never fires: counts the torch ops on the CPU
INTO_STEP = 5  # how many torch ops into a step a fault fires (inside the forward pass)

pytestmark = pytest.mark.usefixtures("state_dir", "deterministic_torch")  # quarantine entries go to a private store



@pytest.fixture(scope="module")
def digits() -> tuple[Any, Any]:
    x, y = datasets.load_digits(return_X_y=True)  # ships with scikit-learn: no download
    x = (x[:SAMPLES] / 16.0).astype(np.float32).reshape(-1, 1, 8, 8)
    return torch.from_numpy(x), torch.from_numpy(y[:SAMPLES].astype(np.int64))



@dataclasses.dataclass
class Run:
    model: Any
    optimizer: Any
    scheduler: Any
    guard: Any
    entries: list[int]  # the torch-op count at each call of the step function (replays included)


def train(data: tuple[Any, Any], rules: list[str] = (), *, schedule_every: int = 1,  # type: ignore[assignment]
          loader_in_state: Any = None, decorated: bool = False, **options: Any) -> Run:
    """The mnist example's loop; ``rules`` are torch drill rules, the last of them ``COUNTER``.
    ``loader_in_state``: makes the loader (after the seed), which the state then holds."""
    torch.manual_seed(1)
    model = DigitsNet()
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    loader = loader_in_state() if loader_in_state is not None else \
        DataLoader(TensorDataset(*data), batch_size=BATCH, shuffle=True)
    entries: list[int] = []
    counting: list[Any] = []

    def train_step(data: Any, target: Any) -> float:
        if counting:
            injection, rule = counting[0]
            entries.append(sum(injection.calls(rule).values()))
        optimizer.zero_grad()
        loss = F.nll_loss(model(data), target)
        loss.backward()
        optimizer.step()
        return float(loss.detach())

    state: dict[str, Any] = {"model": model, "optimizer": optimizer, "scheduler": scheduler}
    if loader_in_state is not None:
        state["loader"] = loader
    options = {"snapshot_every": SNAPSHOT_EVERY, "standby": False, "max_recoveries": 5, "device": "cpu",
               "devices": ["cpu"], **options}
    with hetero.guard(state, **options) as g, \
            (hetero.fault.inject(list(rules)) if rules else contextlib.nullcontext()) as injection:
        if injection is not None:
            counting.append((injection, injection.rules[-1]))
        step = g.step(train_step) if decorated else (lambda *args: g.run(train_step, *args))
        for epoch in range(1, EPOCHS + 1):
            model.train()
            for data_batch, target in loader:
                step(data_batch, target)
            if epoch % schedule_every == 0:
                scheduler.step()
    return Run(model, optimizer, scheduler, g, entries)


def fault_at(entries: list[int], call: int, kind: str = "oom") -> str:
    """A rule firing INTO_STEP torch ops into the ``call``-th call of the step function."""
    return f"cpu:torch:nth={entries[call] + INTO_STEP}:{kind}"



def events(run: Run) -> list[tuple[Any, ...]]:
    return [(r["step"], r["device"], r["in_place"], r["snapshot_step"], r["steps_replayed"])
            for r in run.guard.recoveries]


@pytest.fixture(scope="module")
def fault_free(digits: Any) -> Run:
    run = train(digits, [COUNTER])  # the counter fires never: this is the fault-free run, counted
    assert run.guard.recoveries == [] and len(run.entries) == EPOCHS * STEPS_PER_EPOCH
    assert run.scheduler.last_epoch == EPOCHS
    return run


@pytest.fixture(scope="module")
def every_other_epoch(digits: Any) -> Run:
    run = train(digits, [COUNTER], schedule_every=2)
    assert run.guard.recoveries == [] and run.scheduler.last_epoch == EPOCHS // 2
    return run


# -- the loop, each epoch's scheduler.step() outside g.run ------------------------------------------
@pytest.mark.parametrize(("step", "snapshot_step"), [
    (5, 5),    # the first step of epoch 2, right after scheduler.step(): a snapshot there, nothing to replay
    (7, 5),    # mid-epoch: replays steps 5 and 6, after the epoch's snapshot
    (14, 12),  # the last step of epoch 3: replays 12 and 13
])
def test_an_oom_retried_in_place_ends_bit_identical(digits: Any, fault_free: Run, step: int, snapshot_step: int) -> None:
    run = train(digits, [fault_at(fault_free.entries, step), COUNTER])
    assert events(run) == [(step, "cpu", True, snapshot_step, step - snapshot_step)]
    assert run.guard.boundary_snapshots == EPOCHS - 1  # one after each scheduler.step() but the last
    assert_same_training(run, fault_free)


@pytest.mark.parametrize("kind", ["lost", "sticky"])
def test_a_fault_that_moves_the_work_ends_bit_identical(digits: Any, fault_free: Run, kind: str) -> None:
    if not OTHERS:
        pytest.skip("needs a second device whose torch device is the CPU (an OpenCL CPU device)")
    run = train(digits, [fault_at(fault_free.entries, 11, kind), COUNTER], devices=["cpu", OTHERS[0]])
    assert events(run) == [(11, OTHERS[0], False, 10, 1)]
    assert run.guard.recoveries[0]["fault_class"] in ("device-lost", "context-corrupting")
    assert_same_training(run, fault_free)


def test_a_fault_during_the_replay_ends_bit_identical(digits: Any, fault_free: Run) -> None:
    if not OTHERS:
        pytest.skip("needs a second device whose torch device is the CPU (an OpenCL CPU device)")
    calibration = train(digits, [fault_at(fault_free.entries, 7), COUNTER])
    # step 7 faults, replays 5 and 6; calls: steps 0..7 (7 failing), then the replay of 5 (call 8) and 6 (call 9): fail the replay of 6
    rules = [fault_at(fault_free.entries, 7), fault_at(calibration.entries, 9), COUNTER]
    run = train(digits, rules, devices=["cpu", OTHERS[0]])
    assert events(run) == [(7, OTHERS[0], False, 5, 2)]
    assert [h["step"] for h in run.guard.history] == [7, 7]
    assert_same_training(run, fault_free)


# -- a snapshot in the previous epoch: the replay crosses the loader's draws at an epoch start ------
@pytest.mark.parametrize(("step", "snapshot_step"), [(6, 4), (9, 8)])
def test_a_replay_across_an_epoch_start_draws_what_the_first_run_drew(
        digits: Any, every_other_epoch: Run, step: int, snapshot_step: int) -> None:
    # scheduler.step() after epochs 2 and 4 only: nothing changes the state at the start of epoch 2
    # (step 5) but the loader's draws from torch's generator (its base seed and the shuffle)
    run = train(digits, [fault_at(every_other_epoch.entries, step), COUNTER], schedule_every=2)
    assert events(run) == [(step, "cpu", True, snapshot_step, step - snapshot_step)]
    assert_same_training(run, every_other_epoch)


def test_without_rng_the_replay_across_an_epoch_start_diverges(digits: Any, every_other_epoch: Run) -> None:
    """What the test above stands on: with rng=False the replayed dropout draws other numbers."""
    run = train(digits, [fault_at(every_other_epoch.entries, 6), COUNTER], schedule_every=2, rng=False)
    assert events(run) == [(6, "cpu", True, 4, 2)]
    assert not all(torch.equal(a, b) for a, b in zip(run.model.parameters(), every_other_epoch.model.parameters(),
                                                     strict=True))


# -- the other forms ------------------------------------------------------------------------------
def test_the_decorator_form_recovers_the_same_way(digits: Any, fault_free: Run) -> None:
    run = train(digits, [fault_at(fault_free.entries, 7), COUNTER], decorated=True)
    assert events(run) == [(7, "cpu", True, 5, 2)]
    assert_same_training(run, fault_free)


def test_the_decorator_keeps_the_function_s_name_and_calls_g_run() -> None:
    with hetero.guard({}, device="cpu", devices=["cpu"], standby=False) as g:
        @g.step
        def train_step(x: int, *, y: int = 0) -> int:
            """Doc."""
            return x + y

        assert train_step(1, y=2) == 3 and g.step_number == 1
    assert train_step.__name__ == "train_step" and train_step.__doc__ == "Doc."
    assert train_step.__wrapped__(4) == 4


@pytest.mark.parametrize("loader_kind", ["DataLoader", "StatefulDataLoader"])
def test_a_loader_in_state_is_never_rewound(digits: Any, fault_free: Run, loader_kind: str) -> None:
    loaded: list[Any] = []

    def make() -> Any:
        if loader_kind == "DataLoader":
            return DataLoader(TensorDataset(*digits), batch_size=BATCH, shuffle=True)
        stateful = pytest.importorskip("torchdata.stateful_dataloader")
        loader = stateful.StatefulDataLoader(TensorDataset(*digits), batch_size=BATCH, shuffle=True)
        loader.load_state_dict = loaded.append  # a rewind would call it
        return loader

    made: list[Any] = []
    want = train(digits, [COUNTER], loader_in_state=make)  # StatefulDataLoader draws its own way
    run = train(digits, [fault_at(want.entries, 7), COUNTER], loader_in_state=lambda: made.append(make()) or made[0])
    assert events(run) == [(7, "cpu", True, 5, 2)] and loaded == []
    assert run.guard.state["loader"] is made[0]
    assert_same_training(run, want)


def test_g_snapshot_takes_one_now(digits: Any) -> None:
    w = torch.zeros(3)
    with hetero.guard({"w": w}, snapshot_every=100, device="cpu", devices=["cpu"], standby=False) as g:
        g.run(lambda: w.add_(1))
        g.run(lambda: w.add_(1))
        w.data.mul_(10)  # the blind spot: .data has its own version counter, the fingerprint misses it
        g.snapshot()
        assert g.last_snapshot is not None and g.last_snapshot.step == 2 and g.snapshots_taken == 2
        with pytest.raises(RuntimeError, match="between steps"):
            g.run(g.snapshot)
        with hetero.fault.inject("cpu:torch:nth=1:oom"):
            g.run(lambda: w.add_(1))
    assert torch.equal(w, torch.full((3,), 21.0))
    assert [r["snapshot_step"] for r in g.recoveries] == [2] and g.recoveries[0]["steps_replayed"] == 0


# -- what the fingerprint sees between steps --------------------------------------------------------
def test_the_fingerprint_sees_a_change_made_between_steps() -> None:
    model = nn.Linear(2, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=1.0, momentum=0.9)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.5)
    table = np.zeros(4)
    state = {"model": model, "optimizer": optimizer, "scheduler": scheduler, "table": table, "epoch": 0,
             "loader": DataLoader(TensorDataset(torch.zeros(4, 2)), batch_size=2)}
    seen = fingerprint.of(state)
    assert fingerprint.of(state) == seen  # nothing changed
    for _ in state["loader"]:  # iterating a loader draws from torch's generator: not state
        pass
    torch.rand(2)
    assert fingerprint.of(state) == seen
    changes = {
        "scheduler.step()": lambda: (optimizer.step(), scheduler.step()),
        "an in-place edit of a parameter": lambda: torch.no_grad()(lambda: model.weight.mul_(2))(),
        "a NumPy edit": lambda: table.__setitem__(1, 3.0),
        "a plain value": lambda: state.__setitem__("epoch", 1),
        "a buffer replaced": lambda: setattr(model, "bias", nn.Parameter(torch.zeros(2))),
        "a parameter's storage swapped": lambda: setattr(model.weight, "data", torch.ones(2, 2)),
    }
    for what, change in changes.items():
        before = fingerprint.of(state)
        change()
        assert fingerprint.of(state) != before, what


def test_the_fingerprint_sees_submodules_added_replaced_and_their_parameters() -> None:
    """The per-module cache of where its tensors live is dropped when torch registers anything."""
    model = nn.Sequential(nn.Linear(2, 2), nn.ReLU())
    state = {"model": model}
    before = fingerprint.of(state)
    assert fingerprint.of(state) == before
    model[1] = nn.Linear(2, 2)  # a child replaced: new parameters the cached walk had not seen
    replaced = fingerprint.of(state)
    assert replaced != before
    model.append(nn.Linear(2, 2))
    appended = fingerprint.of(state)
    assert appended != replaced
    with torch.no_grad():
        model[2].weight.add_(1)  # an edit in the new child is seen too
    assert fingerprint.of(state) != appended
    model[2].register_buffer("count", torch.zeros(1))
    assert fingerprint.of(state) != appended


def test_a_change_between_steps_takes_a_snapshot_there() -> None:
    w, table = torch.zeros(2), np.zeros(2)
    with hetero.guard({"w": w, "table": table}, snapshot_every=100, device="cpu", devices=["cpu"],
                      standby=False) as g:
        g.run(lambda: w.add_(1))
        g.run(lambda: w.add_(1))
        assert (g.snapshots_taken, g.boundary_snapshots) == (1, 0)  # nothing happened between steps
        with torch.no_grad():
            w.mul_(3)
        g.run(lambda: w.add_(1))
        assert (g.snapshots_taken, g.boundary_snapshots, g.last_snapshot.step) == (2, 1, 2)
        table[0] = 5
        g.run(lambda: w.add_(1))
        assert (g.snapshots_taken, g.boundary_snapshots, g.last_snapshot.step) == (3, 2, 3)
        assert g.last_snapshot.reason == "boundary"


def test_the_fingerprint_reads_a_grad_scaler_without_its_state_dict() -> None:
    """GradScaler.state_dict() calls .item() (a GPU sync): the fingerprint walks its attributes."""
    try:
        scaler = torch.amp.GradScaler("cpu", init_scale=2.0**8, growth_interval=1)
    except (RuntimeError, TypeError, AttributeError) as exc:
        pytest.skip(f"this torch has no CPU GradScaler: {exc}")
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    scaler.scale(model(torch.ones(2, 3)).sum()).backward()
    scaler.step(optimizer)
    scaler.update()

    def no_state_dict() -> None:
        raise AssertionError("the fingerprint called state_dict()")

    scaler.state_dict = no_state_dict  # type: ignore[method-assign]
    state = {"scaler": scaler}
    before = fingerprint.of(state)
    assert fingerprint.of(state) == before
    scaler.update(new_scale=4.0)  # between steps
    assert fingerprint.of(state) != before
