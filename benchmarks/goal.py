"""One benchmark goal as the results files state it (:class:`Goal`), and the small judging and
formatting helpers the adapters in ``goals_compute.py`` and ``goals_runtime.py`` share.

A goal is judged from the numbers in its results file; a benchmark's own pass/fail flag is read
only where the numbers alone do not say which way the goal points.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

Status = Literal["PASS", "MISS", "INFO", "N/A"]
#: PASS and MISS are measured goals; INFO rows carry no goal; N/A: this machine cannot measure it
#: (a device it lacks, a GPU-only goal, a --quick run that stops short of the goal's size).
STATUSES: tuple[Status, ...] = ("PASS", "MISS", "INFO", "N/A")
#: Issue 19, "performance as a user feels it": its acceptance is PASS for each of its goals this
#: machine measures, in one ``run_all``.
PERFORMANCE = 19
# How the benchmarks spell their verdicts, lower-cased.
_FLAGS: dict[str, Status] = {
    "pass": "PASS", "passed": "PASS", "met": "PASS", "true": "PASS",
    "fail": "MISS", "failed": "MISS", "miss": "MISS", "missed": "MISS", "false": "MISS",
    "information": "INFO", "info": "INFO",
    "not measured": "N/A", "skip": "N/A", "skipped": "N/A", "none": "N/A", "no-cuda-device": "N/A",
}


@dataclass(frozen=True)
class Goal:
    """One row of the summary: what was measured, the figure, the goal it is held to, the verdict."""

    benchmark: str
    what: str
    measured: str
    goal: str
    status: Status
    #: The issue whose acceptance this goal is (``run_all`` gives each such issue its own verdict
    #: line); None: a goal of the benchmark's own, from an issue already closed.
    issue: int | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"goal {self.what!r} of {self.benchmark}: status {self.status!r} is not one of {', '.join(STATUSES)}")

    @property
    def measurable(self) -> bool:
        """Whether this row is a goal this machine measured (PASS or MISS)."""
        return self.status in ("PASS", "MISS")


# -- judging --------------------------------------------------------------------------
def at_least(value: float | None, target: float) -> Status:
    return "N/A" if value is None else "PASS" if value >= target else "MISS"


def at_most(value: float | None, target: float) -> Status:
    return "N/A" if value is None else "PASS" if value <= target else "MISS"


def below(value: float | None, target: float) -> Status:
    return "N/A" if value is None else "PASS" if value < target else "MISS"


def from_flag(flag: object) -> Status:
    """A benchmark's own verdict (``"pass"``, ``"fail"``, ``"information"``, ``True``...) as a status."""
    key = str(flag).strip().lower()
    if key not in _FLAGS:
        raise ValueError(f"unknown verdict {flag!r} (known: {', '.join(sorted(_FLAGS))})")
    return _FLAGS[key]


def worst(statuses: list[Status]) -> Status:
    """One status for a row that stands for several measurements: any MISS misses, any PASS passes."""
    order: tuple[Status, ...] = ("MISS", "PASS", "INFO")
    return next((status for status in order if status in statuses), "N/A")


def missing_devices(benchmark: str, what: str, missing: Mapping[str, Any] | None) -> list[Goal]:
    """One N/A row per device the benchmark wanted and this machine lacks (``what`` names ``{device}``)."""
    return [Goal(benchmark, what.format(device=name), "device missing", str(reason).splitlines()[0] if reason else "", "N/A")
            for name, reason in (missing or {}).items()]


# -- formatting -----------------------------------------------------------------------
def ratio(value: float | None, goal: float | None = None) -> str:
    """``value`` as ``1.23x``; with one more digit where it and ``goal`` (the bound it is held to)
    would read the same but are not (0.947 against 0.95 reads 0.947x, not 0.95x beside a MISS)."""
    if value is None:
        return "-"
    if abs(value) >= 100:
        return f"{value:,.0f}x"
    shown = f"{value:.1f}x" if abs(value) >= 10 else f"{value:.2f}x"
    if goal is not None and value != goal and shown == ratio(goal):
        return f"{value:.3g}x" if abs(value) < 10 else f"{value:.2f}x"
    return shown


def duration(seconds: float | None, signed: bool = False) -> str:
    """``1.9 us``, ``53 us``, ``4.5 ms``, ``0.35 s``, ``12.8 s``; ``signed`` adds a ``+`` to gains."""
    if seconds is None:
        return "-"
    sign = "+" if signed and seconds >= 0 else "-" if seconds < 0 else ""
    size = abs(seconds)
    for unit, scale in (("us", 1e-6), ("ms", 1e-3)):
        if size < scale * 1e3:
            shown = size / scale
            return f"{sign}{shown:.1f} {unit}" if shown < 10 else f"{sign}{shown:.0f} {unit}"
    return f"{sign}{size:.2f} s" if size < 10 else f"{sign}{size:.1f} s"


def percent(value: float | None, signed: bool = True) -> str:
    if value is None:
        return "-"
    return f"{value * 100:+.1f}%" if signed else f"{value * 100:.1f}%"


def count(n: int) -> str:
    """``64 Mi``, ``4 Ki``, ``2 Gi`` for exact binary multiples, else the number itself."""
    for unit, scale in (("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)):
        if n >= scale and n % scale == 0:
            return f"{n // scale} {unit}"
    return str(n)


def size(nbytes: int) -> str:
    """``64 MiB``, ``1 KiB``, ``512 B``."""
    text = count(nbytes)
    return f"{text}B" if not text.isdigit() else f"{text} B"


def median(timing: Mapping[str, Any] | None) -> float | None:
    """The ``median_s`` of a timing record (``measure`` or ``run_stats``), or None without one."""
    return None if timing is None else float(timing["median_s"])
