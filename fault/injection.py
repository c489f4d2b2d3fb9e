"""Fault injection for tests and drills: configured faults raised at the backend boundary as
exactly the error the real path raises, so classification, quarantine and recovery run unchanged.

Rules (syntax in :mod:`hetero.fault.injection_rules`) come from ``HETERO_FAULTS`` /
the config's ``faults:`` list (applied to each device as its backend opens) or from::

    with hetero.fault.inject("oneapi:0:launch:nth=300:lost") as inj:
        train()
    print(inj.fired)          # one FaultRecord per injected fault

Mechanism: on a device a rule matches, the runtime *instance* gets attributes (``launch``,
``allocate``, ...) that shadow its class's methods, count calls and fire. Cached references to the
runtime (kernels keep one) see them; devices no rule matches, and every device when no rule is
active, carry no wrapper at all (``"launch" not in vars(runtime)``). Every injected fault is
logged (logger ``hetero.fault.injection``, WARNING), published on the fault event bus (kind
``fault-injected``), and recorded in the injection's ``fired`` list; its error has ``injected = True``
(so a device it quarantines stays quarantined within the drill only: :mod:`hetero.fault.quarantine`).
At exit, a rule that never fired in the process is named in a warning: injection only reaches
operations through hetero's backends, on devices the rule names. Rules of the ``torch`` op wrap no
runtime: they fire at torch's op boundary (:mod:`hetero.torch.injection`, told through
:data:`hetero.core.injection_hooks.TORCH_RULES_CHANGED` when they come and go); rules of the ``infer``
op fire where a :mod:`hetero.onnx` session runs ONNX Runtime (:mod:`hetero.fault.injection_infer`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import fnmatch
import functools
import logging
import os
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from hetero.core.device import Device, Health, HealthState
from hetero.core.errors import ConfigError, DeviceError, did_you_mean
from hetero.core.injection_hooks import TORCH_RULES_CHANGED
from hetero.core.plugin import DeviceRuntime
from hetero.core.registry import RUNTIMES_OPENED

from hetero.fault import injection_report
from hetero.fault.injection_rules import OPS, TORCH_OP, Rule, RuleState, parse_rules

log = logging.getLogger("hetero.fault.injection")

_INJECTED_METHODS = ("allocate", "upload", "download", "copy", "launch", "call_library", "synchronize", "health",
                     "drain_health_events")


@dataclasses.dataclass(frozen=True)
class FaultRecord:
    """One injected fault: which rule fired, where, on which call, and when (epoch seconds)."""

    rule: str
    device: str
    op: str
    method: str
    call: int
    what: str
    time: float

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


class Injection:
    """A set of active rules (from :func:`inject` or the configuration) and what they fired."""

    def __init__(self, rules: Sequence[Rule], source: str) -> None:
        self.rules = tuple(rules)
        self.source = source
        self.fired: list[FaultRecord] = []
        self.active = False
        self._states: dict[tuple[int, str], RuleState] = {}  # (rule index, device) -> state

    def count(self, rule: str | None = None) -> int:
        """How many faults fired (of one rule, given its text)."""
        return sum(1 for record in self.fired if rule is None or record.rule == rule.strip())

    def calls(self, rule: Rule) -> dict[str, int]:
        """The matching calls ``rule`` (one of this injection's) counted, per device."""
        index = self.rules.index(rule)
        return {device: state.calls for (i, device), state in self._states.items() if i == index}

    def states_for(self, runtime: DeviceRuntime) -> list[RuleState]:
        """This injection's rule states on ``runtime``'s device (created on first match)."""
        name, backend = runtime.info.name, runtime.info.backend
        found = []
        for index, rule in enumerate(self.rules):
            if not fnmatch.fnmatchcase(name, rule.device) and not _names_backend(name, rule.device):
                continue
            if not rule.matches_backend(backend):
                log.debug("fault rule %r skips %s: its vendor code is not a %s error", rule.text, name, backend)
                continue
            key = (index, name)
            if key not in self._states:
                self._states[key] = RuleState(rule, name)
            found.append(self._states[key])
        return found

    def __repr__(self) -> str:
        return f"<hetero.fault.Injection {self.source}: {len(self.rules)} rule(s), {len(self.fired)} fired>"


def _names_backend(name: str, pattern: str) -> bool:
    """``cpu`` names the device ``cpu``; a bare backend name (``oneapi``) names all its devices."""
    return ":" not in pattern and not any(ch in pattern for ch in "*?[") and name.split(":", 1)[0] == pattern


# -- per-runtime patch table ------------------------------------------------------------------
Entry = tuple[Injection, RuleState]


class _Patched:
    """The rule states active on one runtime, per method (lists updated in place, so installed
    wrappers see changes without being rebuilt), and injected events not yet drained."""

    def __init__(self) -> None:
        self.entries: list[Entry] = []
        self.methods: dict[str, list[Entry]] = {method: [] for method in _INJECTED_METHODS}
        self.events: list[dict[str, Any]] = []  # injected health events waiting for drain_health_events()

    def regroup(self) -> None:
        for method, entries in self.methods.items():
            entries[:] = [(inj, s) for inj, s in self.entries if method in s.rule.methods]


_PATCHED: weakref.WeakKeyDictionary[DeviceRuntime, _Patched] = weakref.WeakKeyDictionary()
_LOCK = threading.RLock()
_ACTIVE: list[Injection] = []  # inject() blocks in effect (applied to devices opened later too)


def _attach(injection: Injection, runtimes: Iterable[DeviceRuntime]) -> None:
    with _LOCK:
        for runtime in runtimes:
            existing = _PATCHED.get(runtime)
            if existing is not None and any(inj is injection for inj, _ in existing.entries):
                continue  # attached already (by apply_at_open while this injection was entering)
            states = injection.states_for(runtime)
            if not states:
                continue
            patched = _PATCHED.setdefault(runtime, _Patched())
            patched.entries.extend((injection, s) for s in states)
            _install(runtime, patched)


def _detach(injection: Injection) -> None:
    with _LOCK:
        for runtime, patched in list(_PATCHED.items()):
            patched.entries = [(inj, s) for inj, s in patched.entries if inj is not injection]
            _install(runtime, patched)


def _install(runtime: DeviceRuntime, patched: _Patched) -> None:
    """Make the instance attributes match the active rules: a wrapper per covered method, none else
    (``drain_health_events`` stays wrapped while injected events wait to be drained)."""
    patched.regroup()
    wanted = {method for method, entries in patched.methods.items() if entries}
    if patched.events or any(s.rule.what.kind == "xid" for _, s in patched.entries):
        wanted.add("drain_health_events")
    for method in _INJECTED_METHODS:
        present = method in vars(runtime)
        if method in wanted and not present:
            original = getattr(type(runtime), method).__get__(runtime)
            setattr(runtime, method, _wrapper(runtime, patched, method, original))
        elif method not in wanted and present and getattr(vars(runtime)[method], "_hetero_injection", False):
            delattr(runtime, method)
    if not wanted:
        _PATCHED.pop(runtime, None)


def _wrapper(runtime: DeviceRuntime, patched: _Patched, method: str,
             original: Callable[..., Any]) -> Callable[..., Any]:
    entries = patched.methods[method]

    if method == "drain_health_events":
        def drain() -> list[dict[str, Any]]:
            events = original()
            if patched.events:
                with _LOCK:
                    events, patched.events = [*events, *patched.events], []
                    _install(runtime, patched)  # the last rule gone and its events drained: unwrap
            return events
        drain._hetero_injection = True  # type: ignore[attr-defined]
        return drain

    if method == "health":
        def health() -> Health:
            for injection, state in entries:
                call = state.hit()
                if call is not None:
                    injected = _act(runtime, patched, injection, state, method, call)
                    if injected is not None:
                        return injected
            return original()  # type: ignore[no-any-return]
        health._hetero_injection = True  # type: ignore[attr-defined]
        return health

    # The hot path while a rule is armed: one loop over this method's rules, a locked counter each.
    @functools.wraps(original)
    def call(*args: Any, **kwargs: Any) -> Any:
        for injection, state in entries:
            number = state.hit()
            if number is not None:
                _act(runtime, patched, injection, state, method, number)
        return original(*args, **kwargs)
    call._hetero_injection = True  # type: ignore[attr-defined]
    return call


# -- firing -----------------------------------------------------------------------------------
def _act(runtime: DeviceRuntime, patched: _Patched, injection: Injection, state: RuleState, method: str,
         call: int) -> Health | None:
    rule, what = state.rule, state.rule.what
    name = runtime.info.name
    if rule.op == "health" and state.fires > 1:  # a latched health fault: reported again, not re-injected
        return _injected_health(rule)
    announce(injection, rule, name, method, call)
    if process_fault(rule, name):
        return None
    kind = what.kind
    if what.kind == "xid":
        event = {"kind": "xid", "xid": what.xid, "injected": True, "time": time.time(), "device": name,
                 "rule": rule.text}
        with _LOCK:
            patched.events.append(event)
        mapped = xid_error_kind(what.xid or 0)
        if rule.op == "health":
            return _injected_health(rule)
        if rule.op not in ("launch", "sync") or mapped is None:
            return None  # the event alone: the call itself goes through
        kind = mapped
    if rule.op == "health":
        return _injected_health(rule)
    raise _error(runtime, rule, kind, what.code, what.xid)


def announce(injection: Injection, rule: Rule, device: str, method: str, call: int) -> None:
    """Tell that ``rule`` fired on ``device``'s call number ``call`` (of ``method``): the injection's
    ``fired`` list, the log, the run's record and the fault event bus."""
    description = _describe(rule)
    injection.fired.append(FaultRecord(rule.text, device, rule.op, method, call, description, time.time()))
    log.warning("injected fault on %s: %s at %s call #%d (rule %r, %s)", device, description, method, call,
                rule.text, injection.source)
    injection_report.fired_in_run(rule.text)
    from hetero.fault.event_bus import publish  # only when a fault fires

    publish("fault-injected", device=device, rule=rule.text, op=rule.op, method=method, call=call, what=description,
            source=injection.source)


def process_fault(rule: Rule, device: str) -> bool:
    """Do a fired rule's process fault: ``crash`` never returns, ``hang`` returns True once held;
    False for a rule whose fault is an error (the caller raises it)."""
    if rule.what.kind == "crash":
        _crash(device, rule)
    if rule.what.kind == "hang":
        _hang(rule.what.seconds)
        return True
    return False


def _injected_health(rule: Rule) -> Health | None:
    """What health() reports for a fired health rule: DEGRADED for degraded hardware, UNHEALTHY for a
    lost or corrupted device; None (the real health) for an Xid that leaves the GPU itself healthy."""
    what = rule.what
    if what.kind == "xid":
        from hetero.fault.taxonomy import XIDS, FaultClass

        row = XIDS.get(what.xid or 0)
        states = {FaultClass.DEVICE_LOST: HealthState.UNHEALTHY, FaultClass.DEGRADED: HealthState.DEGRADED}
        state = states.get(row.fault_class) if row is not None else None
        return Health(state, f"injected: {rule.text}") if state is not None else None
    return Health(HealthState.DEGRADED if what.kind == "degraded" else HealthState.UNHEALTHY, f"injected: {rule.text}")


#: Xids the driver reports while applications keep running (page retirement/row remap recorded,
#: high single-bit ECC rate, cleanup after another error, C2C corrected, recovery action changed):
#: injecting one yields the event only, never an error. Source: NVIDIA "Xid Errors" and its catalog.
REPORT_ONLY_XIDS = frozenset({45, 63, 64, 92, 121, 154})


def xid_error_kind(xid: int) -> str | None:
    """The fault kind an application sees on its next launch or sync after ``xid`` (from the Xid
    catalog in :mod:`hetero.fault.taxonomy`), or None when the Xid comes without an error."""
    from hetero.fault.taxonomy import XIDS, FaultClass

    row = XIDS.get(xid)
    if row is None or xid in REPORT_ONLY_XIDS:
        return None
    kinds = {FaultClass.DEVICE_LOST: "lost", FaultClass.CONTEXT_CORRUPTING: "sticky", FaultClass.DEGRADED: "degraded",
             FaultClass.RECOVERABLE: "oom"}
    return kinds.get(row.fault_class)


def _describe(rule: Rule) -> str:
    what = rule.what
    if what.kind == "code":
        return f"{what.vendor}:{what.code}"
    if what.kind == "xid":
        return f"xid:{what.xid}"
    if what.kind == "hang":
        return "hang forever" if what.seconds is None else f"hang {what.seconds:g}s"
    return what.kind


def _error(runtime: DeviceRuntime, rule: Rule, kind: str, code: int | None, xid: int | None) -> BaseException:
    error = runtime.fault_error(kind, code=code, doing=rule.op) if kind == "code" else \
        runtime.fault_error(kind, doing=rule.op)
    error.injected = True  # type: ignore[attr-defined]
    if xid is not None and isinstance(error, DeviceError):
        error.xid = xid
    if error.args and isinstance(error.args[0], str):
        error.args = (f"{error.args[0]} (injected by fault rule {rule.text!r})", *error.args[1:])
    return error


def _crash(device: str, rule: Rule) -> None:
    """Die as a segfault would (SIGKILL: no cleanup, no exit handlers), after flushing the logs."""
    log.critical("injected crash on %s (rule %r): process %d kills itself with SIGKILL", device, rule.text,
                 os.getpid())
    for handler in [*logging.getLogger().handlers, *_all_handlers()]:
        with contextlib.suppress(OSError, ValueError):  # a closed or broken handler must not stop the crash
            handler.flush()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError, AttributeError):
            stream.flush()
    os.kill(os.getpid(), signal.SIGKILL)


def _all_handlers() -> list[logging.Handler]:
    handlers: list[logging.Handler] = []
    for logger in list(logging.Logger.manager.loggerDict.values()):
        if isinstance(logger, logging.Logger):
            handlers.extend(logger.handlers)
    return handlers


def _hang(seconds: float | None) -> None:
    """Hold the calling thread (the process stops making progress there); None: forever."""
    if seconds is None:
        threading.Event().wait()
    else:
        time.sleep(seconds)


# -- public entry points ----------------------------------------------------------------------
def _check_devices(rules: Sequence[Rule], runtimes: Sequence[DeviceRuntime] = ()) -> None:
    """A rule naming a backend that is not installed, or a device its (open) backend does not have,
    is a typo: say so, with the close name. ``runtimes``: devices of backends opened so far."""
    from hetero.core.registry import backend_names

    names = backend_names()
    present: dict[str, list[str]] = {}
    for runtime in runtimes:
        present.setdefault(runtime.info.backend, []).append(runtime.info.name)
    for rule in rules:
        if any(ch in rule.device for ch in "*?["):
            continue
        backend = rule.device.split(":", 1)[0]
        if backend not in names:
            raise ConfigError(f"fault rule {rule.text!r}: device {rule.device!r} names backend {backend!r}, which "
                              f"is not installed; installed backends: {', '.join(names)}"
                              + did_you_mean(backend, names))
        devices = present.get(backend)
        if devices and rule.device != backend and rule.device not in devices:
            raise ConfigError(f"fault rule {rule.text!r}: there is no device {rule.device!r}; {backend} devices here: "
                              f"{', '.join(devices)}" + did_you_mean(rule.device, devices))


def open_named(rules: Sequence[Rule]) -> list[Device]:
    """The opened devices, after opening the enabled backends the rules name (so that a device
    name is checked as HETERO_FAULTS checks it, even before anything else opened a backend)."""
    from hetero.core.registry import backend_status, enabled_backends, opened_devices

    named = {rule.device.split(":", 1)[0] for rule in rules if not any(ch in rule.device for ch in "*?[")}
    for backend in sorted(named & set(enabled_backends())):
        backend_status(backend)  # opens it once; an unavailable backend has no devices to check against
    return opened_devices()


class inject:  # lower case: used like a function, ``with hetero.fault.inject(...)``
    """Inject faults while the block runs, on devices already opened and on those opened inside it.

    ``rules``: one rule, a ``;``-separated string, or a list. A rule is ``DEVICE:OP:TRIGGER:WHAT``:

    - DEVICE: a device name or ``fnmatch`` pattern (``oneapi:0``, ``opencl:*``, ``cpu``, ``*``);
    - OP: ``launch`` (kernel launches and vendor library calls: ``hetero.matmul``'s BLAS), ``copy``
      (upload, download, device copies), ``alloc``, ``sync``, ``health``, or
      ``torch`` (torch ops on the device's torch tensors, raising torch's own exception:
      :mod:`hetero.torch.injection`), ``infer`` (ONNX Runtime inferences of
      :mod:`hetero.onnx` sessions and pools on the device: :mod:`hetero.fault.injection_infer`);
    - TRIGGER: ``nth=N`` (exactly the Nth matching call on each device), ``every=K``, or ``p=P``
      (with ``,seed=S`` the same calls fire in every run); ``,times=M`` caps the fires;
    - WHAT: ``lost``, ``sticky``, ``oom``, ``degraded`` (the backend's own error of that kind), a vendor
      code ``cuda:700``, ``hip:700``, ``opencl:-5`` (on devices of that backend only), ``xid:79`` (a
      health event, and on launch/sync the error NVIDIA pairs with it), ``crash`` (SIGKILL) or
      ``hang:2s`` (``hang``: forever). On ``health`` the state sticks once fired (``times=M`` limits it).

    On exit the devices are restored (no wrapper is left behind). The object bound by ``as`` is the
    :class:`Injection`: its ``fired`` list holds a :class:`FaultRecord` per injected fault. Raises
    ConfigError for a bad rule, naming the bad part and the valid choices.
    """

    def __init__(self, rules: str | Rule | Sequence[str | Rule]) -> None:
        parsed = parse_rules(rules)  # type: ignore[arg-type]
        _check_devices(parsed)
        _check_devices(parsed, [d.runtime for d in open_named(parsed)])
        self.injection = Injection(parsed, "hetero.fault.inject")
        self._targets_torch = any(rule.op == TORCH_OP for rule in parsed)

    def __enter__(self) -> Injection:
        from hetero.core.registry import opened_devices

        with _LOCK:
            if self.injection.active:
                raise RuntimeError("this hetero.fault.inject block is already active; create another one to nest")
            self.injection.active = True
            _ACTIVE.append(self.injection)
        injection_report.watch(self.injection)  # reported when the block ends (or the process, inside it)
        # Outside our lock: opened_devices() takes the registry's lock, and a backend opening in another
        # thread (the guard's standby) holds that one while it takes ours in apply_at_open; holding both
        # here deadlocked. A backend that opens in between is attached by apply_at_open (we are in
        # _ACTIVE already) and _attach skips runtimes this injection already covers.
        _attach(self.injection, [d.runtime for d in opened_devices()])
        if self._targets_torch:
            TORCH_RULES_CHANGED.call(torch_injections())  # torch's op boundary, for this block's torch rules
        return self.injection

    def __exit__(self, *exc: object) -> None:
        with _LOCK:
            self.injection.active = False
            if self.injection in _ACTIVE:
                _ACTIVE.remove(self.injection)
            _detach(self.injection)
        if self._targets_torch:
            TORCH_RULES_CHANGED.call(torch_injections())  # removed when no other injection targets torch
        injection_report.report_unfired([self.injection])  # the drill ends here: say now what it missed
        injection_report.forget(self.injection)


_CONFIGURED: dict[tuple[str, ...], Injection] = {}
def configured() -> Injection | None:
    """The injection built from the configuration's ``faults`` (HETERO_FAULTS), once a backend opened."""
    from hetero.core.config import get_config

    return _CONFIGURED.get(get_config().faults)


def apply_at_open(runtimes: Sequence[DeviceRuntime], faults: tuple[str, ...]) -> None:
    """Apply configured rules (``faults``) and active :func:`inject` blocks to a backend's devices as
    it opens (called by the registry; never when no rule is configured or active)."""
    with _LOCK:
        if faults:
            injection = configured_injection(faults)
            _check_devices(injection.rules, runtimes)
            _attach(injection, runtimes)
        for injection in _ACTIVE:
            _attach(injection, runtimes)
    if torch_injections():
        TORCH_RULES_CHANGED.call(torch_injections())  # the new devices' torch tensors count from now on


def configured_injection(faults: tuple[str, ...]) -> Injection:
    """The injection of the configured rules ``faults`` (built, checked and watched on first use)."""
    with _LOCK:
        injection = _CONFIGURED.get(faults)
        if injection is None:
            parsed = parse_rules(list(faults))
            _check_devices(parsed)
            injection = _CONFIGURED[faults] = Injection(parsed, "HETERO_FAULTS/config faults")
            injection_report.applied(faults)
            injection.active = True
        injection_report.watch(injection)  # a valid configured rule: reported at exit if it never fires
        return injection


def torch_injections() -> list[Injection]:
    """The active injections (configured and :func:`inject` blocks) with a rule for torch ops."""
    return injections_for(TORCH_OP)


def any_rules() -> bool:
    """Whether any injection exists (configured, or an inject() block): a hot path's lock-free check
    before it asks :func:`injections_for`."""
    return bool(_ACTIVE) or bool(_CONFIGURED)


def injections_for(op: str) -> list[Injection]:
    """The active injections (configured and :func:`inject` blocks) with a rule for ``op``."""
    with _LOCK:
        return [inj for inj in (*_CONFIGURED.values(), *_ACTIVE)
                if inj.active and any(rule.op == op for rule in inj.rules)]


def fault_error(runtime: DeviceRuntime, rule: Rule) -> BaseException:
    """The error a fired error rule raises: ``runtime``'s own native error of the rule's kind or
    vendor code, marked injected (what a call-site boundary outside the runtime, such as
    :mod:`hetero.fault.injection_infer`, raises)."""
    return _error(runtime, rule, rule.what.kind, rule.what.code, rule.what.xid)


def active() -> bool:
    """Whether any :func:`inject` block is in effect (the registry's cheap check)."""
    return bool(_ACTIVE)


def wrapped_methods(runtime: DeviceRuntime) -> list[str]:
    """The runtime methods injection has wrapped on this instance (empty when injection is off)."""
    return [m for m in _INJECTED_METHODS if m in vars(runtime)]


__all__ = ["OPS", "FaultRecord", "Injection", "active", "announce", "any_rules", "apply_at_open", "configured", "configured_injection",
           "fault_error", "inject", "injections_for", "process_fault", "torch_injections", "wrapped_methods"]


RUNTIMES_OPENED.register(apply_at_open)  # the registry calls it as each backend opens (see hetero.core.hooks)
