"""Host-memory snapshots of the state ``hetero.guard`` protects, and their restoration onto any
device.

What a snapshot keeps, per value of the state dict:

- ``hetero.Array``: a host NumPy copy; restored into the same array when it is still on the
  target device (no allocation, which matters after an out-of-memory error), else as a new
  array on the target device. A view (``w[0]``, ``w.T``) keeps its base's whole buffer (one
  copy per base, shared with the base's own entry when the base is in the state too) and its
  layout; restored, it is a view of the restored base again, so views and bases still share
  memory after a move to another device.
- torch ``nn.Module``: its ``state_dict`` copied to the CPU; restored by giving the module fresh
  storage on the target's torch device (``to_empty``: the failed device's memory is never read)
  and ``load_state_dict`` (parameters keep their identity, so optimizers holding them stay valid). torch ``Optimizer``: its ``state_dict`` with tensors on the CPU;
  restored after the modules, so its state lands on the parameters' device. torch ``Tensor``: a CPU
  clone, copied back in place when it stays on its device.
- NumPy arrays: a copy, restored in place when the shape and dtype still match.
- anything else with ``state_dict()`` and ``load_state_dict()`` (LR schedulers, ``GradScaler``,
  torchdata's ``StatefulDataLoader``, a class of the user's): a copy of its ``state_dict`` (tensors
  cloned to the CPU, the rest deep-copied); restored after the optimizers, by handing a fresh copy
  of it to the same object's ``load_state_dict``.
- generator objects (``numpy.random.Generator``, ``RandomState``, ``random.Random``,
  ``torch.Generator``): their state, set back into the same object (:mod:`hetero.recovery.snapshot_rng`).
- data loaders (``torch.utils.data.DataLoader``, torchdata's ``StatefulDataLoader``, and their
  iterators): nothing. A restore leaves them where they are: the guard replays the batches its
  steps were called with, so a loader rewound to the snapshot would hand the steps after the
  recovery batches they have trained on already.
- dicts and lists: each item, recursively (restored in place). Any other value: ``copy.deepcopy``;
  one that cannot be deep-copied (an open file, a generator function's iterator, a lock, a socket)
  is refused with :class:`UnsnapshottableError`, by :func:`check` before the first step.

The process-wide random generators are not part of :func:`take`: the guard adds them to each
snapshot (``Snapshot.rng``, :mod:`hetero.recovery.snapshot_rng`). Nothing here runs between snapshot
steps: the guard calls :func:`take` only on them.
"""

from __future__ import annotations

import copy
import dataclasses
import itertools
import sys
import threading
import time
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any, TypeVar

import numpy as np

from hetero.array.ndarray import Array, asarray, copyto
from hetero.core.device import Device
from hetero.core.errors import ArgumentError, DeviceError
from hetero.recovery import snapshot_rng
from hetero.core.torch_devices import torch_device

T = TypeVar("T")
_TORCH_KINDS = ("module", "optimizer", "tensor")
#: Values copied as they are: immutable, nothing in them to walk.
_ATOMIC = (type(None), bool, int, float, complex, str, bytes)
#: ``spare(device, shape, dtype)``: an array ready on ``device`` that a restore may fill (and keep) in
#: place of allocating one, or None (:mod:`hetero.recovery.reserve`).
Spare = Callable[[Device, tuple[int, ...], Any], Array | None]

#: The order restore() puts values back in: modules, then optimizers (their state follows the
#: parameters' device), then state_dict objects (a scheduler or an EMA helper may read either).
_RESTORE_RANK = {"optimizer": 1, "stateful": 2}


class UnsnapshottableError(ArgumentError):
    """A value of ``hetero.guard``'s state that a snapshot cannot copy: ``path`` is where it is
    (the state's key, then the keys and indices inside it)."""

    def __init__(self, path: tuple[Any, ...], type_name: str, reason: str) -> None:
        self.path, self.type_name, self.reason = path, type_name, reason
        where = "state" + "".join(f"[{key!r}]" for key in path)
        super().__init__(
            f"hetero.guard cannot snapshot {where}, a {type_name}: it has no state_dict()/load_state_dict() "
            f"methods and copying it failed ({reason}). Give its class state_dict() and load_state_dict(state) "
            "methods (the guard saves it and restores it through them), or keep it out of state (pass it to "
            "the step as an argument or a closure)")

    def under(self, key: Any) -> UnsnapshottableError:
        """The same error, one level further out (``key`` holds the value)."""
        return UnsnapshottableError((key, *self.path), self.type_name, self.reason)

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.path, self.type_name, self.reason))


@dataclasses.dataclass
class Captured:
    """One value of the state, in host memory. ``kind`` says how it is restored."""

    #: "array" | "view" | "ndarray" | "module" | "optimizer" | "tensor" | "stateful" | "generator" | "loader" | "dict"
    #: | "list" | "object"
    kind: str
    data: Any
    nbytes: int


@dataclasses.dataclass
class Snapshot:
    """The state at the start of guarded step ``step``, in host memory."""

    step: int
    values: dict[str, Captured]
    nbytes: int
    seconds: float  # how long taking it took
    rng: snapshot_rng.ProcessRng | None = None  # the process-wide generators, when the guard keeps them
    #: why the guard took it: "first" (its first step), "every" (``snapshot_every``), "boundary" (the
    #: state changed between two steps, :mod:`hetero.recovery.fingerprint`), "user" (``g.snapshot()``)
    reason: str = "every"
    #: device copies still on their way (``take(..., wait=False)``): ``done(block)`` per device; see :meth:`complete`
    waiters: list[Callable[[bool], bool]] = dataclasses.field(default_factory=list, repr=False, compare=False)
    #: the host copies of the hetero arrays, once each (what :func:`host_arrays` returns), as :func:`take`
    #: made them; None: found by walking :attr:`values`
    hosts: list[np.ndarray] | None = dataclasses.field(default=None, repr=False, compare=False)

    @property
    def pending(self) -> bool:
        """Whether some device copies of this snapshot may still be on their way (its host copies of
        those arrays are not to be read before :meth:`complete` returned True)."""
        return bool(self.waiters)

    def complete(self, block: bool = True) -> bool:
        """Whether every copy has arrived: with ``block``, after waiting for those on their way.
        Raises the device's error when they failed (the snapshot stays pending then: it is not to
        be restored)."""
        while self.waiters:
            if not self.waiters[0](block):
                return False
            self.waiters.pop(0)
        return True


def check(state: Mapping[str, Any]) -> None:
    """Raise :class:`UnsnapshottableError` for the first value of ``state`` that :func:`take` could
    not copy. Reads no device: only the values :func:`take` would deep-copy are copied, once, to try."""
    for key, value in state.items():
        _within(key, _check, value)


class _Bases(threading.local):
    """The host copies of the arrays (view bases) one take() or restore() has met, by id()."""

    taking: dict[int, np.ndarray] | None = None  # id(base array) -> its host copy
    #: per device runtime, (host copy, device buffer) of the arrays take() reads at its end, all of a
    #: device's at once
    downloads: dict[Any, list[tuple[np.ndarray, Any]]] | None = None
    restoring: dict[int, Array] | None = None  # id(host copy) -> the array restored from it
    spare: Spare | None = None  # where restore() takes the new arrays it needs, when it can


_bases = _Bases()


def take(state: Mapping[str, Any], step: int, *, wait: bool = True) -> Snapshot:
    """Copy every value of ``state`` to host memory. Raises the device's own error when a device
    cannot be read (the guard then falls back to the previous snapshot), and
    :class:`UnsnapshottableError` for a value that cannot be copied.

    ``wait=False``: the copies from a device whose copies queue (OpenCL) are queued behind the
    work asked of it so far, and not waited for: the snapshot is :attr:`~Snapshot.pending` until
    :meth:`Snapshot.complete` (which :func:`restore` calls), and holds the state as it was at this
    call whatever the device runs after it. Everything else is copied before this returns."""
    start = time.perf_counter()
    taking: dict[int, np.ndarray] = {}
    downloads: dict[Any, list[tuple[np.ndarray, Any]]] = {}
    values: dict[str, Captured] = {}
    nbytes = 0
    _bases.taking, _bases.downloads = taking, downloads
    try:
        # The guard's state is mostly arrays that own their buffers (a model's weights), met every
        # ``snapshot_every`` steps right after a step, when little of this code is in the CPU's
        # caches: the copy of one from a device whose copies queue is set up here, inline (a
        # function call per array was a fifth of a small model's snapshot); other owners go
        # through _owner, everything else through the walk by kind.
        for key, value in state.items():
            if type(value) is Array and value._base is None:
                runtime = value._device.runtime
                if runtime.host_memory or not value.nbytes or id(value) in taking:
                    captured = _owner(value, taking)
                else:
                    host = taking[id(value)] = np.empty(value.shape, value.dtype)
                    copies = downloads.get(runtime)
                    if copies is None:
                        copies = downloads[runtime] = []
                    copies.append((host, value._buffer))
                    captured = Captured("array", host, value.nbytes)
            else:
                captured = _within(key, capture, value)
            values[key] = captured
            nbytes += captured.nbytes
        waiters = _download_all(downloads, wait) if downloads else []
    finally:
        _bases.taking = _bases.downloads = None
    return Snapshot(step, values, nbytes, time.perf_counter() - start, waiters=waiters, hosts=list(taking.values()))


def _download_all(downloads: dict[Any, list[tuple[np.ndarray, Any]]], wait: bool) -> list[Callable[[bool], bool]]:
    """Fill the host copies :func:`capture` left empty: each device's in one ``download_many``
    (one wait for all of them on a device whose copies queue, or none: ``wait=False``); returns
    what waits for those still on their way."""
    waiters = []
    for runtime, copies in downloads.items():
        waiter = runtime.download_many(copies, wait)
        if waiter is not None:
            waiters.append(waiter)
    return waiters


def restore(snapshot: Snapshot, state: MutableMapping[str, Any], device: Device, spare: Spare | None = None) -> None:
    """Put the snapshot's values back into ``state`` (in place where they can go), on ``device``.
    torch modules come back before optimizers, so optimizer state follows its parameters, and
    state_dict objects last. The process-wide generators (``snapshot.rng``) are the guard's to
    restore (:func:`hetero.recovery.snapshot_rng.restore`). ``spare``: where a hetero array that
    cannot be refilled in place finds one ready (see :data:`Spare`) before one is allocated."""
    snapshot.complete()  # copies still on their way (take(wait=False)): their host arrays are read below
    order = sorted(snapshot.values, key=lambda key: _RESTORE_RANK.get(snapshot.values[key].kind, 0))
    moved: dict[int, Any] = {}  # id(old parameter) -> its replacement, where torch made new ones
    _bases.restoring, _bases.spare = {}, spare
    try:
        for key in order:
            state[key] = put_back(snapshot.values[key], state.get(key), device, moved)
    finally:
        _bases.restoring, _bases.spare = None, None


def host_arrays(snapshot: Snapshot) -> list[np.ndarray]:
    """The host copies of the hetero arrays (owners, and views' bases, once each) in ``snapshot``:
    what a restore onto another device allocates arrays for."""
    if snapshot.hosts is not None:  # as take() made them: no walk (the guard asks after every snapshot)
        return snapshot.hosts
    found: dict[int, np.ndarray] = {}

    def visit(captured: Captured) -> None:
        if captured.kind == "array":
            found.setdefault(id(captured.data), captured.data)
        elif captured.kind == "view":
            found.setdefault(id(captured.data[0]), captured.data[0])
        elif captured.kind == "dict":
            for item in captured.data.values():
                visit(item)
        elif captured.kind == "list":
            for item in captured.data:
                visit(item)

    for value in snapshot.values.values():
        visit(value)
    return list(found.values())


# -- one value -----------------------------------------------------------------------------
def kind_of(value: Any) -> str:
    """How a snapshot copies ``value``: the :attr:`Captured.kind` it gets."""
    if isinstance(value, Array):
        return "array"
    if isinstance(value, np.ndarray):
        return "ndarray"
    if isinstance(value, _ATOMIC):
        return "object"
    torch_kind = _torch_kind(value)
    if torch_kind is not None:
        return torch_kind
    if snapshot_rng.is_generator(value):
        return "generator"
    if _has_state_dict(value):
        return "stateful"
    if isinstance(value, dict):
        return "dict"
    if isinstance(value, list):
        return "list"
    return "object"


def capture(value: Any) -> Captured:
    kind = kind_of(value)
    if kind == "array":
        if value.base is not None:
            root = value.base
            shared = _bases.taking is not None and id(root) in _bases.taking
            base = _host_copy(root)
            return Captured("view", (base, value.shape, value.strides, value.offset), 0 if shared else base.nbytes)
        shared = _bases.taking is not None and id(value) in _bases.taking
        host = _host_copy(value)
        return Captured("array", host, 0 if shared else host.nbytes)
    if kind == "ndarray":
        return Captured("ndarray", value.copy(), value.nbytes)
    if kind in _TORCH_KINDS:
        return _capture_torch(kind, value)
    if kind == "generator":
        return Captured("generator", (value, snapshot_rng.generator_state(value)), 0)
    if kind == "loader":
        return Captured("loader", value, 0)
    if kind == "stateful":  # the object itself is kept too: restored into it when the state holds another
        data, nbytes = _cpu_copy(value.state_dict())
        return Captured("stateful", (value, data), nbytes)
    if kind == "dict":
        items = {k: _within(k, capture, v) for k, v in value.items()}
        return Captured("dict", items, sum(c.nbytes for c in items.values()))
    if kind == "list":
        entries = [_within(i, capture, v) for i, v in enumerate(value)]
        return Captured("list", entries, sum(c.nbytes for c in entries))
    return Captured("object", _copy_object(value), 0)


def _owner(array: Array, taking: dict[int, np.ndarray]) -> Captured:
    """:func:`capture` of an array that owns its buffer, inside :func:`take`, when its copy does not
    queue (:func:`take` queues the others itself): met already in this snapshot, on a device whose
    memory is the host's, or empty."""
    found = taking.get(id(array))
    if found is not None:
        return Captured("array", found, 0)
    host = _host_copy(array)
    return Captured("array", host, host.nbytes)


def _host_copy(array: Array) -> np.ndarray:
    """A host copy of owner ``array`` (one per take(), shared by its views)."""
    taken = _bases.taking
    if taken is not None and id(array) in taken:
        return taken[id(array)]
    runtime = array.device.runtime
    if not runtime.host_memory and array.nbytes and _bases.downloads is not None:
        host = np.empty(array.shape, array.dtype)  # filled at the end of take(), with the device's other copies
        _bases.downloads.setdefault(runtime, []).append((host, array._buffer))
    else:
        host = array._host()  # a fresh host copy, except on host-memory devices (`cpu`): a view there
        if runtime.host_memory:
            host = host.copy()
    if taken is not None:
        taken[id(array)] = host
    return host


def _put_back_array(data: np.ndarray, current: Any, device: Device) -> Array:
    """Owner array from host copy ``data``: ``current`` refilled when it can hold it, else new;
    once per restore() (its views' bases are the same array)."""
    restored = _bases.restoring
    if restored is not None and id(data) in restored:
        return restored[id(data)]
    if isinstance(current, Array) and current.base is None and current.device is device \
            and current.shape == data.shape and current.dtype == data.dtype:
        copyto(current, data)
        result = current
    else:
        ready = _bases.spare(device, data.shape, data.dtype) if _bases.spare is not None else None
        if ready is not None:
            copyto(ready, data)
            result = ready
        else:
            result = asarray(data, device=device, copy=True)
    if restored is not None:
        restored[id(data)] = result
    return result


def put_back(captured: Captured, current: Any, device: Device, moved: dict[int, Any] | None = None) -> Any:
    """The restored value: ``current`` refilled in place when possible, else a new object."""
    kind, data = captured.kind, captured.data
    if kind == "array":
        return _put_back_array(data, current, device)
    if kind == "view":
        base, shape, strides, offset = data
        same = isinstance(current, Array) and current.base is not None and current.shape == shape \
            and current.strides == strides and current.offset == offset
        root = _put_back_array(base, current.base if same else None, device)
        if same and current.base is root:
            return current
        return root._view(shape, strides, offset)
    if kind == "ndarray":
        if isinstance(current, np.ndarray) and current.shape == data.shape and current.dtype == data.dtype \
                and current.flags.writeable:
            np.copyto(current, data)
            return current
        return data.copy()
    if kind in _TORCH_KINDS:
        return _put_back_torch(kind, data, current, device, {} if moved is None else moved)
    if kind == "loader":  # never rewound (see the module docs)
        return current if current is not None else data
    if kind in ("generator", "stateful"):
        owner, saved = data
        target = current if type(current) is type(owner) else owner
        if kind == "generator":
            snapshot_rng.set_generator_state(target, saved)
        else:
            target.load_state_dict(_to_cpu(saved))  # a fresh copy: the snapshot may be restored again
        return target
    if kind == "dict":
        target = current if isinstance(current, dict) else {}
        for k, item in data.items():
            target[k] = put_back(item, target.get(k), device, moved)
        return target
    if kind == "list":
        old = current if isinstance(current, list) and len(current) == len(data) else [None] * len(data)
        restored = [put_back(item, old[i], device, moved) for i, item in enumerate(data)]
        if isinstance(current, list):
            current[:] = restored
            return current
        return restored
    return copy.deepcopy(data)


def _check(value: Any) -> None:
    kind = kind_of(value)
    if kind == "dict":
        for k, v in value.items():
            _within(k, _check, v)
    elif kind == "list":
        for i, v in enumerate(value):
            _within(i, _check, v)
    elif kind == "object":
        _copy_object(value)


def _within(key: Any, fn: Callable[[Any], T], value: Any) -> T:
    """``fn(value)``, an :class:`UnsnapshottableError` naming ``key`` as where the value is."""
    try:
        return fn(value)
    except UnsnapshottableError as error:
        raise error.under(key) from error.__cause__


def _has_state_dict(value: Any) -> bool:
    return not isinstance(value, type) and callable(getattr(value, "state_dict", None)) \
        and callable(getattr(value, "load_state_dict", None))


def _copy_object(value: Any) -> Any:
    if isinstance(value, _ATOMIC):
        return value
    try:
        return copy.deepcopy(value)
    except DeviceError:
        raise
    except Exception as exc:  # whatever deepcopy raises, the value cannot be snapshotted
        kind = type(value)
        name = kind.__qualname__ if kind.__module__ == "builtins" else f"{kind.__module__}.{kind.__qualname__}"
        raise UnsnapshottableError((), name, f"{type(exc).__name__}: {exc}") from exc


# -- torch (imported only when the state holds torch objects) -------------------------------
def _torch_kind(value: Any) -> str | None:
    torch = sys.modules.get("torch")
    if torch is None:  # no torch object can exist without torch imported
        return None
    if isinstance(value, torch.nn.Module):
        return "module"
    if isinstance(value, torch.optim.Optimizer):
        return "optimizer"
    if isinstance(value, torch.Tensor):
        return "tensor"
    if isinstance(value, _loader_types(torch)):
        return "loader"
    return None


_LOADERS: tuple[type, ...] | None = None


def _loader_types(torch: Any) -> tuple[type, ...]:
    """torch's DataLoader (torchdata's StatefulDataLoader is one) and its iterators' base class."""
    global _LOADERS
    if _LOADERS is None:
        data = getattr(getattr(torch, "utils", None), "data", None)
        found = (getattr(data, "DataLoader", None), getattr(getattr(data, "dataloader", None), "_BaseDataLoaderIter", None))
        _LOADERS = tuple(kind for kind in found if isinstance(kind, type))
    return _LOADERS


def _to_cpu(value: Any) -> Any:
    """``value`` with every tensor in it (dicts, lists, tuples) copied to the CPU, the rest deep-copied."""
    return _cpu_copy(value)[0]


def _cpu_copy(value: Any) -> tuple[Any, int]:
    """:func:`_to_cpu` of ``value``, and the bytes of the tensors and NumPy arrays in the copy (one
    walk: a snapshot of a module and its optimizer meets a few hundred values at every snapshot)."""
    if isinstance(value, _ATOMIC):  # most leaves of an optimizer's state_dict: deepcopy would return them as they are
        return value, 0
    torch = sys.modules.get("torch")  # a tensor cannot exist without torch imported
    if torch is not None and isinstance(value, torch.Tensor):
        copied = value.detach().to("cpu", copy=True)
        return copied, copied.element_size() * copied.nelement()
    if isinstance(value, dict):
        items, nbytes = {}, 0
        for k, v in value.items():
            items[k], size = _cpu_copy(v)
            nbytes += size
        return items, nbytes
    if isinstance(value, (list, tuple)):
        pairs = [_cpu_copy(v) for v in value]
        return type(value)(copied for copied, _ in pairs), sum(size for _, size in pairs)
    copied = copy.deepcopy(value)
    return copied, copied.nbytes if isinstance(copied, np.ndarray) else 0


def _capture_torch(kind: str, value: Any) -> Captured:
    data, nbytes = _cpu_copy(value if kind == "tensor" else value.state_dict())
    return Captured(kind, data, nbytes)


def _put_back_torch(kind: str, data: Any, current: Any, device: Device, moved: dict[int, Any]) -> Any:
    import torch

    where = torch.device(torch_device(device))
    if kind == "module":
        if any(t.device != where for t in itertools.chain(current.parameters(), current.buffers())):
            # Fresh storage on the new device, without reading the old one: after a sticky error or a
            # lost device its memory cannot be read. torch keeps the parameter objects where the two
            # devices' tensors are compatible (CPU, CUDA); where it makes new ones, optimizers holding
            # the old ones are pointed at them below.
            before = list(current.parameters())
            current.to_empty(device=where)
            moved.update((id(old), new) for old, new in zip(before, current.parameters(), strict=True) if old is not new)
        current.load_state_dict(data)  # copies into the existing parameters and buffers
        return current
    if kind == "optimizer":
        if moved:
            for group in current.param_groups:
                group["params"] = [moved.get(id(p), p) for p in group["params"]]
        current.load_state_dict(_to_cpu(data))  # torch casts state onto each parameter's device
        return current
    if isinstance(current, torch.Tensor) and current.device == where and current.shape == data.shape \
            and current.dtype == data.dtype:
        with torch.no_grad():
            current.copy_(data)
        return current
    restored = data.to(where, copy=True)
    if isinstance(current, torch.Tensor) and current.requires_grad:
        restored.requires_grad_(True)
    return restored
