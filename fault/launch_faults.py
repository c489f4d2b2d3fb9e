"""What a worker's fault report means to ``hetero-run``: its fault class, and whether its
device goes into quarantine.

The worker bootstrap classifies the error before it writes the report (``fault_class``,
``quarantine``, ``ttl``). When a report lacks the verdict (an older or foreign bootstrap, or
one whose classifier failed), the launcher rebuilds the hetero error from the report's
fields and runs :func:`hetero.fault.classify` itself; failing that, the class decides:
context-corrupting, device-lost and degraded devices are quarantined.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

QUARANTINE_CLASSES = ("context-corrupting", "device-lost", "degraded")


class Verdict(NamedTuple):
    fault_class: str
    quarantine: bool
    ttl: float | None


def classify_report(report: Mapping[str, Any]) -> Verdict:
    """The verdict on a fault report (see the module docstring)."""
    fault_class, wants, ttl = report.get("fault_class"), report.get("quarantine"), report.get("ttl")
    if fault_class and wants is not None:
        return Verdict(str(fault_class), bool(wants), ttl)
    result = _classify_again(report)
    if result is not None:
        return result
    fault_class = str(fault_class or "context-corrupting")  # a fatal device error of unknown kind
    return Verdict(fault_class, fault_class in QUARANTINE_CLASSES, ttl)


def _classify_again(report: Mapping[str, Any]) -> Verdict | None:
    try:
        from hetero import errors
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
