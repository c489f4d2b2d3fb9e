"""A launch plan: a traced call's device operations, replayed with a new call's arrays.

:func:`build` turns a finished :class:`hetero.plans.recorder.Recorder` into a :class:`LaunchPlan`.
Each buffer the trace saw becomes one of

- an *input*: bound at every replay to the buffer of the argument in the same position;
- an *output*: allocated anew at every replay (the results are fresh arrays, as eager's are);
- the plan's own: the intermediates the trace allocated, allocated once (by the trace), shared
  where their lives do not overlap (:mod:`hetero.plans.liveness`) and reused by every replay;
  and arrays the function closed over (the same object every call).

A replay runs the steps in order on each device's queue, so it computes what the traced call
computed, launch for launch: results are bit-identical to eager's. Replays of one plan share
its intermediates, so they run one at a time (a lock; the device's in-order queue does the rest).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.array.ndarray import Array, empty, give_buffer
from hetero.core import fusion_state
from hetero.plans import liveness
from hetero.plans.errors import JitError
from hetero.plans.recorder import Recorder
from hetero.plans.signature import root
from hetero.plans.steps import LaunchStep, LibraryStep, Step, view_of

#: How an output leaf is made at replay: ("input", position), ("object", value), ("empty", shape,
#: dtype, device), or ("array", index, shape, dtype, strides, offset, layout, device).
OutputHow = tuple[Any, ...]


class LaunchPlan:
    """One signature's recorded steps, and how to bind, allocate and return (module docstring)."""

    def __init__(self, steps: list[Step], buffers: list[Any], inputs: list[tuple[int, int]],
                 fresh: dict[int, tuple[Any, tuple[int, ...], np.dtype[Any]]], outputs: list[OutputHow]) -> None:
        self.steps = steps
        self.buffers = buffers
        self.inputs = inputs  # (leaf position, buffer index)
        self.fresh = fresh  # buffer index -> (device, owner shape, owner dtype)
        self.outputs = outputs
        self.lock = threading.Lock()

    @property
    def launches(self) -> int:
        """Kernel launches and library calls a replay makes."""
        return sum(isinstance(step, (LaunchStep, LibraryStep)) for step in self.steps)

    def describe(self) -> dict[str, Any]:
        """What a replay does: its steps by kind, and the bytes the plan keeps for intermediates."""
        kinds: dict[str, int] = {}
        for step in self.steps:
            name = type(step).__name__.removesuffix("Step").lower()
            kinds[name] = kinds.get(name, 0) + 1
        kept = sum(getattr(b, "nbytes", 0) or getattr(b, "size", 0) for i, b in enumerate(self.buffers)
                   if b is not None and i not in self.fresh)
        return {"steps": kinds, "launches": self.launches, "inputs": len(self.inputs), "outputs": len(self.outputs),
                "fresh_buffers": len(self.fresh), "intermediate_bytes": int(kept)}

    def replay(self, leaves: Sequence[Any]) -> list[Any]:
        """The outputs of the call whose flattened arguments are ``leaves`` (of this plan's signature)."""
        with self.lock:
            buffers = self.buffers.copy()
            roots = []
            for position, index in self.inputs:
                owner = root(leaves[position])
                buffers[index] = owner._buffer  # a recorded (fused) argument is computed first
                roots.append(owner)
            owners: dict[int, Array] = {}
            for index, (device, shape, dtype) in self.fresh.items():
                owner = Array(None, device, shape, dtype)
                give_buffer(owner)
                buffers[index] = owner._buf
                owners[index] = owner
            if fusion_state.PENDING and roots:
                fusion_state.before_write(roots)  # recorded work reading an argument sees it before the plan writes
            kargs: dict[tuple[Any, ...], Any] = {}
            for step in self.steps:
                step.run(buffers, kargs)
            return [_output(how, leaves, buffers, owners) for how in self.outputs]


def _output(how: OutputHow, leaves: Sequence[Any], buffers: list[Any], owners: dict[int, Array]) -> Any:
    kind = how[0]
    if kind == "input":
        return leaves[how[1]]
    if kind == "object":
        return how[1]
    if kind == "empty":
        return empty(how[1], how[2], how[3])
    _, index, shape, dtype, strides, offset, layout, device, owner_shape, owner_dtype = how
    owner = owners.get(index)
    if owner is None:  # a view of an argument's buffer
        owner = Array(buffers[index], device, owner_shape, owner_dtype)
    return view_of(owner, shape, dtype, strides, offset, layout)


def build(recorder: Recorder, leaves: Sequence[Any], inputs: list[tuple[int, int]], results: Sequence[Any]) -> LaunchPlan:
    """The plan of a finished trace: ``leaves`` the traced call's arguments, ``results`` its output leaves."""
    table = recorder.table
    input_indices = {index for _, index in inputs}
    fresh: dict[int, tuple[Any, tuple[int, ...], np.dtype[Any]]] = {}
    outputs: list[OutputHow] = []
    for result in results:
        if not isinstance(result, Array):
            outputs.append(("object", result))
            continue
        position = next((p for p, leaf in enumerate(leaves) if leaf is result), None)
        if position is not None:
            outputs.append(("input", position))
            continue
        if not result.nbytes:
            outputs.append(("empty", result.shape, result.dtype, result._device))
            continue
        owner = root(result)
        found = table.find(owner._buf)
        if found is None or found[1]:
            outputs.append(("object", result))  # an array from outside the function, returned as it is
            continue
        index = found[0]
        if index not in input_indices:
            if index not in recorder.allocated:
                raise JitError(f"hetero.jit: {recorder.name}() returned an array hetero.jit cannot place; "
                               f"call the function without hetero.jit")
            fresh[index] = (owner._device, owner.shape, owner.dtype)
        outputs.append(("array", index, result.shape, result.dtype, result._strides, result.offset, result._layout,
                        result._device, owner.shape, owner.dtype))
    buffers: list[Any] = list(table.buffers)
    rebound = input_indices | set(fresh)
    for index in rebound:
        buffers[index] = None  # bound or allocated per call: the plan does not keep the trace's
    _check_bound(recorder, rebound)
    intermediates = {i: size for i, size in recorder.allocated.items() if i not in rebound}
    liveness.plan_memory(recorder.steps, buffers, intermediates)
    return LaunchPlan(recorder.steps, buffers, inputs, fresh, outputs)


def _check_bound(recorder: Recorder, rebound: set[int]) -> None:
    """Make sure no launch still holds an input's or output's buffer as a constant (a replay
    would then read or write the traced call's arrays: a silent wrong result), and drop the
    template's references to the values it rebinds."""
    probes: dict[int, set[int]] = {}  # id(runtime) -> ids of the rebound buffers' launch values
    for step in recorder.steps:
        if not isinstance(step, LaunchStep):
            continue
        known = probes.get(id(step.runtime))
        if known is None:
            known = probes[id(step.runtime)] = set()
            for index in rebound:
                buffer = recorder.table.buffers[index]
                known.add(id(buffer))
                if not isinstance(buffer, np.ndarray):
                    known.add(id(step.runtime.kernel_arg(buffer, (1,), np.dtype(np.uint8))))
        rebinds = {position for position, _ in step.rebinds}
        for position, value in enumerate(step.template):
            if position in rebinds:
                step.template[position] = None
            elif id(value) in known:
                raise JitError(f"hetero.jit: {recorder.name}() launched a kernel whose argument hetero.jit could "
                               f"not rebind to a new call's arrays; call the function without hetero.jit "
                               f"(and report this: it is a hetero bug)")
            elif isinstance(value, np.ndarray):
                found = recorder.table.find(value)
                if found is not None and found[0] in rebound:
                    raise JitError(f"hetero.jit: {recorder.name}() launched a kernel on a view hetero.jit "
                                   f"could not rebind; call the function without hetero.jit")


__all__ = ["LaunchPlan", "OutputHow", "build"]
