"""Fault rules reach ONNX Runtime: a rule for the ``infer`` op (``cpu:infer:p=0.01,seed=3:sticky``,
``cuda:0:infer:nth=40:lost``) counts the inferences :mod:`hetero.onnx` runs on its device and,
when it fires, raises the device's own error of that kind (marked injected, so the quarantine it
causes stays within the drill) before ONNX Runtime runs: a pool or a server drills its failover
without a broken GPU. ONNX Runtime is a C++ library hetero does not wrap, so the boundary is the
session's ``run``, which calls :func:`check` once per inference.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from hetero.fault import injection as _injection
from hetero.fault.injection_rules import INFER_OP

if TYPE_CHECKING:
    from hetero.core.device import Device


def armed() -> bool:
    """Whether any active rule (configured or an ``inject`` block) targets inferences (cheap)."""
    return bool(_injection.injections_for(INFER_OP))


def check(device: Device, where: str = "onnxruntime run") -> None:
    """Count one inference on ``device``; when a rule fires, announce it and raise its error (a
    ``crash`` rule kills the process, a ``hang`` rule holds it, then the inference goes on)."""
    if not _injection.any_rules():  # the common case: no rule at all, no lock taken
        return
    for injection in _injection.injections_for(INFER_OP):
        for state in injection.states_for(device.runtime):
            if state.rule.op != INFER_OP:
                continue
            call = state.hit()
            if call is None:
                continue
            _injection.announce(injection, state.rule, state.device, where, call)
            if _injection.process_fault(state.rule, state.device):
                continue
            raise _injection.fault_error(device.runtime, state.rule)


__all__ = ["armed", "check"]
