"""Cheap fingerprints of the state ``hetero.guard`` protects, so that the guard sees when something
outside ``g.run`` changed it between two steps (``scheduler.step()`` at an epoch end, an EMA or a
metric object's update, weights edited in place) and takes a snapshot at the next step, before it
runs: the restore point then includes the change, and no replay has to redo it.

A fingerprint never syncs a device and never calls ``state_dict()`` (``GradScaler.state_dict()``
calls ``.item()``, a GPU sync). Per value of the state:

- torch tensors: ``(data_ptr, _version, shape)``; every in-place op bumps ``_version``, and a
  new dtype or device comes with new storage. Modules: their parameters' and buffers'
  ``(data_ptr, _version)`` (a resize in place bumps the version), found through a cache of where
  they live that torch's global registration hooks invalidate; optimizers: each param group's
  hyper-parameters (everything but ``params``) by value and their state tensors so;
- NumPy arrays: a CRC-32 of their bytes (a pass over them, at the end of each step and at the
  start of the next: keep large NumPy tables out of ``state`` when that costs too much);
- hetero arrays: their buffer and the device's kernel launches and writes so far
  (:mod:`hetero.core.launch_counts`): any kernel launched on that device or copy made into it between
  steps counts as a change (conservative: it costs a snapshot, never a missed change; a health
  probe's kernel counts too);
- generator objects: their state; plain values (numbers, strings) by value; dicts, lists and tuples
  item by item;
- other objects, ``state_dict`` ones included (LR schedulers, ``GradScaler``, EMA helpers, dataclasses):
  a shallow walk of ``vars(obj)`` (scalars by value, tensors as above, NumPy arrays by CRC, small
  containers of those by value, any other attribute skipped);
- data loaders (``torch.utils.data.DataLoader``, torchdata's ``StatefulDataLoader``): skipped, as a
  snapshot skips them: the guard never rewinds a loader.

Blind spots, for which ``g.snapshot()`` takes a snapshot by hand: ``p.data.mul_(...)`` (``.data`` is
a tensor with its own version counter: edit the parameter itself under ``torch.no_grad()``), writes
through a NumPy, DLPack or ``__cuda_array_interface__`` view of a torch tensor or of a hetero array
(``w.numpy()[:] = ...`` on ``cpu``: use ``hetero.copyto``, which is counted), attributes of an object
that are themselves objects (the shallow walk skips them), and objects with neither ``__dict__`` nor
``__slots__``.
"""

from __future__ import annotations

import operator
import sys
import zlib
from collections.abc import Mapping
from typing import Any

import numpy as np

from hetero.array.ndarray import Array
from hetero.recovery import snapshot, snapshot_rng
from hetero.core.launch_counts import launches, write_count

#: Containers longer than this are fingerprinted by their length only (the walk must stay cheap).
MAX_ITEMS = 4096
_SCALARS = (type(None), bool, int, float, complex, str, bytes)
_PLAIN_TYPES = frozenset(_SCALARS)


_tensor_type: Any = None  # torch.Tensor, once torch is imported
_data_ptr: Any = None  # torch.Tensor.data_ptr, likewise: map()ped over a model's tensors
_version = operator.attrgetter("_version")
_changes: dict[Any, tuple[int, int]] = {}  # a device -> (its launches, its writes), read once a fingerprint
_kinds: dict[type, str] = {}  # a type -> the snapshot kind of its values (snapshot.kind_of)
_generators: dict[type, bool] = {}  # a type -> whether its values are generator objects


def of(state: Mapping[str, Any]) -> tuple[Any, ...]:
    """A value that compares equal for two readings of ``state`` between which nothing changed it
    (as far as this module can see: see its docs)."""
    global _tensor_type, _data_ptr
    _changes.clear()
    torch = sys.modules.get("torch")
    if torch is None:
        return _items(state)
    _tensor_type, _data_ptr = torch.Tensor, torch.Tensor.data_ptr
    # Outside torch's function modes: the guard's bookkeeping is no op of the program's (a fault
    # drill counting torch ops, a user's mode, must not see it), and reads run faster without them.
    with torch._C.DisableTorchFunction():
        return _items(state)


def _items(state: Mapping[str, Any]) -> tuple[Any, ...]:
    # This runs twice a step, right after the step's work, when little of it is in the cache: each
    # lookup and call here costs several times what it costs timed alone, so the common case (hetero
    # arrays, most often all on one device) is inline, flat, and reads a device's counters once.
    found = []
    device: Any = None  # the device of the last hetero array met, and its counters
    changes: Any = None
    for key, value in state.items():
        if type(value) is Array:
            if value._device is not device:
                device = value._device
                changes = _changes.get(device)
                if changes is None:
                    name = device.name
                    changes = _changes[device] = (launches(name), write_count(name))
            buffer = value._buf if value._pending is None else value.buffer
            found.append((key, id(buffer), value.shape, value.dtype, changes))
        else:
            found.append((key, _value(value)))
    return tuple(found)


def _value(value: Any) -> Any:
    kind = _kinds.get(type(value))
    if kind is None:
        kind = _kinds[type(value)] = snapshot.kind_of(value)  # how a snapshot copies it: a matter of its type
    if kind == "loader":
        return "loader"
    if kind == "object" and isinstance(value, _SCALARS):
        return value
    if kind == "array":  # inline: this runs for every array of the state, twice a step
        device = value._device
        changes = _changes.get(device)
        if changes is None:
            changes = _changes[device] = _device_changes(device.name)
        # _buf unless a recorded (fused) value is still to be computed: the buffer property computes it
        buffer = value._buf if value._pending is None else value.buffer
        return id(buffer), value.shape, value.dtype, changes
    if kind == "ndarray":
        return _ndarray(value)
    if kind == "tensor":
        return _tensor(value)
    if kind == "module":
        return id(value), _module(value)
    if kind == "optimizer":
        return id(value), _optimizer(value)
    if kind == "generator":
        return id(value), _frozen(snapshot_rng.generator_state(value))
    if kind == "dict":
        return id(value), tuple((k, _value(v)) for k, v in value.items())
    if kind == "list" or isinstance(value, tuple):
        return id(value), tuple(_value(v) for v in value)
    return id(value), _attributes(value)


def _device_changes(name: str) -> tuple[int, int]:
    """A device's kernel launches and writes into its memory so far."""
    return launches(name), write_count(name)


def _tensor(t: Any) -> tuple[Any, ...]:
    # A new dtype or device comes with new storage: data_ptr covers them, for a third less time.
    return t.data_ptr(), t._version, t.shape


def _module(module: Any) -> tuple[Any, ...]:
    """The parameters and buffers of ``module`` and its descendants, read from the dicts
    ``nn.Module`` keeps them in (``parameters()`` costs several times more: memo sets, names).
    Which dicts those are is cached per module until torch registers a module, a parameter or a
    buffer anywhere (its global registration hooks), so a step reads one flat list."""
    dicts = _module_dicts.get(id(module))
    if dicts is None or dicts[0] != _registrations[0] or dicts[1] is not module:
        _watch_registrations()
        found: list[Any] = []
        stack = [module]
        while stack:
            each = stack.pop()
            found.append(each._parameters)
            found.append(each._buffers)
            stack.extend(child for child in each._modules.values() if child is not None)
        dicts = _module_dicts[id(module)] = (_registrations[0], module, tuple(found))
    tensors = [t for d in dicts[2] for t in d.values() if t is not None]
    return tuple(map(_data_ptr, tensors)), tuple(map(_version, tensors))  # map: a C loop, no attribute lookups


#: id(module) -> (registrations seen then, the module, the _parameters/_buffers dicts of it and its descendants)
_module_dicts: dict[int, tuple[int, Any, tuple[Any, ...]]] = {}
_registrations = [0]  # torch's module/parameter/buffer registrations seen since the hooks went in
_hooks: list[Any] = []


def _watch_registrations() -> None:
    """Install torch's global registration hooks once: any module, parameter or buffer registered
    (assigned) on any module makes every cached dict list stale."""
    if _hooks:
        return
    torch = sys.modules["torch"]
    hooks = torch.nn.modules.module

    def registered(*_: Any) -> None:
        _registrations[0] += 1

    for name in ("register_module_module_registration_hook", "register_module_parameter_registration_hook",
                 "register_module_buffer_registration_hook"):
        install = getattr(hooks, name, None)
        if install is None:  # an older torch: never cache (a new counter value each time)
            _registrations[0] = -1 - len(_module_dicts)
            continue
        _hooks.append(install(registered))
    if len(_module_dicts) > 4096:
        _module_dicts.clear()


def _ndarray(a: np.ndarray) -> tuple[Any, ...]:
    return id(a), a.shape, a.dtype.str, _crc(a)


def _crc(a: np.ndarray) -> int:
    return zlib.crc32(np.ascontiguousarray(a).data) if a.size else 0


def _optimizer(optimizer: Any) -> tuple[Any, ...]:
    groups = tuple(_plain_items(group, "params") for group in optimizer.param_groups)
    states = optimizer.state.values()  # per parameter: {"step": ..., "exp_avg": ...}
    lengths = tuple([len(per_param) for per_param in states])
    values = [v for per_param in states for v in per_param.values()]
    if set(map(type, values)) <= {_tensor_type}:  # the usual case: all plain tensors, read by map()
        return groups, lengths, tuple(map(_data_ptr, values)), tuple(map(_version, values))
    tensor_type = _tensor_type
    return groups, lengths, tuple([_tensor(v) if isinstance(v, tensor_type) else _leaf(v, 1) for v in values])


def _plain_items(mapping: Mapping[str, Any], skip: str = "") -> tuple[Any, ...]:
    """A dict's items but ``skip``: plain values as they are (the common case: one tuple, compared
    by ``==``), anything else through :func:`_leaf`."""
    values = tuple(v for k, v in mapping.items() if k != skip)
    if all(type(v) in _PLAIN_TYPES for v in values):
        return values
    return tuple(_leaf(v, 1) for v in values)


def _attributes(value: Any) -> tuple[Any, ...]:
    """The shallow walk of an object's attributes (see the module docs)."""
    names = getattr(value, "__dict__", None)
    if names is None:
        slots = [name for cls in type(value).__mro__ for name in getattr(cls, "__slots__", ())]
        names = {name: getattr(value, name) for name in slots if hasattr(value, name)}
    plain = _PLAIN_TYPES
    return tuple([(name, item if type(item) in plain else _leaf(item, 2)) for name, item in names.items()])


def _leaf(value: Any, depth: int) -> Any:
    """A scalar by value, a tensor or an array as above, a small container of those item by item
    (``depth`` more levels), anything else by its type alone. Tested most common first: it runs for
    every attribute and hyper-parameter at every step; a type found to be none of these (an
    optimizer a schedule holds) is remembered as such."""
    kind = type(value)
    if kind in _PLAIN_TYPES:
        return value
    if kind in _OPAQUE:
        return kind.__name__
    if isinstance(value, _SCALARS):
        return value
    if _tensor_type is not None and isinstance(value, _tensor_type):
        return _tensor(value)
    if depth > 0 and kind in (list, tuple, dict):
        if len(value) > MAX_ITEMS:
            return kind.__name__, len(value)
        if kind is not dict and all(map(_PLAIN_TYPES.__contains__, map(type, value))):
            return tuple(value)  # plain items (a scheduler's base_lrs, _last_lr): as they are, no walk
        items = value.items() if kind is dict else enumerate(value)
        return tuple((k, _leaf(v, depth - 1)) for k, v in items)
    if isinstance(value, np.ndarray):
        return _ndarray(value)
    if isinstance(value, np.generic):
        return value
    generator = _generators.get(kind)
    if generator is None:
        generator = _generators[kind] = snapshot_rng.is_generator(value)
    if generator:
        return _frozen(snapshot_rng.generator_state(value))
    if kind not in (list, tuple, dict) and _tensor_type is not None and len(_OPAQUE) < 4096:
        _OPAQUE.add(kind)  # a matter of its type (tested after torch's import: no tensor type is missed)
    return kind.__name__


#: Types whose values _leaf fingerprints by their type's name alone (see there).
_OPAQUE: set[type] = set()


def _frozen(value: Any) -> Any:
    """A generator's state as something ``==`` compares (dicts, lists and arrays made into tuples)."""
    if isinstance(value, dict):
        return tuple((k, _frozen(v)) for k, v in value.items())
    if isinstance(value, (list, tuple)):
        return tuple(_frozen(v) for v in value)
    if isinstance(value, np.ndarray):
        return value.dtype.str, value.shape, value.tobytes()
    if _tensor_type is not None and isinstance(value, _tensor_type):
        return value.numpy().tobytes()
    return value
