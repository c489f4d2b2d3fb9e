"""Fault-injection rules: the ``DEVICE:OP:TRIGGER:WHAT`` syntax, parsed into :class:`Rule`, and
the per-device trigger state that decides which call a rule fires on.

Examples::

    oneapi:0:launch:nth=300:lost          the 300th kernel launch on oneapi:0 loses the device
    cpu:alloc:every=5:oom                 every 5th allocation on the CPU runs out of memory
    *:copy:p=0.01,seed=7:cuda:700         1% of copies on CUDA devices, reproducibly (seed 7)
    opencl:*:launch:nth=2:crash           the process SIGKILLs itself at the 2nd launch
    cpu:launch:nth=40:hang:2s             the 40th launch holds the process for 2 seconds
    cuda:0:sync:nth=1:xid:79              an Xid 79 health event, and the device-lost error
    oneapi:0:health:nth=3:degraded        health() reports DEGRADED from the 3rd call on
    cuda:0:torch:nth=50:sticky            the 50th torch op on cuda:0's tensors: an illegal memory access
    cpu:infer:p=0.01,seed=3:sticky        1% of ONNX Runtime inferences on the CPU (hetero.onnx), reproducibly

DEVICE is an ``fnmatch`` pattern over device names; DEVICE and WHAT may contain colons, so the
rule is split on the OP keyword. This module only parses and counts: applying rules to devices
is :mod:`hetero.fault.injection`.
"""

from __future__ import annotations

import dataclasses
import itertools
import random
import re
import threading

from hetero.core.errors import ConfigError, did_you_mean

#: Operations a rule can target, and the runtime methods each one covers. A copy between two
#: devices is one call on the runtime that does it (the non-host side: ``oneapi:0`` uploads from
#: ``cpu``), so it counts there; reading a host-memory array (``cpu``) calls no runtime at all.
#: ``torch`` covers no runtime method: torch ops on the device's torch tensors, counted at torch's
#: op boundary (:mod:`hetero.torch.injection`). ``infer`` neither: each ONNX Runtime
#: inference a :mod:`hetero.onnx` session runs on the device (:mod:`hetero.fault.injection_infer`).
OPS: dict[str, tuple[str, ...]] = {
    "launch": ("launch", "call_library"),  # a kernel, or a vendor library routine (CLBlast, cuBLAS, NumPy)
    "copy": ("upload", "download", "copy"),
    "alloc": ("allocate",),
    "sync": ("synchronize",),
    "health": ("health",),
    "torch": (),
    "infer": (),
}
#: The op whose rules fire in torch, not in a hetero backend.
TORCH_OP = "torch"
#: The op whose rules fire in hetero.onnx's sessions, before ONNX Runtime runs.
INFER_OP = "infer"

#: Fault kinds: the device backend's own native error of that kind (``runtime.fault_error(kind)``).
KINDS = ("lost", "sticky", "oom", "degraded")
#: Vendor-code families and the backends whose errors carry them.
VENDORS: dict[str, tuple[str, ...]] = {"cuda": ("cuda",), "hip": ("rocm",), "opencl": ("oneapi", "opencl")}
PROCESS_FAULTS = ("crash", "hang")
#: What a torch rule can do: torch's own error of that kind, or a process fault (no vendor code, no Xid).
TORCH_WHATS = (*KINDS, *PROCESS_FAULTS)
#: What an infer rule can do: the device's own error of a kind or a vendor code, or a process fault (no Xid:
#: an Xid is a health event of the GPU, which a health or launch rule drills).
INFER_WHATS = (*KINDS, "code", *PROCESS_FAULTS)
WHAT_CHOICES = (*KINDS, "cuda:CODE", "hip:CODE", "opencl:CODE", "xid:N", "crash", "hang", "hang:DURATION")
SYNTAX = "DEVICE:OP:TRIGGER:WHAT, e.g. 'oneapi:0:launch:nth=300:lost'"

_RULE = re.compile(r"^(?P<device>.+?):(?P<op>launch|copy|alloc|sync|health|torch|infer):(?P<trigger>[^:]*):(?P<what>.+)$")
_DURATION = re.compile(r"^(?P<value>\d+(?:\.\d*)?|\.\d+)(?P<unit>ms|s|m|h)?$")
_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, None: 1.0}


@dataclasses.dataclass(frozen=True)
class Trigger:
    """Which matching calls fire: exactly the ``nth``, every ``every``-th, or each with probability ``p``."""

    nth: int | None = None
    every: int | None = None
    p: float | None = None
    seed: int | None = None
    times: int | None = None  # at most this many fires

    def __str__(self) -> str:
        parts = [f"nth={self.nth}" if self.nth is not None else f"every={self.every}" if self.every is not None
                 else f"p={self.p}"]
        parts += [f"seed={self.seed}"] if self.seed is not None else []
        parts += [f"times={self.times}"] if self.times is not None else []
        return ",".join(parts)


@dataclasses.dataclass(frozen=True)
class What:
    """What a fired rule does. ``kind``: lost|sticky|oom|degraded, ``code`` (``vendor``, ``code``),
    ``xid`` (``xid``), ``crash`` or ``hang`` (``seconds``; None: forever)."""

    kind: str
    vendor: str | None = None
    code: int | None = None
    xid: int | None = None
    seconds: float | None = None


@dataclasses.dataclass(frozen=True)
class Rule:
    """One parsed rule; ``text`` is the rule as the user wrote it."""

    text: str
    device: str
    op: str
    trigger: Trigger
    what: What

    @property
    def methods(self) -> tuple[str, ...]:
        return OPS[self.op]

    def matches_backend(self, backend: str) -> bool:
        """Whether a device of ``backend`` can raise this rule's vendor code (always, without one)."""
        return self.what.vendor is None or backend in VENDORS[self.what.vendor]

    def __str__(self) -> str:
        return self.text


def _bad(rule: str, part: str, problem: str) -> ConfigError:
    return ConfigError(f"fault rule {rule!r}: {part} {problem} (syntax: {SYNTAX})")


def parse_rule(text: str) -> Rule:
    """Parse one rule; raises ConfigError naming the rule, the bad part and the valid choices."""
    rule = text.strip()
    match = _RULE.match(rule)
    if match is None:
        parts = rule.split(":")
        guesses = [did_you_mean(p, OPS) for p in parts if p and did_you_mean(p, OPS)]
        if len(parts) < 4:
            raise _bad(rule, "has", f"{len(parts)} part(s); expected DEVICE:OP:TRIGGER:WHAT"
                       + (guesses[0] if guesses else ""))
        raise _bad(rule, "names no operation;", f"valid operations: {', '.join(OPS)}"
                   + (guesses[0] if guesses else ""))
    device, op = match["device"], match["op"]
    trigger = _parse_trigger(rule, match["trigger"])
    what = _parse_what(rule, match["what"])
    if op == "health" and what.kind in ("oom", "code"):
        raise _bad(rule, f"WHAT {match['what']!r}", "cannot apply to op 'health'; health faults are lost, "
                   "sticky, degraded, xid:N, crash or hang")
    if op == TORCH_OP and what.kind not in TORCH_WHATS:
        raise _bad(rule, f"WHAT {match['what']!r}", "cannot apply to op 'torch'; torch faults are "
                   f"{', '.join(TORCH_WHATS)} (torch's own error of that kind), hang:DURATION")
    if op == INFER_OP and what.kind not in INFER_WHATS:
        raise _bad(rule, f"WHAT {match['what']!r}", "cannot apply to op 'infer'; inference faults are "
                   f"{', '.join(KINDS)}, cuda:CODE, hip:CODE, opencl:CODE, crash or hang:DURATION")
    if what.vendor is not None and not any(ch in device for ch in "*?["):
        backend = device.split(":", 1)[0]
        if backend not in VENDORS[what.vendor]:
            raise _bad(rule, f"WHAT {match['what']!r}", f"is a {what.vendor} error code but device {device!r} is a "
                       f"{backend} device; {what.vendor} codes apply to {', '.join(VENDORS[what.vendor])} devices"
                       + (" (the CPU has no vendor error codes: use lost, sticky, oom or degraded)"
                          if backend == "cpu" else ""))
    return Rule(rule, device, op, trigger, what)


def parse_rules(rules: str | Rule | list[str | Rule] | tuple[str | Rule, ...]) -> tuple[Rule, ...]:
    """One rule, a ``;``-separated string of rules, or a list of rules (strings or parsed)."""
    if isinstance(rules, Rule):
        return (rules,)
    items = [part for part in rules.split(";")] if isinstance(rules, str) else list(rules)
    parsed = tuple(item if isinstance(item, Rule) else parse_rule(item) for item in items
                   if isinstance(item, Rule) or item.strip())
    if not parsed:
        raise ConfigError(f"no fault rule given (syntax: {SYNTAX})")
    return parsed


def _positive_int(rule: str, key: str, value: str) -> int:
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number < 1:
        raise _bad(rule, f"trigger {key}={value!r}", "must be a whole number >= 1")
    return number


def _parse_trigger(rule: str, text: str) -> Trigger:
    fields: dict[str, str] = {}
    keys = ("nth", "every", "p", "seed", "times")
    for item in text.split(","):
        key, sep, value = item.strip().partition("=")
        if not sep or key not in keys:
            raise _bad(rule, f"trigger {text!r}", "is not nth=N, every=K or p=P (optionally ,seed=S and ,times=M)"
                       + did_you_mean(key, keys))
        if key in fields:
            raise _bad(rule, f"trigger {text!r}", f"gives {key} twice")
        fields[key] = value.strip()
    chosen = [key for key in ("nth", "every", "p") if key in fields]
    if len(chosen) != 1:
        raise _bad(rule, f"trigger {text!r}", "needs exactly one of nth=N, every=K, p=P")
    nth = _positive_int(rule, "nth", fields["nth"]) if "nth" in fields else None
    every = _positive_int(rule, "every", fields["every"]) if "every" in fields else None
    times = _positive_int(rule, "times", fields["times"]) if "times" in fields else None
    p = None
    if "p" in fields:
        try:
            p = float(fields["p"])
        except ValueError:
            p = -1.0
        if not 0.0 <= p <= 1.0:
            raise _bad(rule, f"trigger p={fields['p']!r}", "must be a probability between 0 and 1")
    seed = None
    if "seed" in fields:
        if p is None:
            raise _bad(rule, f"trigger {text!r}", "has a seed, which only p=P uses")
        try:
            seed = int(fields["seed"])
        except ValueError:
            raise _bad(rule, f"trigger seed={fields['seed']!r}", "must be an integer") from None
    return Trigger(nth, every, p, seed, times)


def parse_duration(text: str) -> float:
    """``2s``, ``500ms``, ``1.5m``, ``3`` (seconds) -> seconds; ValueError otherwise."""
    match = _DURATION.match(text.strip())
    if match is None:
        raise ValueError(f"bad duration {text!r}")
    return float(match["value"]) * _UNITS[match["unit"]]


def _parse_what(rule: str, text: str) -> What:
    head, _, tail = text.partition(":")
    if head in KINDS and not tail:
        return What(head)
    if head == "crash" and not tail:
        return What("crash")
    if head == "hang":
        if not tail:
            return What("hang")
        try:
            return What("hang", seconds=parse_duration(tail))
        except ValueError:
            raise _bad(rule, f"WHAT {text!r}", "has a bad duration; write hang:2s, hang:500ms, hang:1m, "
                       "or hang alone for forever") from None
    if head in VENDORS or head == "xid":
        try:
            code = int(tail)
        except ValueError:
            raise _bad(rule, f"WHAT {text!r}", f"needs an integer after '{head}:', e.g. "
                       + ("'xid:79'" if head == "xid" else "'opencl:-5'" if head == "opencl" else f"'{head}:700'")
                       ) from None
        if head == "xid":
            if code <= 0:
                raise _bad(rule, f"WHAT {text!r}", "needs a positive Xid number, e.g. 'xid:79'")
            return What("xid", xid=code)
        return What("code", vendor=head, code=code)
    raise _bad(rule, f"WHAT {text!r}", f"is not a fault; valid: {', '.join(WHAT_CHOICES)}"
               + did_you_mean(head, (*KINDS, *VENDORS, "xid", *PROCESS_FAULTS)))


class RuleState:
    """One rule's trigger state on one device: counts matching calls and decides which fire.

    ``p`` triggers draw from ``random.Random`` seeded with the rule's seed and the device name, so
    the same seed fires on the same calls in every run. Thread-safe: calls are numbered by an
    atomic counter, and only a call that fires takes the lock (the armed path stays short).
    """

    def __init__(self, rule: Rule, device: str) -> None:
        self.rule = rule
        self.device = device
        self.calls = 0
        self.fires = 0
        self.latched = False  # health faults stay once fired (a lost device does not come back)
        trigger = rule.trigger
        self._nth, self._every, self._p, self._times = trigger.nth, trigger.every, trigger.p or 0.0, trigger.times
        self._latches = rule.op == "health" and rule.what.kind not in PROCESS_FAULTS
        seed = trigger.seed
        self._random = random.Random(f"{seed}:{device}") if seed is not None else random.Random()
        self._counter = itertools.count(1)  # next() on it is atomic under the GIL
        self._lock = threading.Lock()

    def hit(self) -> int | None:
        """Count one matching call; the call number when the rule fires on it, else None."""
        call = self.calls = next(self._counter)
        if self.latched:
            pass
        elif self._nth is not None:
            if call != self._nth:
                return None
        elif self._every is not None:
            if call % self._every:
                return None
        elif self._random.random() >= self._p:
            return None
        with self._lock:
            if self._times is not None and self.fires >= self._times:
                return None
            self.fires += 1
            if self._latches:
                self.latched = True
        return call
