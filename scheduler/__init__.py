"""Placement of work on devices by policy, quota and measured speed.

    >>> hetero.scheduler.place(memory="2GiB", policy="binpack")      # a Device
    >>> print(hetero.scheduler.explain(memory="2GiB", policy="binpack"))
    >>> with hetero.scheduler.task("train", quota={"cuda:0": "8GiB"}):
    ...     ...                                                      # allocations accounted, capped
    >>> hetero.scheduler.assign(4, "spread")                         # devices for 4 workers

Pure policy over device descriptors, health and usage: no vendor library, no I/O of its own
(the cost model keeps its samples in a :class:`hetero.core.files.JsonStore`). It sits on the ground
floor, backends and compiler; what it needs from the floors above (the quarantine, whom to tell
about quotas) it asks through hooks (:mod:`hetero.scheduler.inputs`). Names load on first use, so
``import hetero`` (whose allocator reads :mod:`hetero.scheduler.context`) pulls in only that.

May import: the ground floor (and through it nothing vendor-specific: a second contract forbids
every vendor library here).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hetero.scheduler.explanation import Explanation, NoDeviceAvailable, Row
    from hetero.scheduler.placement import (
        assign, auto_device, decide, explain, forget_decisions, get_cost_model, live_candidates, place, use_cost_model,
    )
    from hetero.scheduler.policies import KIND_WEIGHT, Policy, Ranking, get_policy, rank, static_speed
    from hetero.scheduler.quota import Task, current_task, set_process_task, task
    from hetero.scheduler.failover import replacement
    from hetero.scheduler.routing import ROUTING_POLICIES, Router
    from hetero.scheduler.request import PRIORITIES, Candidate, CostModel, Request, format_size, parse_size
    from hetero.scheduler.usage import LEDGER, DeviceLoad

_LAZY = {
    "explain": "placement", "place": "placement", "assign": "placement", "decide": "placement",
    "auto_device": "placement", "get_cost_model": "placement", "use_cost_model": "placement",
    "live_candidates": "placement", "forget_decisions": "placement",
    "Explanation": "explanation", "NoDeviceAvailable": "explanation", "Row": "explanation",
    "Policy": "policies", "Ranking": "policies", "get_policy": "policies", "rank": "policies",
    "static_speed": "policies", "KIND_WEIGHT": "policies",
    "Task": "quota", "task": "quota", "current_task": "quota", "set_process_task": "quota",
    "Request": "request", "Candidate": "request", "CostModel": "request", "PRIORITIES": "request",
    "parse_size": "request", "format_size": "request",
    "LEDGER": "usage", "DeviceLoad": "usage",
    "replacement": "failover",
    "Router": "routing", "ROUTING_POLICIES": "routing",
}


def __getattr__(name: str) -> object:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'hetero.scheduler' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"hetero.scheduler.{module}"), name)
    globals()[name] = value
    return value


__all__ = [
    "ROUTING_POLICIES", "Router",
    "KIND_WEIGHT", "LEDGER", "PRIORITIES", "Candidate", "CostModel", "DeviceLoad", "Explanation", "NoDeviceAvailable",
    "Policy", "Ranking", "Request", "Row", "Task", "assign", "auto_device", "current_task", "decide", "explain",
    "forget_decisions", "format_size", "get_cost_model", "get_policy", "live_candidates", "parse_size", "place", "rank",
    "replacement", "set_process_task", "static_speed", "task", "use_cost_model",
]
