"""hetero.resumable: a torch loop stopped at any batch (a crash: the loop is abandoned mid-epoch,
its objects thrown away) and started again from fresh objects goes on from the batch of its last
checkpoint, and ends bit-identical to a run that never stopped, with each batch trained once in
the lineage; with a plain shuffling DataLoader (its sampler moved, no sample loaded), one with
worker processes (the skipped batches loaded and dropped), its own generator, random
augmentation drawn in the main process, and torchdata's StatefulDataLoader. And the errors."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.checkpoint import store as checkpoint
from hetero.checkpoint.resume import ResumeError
from hetero.checkpoint.resume_data import epoch_start, position

torch = pytest.importorskip("torch")
from torch_training import assert_same_training  # noqa: E402
nn, F = torch.nn, torch.nn.functional
EPOCHS, SAMPLES, BATCH, EVERY = 3, 40, 6, 3  # 7 batches an epoch, the last one short
# torchdata 0.11 calls a torch function torch 2.13 deprecates
pytestmark = [pytest.mark.filterwarnings("ignore:'set_vital' is deprecated:UserWarning"),
              pytest.mark.usefixtures("deterministic_torch")]



class Augmented(torch.utils.data.Dataset):  # type: ignore[misc]  # torch comes from importorskip
    """Samples with random noise drawn from torch's global generator when loaded (num_workers=0:
    in the main process, between the training steps' own draws)."""

    def __init__(self, x: Any, y: Any) -> None:
        self.x, self.y = x, y

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, index: int) -> tuple[Any, Any]:
        return self.x[index] + 0.1 * torch.randn(self.x.shape[1:]), self.y[index]


def data() -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(5)
    return torch.randn(SAMPLES, 4, generator=g), torch.randint(0, 3, (SAMPLES,), generator=g)


def make_loader(kind: str) -> Any:
    x, y = data()
    plain = torch.utils.data.TensorDataset(x, y)
    if kind == "shuffle":
        return torch.utils.data.DataLoader(plain, batch_size=BATCH, shuffle=True)
    if kind == "generator":
        return torch.utils.data.DataLoader(plain, batch_size=BATCH, shuffle=True, generator=torch.Generator().manual_seed(9))
    if kind == "augmented":
        return torch.utils.data.DataLoader(Augmented(x, y), batch_size=BATCH, shuffle=True)
    if kind == "workers":
        return torch.utils.data.DataLoader(Augmented(x, y), batch_size=BATCH, shuffle=True, num_workers=1)
    if kind == "stateful":
        stateful = pytest.importorskip("torchdata.stateful_dataloader")
        return stateful.StatefulDataLoader(Augmented(x, y), batch_size=BATCH, shuffle=True)
    raise AssertionError(kind)


@dataclasses.dataclass
class Run:
    model: Any
    optimizer: Any
    scheduler: Any
    trained: list[tuple[int, int, float]]  # (epoch, batch, sum of its inputs), in training order
    resumed: Any


def train(directory: Path, kind: str, stop: tuple[int, int] | None = None) -> Run:
    """EPOCHS epochs; ``stop=(epoch, batch)``: abandon the loop when that batch arrives, untrained,
    as a crash would (after the pending checkpoint writes, which a crash may also lose)."""
    torch.manual_seed(0)  # a fresh process would draw these again: the checkpoint must override them
    model = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Dropout(0.3), nn.Linear(8, 3))
    optimizer = torch.optim.Adadelta(model.parameters(), lr=1.0)
    scheduler = torch.optim.lr_scheduler.StepLR(optimizer, step_size=1, gamma=0.7)
    loader = make_loader(kind)
    run = hetero.resumable({"model": model, "optimizer": optimizer, "scheduler": scheduler}, every=EVERY,
                           directory=directory)
    trained: list[tuple[int, int, float]] = []
    for epoch in run.range(1, EPOCHS + 1):
        model.train()
        for index, (x, y) in run.enumerate(loader):
            if (epoch, index) == stop:
                checkpoint.wait()
                return Run(model, optimizer, scheduler, trained, run.resumed)
            optimizer.zero_grad()
            F.cross_entropy(model(x), y).backward()
            optimizer.step()
            trained.append((epoch, index, float(x.sum())))
        scheduler.step()
    checkpoint.wait()
    return Run(model, optimizer, scheduler, trained, run.resumed)



@pytest.fixture(scope="module")
def fault_free(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    return {}


def reference(kind: str, cache: dict[str, Run], tmp_path_factory: pytest.TempPathFactory) -> Run:
    if kind not in cache:
        cache[kind] = train(tmp_path_factory.mktemp(f"ref-{kind}"), kind)
        assert cache[kind].resumed is None and len(cache[kind].trained) == EPOCHS * 7
    return cache[kind]


STOPS = [(1, 4), (2, 0), (2, 3), (3, 6)]  # mid-epoch, an epoch's first batch, just after a checkpoint, the last
# worker processes take a second an epoch: two stops are enough for the loaded skip
CASES = [(kind, stop) for kind in ("shuffle", "generator", "augmented", "stateful") for stop in STOPS] + [
    ("workers", (1, 4)), ("workers", (2, 3))]


@pytest.mark.parametrize(("kind", "stop"), CASES, ids=[f"{kind}-e{e}b{b}" for kind, (e, b) in CASES])
def test_a_run_stopped_anywhere_resumes_at_the_batch_and_ends_bit_identical(
        tmp_path: Path, kind: str, stop: tuple[int, int], fault_free: dict[str, Run],
        tmp_path_factory: pytest.TempPathFactory) -> None:
    want = reference(kind, fault_free, tmp_path_factory)
    first = train(tmp_path, kind, stop=stop)
    second = train(tmp_path, kind)
    resumed = second.resumed
    assert resumed is not None
    assert resumed.step < len(first.trained) + 1 and len(first.trained) - resumed.step < EVERY + 7
    # the lineage: what the first run trained up to its checkpoint, then everything the second trained
    lineage = first.trained[:resumed.step] + second.trained
    assert lineage == want.trained  # every batch once, in order, none skipped (and the same samples)
    assert second.trained[0][:2] == ((resumed.epoch, resumed.batch) if not resumed.epoch_done
                                     else (resumed.epoch + 1, 0))
    if not resumed.epoch_done and resumed.batch:
        expected = {"stateful": "state", "workers": "loaded"}.get(kind, "sampler")
        assert resumed.skipped == expected
    assert_same_training(second, want)


def test_a_finished_run_started_again_trains_nothing(tmp_path: Path) -> None:
    train(tmp_path, "shuffle")
    again = train(tmp_path, "shuffle")
    assert again.trained == [] and again.resumed is not None and again.resumed.epoch_done


def test_moving_the_sampler_gives_the_batches_loading_them_does(tmp_path: Path) -> None:
    loader = make_loader("shuffle")
    torch.manual_seed(3)
    start = epoch_start(loader)
    want = [x for x, _ in loader]
    for batches in (0, 1, 4, 7):
        fast = position(loader, start, batches)
        assert fast.skipped == ("none" if batches == 0 else "sampler")
        got = [x for x, _ in fast.iterator]
        assert len(got) == len(want) - batches and all(torch.equal(a, b) for a, b in zip(got, want[batches:], strict=True))
    with pytest.raises(ValueError, match="only 7"):
        position(loader, start, 8)


def test_values_it_cannot_checkpoint_are_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(ResumeError, match=r"state\['log'\], a TextIOWrapper"):
        with open(tmp_path / "f", "w") as f:
            hetero.resumable({"log": f}, directory=tmp_path)
    with pytest.raises(ResumeError, match=r"state\['loader'\] is a data loader: pass it to run.enumerate"):
        hetero.resumable({"loader": make_loader("shuffle")}, directory=tmp_path)
    with pytest.raises(ResumeError, match=r"state\['best'\]\[0\]"):
        hetero.resumable({"best": [object()]}, directory=tmp_path)
    run = hetero.resumable({"best": 0.5, "w": np.zeros(3), "t": torch.zeros(2), "notes": {"a": [1, "x"]}},
                           directory=tmp_path)
    assert run.resumed is None


def test_the_loop_it_follows_is_checked(tmp_path: Path) -> None:
    run = hetero.resumable({"model": nn.Linear(2, 2)}, directory=tmp_path)
    loader = make_loader("shuffle")
    with pytest.raises(ResumeError, match="inside `for epoch in run.range"):
        run.enumerate(loader)
    for _ in run.range(1):
        for _ in run.enumerate(loader):
            break
        with pytest.raises(ResumeError, match="follows one loader"):
            run.enumerate(make_loader("shuffle"))


def test_plain_values_tensors_and_arrays_come_back(tmp_path: Path) -> None:
    tensor, array = torch.zeros(3), np.zeros(2)
    state: dict[str, Any] = {"best": 0.0, "t": tensor, "a": array}
    run = hetero.resumable(state, every=1, directory=tmp_path)
    for epoch in run.range(2):
        for _ in run.enumerate([1, 2]):
            state["best"] += 1
            tensor += 1
            array += 1
        if epoch == 0:
            break  # the epoch's end was checkpointed
    checkpoint.wait()
    t2, a2 = torch.zeros(3), np.zeros(2)
    again: dict[str, Any] = {"best": 0.0, "t": t2, "a": a2}
    resumed = hetero.resumable(again, directory=tmp_path)
    assert resumed.resumed is not None and resumed.resumed.epoch_done and resumed.step == 2
    assert again["best"] == 2.0 and again["t"] is t2 and torch.equal(t2, torch.full((3,), 2.0))
    assert again["a"] is a2 and (a2 == 2).all()


def test_a_checkpoint_of_other_keys_or_another_writer_is_refused(tmp_path: Path) -> None:
    run = hetero.resumable({"model": nn.Linear(2, 2)}, directory=tmp_path)
    for _ in run.range(1):
        for _ in run.enumerate([0]):
            pass
    checkpoint.wait()
    with pytest.raises(ResumeError, match=r"has no 'optimizer'.*keys it has \('model'\)"):
        hetero.resumable({"model": nn.Linear(2, 2), "optimizer": 1}, directory=tmp_path)
    other = tmp_path / "other"
    checkpoint.save({"w": np.zeros(2)}, 5, other)
    with pytest.raises(ResumeError, match="not written by hetero.resumable"):
        hetero.resumable({"w": np.zeros(2)}, directory=other)


def test_a_shrunken_data_set_is_an_error_not_a_silent_skip(tmp_path: Path) -> None:
    x, y = data()
    state = {"model": nn.Linear(4, 3)}
    run = hetero.resumable(state, every=1, directory=tmp_path)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=BATCH)
    for _ in run.range(1):
        for index, _ in run.enumerate(loader):
            if index == 5:
                break
    checkpoint.wait()
    small = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x[:12], y[:12]), batch_size=BATCH)
    again = hetero.resumable(state, directory=tmp_path)
    with pytest.raises(ResumeError, match="5 batch\\(es\\) into the epoch.*only 2"):
        for _ in again.range(1):
            for _ in again.enumerate(small):
                pass
