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

import ctypes
import dataclasses
import logging
import random
import struct
import sys
from collections.abc import Collection
from typing import Any

import numpy as np

log = logging.getLogger("hetero.recovery.snapshot")
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


class EntryCapture:
    """:func:`capture`, for the entry of every guarded step: Python's and NumPy's global states are
    read again only when their Mersenne Twister's *signature* differs from the one last read;
    torch's (one small tensor) always. The signature is the position in the state and its first
    three and last words (20 bytes read in place), not the whole 2.5 KB: right after a training
    step those kilobytes are out of the cache, and copying and comparing both states cost the step
    about twice what the rest of this call does. A draw moves the position; draws that bring the
    position back to where it was (a multiple of 624 words) regenerate every word of the state, so
    the signature misses a draw only when all four of those words come out as they were (one chance
    in 2^128), or when a state was set (``setstate``) that differs from the one it replaced only in
    the words it skips. NumPy's cached second normal deviate moves no state, which is why NumPy's is
    reused only when it held none. Where the raw state cannot be located and checked (another Python
    implementation, another layout), every call reads the full states, as :func:`capture` does."""

    def __init__(self) -> None:
        self._python: tuple[bytes, Any, Any] | None = None  # (raw, gauss_next, getstate())
        self._numpy: tuple[bytes, Any] | None = None  # (raw, get_state())
        self._last: ProcessRng | None = None

    def __call__(self, work: str, avoid: Collection[str] = ()) -> ProcessRng:
        torch = sys.modules.get("torch")
        python, numpy = self._python_state(), self._numpy_state()
        last = self._last
        if torch is None and last is not None and last.python is python and last.numpy is numpy and last.work == work:
            return last  # nothing drawn since: the same (immutable) record
        self._last = ProcessRng(
            python=python, numpy=numpy, torch_cpu=None if torch is None else torch.get_rng_state(),
            accelerators={} if torch is None else _accelerator_states(torch, avoid), work=work,
        )
        return self._last

    def _python_state(self) -> Any:
        raw = _python_raw()
        gauss = getattr(getattr(random.getstate, "__self__", None), "gauss_next", None)
        last = self._python
        if raw is not None and last is not None and last[0] == raw and last[1] == gauss:
            return last[2]
        state = random.getstate()
        self._python = None if raw is None else (raw, gauss, state)
        return state

    def _numpy_state(self) -> Any:
        raw = _numpy_raw()
        last = self._numpy
        if raw is not None and last is not None and last[0] == raw and not last[1][3]:  # [3]: has_gauss
            return last[1]
        state = np.random.get_state()
        self._numpy = None if raw is None else (raw, state)
        return state


_MT_WORDS = 624  # the Mersenne Twister's state, in 32-bit words, in both Python and NumPy
_PYTHON_BYTES = 4 + 4 * _MT_WORDS  # CPython's RandomObject after its header: int index, uint32 state[624]
_NUMPY_BYTES = 4 * _MT_WORDS + 4  # NumPy's mt19937_state: uint32 key[624], int pos
_python_checked: Any = None  # the instance of random's module functions last located (kept alive here)
#: its signature's bytes (index and the first three words; the last word), as ctypes arrays over
#: them; None: not found
_python_view: tuple[Any, Any] | None = None
_numpy_checked: Any = None  # the bit generator last located (kept alive here)
_numpy_view: tuple[Any, Any] | None = None  # its signature's bytes (the first three words; the last and pos), likewise


def _python_raw() -> bytes | None:
    """The signature of Python's global generator (:class:`EntryCapture`), as bytes read from the
    object (CPython's ``RandomObject``: the object header, an int index, 624 uint32), once its
    layout is checked against ``getstate()``. The object is the one ``random.getstate`` and
    ``random.random`` are bound to."""
    global _python_checked, _python_view
    instance: Any = getattr(random.getstate, "__self__", None)
    if _python_checked is not instance:  # first use, or the module's functions rebound
        _python_checked, _python_view = instance, None
        offset, base = object.__basicsize__, type(instance).__mro__[-2]  # _random.Random, under object
        if sys.implementation.name == "cpython" and isinstance(instance, random.Random) \
                and getattr(random.random, "__self__", None) is instance and base.__basicsize__ >= offset + _PYTHON_BYTES:
            words = random.getstate()[1]
            address = id(instance) + offset
            if ctypes.string_at(address, _PYTHON_BYTES) == struct.pack(f"=i{_MT_WORDS}I", words[-1], *words[:-1]):
                _python_view = _views(address, 16, address + _PYTHON_BYTES - 4, 4)
    if _python_view is None:
        return None
    # bytes() of a view: a third of string_at's cost (no address arithmetic, no argument conversion)
    return bytes(_python_view[0]) + bytes(_python_view[1])


def _numpy_raw() -> bytes | None:
    """The signature of NumPy's global MT19937 (:class:`EntryCapture`), read through its ctypes
    interface (the address of its ``mt19937_state``: 624 uint32 key, int pos), once checked
    against its ``state``."""
    global _numpy_checked, _numpy_view
    bit_generator = getattr(getattr(np.random.mtrand, "_rand", None), "_bit_generator", None)
    if bit_generator is not _numpy_checked:  # first use, or another bit generator
        address = _locate_numpy(bit_generator)
        _numpy_checked = bit_generator
        _numpy_view = None if address is None else _views(address, 12, address + _NUMPY_BYTES - 8, 8)
    return None if _numpy_view is None else bytes(_numpy_view[0]) + bytes(_numpy_view[1])


def _views(head: int, head_bytes: int, tail: int, tail_bytes: int) -> tuple[Any, Any]:
    """ctypes arrays over the bytes a signature reads: ``head_bytes`` at ``head``, ``tail_bytes`` at ``tail``."""
    return (ctypes.c_char * head_bytes).from_address(head), (ctypes.c_char * tail_bytes).from_address(tail)


def _locate_numpy(bit_generator: Any) -> int | None:
    try:
        address, state = bit_generator.ctypes.state_address, bit_generator.state["state"]
        expected = np.asarray(state["key"], dtype="=u4").tobytes() + struct.pack("=i", state["pos"])
    except Exception:  # noqa: BLE001 - no MT19937, or no ctypes interface: read the full state
        return None
    if len(expected) != _NUMPY_BYTES or ctypes.string_at(address, _NUMPY_BYTES) != expected:
        return None
    return int(address)


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
