"""How ``hetero top`` draws a :class:`~hetero.cli.top_gather.Frame` with rich: a table of devices,
the quarantine, a run's workers, and each metrics endpoint's numbers ("—" where a source has no
number, the reason where an endpoint did not answer)."""

from __future__ import annotations

import time
from collections.abc import Iterable

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from hetero.cli.top_devices import duration
from hetero.cli.top_endpoint import EndpointView
from hetero.cli.top_gather import Frame
from hetero.cli.top_run_dir import RunReading, WorkerRow

NONE = "—"  # a number the source does not give
HEALTH_STYLE = {"ok": "green", "degraded": "yellow", "unhealthy": "bold red", "unknown": "dim"}
STATE_STYLE = {"healthy": "green", "starting": "cyan", "restarting": "yellow", "succeeded": "green",
               "failed": "bold red", "stopped": "dim"}


def render(frame: Frame, interval: float | None = None) -> RenderableType:
    """The whole view of ``frame``; ``interval``: the refresh shown in the header (None: one frame)."""
    when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(frame.taken))
    refresh = f"  refresh {interval:g} s  q quits" if interval is not None else ""
    parts: list[RenderableType] = [Text(f"hetero top  {when}{refresh}", style="bold"),
                                   devices_table(frame), quarantine_table(frame)]
    if frame.run is not None or frame.workers or any(view.is_run for view in frame.endpoints):
        parts.append(workers_table(frame.workers, frame.run, frame.endpoints))
    parts += [endpoint_view(view) for view in frame.endpoints]
    parts += [Text(note, style="yellow") for note in frame.notes]
    return Group(*parts)


def _table(title: str, columns: Iterable[str]) -> Table:
    table = Table(title=title or None, title_justify="left", title_style="bold")
    for column in columns:
        table.add_column(column, no_wrap=column in ("device", "stable id"))
    return table


def _gib(nbytes: float) -> str:
    return f"{nbytes / 2**30:.1f}"


def _number(value: float | None, pattern: str = "{:g}") -> str:
    return NONE if value is None else pattern.format(value)


def devices_table(frame: Frame) -> Table:
    table = _table("Devices", ["device", "vendor", "kind", "health", "used / total GiB", "launches"])
    for row in frame.devices:
        style = HEALTH_STYLE.get(row.health.split(" ", 1)[0], "")
        health = Text(row.health, style=style)
        if row.quarantined:
            health.append(", quarantined", style="bold red")
        used = NONE if row.memory_used is None else _gib(row.memory_used)
        table.add_row(row.name, row.vendor, row.kind, health, f"{used} / {_gib(row.memory_total)}",
                      _number(row.launches, "{:d}"))
    if not frame.devices:
        table.add_row("no devices found", "", "", "", "", "")
    return table


def quarantine_table(frame: Frame) -> RenderableType:
    if not frame.quarantine:
        return Group(Text("Quarantine", style="bold"), Text("no device is quarantined", style="dim"))
    table = _table("Quarantine", ["device", "stable id", "class", "time left", "reason"])
    for row in frame.quarantine:
        scope = " (drill)" if row.drill else ""
        table.add_row(row.name + scope, row.stable_id, row.fault_class, row.time_left(frame.taken), row.reason)
    return table


def workers_table(workers: tuple[WorkerRow, ...], run: RunReading | None,
                  endpoints: tuple[EndpointView, ...]) -> RenderableType:
    live = next((view for view in endpoints if view.is_run), None)
    facts = []
    if run is not None:
        facts.append(str(run.run_dir))
    restarts = live.restarts if live is not None and live.restarts is not None else (run.restarts if run else None)
    faults = live.faults if live is not None and live.faults is not None else (run.faults if run else None)
    facts += [f"restarts {_number(restarts)}", f"faults {_number(faults)}"]
    if live is not None and live.goodput is not None:
        facts.append(f"goodput {live.goodput:.0%}")
    if run is not None and run.ended:
        facts.append(run.ended)
    table = _table("", ["rank", "device", "state", "heartbeat age", "step", "restarts"])
    for row in workers:
        age = NONE if row.heartbeat_age is None else duration(row.heartbeat_age) if row.heartbeat_age >= 60 \
            else f"{row.heartbeat_age:.1f}s"
        table.add_row(str(row.rank), row.device, Text(row.state, style=STATE_STYLE.get(row.state, "yellow")), age,
                      _number(row.step, "{:d}"), _number(row.restarts, "{:d}"))
    if not workers:
        table.add_row(NONE, "", "no worker seen yet", "", "", "")
    notes = [Text(run.note, style="yellow")] if run is not None and run.note else []
    return Group(Text("hetero-run", style="bold").append("  " + "  ".join(facts), style=""), table, *notes)


def endpoint_view(view: EndpointView) -> RenderableType:
    head = Text(f"Metrics {view.url}", style="bold")
    if view.error is not None:
        return Group(head, Text(view.error, style="red"))
    if view.build:
        head.append(f"  {view.build}", style="dim")
    parts: list[RenderableType] = [head]
    if view.models:
        models = _table("hetero serve", ["model", "requests", "requests/s", "failed/s", "in flight"])
        for row in view.models:
            models.add_row(row.model, f"{row.requests:g}", _number(row.rate, "{:.1f}"),
                           _number(row.failed_rate, "{:.1f}"), _number(row.inflight))
        parts.append(models)
    if view.members:
        members = _table("pool members", ["member", "device", "healthy", "requests"])
        for member in view.members:
            members.add_row(member.member, member.device, Text("yes", style="green") if member.healthy
                            else Text("no", style="bold red"), f"{member.requests:g}")
        parts.append(members)
    if view.quarantined:
        parts.append(Text("quarantined by the run: " + ", ".join(sorted(view.quarantined)), style="red"))
    if not (view.is_run or view.is_server):
        parts.append(Text("no hetero-run or hetero serve metrics here", style="dim"))
    return Group(*parts)
