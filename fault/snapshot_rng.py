"""Random-number generator states for ``hetero.guard`` snapshots, so a replayed step draws the
numbers its first run drew (dropout masks, augmentation, sampling).

Two sorts:

- the process-wide generators (:class:`ProcessRng`, taken by the guard unless ``rng=False``):
  Python's ``random``, NumPy's global ``np.random``, torch's CPU generator and the generators of
  every accelerator torch has already initialised (CUDA/ROCm, XPU) or has (MPS). torch is read
  only when something else imported it, and a device torch has not initialised is never
  initialised to read its generator;
- generator objects kept in the state (``numpy.random.Generator``, ``RandomState``, a bare
  ``BitGenerator``, ``random.Random``, ``torch.Generator``): :func:`generator_state` and
  :func:`set_generator_state`, restored into the same object.
"""

from __future__ import annotations

import dataclasses
import logging
import random
import sys
from collections.abc import Collection
from typing import Any

import numpy as np

log = logging.getLogger("hetero.fault.snapshot")
#: torch's accelerator modules whose generators a snapshot keeps, when torch has initialised them.
ACCELERATORS = ("cuda", "xpu")


@dataclasses.dataclass(frozen=True)
class ProcessRng:
    """The process-wide generators at a snapshot. ``work`` is the torch device the guarded work
    ran on then (``cuda:0``, ``cpu``): a recovery that moves the work to ``cuda:1`` gives cuda:1's
    generator the state cuda:0's had, so the replayed steps continue the same stream."""

    python: Any
    numpy: Any
    torch_cpu: Any | None  # torch.get_rng_state(), None when torch is not imported
    accelerators: dict[str, Any]  # "cuda:0" -> its generator's state
    work: str


def capture(work: str, avoid: Collection[str] = ()) -> ProcessRng:
    """The state of every process-wide generator. ``avoid``: torch devices not to read (those the
    guard left after a fault: their memory may not answer any more)."""
    torch = sys.modules.get("torch")
    return ProcessRng(
        python=random.getstate(), numpy=np.random.get_state(),
        torch_cpu=None if torch is None else torch.get_rng_state(),
        accelerators={} if torch is None else _accelerator_states(torch, avoid), work=work,
    )


def restore(saved: ProcessRng, work: str, avoid: Collection[str] = ()) -> None:
    """Put every generator back as ``saved`` has it; the generator of ``work`` (the torch device
    the work resumes on) takes the state of the one it ran on at the snapshot. Generators of the
    devices in ``avoid`` are left alone."""
    random.setstate(saved.python)
    np.random.set_state(saved.numpy)
    torch = sys.modules.get("torch")
    if torch is None or saved.torch_cpu is None:
        return
    torch.set_rng_state(saved.torch_cpu)
    states = {name: state for name, state in saved.accelerators.items() if name not in avoid}
    if work != saved.work and saved.work in saved.accelerators and _kind(work) == _kind(saved.work):
        states[work] = saved.accelerators[saved.work]
    for name, state in states.items():
        try:
            _accelerator(torch, name).set_rng_state(state, _index(name))
        except Exception as exc:  # noqa: BLE001 - a device that cannot take it must not stop the recovery
            log.warning("hetero.guard: could not restore the random generator of torch device %s (%s); steps "
                        "replayed there draw other random numbers than their first run", name, exc)


# -- generator objects in the state ------------------------------------------------------------
def is_generator(value: Any) -> bool:
    """Whether ``value`` is a generator object whose state :func:`generator_state` reads."""
    if isinstance(value, (np.random.Generator, np.random.RandomState, np.random.BitGenerator)):
        return True
    if isinstance(value, random.Random) and not isinstance(value, random.SystemRandom):  # the OS's: no state
        return True
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(value, torch.Generator)


def generator_state(value: Any) -> Any:
    """A copy of the state of the generator object ``value`` (see :func:`is_generator`)."""
    if isinstance(value, np.random.Generator):
        return value.bit_generator.state  # a fresh dict on each read
    if isinstance(value, np.random.RandomState):
        return value.get_state(legacy=False)
    if isinstance(value, np.random.BitGenerator):
        return value.state
    if isinstance(value, random.Random):
        return value.getstate()  # a tuple of ints: immutable
    return value.get_state()  # torch.Generator: a new CPU byte tensor


def set_generator_state(target: Any, state: Any) -> None:
    """Give the generator object ``target`` the state :func:`generator_state` read."""
    if isinstance(target, np.random.Generator):
        target.bit_generator.state = state
    elif isinstance(target, np.random.RandomState):
        target.set_state(state)
    elif isinstance(target, np.random.BitGenerator):
        target.state = state
    elif isinstance(target, random.Random):
        target.setstate(state)
    else:
        target.set_state(state)


# -- torch's accelerators ------------------------------------------------------------------------
def _accelerator_states(torch: Any, avoid: Collection[str]) -> dict[str, Any]:
    states: dict[str, Any] = {}
    for kind in ACCELERATORS:
        initialized = getattr(getattr(torch, kind, None), "is_initialized", None)  # absent in older torch
        if initialized is None or not initialized():  # never initialise a device to read it
            continue
        module = getattr(torch, kind)
        for index in range(module.device_count()):
            name = f"{kind}:{index}"
            if name not in avoid:
                states[name] = _read(module, name, index)
    mps = getattr(torch.backends, "mps", None)
    if mps is not None and mps.is_available() and "mps" not in avoid:  # one device, always open on a Mac
        states["mps"] = _read(torch.mps, "mps", None)
    return {name: state for name, state in states.items() if state is not None}


def _read(module: Any, name: str, index: int | None) -> Any:
    try:
        return module.get_rng_state() if index is None else module.get_rng_state(index)
    except Exception as exc:  # noqa: BLE001 - another device's trouble must not stop this snapshot
        log.warning("hetero.guard: could not read the random generator of torch device %s (%s); a replay "
                    "there draws other random numbers than the first run", name, exc)
        return None


def _kind(name: str) -> str:
    return name.partition(":")[0]


def _index(name: str) -> Any:
    kind, _, index = name.partition(":")
    return int(index) if index else kind


def _accelerator(torch: Any, name: str) -> Any:
    return getattr(torch, _kind(name))
