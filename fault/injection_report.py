"""What fault injection tells at the end of a drill: the rules that never fired.

A rule that never fired (a typo'd trigger, a device the work never used, work that never went
through hetero, a ``torch`` rule whose device's tensors no torch op touched) is named in a warning with the calls it saw, so that a drill that tested nothing
does not pass for one: a :func:`~hetero.fault.inject` block's rules when the block ends, the
configured ones (``HETERO_FAULTS``, ``hetero-run --inject``) when the process exits. Under ``hetero-run`` a rule belongs to the run: each fire is noted
in the run's directory (beside its drill quarantine), and a later worker (a restart on another
device) does not report a rule an earlier one fired.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hetero.fault.injection import Injection

log = logging.getLogger("hetero.fault.injection")

FIRED_FILE_NAME = "faults-fired.txt"
_lock = threading.Lock()
_watched: list[Injection] = []  # every injection of the process
_applied: set[tuple[str, ...]] = set()  # configured rule sets applied to an opened backend (see applied)


def watch(injection: Injection) -> None:
    """Report ``injection``'s unfired rules when the process exits."""
    with _lock:
        if not _watched:
            atexit.register(report_unfired)
        if injection not in _watched:
            _watched.append(injection)


def applied(faults: tuple[str, ...]) -> None:
    """Note that the configured rules ``faults`` were applied to a backend as it opened."""
    with _lock:
        _applied.add(faults)


def forget(injection: Injection) -> None:
    """Stop watching ``injection`` (its block ended and was reported)."""
    with _lock:
        if injection in _watched:
            _watched.remove(injection)


def watched() -> list[Injection]:
    """The injections whose unfired rules will be reported at exit."""
    with _lock:
        return list(_watched)


def _run_file() -> Path | None:
    from hetero.fault.quarantine import drill_store

    store = drill_store()
    return None if store is None else store.with_name(FIRED_FILE_NAME)


def fired_in_run(rule: str) -> None:
    """Under hetero-run, note that ``rule`` fired (one line, appended: before a crash rule's SIGKILL)."""
    path = _run_file()
    if path is not None:
        with contextlib.suppress(OSError), open(path, "a", encoding="utf-8") as handle:
            handle.write(rule.replace("\n", " ") + "\n")


def _fired_in_run() -> set[str]:
    path = _run_file()
    try:
        return set(path.read_text(encoding="utf-8").splitlines()) if path is not None else set()
    except (OSError, UnicodeDecodeError):
        return set()


def unfired(injections: Sequence[Injection] | None = None) -> list[str]:
    """One line per rule that never fired in this process (nor, under hetero-run, in its run):
    of ``injections``, or of every watched one and the configured rules."""
    told: list[str] = []
    in_run = _fired_in_run()
    for injection in watched() if injections is None else injections:
        for rule in injection.rules:
            if injection.count(rule.text) or rule.text in in_run:
                continue
            seen = injection.calls(rule)
            where = ", ".join(f"{calls} on {device}" for device, calls in seen.items()) or "none: no device it names was opened"
            told.append(f"{rule.text!r} ({injection.source}; {rule.op} calls seen: {where})")
    if injections is not None:
        return told
    with contextlib.suppress(Exception):  # HETERO_FAULTS set, but no backend ever opened to apply it
        from hetero.core.config import get_config

        faults = get_config().faults
        if faults and faults not in _applied:
            told += [f"{rule!r} (HETERO_FAULTS/config faults; no hetero device was opened)" for rule in faults
                     if rule not in in_run]
    return told


def report_unfired(injections: Sequence[Injection] | None = None) -> None:
    """Warn about every rule :func:`unfired` names (with no argument: registered with atexit)."""
    try:
        lines = unfired(injections)
    except Exception:  # noqa: BLE001 - an exit report must never turn a clean exit into a traceback
        log.debug("the report of unfired fault rules failed", exc_info=True)
        return
    for line in lines:
        log.warning("fault rule %s never fired in process %d: injection only reaches hetero operations "
                    "(kernel launches, copies, allocations, syncs and health queries through hetero's "
                    "backends) and, for the torch op, torch ops on tensors of the devices a rule names; check "
                    "its device, op and trigger", line, os.getpid())
