"""Where a torch ``DataLoader`` is in its epoch, and how :mod:`hetero.checkpoint.resume` puts a fresh one back
there after a restart, so that the resumed epoch yields the batches the lost run had not trained,
in the same order, and no others.

Two ways, by what the loader offers:

- **torchdata's** ``StatefulDataLoader`` (anything with ``state_dict()``/``load_state_dict()``):
  its own state, saved at each checkpoint and loaded before the epoch's iterator is made;
- **any other** ``DataLoader``: the epoch's order comes from the generators its iterator draws
  from when it is made (torch's global one, unless the loader or its sampler has its own:
  ``RandomSampler`` draws its seed there, the iterator its workers' base seed), so
  :func:`epoch_start` keeps their states just before ``iter(loader)``, and :func:`position`
  sets them back, makes the iterator and moves it past the batches already trained. A
  single-process loader over a map-style dataset is moved by advancing its sampler (no sample
  is loaded: ``skipped="sampler"``); a loader with worker processes, or over an iterable
  dataset, loads the skipped batches and drops them (``skipped="loaded"``), since its workers
  were handed their indices when it was made.

Either way the caller then sets the process-wide generators to their state at the checkpoint,
so what the resumed batches draw (augmentation in the main process, dropout) is what the lost
run drew. ``persistent_workers=True`` with random transforms in the workers is the one case that
cannot be repositioned exactly (the workers' generators carry over between epochs): use
torchdata's ``StatefulDataLoader`` there.
"""

from __future__ import annotations

import dataclasses
import sys
import time
from collections.abc import Iterator
from typing import Any


def stateful(loader: Any) -> bool:
    """Whether ``loader`` keeps its own position (torchdata's ``StatefulDataLoader``)."""
    return callable(getattr(loader, "state_dict", None)) and callable(getattr(loader, "load_state_dict", None))


def epoch_start(loader: Any) -> dict[str, Any]:
    """The states of the generators ``iter(loader)`` will draw from, read just before it is made."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    return {"torch_cpu": torch.get_rng_state(), **own_generator_states(loader)}


def own_generator_states(loader: Any) -> dict[str, Any]:
    """The states of the loader's and its samplers' own ``torch.Generator``\\ s (none: ``{}``)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    return {name: generator.get_state() for name, generator in _own_generators(torch, loader).items()}


def set_own_generator_states(loader: Any, states: dict[str, Any]) -> None:
    """Give the loader's own generators the states :func:`own_generator_states` read."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    for name, generator in _own_generators(torch, loader).items():
        if name in states:
            generator.set_state(states[name])


def restore_stateful(loader: Any, loader_state: Any) -> None:
    """Load a :func:`stateful` loader's saved state (its position, its generators)."""
    loader.load_state_dict(loader_state)


@dataclasses.dataclass(frozen=True)
class Positioned:
    """A loader's iterator moved to a batch: ``skipped`` says how (``"none"``, ``"sampler"``,
    ``"loaded"``, ``"state"``), ``seconds`` how long it took."""

    iterator: Iterator[Any]
    skipped: str
    seconds: float


def position(loader: Any, start: dict[str, Any], batches: int, loader_state: Any = None) -> Positioned:
    """``loader``'s iterator for the epoch whose start generators were ``start``
    (:func:`epoch_start`), past its first ``batches`` batches. ``loader_state``: the loader's own
    state at the checkpoint, for a :func:`stateful` loader. Raises :class:`ValueError` when the
    epoch has fewer batches than that (the data set shrank since the checkpoint)."""
    began = time.perf_counter()
    if loader_state is not None and stateful(loader):
        restore_stateful(loader, loader_state)
        return Positioned(iter(loader), "state", time.perf_counter() - began)
    _set_epoch_start(loader, start)
    iterator = iter(loader)
    if batches <= 0:
        return Positioned(iterator, "none", time.perf_counter() - began)
    sampler_iter = getattr(iterator, "_sampler_iter", None)
    fast = sampler_iter is not None and type(iterator).__name__ == "_SingleProcessDataLoaderIter" \
        and getattr(loader, "_dataset_kind", None) == 0  # torch's _DatasetKind.Map
    done = 0
    try:
        if fast:  # the sampler hands out the skipped batches' indices, and nothing loads them
            assert sampler_iter is not None
            for done in range(1, batches + 1):
                next(sampler_iter)
            iterator._num_yielded += batches  # type: ignore[attr-defined]  # as if they had been yielded
        else:
            for done in range(1, batches + 1):
                next(iterator)
    except StopIteration:
        raise ValueError(f"hetero.checkpoint.resume: the checkpoint is {batches} batch(es) into the epoch, but this loader's "
                         f"epoch has only {done - 1}: the data set or the batch size changed since the checkpoint. "
                         "Resume with the data it was made with, or start afresh (remove the checkpoints)") from None
    return Positioned(iterator, "sampler" if fast else "loaded", time.perf_counter() - began)


def _set_epoch_start(loader: Any, start: dict[str, Any]) -> None:
    torch = sys.modules.get("torch")
    if torch is None or not start:
        return
    torch.set_rng_state(start["torch_cpu"])
    set_own_generator_states(loader, start)


def _own_generators(torch: Any, loader: Any) -> dict[str, Any]:
    """The loader's and its samplers' own ``torch.Generator``\\ s, by where they hang."""
    found: dict[str, Any] = {}
    for name, owner in (("loader", loader), ("sampler", getattr(loader, "sampler", None)),
                        ("batch_sampler", getattr(getattr(loader, "batch_sampler", None), "sampler", None))):
        generator = getattr(owner, "generator", None)
        if isinstance(generator, torch.Generator) and all(generator is not g for g in found.values()):
            found[name] = generator
    return found
