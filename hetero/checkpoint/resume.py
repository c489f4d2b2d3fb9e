"""``hetero.resumable``: a torch training loop that ``hetero-run`` restarts at the batch it had
reached, not at the start of the epoch.

    state = {"model": model, "optimizer": optimizer, "scheduler": scheduler}
    run = hetero.resumable(state, every=50)                  # loads the newest checkpoint, if any
    for epoch in run.range(1, epochs + 1):                   # was: range(1, epochs + 1)
        model.train()
        for batch_idx, (data, target) in run.enumerate(train_loader):   # was: enumerate(train_loader)
            ...                                              # the step, unchanged
        scheduler.step()

Every ``every`` batches, and at the end of each epoch, ``run.enumerate`` saves a checkpoint
(:func:`hetero.checkpoint.store.save_async`: copied to host memory between two batches, written by a
background thread; atomic, checksummed, the newest ``keep`` kept) holding:

- each value of ``state``: the ``state_dict()`` of anything that has ``state_dict()`` and
  ``load_state_dict()`` (modules, optimizers, LR schedulers, ``torch.amp.GradScaler``, EMA
  helpers, a class of yours); tensors, NumPy and hetero arrays, and plain values (numbers,
  strings, lists and dicts of them) as they are;
- the process-wide random generators (Python's ``random``, NumPy's global one, torch's CPU
  generator and those of the accelerators torch has initialised);
- the data position: the epoch, the batches of it trained, and what the loader needs to yield the
  rest of the epoch in the same order (:mod:`hetero.checkpoint.resume_data`: torchdata's
  ``StatefulDataLoader`` state where the loader is one, else the generator states its epoch's
  order was drawn from).

When the script starts again (``hetero-run`` restarting a worker after a crash, a hang or a
device fault, or a plain run given ``directory=``), :func:`resumable` loads the newest valid
checkpoint into the objects of ``state`` (``load_state_dict``, in place, so optimizers keep their
parameters; other values are replaced in the dict), ``run.range`` starts at the checkpoint's
epoch and ``run.enumerate`` at the first batch not trained, with the generators as they were
there. So the batches trained after the last checkpoint are trained once more, and no batch
before it is trained twice or skipped: the final model is bit-identical to a run that never
stopped (torch deterministic mode; for a GPU, the same device kind). The batch index
``run.enumerate`` yields counts from the start of the epoch, as ``enumerate`` does.

Checkpoints are taken between two batches: the code of the loop body around the step may run
anything, but must keep what the next batches need in ``state``; the code between epochs
(evaluation, ``scheduler.step()``) runs after the epoch's last checkpoint, so a resumed run
does it again, as it should. ``run.enumerate`` follows one loader (the training one, the first
it is given); iterate others (a validation loader) directly. Where the checkpoints go and
where they are resumed from is :mod:`hetero.checkpoint.store`'s rule: ``hetero-run`` gives each worker
its directory; outside it they are written to ``./checkpoints`` and resumed only from a
``directory=`` given (or ``$HETERO_CHECKPOINT_DIR``).
"""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from collections.abc import Iterator, MutableMapping
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import numpy as np

from hetero.checkpoint import store as checkpoint
from hetero.array.ndarray import Array
from hetero.core.errors import ArgumentError
from hetero.fault import event_bus
from hetero.recovery import snapshot_rng
from hetero.fault.heartbeat import heartbeat
from hetero.core.registry import device as current_device
from hetero.checkpoint.resume_data import Positioned, epoch_start, own_generator_states, position, set_own_generator_states, stateful
from hetero.core.torch_devices import loaded_torch_device

log = logging.getLogger("hetero.checkpoint.resume")
FORMAT = "hetero.checkpoint.resume"
VERSION = 1
_PLAIN = (type(None), bool, int, float, str)


class ResumeError(ArgumentError):
    """A value ``hetero.resumable`` cannot checkpoint, a checkpoint it cannot resume from, or a
    loop it cannot follow (the message says which, and what to do)."""


@dataclasses.dataclass(frozen=True)
class Resumed:
    """Where a run resumed: the checkpoint's ``step`` (batches trained in all), ``epoch``,
    ``batch`` (trained in that epoch), how the loader was moved there (``skipped``: see
    :class:`hetero.checkpoint.resume_data.Positioned`) and how long loading and moving took."""

    step: int
    epoch: int
    batch: int
    epoch_done: bool
    load_seconds: float
    skipped: str = "none"
    position_seconds: float = 0.0


class Resumable:
    """A resumable training loop's checkpoints; make one with :func:`resumable`."""

    def __init__(self, state: MutableMapping[str, Any], *, every: int = 100, directory: str | Path | None = None,
                 keep: int | None = 3) -> None:
        if not isinstance(state, MutableMapping):
            raise ResumeError(f"hetero.resumable: state must be a dict of what to checkpoint, got {type(state).__name__}")
        if int(every) < 1:
            raise ResumeError(f"hetero.resumable: every must be >= 1 (batches between checkpoints), got {every}")
        for key, value in state.items():
            _check(key, value)
        self.state = state
        self.every = int(every)
        self.directory = directory
        self.keep = keep
        self.step = 0  # batches trained in all, in this run's lineage
        self.epoch: int | None = None  # the epoch run.range is in
        self.resumed: Resumed | None = None
        self.saves = 0
        self.save_seconds = 0.0  # time the loop waited for saves (the copy to host memory)
        self.last_saved: Future[Path] | None = None
        self._saved_step: int | None = None
        self._loader: Any = None
        self._pending: dict[str, Any] | None = None  # the loaded position, until run.enumerate reaches it
        self._load()

    # -- the loop ------------------------------------------------------------------------------
    def range(self, start: int, stop: int | None = None) -> Iterator[int]:
        """``range(start, stop)`` for the epochs, from the checkpoint's epoch when resuming."""
        if stop is None:
            start, stop = 0, start
        first = start
        if self._pending is not None:
            first = int(self._pending["epoch"])
            if not start <= first <= stop:
                raise ResumeError(f"hetero.resumable: the checkpoint is in epoch {first}, outside run.range({start}, "
                                  f"{stop}): resume with the epochs it was made with, or start afresh (remove the "
                                  f"checkpoints in {checkpoint.default_directory() if self.directory is None else self.directory})")
        for epoch in range(first, stop):
            self.epoch = epoch
            yield epoch
        self.epoch = None

    def enumerate(self, loader: Any) -> Iterator[tuple[int, Any]]:
        """``enumerate(loader)`` for one epoch, checkpointing between batches (see the module docs)."""
        if self.epoch is None:
            raise ResumeError("hetero.resumable: run.enumerate(loader) must run inside `for epoch in run.range(...)`: "
                              "the checkpoints record the epoch, and a resumed run starts at it")
        if self._loader is None:
            self._loader = loader
        elif loader is not self._loader:
            raise ResumeError("hetero.resumable: run.enumerate follows one loader (the training one) and was given "
                              "another; iterate the others (a validation loader) with plain enumerate()")
        pending = None
        if self._pending is not None and self._pending["epoch"] == self.epoch:
            pending, self._pending = self._pending, None
        return self._batches(loader, pending)

    def _batches(self, loader: Any, pending: dict[str, Any] | None) -> Iterator[tuple[int, Any]]:
        if pending is not None and pending["epoch_done"]:
            self._restore_loader(loader, pending)
            self._restore_rng(pending["rng"])
            return
        if pending is not None:
            start, index = pending["epoch_start"], int(pending["batch"])
            moved = _positioned(loader, start, index, pending.get("loader"))
            iterator = moved.iterator
            self._restore_loader(loader, pending)
            self._restore_rng(pending["rng"])  # after the loader's own draws: the batches draw what they drew
            assert self.resumed is not None
            self.resumed = dataclasses.replace(self.resumed, skipped=moved.skipped, position_seconds=moved.seconds)
            event_bus.publish("resumed_mid_epoch", **dataclasses.asdict(self.resumed))
        else:
            start, index = epoch_start(loader), 0
            iterator = iter(loader)
        first = index
        while True:
            if index > first and self.step % self.every == 0:
                self._save(loader, start, index, done=False)
            heartbeat(self.step)
            try:
                batch = next(iterator)
            except StopIteration:
                break
            yield index, batch
            index += 1
            self.step += 1
        self._save(loader, start, index, done=True)

    # -- checkpoints ---------------------------------------------------------------------------
    def _save(self, loader: Any, start: dict[str, Any], batch: int, *, done: bool) -> None:
        began = time.perf_counter()
        tree = {
            "format": FORMAT, "version": VERSION,
            "state": {key: value.state_dict() if _stateful(value) else value for key, value in self.state.items()},
            "rng": _rng_tree(snapshot_rng.capture(_work())),
            "position": {"epoch": self.epoch, "batch": batch, "step": self.step, "epoch_done": done,
                         "epoch_start": start,
                         "loader": loader.state_dict() if stateful(loader) and not done else None,
                         "generators": own_generator_states(loader)},
        }
        self.last_saved = checkpoint.save_async(tree, self.step, self.directory, self.keep)
        self._saved_step = self.step
        self.saves += 1
        self.save_seconds += time.perf_counter() - began

    def _load(self) -> None:
        began = time.perf_counter()
        found = checkpoint.load(self.directory, device=current_device())
        if found is None:
            return
        tree, step = found
        if not isinstance(tree, dict) or tree.get("format") != FORMAT:
            raise ResumeError(f"hetero.resumable: the newest checkpoint (step {step}) was not written by "
                              "hetero.resumable; resume it with hetero.checkpoint.store.load, or give resumable its own "
                              "directory=")
        if int(tree.get("version", 0)) > VERSION:
            raise ResumeError(f"hetero.resumable: the checkpoint of step {step} is format version {tree['version']}, "
                              f"newer than this hetero reads ({VERSION}): upgrade hetero")
        saved = tree["state"]
        missing = sorted(set(self.state) - set(saved))
        if missing:
            raise ResumeError(f"hetero.resumable: the checkpoint of step {step} has no {', '.join(map(repr, missing))}: "
                              "it was made with another state dict; resume with the keys it has "
                              f"({', '.join(map(repr, saved))}) or start afresh (remove the checkpoints)")
        for key, value in self.state.items():
            if _stateful(value):
                value.load_state_dict(saved[key])
                if _is_optimizer(value) and saved[key].get("state"):
                    # it has stepped, in the run this one continues: the LR scheduler would warn that
                    # its step() came first (it looks for this mark, set by the optimizer's step)
                    value._opt_called = True
            else:
                self.state[key] = _in_place(value, saved[key])
        position_ = tree["position"]
        self.step = int(position_["step"])
        self._pending = {**position_, "rng": tree["rng"]}
        self.resumed = Resumed(step=self.step, epoch=int(position_["epoch"]), batch=int(position_["batch"]),
                               epoch_done=bool(position_["epoch_done"]), load_seconds=time.perf_counter() - began)
        print(f"hetero.resumable: resuming at epoch {self.resumed.epoch}, "
              + ("after its last batch" if self.resumed.epoch_done else f"batch {self.resumed.batch}")
              + f" (step {self.step}), from the checkpoint of step {step}", file=sys.stderr)

    @staticmethod
    def _restore_loader(loader: Any, pending: dict[str, Any]) -> None:
        """The loader's own generators as they were at the checkpoint: the next epochs draw their
        order from them. (At an epoch's end a stateful loader's own state is not loaded: a fresh
        one with these generators starts the next epoch as the finished one would, while one
        loaded with a finished state draws from torch's generator differently.)"""
        set_own_generator_states(loader, pending.get("generators") or {})

    def _restore_rng(self, saved: dict[str, Any]) -> None:
        snapshot_rng.restore(_rng_from_tree(saved), _work())


def resumable(state: MutableMapping[str, Any], every: int = 100, directory: str | Path | None = None,
              keep: int | None = 3) -> Resumable:
    """Checkpoint ``state`` and the data position between batches, and resume from the newest
    checkpoint (see the module docs). ``every``: batches between checkpoints (each epoch's end
    is one too). ``directory``: where checkpoints go and are resumed from (default: hetero-run's
    per-worker directory; outside it :mod:`hetero.checkpoint.store`'s rule). ``keep``: how many to keep.

    Raises :class:`ResumeError` for a value of ``state`` that cannot be checkpointed, and for a
    newest checkpoint that was made with other state keys or by something else."""
    return Resumable(state, every=every, directory=directory, keep=keep)


# -- helpers -----------------------------------------------------------------------------------
def _positioned(loader: Any, start: dict[str, Any], batch: int, loader_state: Any) -> Positioned:
    try:
        return position(loader, start, batch, loader_state)
    except ValueError as exc:
        raise ResumeError(str(exc)) from None


def _stateful(value: Any) -> bool:
    return callable(getattr(value, "state_dict", None)) and callable(getattr(value, "load_state_dict", None))


def _check(key: Any, value: Any, path: str = "") -> None:
    where = f"state[{key!r}]{path}"
    if _is_loader(value):
        raise ResumeError(f"hetero.resumable: {where} is a data loader: pass it to run.enumerate(loader) instead, "
                          "which records its position")
    if _stateful(value) or isinstance(value, (Array, np.ndarray, np.generic)) or _is_tensor(value):
        return
    if isinstance(value, _PLAIN):
        return
    if isinstance(value, (list, tuple)):
        for index, item in enumerate(value):
            _check(key, item, f"{path}[{index}]")
        return
    if isinstance(value, dict):
        for name, item in value.items():
            if not isinstance(name, _PLAIN):
                raise ResumeError(f"hetero.resumable: {where} has a key {name!r} of type {type(name).__name__}; "
                                  "checkpoint keys are str, int, float, bool or None")
            _check(key, item, f"{path}[{name!r}]")
        return
    raise ResumeError(f"hetero.resumable cannot checkpoint {where}, a {type(value).__name__}: give its class "
                      "state_dict() and load_state_dict(state) methods, or keep it out of state (checkpoints hold "
                      "state_dicts, tensors, arrays and plain values; nothing is pickled)")


def _is_tensor(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Tensor)


def _is_optimizer(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.optim.Optimizer)


def _is_loader(value: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.utils.data.DataLoader)


def _in_place(current: Any, loaded: Any) -> Any:
    """The loaded value, copied into ``current`` where it can go (a tensor of the same shape keeps
    its identity and device); otherwise the loaded value itself."""
    if _is_tensor(current) and _is_tensor(loaded) and current.shape == loaded.shape and current.dtype == loaded.dtype:
        torch = sys.modules["torch"]
        with torch.no_grad():
            current.copy_(loaded)
        return current
    if isinstance(current, np.ndarray) and isinstance(loaded, np.ndarray) and current.shape == loaded.shape \
            and current.dtype == loaded.dtype and current.flags.writeable:
        np.copyto(current, loaded)
        return current
    return loaded


def _rng_tree(rng: snapshot_rng.ProcessRng) -> dict[str, Any]:
    """The generator states as checkpoint values: Python's 625-word state as one uint32 array
    (one payload, not 625 manifest entries)."""
    version, words, gauss = rng.python
    return {"python": [version, np.asarray(words, dtype=np.uint32), gauss], "numpy": rng.numpy,
            "torch_cpu": rng.torch_cpu, "accelerators": rng.accelerators, "work": rng.work}


def _rng_from_tree(tree: dict[str, Any]) -> snapshot_rng.ProcessRng:
    version, words, gauss = tree["python"]
    return snapshot_rng.ProcessRng(python=(int(version), tuple(int(w) for w in words), gauss), numpy=tree["numpy"],
                                   torch_cpu=tree["torch_cpu"], accelerators=dict(tree["accelerators"]),
                                   work=str(tree["work"]))


def _work() -> str:
    """The torch device whose generator the checkpoint keeps for the current hetero device."""
    return loaded_torch_device(current_device()) or "cpu"
