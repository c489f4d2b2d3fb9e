"""What a compiled model ran where: per ATen operation, the calls hetero ran (lowered) and the
calls torch ran on the host, with the reason; per graph, whether it replays a launch plan."""

from __future__ import annotations

import dataclasses
import threading
from typing import Any


@dataclasses.dataclass
class OpCount:
    """One ATen operation's calls: ``lowered`` on the device, ``host`` in torch (``reasons``)."""

    lowered: int = 0
    host: int = 0
    reasons: set[str] = dataclasses.field(default_factory=set)


class Report:
    """The counts of every graph compiled for one model (:func:`hetero.torch.explain` prints it)."""

    def __init__(self, device: str) -> None:
        self.device = device
        self.ops: dict[str, OpCount] = {}
        self.graphs: list[dict[str, Any]] = []
        self._lock = threading.Lock()

    def count(self, op: str, host_reason: str | None = None) -> None:
        with self._lock:
            entry = self.ops.setdefault(op, OpCount())
            if host_reason is None:
                entry.lowered += 1
            else:
                entry.host += 1
                entry.reasons.add(host_reason)

    def graph(self, **facts: Any) -> dict[str, Any]:
        with self._lock:
            self.graphs.append(facts)
            return facts

    @property
    def host_ops(self) -> dict[str, OpCount]:
        """The operations that ran in torch on the host at least once."""
        return {op: c for op, c in self.ops.items() if c.host}

    def as_dict(self) -> dict[str, Any]:
        return {"device": self.device, "graphs": list(self.graphs),
                "ops": {op: {"lowered": c.lowered, "host": c.host, "reasons": sorted(c.reasons)}
                        for op, c in sorted(self.ops.items())}}

    def __str__(self) -> str:
        lines = [f"hetero torch backend on {self.device}: {len(self.graphs)} graph(s)"]
        for g in self.graphs:
            lines.append(f"  graph {g.get('name')}: {g.get('nodes')} operations, "
                         f"{'one launch plan (hetero.jit)' if g.get('jit') else 'eager: ' + str(g.get('eager_because'))}")
        width = max((len(op) for op in self.ops), default=10)
        for op, c in sorted(self.ops.items()):
            where = f"{c.lowered:>6} lowered" + (f", {c.host} on the host: {'; '.join(sorted(c.reasons))}" if c.host else "")
            lines.append(f"  {op:<{width}}  {where}")
        return "\n".join(lines)


__all__ = ["OpCount", "Report"]
