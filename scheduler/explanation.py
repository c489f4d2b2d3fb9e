"""Why a placement went where it went: every candidate with its score or the reason it was
rejected, and what made the winner win. ``str(explanation)`` is a stable table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from typing import Any

from hetero.core.errors import DeviceNotFoundError
from hetero.scheduler.policies import Key, Predictions, Ranking, StaticEstimate
from hetero.scheduler.request import Request, format_size

_COLUMNS = ("rank", "device", "kind", "health", "memory", "used", "tasks", "score", "note")


@dataclasses.dataclass(frozen=True)
class Row:
    """One candidate in an explanation; ``rank`` is None for rejected ones, whose ``note`` says why."""

    rank: int | None
    device: str
    kind: str
    health: str
    memory: int
    used: int
    tasks: int
    score: str
    note: str

    def cells(self) -> tuple[str, ...]:
        return ("-" if self.rank is None else str(self.rank), self.device, self.kind, self.health,
                format_size(self.memory), format_size(self.used), str(self.tasks), self.score, self.note)


@dataclasses.dataclass(frozen=True)
class Explanation:
    """A placement decision laid out: ``rows`` (eligible best first, then rejected),
    ``winner`` (a device name, or None), ``why`` (one sentence) and ``queued`` (the
    request would wait for a held device rather than fail)."""

    policy: str
    request: Request
    rows: tuple[Row, ...]
    winner: str | None
    why: str
    queued: bool = False
    #: Which model scored the devices, for policies that use one (``fastest``): the cost
    #: model and the figures, or the static estimate and why; "" for the others.
    model: str = ""

    def __str__(self) -> str:
        cells = [_COLUMNS, *(row.cells() for row in self.rows)]
        widths = [max(len(line[i]) for line in cells) for i in range(len(_COLUMNS))]
        table = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in cells]
        model = [f"model: {self.model}"] if self.model else []
        return "\n".join([f"placement by {self.policy} for {self.request.describe()}", *table, self.why, *model])

    def as_dict(self) -> dict[str, Any]:
        return {"policy": self.policy, "request": dataclasses.asdict(self.request), "winner": self.winner,
                "why": self.why, "queued": self.queued, "model": self.model,
                "rows": [dataclasses.asdict(row) for row in self.rows]}


class NoDeviceAvailable(DeviceNotFoundError):
    """No device qualifies for a placement request. ``queued`` is True when the only obstacle
    is devices held by other tasks (priority policy): the request may wait and retry.
    ``explanation`` (in the raising process) has every candidate and its reason."""

    def __init__(self, spec: str, valid: Iterable[str], detail: str = "", queued: bool = False) -> None:
        super().__init__(spec, valid, detail)
        self.queued = queued
        self.explanation: Explanation | None = None

    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.spec, self.valid, self.detail, self.queued))

    @classmethod
    def from_explanation(cls, explanation: Explanation, spec: str = "auto") -> NoDeviceAvailable:
        rejected = "; ".join(f"{row.device} {row.note.removeprefix('rejected: ')}" for row in explanation.rows)
        detail = f"{explanation.why} ({rejected})" if rejected else explanation.why
        error = cls(spec, [row.device for row in explanation.rows], detail, explanation.queued)
        error.explanation = explanation
        return error


def _difference(winner: Key, other: Key) -> str:
    # Keys are (preference, health rank, policy score, order, name, stable id, position).
    if winner[0] != other[0]:
        return "the request prefers its kind/vendor/backend"
    if winner[1] != other[1]:
        return "it is healthier"
    if winner[2] != other[2]:
        return "a better score"
    if winner[2] == ():  # the policy has no score of its own (first-fit)
        return "the configured device order"
    return "a tie on score, broken by the configured device order"


def explanation(ranking: Ranking) -> Explanation:
    """Lay out a :class:`Ranking` for people (and tests)."""
    policy, context = ranking.policy, ranking.context
    rows = [Row(position, c.name, str(c.info.kind), str(c.health), c.info.memory, c.used, c.tasks,
                policy.describe(c, key[2], context), "winner" if position == 1 else "")
            for position, (key, c) in enumerate(ranking.ranked, 1)]
    rows += [Row(None, c.name, str(c.info.kind), str(c.health), c.info.memory, c.used, c.tasks, "", f"rejected: {reason}")
             for c, reason in ranking.rejected]
    winner = ranking.winner
    if winner is not None:
        why = f"{winner.name} won: {policy.name} {policy.summary}; {rows[0].score or 'eligible'}"
        if len(ranking.ranked) > 1:
            runner_key, runner = ranking.ranked[1]
            why += f"; ahead of {runner.name} ({rows[1].score or 'eligible'}) by {_difference(ranking.ranked[0][0], runner_key)}"
        if isinstance(context, StaticEstimate):
            why += f" (static speed estimate: {context.reason})"
    elif ranking.queued:
        why = (f"queued: every device that fits is held by other tasks ({policy.name} policy, "
               f"priority {ranking.request.priority}); it frees when they end")
    elif not ranking.rejected:
        why = "no device to choose from"
    else:
        why = f"no eligible device: all {len(ranking.rejected)} rejected"
    if isinstance(context, Predictions):
        model = context.model
    elif isinstance(context, StaticEstimate):
        model = f"static speed estimate (compute units x kind weight), because {context.reason}"
    else:
        model = ""
    return Explanation(policy.name, ranking.request, tuple(rows), winner.name if winner else None, why, ranking.queued,
                       model)
