"""Fault rules reach torch: a rule for the ``torch`` op (``cpu:torch:nth=20:oom``,
``cuda:0:torch:every=100:sticky``) counts the torch ops on its device's torch tensors and, when it
fires, raises what torch itself raises for that fault (:mod:`hetero.fault.injection_torch_errors`),
so a pure torch loop drills ``hetero.fault.classify``, ``hetero.guard`` and ``hetero-run`` unchanged.

The boundary is a ``torch.overrides.TorchFunctionMode``: it sees each torch function and tensor
method the program calls (``F.linear``, ``x.pow``, ``loss.backward()``, the optimizer's
``_foreach_*``) once, before it runs, and nothing torch calls inside it, so "the Nth op" is the
Nth call the program makes. A ``TorchDispatchMode`` would also count every aten op autograd and
the composite ops run underneath (a backward pass is dozens of them), numbers a user cannot read
off the code, and it sits below autograd, where an exception crosses the engine's threads. An op
counts for a device when one of its tensor arguments (or its ``device=``) is on that device's
torch device (:func:`hetero.torch_device`: ``cpu`` for the CPU, ``cuda:N`` for
CUDA and ROCm GPUs); property reads (``x.grad``, ``x.shape``) are no ops.

The mode is on torch's function-mode stack only while a torch rule is active, in the thread that
armed it (torch keeps that stack per thread): an ``inject()`` block pushes it on entry and pops it
on exit; configured rules (``HETERO_FAULTS``, ``hetero-run --inject``) push it when torch is
imported (at ``import hetero`` when torch is already loaded). No rule, no mode.
"""

from __future__ import annotations

import contextlib
import logging
import sys
import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from hetero.core.after_import import AfterImport, after_import
from hetero.fault import injection as _injection
from hetero.fault.injection_rules import TORCH_OP, RuleState
from hetero.fault.injection_torch_errors import torch_fault_error
from hetero.core.torch_devices import torch_device  # the one hetero -> torch device mapping
from hetero.core.injection_hooks import TORCH_RULES_CHANGED, TORCH_RULES_CONFIGURED

log = logging.getLogger("hetero.fault.injection")

#: An active rule on one hetero device, as the mode sees it: (injection, state, device's backend).
Entry = tuple["_injection.Injection", RuleState, str]

_lock = threading.RLock()
_injections: tuple[_injection.Injection, ...] = ()  # the active injections with torch rules
_by_place: dict[str, list[Entry]] = {}  # torch device -> its entries (resolved on first sight)
_mode: Any = None  # the installed mode, while one is
_finder: AfterImport | None = None
_PROPERTY_ACCESS = ("__get__", "__set__", "__delete__")


def rules_changed(injections: Sequence[_injection.Injection]) -> None:
    """The active torch rules are now those of ``injections``: install the mode, refresh which
    devices count, or remove it when none is left (see :data:`TORCH_RULES_CHANGED`)."""
    global _injections
    with _lock:
        _injections = tuple(injections)
        _by_place.clear()  # resolved again: a rule came or went, or a backend opened
        if not _injections:
            _uninstall()
        elif "torch" in sys.modules:
            _install()
        else:
            _arm_after_torch_import()


def configured(faults: tuple[str, ...]) -> None:
    """Arm the configured rules ``faults`` (some target torch): see :data:`TORCH_RULES_CONFIGURED`."""
    _injection.configured_injection(faults)
    if "torch" in sys.modules:
        _after_torch_import()  # torch came first: arm now
    else:
        rules_changed(_injection.torch_injections())


def installed() -> bool:
    """Whether the torch op boundary is on this thread's torch function-mode stack."""
    torch = sys.modules.get("torch")
    return torch is not None and _mode is not None and _mode in _stack(torch)


# -- the mode ----------------------------------------------------------------------------------
def _install() -> None:
    global _mode
    torch = sys.modules["torch"]
    if _mode is not None:  # installed, in the thread that armed it: a backend opening in another thread
        return  # (the guard's standby) only refreshes which devices count
    _mode = _mode_class(torch)()
    torch._C._push_on_torch_function_stack(_mode)
    log.debug("torch op boundary installed for fault rules %s",
              [r.text for inj in _injections for r in inj.rules if r.op == TORCH_OP])


def _uninstall() -> None:
    global _mode
    torch = sys.modules.get("torch")
    mode, _mode = _mode, None
    if torch is None or mode is None:
        return
    stack = _stack(torch)
    if mode not in stack:
        log.debug("torch op boundary not on this thread's mode stack: left to the thread that installed it")
        return
    above = []
    while (top := torch._C._pop_torch_function_stack()) is not mode:  # modes the program pushed since stay
        above.append(top)
    for each in reversed(above):
        torch._C._push_on_torch_function_stack(each)


def _stack(torch: Any) -> list[Any]:
    return [torch._C._get_function_stack_at(i) for i in range(torch._C._len_torch_function_stack())]


def _mode_class(torch: Any) -> type:
    class TorchOpBoundary(torch.overrides.TorchFunctionMode):  # type: ignore[misc, name-defined]
        """hetero's fault rules for torch ops (hetero.torch.injection)."""

        def __torch_function__(self, func: Callable[..., Any], types: Any, args: Sequence[Any] = (),
                               kwargs: dict[str, Any] | None = None) -> Any:
            kwargs = kwargs or {}
            if getattr(func, "__name__", "") not in _PROPERTY_ACCESS:
                for place in _places(torch, args, kwargs):
                    for injection, state, backend in _entries(place):
                        call = state.hit()
                        if call is not None:
                            _fire(injection, state, backend, place, func, call)
            return func(*args, **kwargs)

    return TorchOpBoundary


def _places(torch: Any, args: Iterable[Any], kwargs: dict[str, Any]) -> set[str]:
    """The torch devices of an op's tensors (a list of tensors, as ``_foreach_*`` take, included)."""
    found: set[str] = set()
    for value in (*args, *kwargs.values()):
        items = value if isinstance(value, (list, tuple)) else (value,)
        for item in items:
            if isinstance(item, torch.Tensor):
                found.add(str(item.device))
    device = kwargs.get("device")
    if device is not None:
        with contextlib.suppress(RuntimeError, TypeError):
            found.add(str(torch.device(device)))
    return found


def _entries(place: str) -> list[Entry]:
    """The active torch rules on the hetero devices whose torch device is ``place``."""
    found = _by_place.get(place)
    if found is not None:
        return found
    from hetero.core.registry import opened_devices  # devices are counted once a backend has opened them

    with _lock:
        injections = _injections
    found = []
    for device in opened_devices():  # not under our lock: a backend opening holds the registry's, then takes ours
        if torch_device(device) != place:
            continue
        for injection in injections:
            found += [(injection, state, device.backend) for state in injection.states_for(device.runtime)
                      if state.rule.op == TORCH_OP]
    with _lock:
        if injections is _injections:  # still the rules it was resolved for
            _by_place[place] = found
    return found


def _fire(injection: _injection.Injection, state: RuleState, backend: str, place: str, func: Callable[..., Any],
          call: int) -> None:
    rule = state.rule
    name = getattr(func, "__qualname__", None) or getattr(func, "__name__", None) or repr(func)
    _injection.announce(injection, rule, state.device, f"torch {name} on {place}", call)
    if _injection.process_fault(rule, state.device):
        return
    raise torch_fault_error(rule.what.kind, place, rule.text, hip=backend == "rocm")


# -- configured rules before torch is imported ----------------------------------------------
def _arm_after_torch_import() -> None:
    global _finder
    _finder = after_import("torch", _after_torch_import, "arm the fault rules for torch ops", _finder)


def _after_torch_import() -> None:
    rules = [r for inj in _injection.torch_injections() for r in inj.rules if r.op == TORCH_OP]
    _injection.open_named(rules)  # the devices the rules name, so their torch tensors count (opens backends once)
    rules_changed(_injection.torch_injections())


TORCH_RULES_CHANGED.register(rules_changed)
TORCH_RULES_CONFIGURED.register(configured)
