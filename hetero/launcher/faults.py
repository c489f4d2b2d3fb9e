"""What a worker's end means to ``hetero-run``: the fault class of its exit status or fault
report (:func:`diagnose`), whether its device goes into quarantine, and whether it is restarted
(:func:`restartable`).

A device fault is restarted: a fault report (exit status 86), a crash by a signal, a hang. An
``error`` (any other non-zero exit: an exception of the program, which the bootstrap names in
an exception report, or the program's own ``sys.exit(N)``) is the program's, so restarting it
would only fail again: it ends the run unless ``--restart-on any`` (torchrun's default too).

The worker bootstrap classifies the error before it writes the report (``fault_class``,
``quarantine``, ``ttl``). When a report lacks the verdict (an older or foreign bootstrap, or
one whose classifier failed), the launcher rebuilds the hetero error from the report's
fields and runs :func:`hetero.fault.classify` itself; failing that, the class decides:
context-corrupting, device-lost and degraded devices are quarantined.

A report is a file a worker (any program) wrote, so nothing in it is trusted: only plain
fields are kept (:func:`sanitize_report`: nested values dropped, text cut short), and a
verdict with a field out of its domain (an unknown class, a ``quarantine`` that is not a
bool, a ``ttl`` that is not a non-negative number) is ignored, the report classified again.
"""

from __future__ import annotations

import math
import signal
from collections.abc import Mapping
from typing import Any, NamedTuple

from hetero.fault.protocol import FAULT_EXIT_CODE

QUARANTINE_CLASSES = ("context-corrupting", "device-lost", "degraded")
#: The fault class of a failure of the program itself (not a device fault).
ERROR = "error"
FAULT_CLASSES = ("recoverable", *QUARANTINE_CLASSES)
#: The longest text kept of a report's field (a message goes into events, logs and the quarantine).
MAX_TEXT = 2000
_INT_FIELDS = ("code", "xid", "pid")
#: The report's fields a ``fault_detected`` event carries.
_EVENT_FIELDS = ("error_type", "code", "code_name", "xid", "injected", "message", "action", "torch_device")


class Verdict(NamedTuple):
    fault_class: str
    quarantine: bool
    ttl: float | None


def sanitize_report(report: Mapping[Any, Any]) -> dict[str, Any]:
    """The plain fields of ``report``: str keys whose values are None, bool, int, float or str
    (cut to :data:`MAX_TEXT` characters); ``code``/``xid``/``pid`` only as ints."""
    clean: dict[str, Any] = {}
    for key, value in report.items():
        if not isinstance(key, str) or not (value is None or isinstance(value, (bool, int, float, str))):
            continue
        if key in _INT_FIELDS and not (value is None or (isinstance(value, int) and not isinstance(value, bool))):
            continue
        clean[key] = value[:MAX_TEXT] if isinstance(value, str) else value
    return clean


def _ttl(value: Any) -> tuple[bool, float | None]:
    """Whether ``value`` is a valid quarantine TTL (None: no expiry), and that TTL."""
    if value is None:
        return True, None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value) or value < 0:
        return False, None
    return True, float(value)


def classify_report(report: Mapping[str, Any]) -> Verdict:
    """The verdict on a fault report (see the module docstring)."""
    report = sanitize_report(report)
    fault_class, wants = report.get("fault_class"), report.get("quarantine")
    ttl_ok, ttl = _ttl(report.get("ttl"))
    if fault_class in FAULT_CLASSES and isinstance(wants, bool) and ttl_ok:
        return Verdict(str(fault_class), wants, ttl)
    result = _classify_again(report)
    if result is not None:
        return result
    fault_class = fault_class if fault_class in FAULT_CLASSES else "context-corrupting"  # fatal, of unknown kind
    return Verdict(str(fault_class), fault_class in QUARANTINE_CLASSES, ttl)


def _classify_again(report: Mapping[str, Any]) -> Verdict | None:
    try:
        from hetero.core import errors
        from hetero.fault import classify

        kind = getattr(errors, str(report.get("error_type")), None)
        if not (isinstance(kind, type) and issubclass(kind, errors.DeviceError)):
            kind = errors.DeviceError
        error = kind(str(report.get("message") or "device error"), backend=str(report.get("backend") or ""),
                     device=str(report.get("device") or ""), code=report.get("code"),
                     code_name=report.get("code_name"), xid=report.get("xid"),
                     injected=bool(report.get("injected")))
        result = classify(error, events=())
    except Exception:  # noqa: BLE001 - the classifier or an error class that will not rebuild: use the class
        return None
    fault_class = getattr(result.fault_class, "value", result.fault_class)
    if fault_class == "none":  # too little in the report to tell: the bootstrap judged it fatal
        return None
    return Verdict(str(fault_class), bool(result.quarantine), result.ttl)


def signal_name(code: int) -> str | None:
    """``SIGKILL`` for an exit status of -9; None for a normal exit."""
    try:
        return signal.Signals(-code).name if code < 0 else None
    except ValueError:
        return f"signal {-code}"


def exit_reason(code: int) -> str:
    """What an exit status says before any report is read: ``ok`` (0), ``fault`` (the bootstrap's
    :data:`~hetero.fault.protocol.FAULT_EXIT_CODE`), ``crash`` (killed by a signal) or ``error``."""
    return "ok" if code == 0 else "fault" if code == FAULT_EXIT_CODE else "crash" if code < 0 else "error"


class Diagnosis(NamedTuple):
    """What the supervisor makes of a failed incarnation."""

    fault_class: str  # a taxonomy class (from the report), or hang, crash, fault, error
    fields: dict[str, Any]  # for the ``fault_detected`` event: the report's, or how the process ended
    verdict: Verdict | None  # the report's verdict (whether to quarantine its device); None without a report


def diagnose(code: int, reason: str, report: Mapping[str, Any] | None) -> Diagnosis:
    """The fault class of an incarnation that ended with exit status ``code`` for ``reason`` (``hang``
    when the supervisor killed it for silence, else :func:`exit_reason`), given what it wrote at
    ``$HETERO_FAULT_REPORT`` (None: nothing): for :data:`~hetero.fault.protocol.FAULT_EXIT_CODE` its
    fault report; for another exit status the exception report of the program's own error."""
    if report is not None and code == FAULT_EXIT_CODE:
        verdict = classify_report(report)
        return Diagnosis(verdict.fault_class, {key: report.get(key) for key in _EVENT_FIELDS}, verdict)
    if reason == "hang":
        return Diagnosis("hang", {}, None)
    if code < 0:
        return Diagnosis("crash", {"message": f"killed by {signal_name(code) or code}"}, None)
    if code == FAULT_EXIT_CODE:
        return Diagnosis("fault", {"message": f"exit status {code} without a fault report"}, None)
    if report is not None and report.get("exception") is True and isinstance(report.get("error_type"), str):
        return Diagnosis(ERROR, {"error_type": report["error_type"], "message": report.get("message")}, None)
    return Diagnosis(ERROR, {"message": f"exit status {code}"}, None)


def restartable(fault_class: str, restart_on: str) -> bool:
    """Whether a failure of ``fault_class`` restarts its worker under ``--restart-on restart_on``:
    every failure for ``any``; for ``fault`` (the default) all but the program's own :data:`ERROR`."""
    return restart_on == "any" or fault_class != ERROR
