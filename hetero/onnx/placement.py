"""Which execution provider ONNX Runtime gave each node of a session, read when the session is made.

A provider ONNX Runtime binds can still be given none of the model's nodes, or some: it partitions
the graph by what each provider supports and hands the rest to the CPU provider, logging it at
best. ``get_providers()`` then lists the device's provider first either way: on ``oneapi:0``,
scikit-learn models ran entirely on ``CPUExecutionProvider`` while the session listed
``OpenVINOExecutionProvider``. ONNX Runtime (1.24 and later) records the assignment when the
session option :data:`RECORD` is on, and ``get_provider_graph_assignment_info()`` returns it: per
node, its op type and provider, known at load time, with no run and no log to parse. On an older
ONNX Runtime the placement is unknown (None), and only the bound providers are checked.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
from typing import Any

log = logging.getLogger("hetero.onnx")

#: The session option that makes ONNX Runtime record which provider each node went to.
RECORD = "session.record_ep_graph_assignment_info"


def supported(ort: Any) -> bool:
    """Whether this ONNX Runtime reports node placement."""
    return hasattr(ort.InferenceSession, "get_provider_graph_assignment_info")


def record(ort: Any, options: Any) -> None:
    """Ask ONNX Runtime to record the placement of the session made with ``options``."""
    if supported(ort):
        options.add_session_config_entry(RECORD, "1")


@dataclasses.dataclass(frozen=True)
class Placement:
    """Each node's ``(op_type, provider)``, in ONNX Runtime's order (after its graph rewrites, so a
    fused op appears under its fused name)."""

    nodes: tuple[tuple[str, str], ...]

    def by_op(self) -> dict[str, dict[str, int]]:
        """Op type -> provider -> how many such nodes it runs."""
        table: dict[str, collections.Counter[str]] = {}
        for op, provider in self.nodes:
            table.setdefault(op, collections.Counter())[provider] += 1
        return {op: dict(counts) for op, counts in table.items()}

    def count(self, provider: str) -> int:
        """How many nodes ``provider`` runs."""
        return sum(1 for _, where in self.nodes if where == provider)

    def off(self, provider: str) -> dict[str, int]:
        """Op type -> how many of its nodes went to a provider other than ``provider``."""
        return dict(collections.Counter(op for op, where in self.nodes if where != provider))

    def elsewhere(self, provider: str) -> list[str]:
        """The providers other than ``provider`` that run some node."""
        return sorted({where for _, where in self.nodes if where != provider})


def read(session: Any) -> Placement | None:
    """The placement of ``session`` (made with :func:`record`); None when ONNX Runtime cannot say."""
    if not hasattr(session, "get_provider_graph_assignment_info"):
        return None
    try:
        subgraphs = session.get_provider_graph_assignment_info()
    except Exception as exc:  # noqa: BLE001 - the option was off (a caller's own SessionOptions): unknown
        log.info("ONNX Runtime did not report where the session's nodes run: %s", exc)
        return None
    nodes = tuple((str(node.op_type), str(sub.ep_name)) for sub in subgraphs for node in sub.get_nodes())
    return Placement(nodes) if nodes else None


def describe(ops: dict[str, int]) -> str:
    """``{"Gemm": 2, "Relu": 1}`` as ``Gemm x2, Relu x1`` (sorted by op type)."""
    return ", ".join(f"{op} x{count}" for op, count in sorted(ops.items()))


__all__ = ["RECORD", "Placement", "describe", "read", "record", "supported"]
