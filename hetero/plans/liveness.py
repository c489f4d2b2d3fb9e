"""Intermediates planned by liveness: a plan's intermediate buffers share memory where their
lives do not overlap, and launch values that do not change between calls are made once.

A trace keeps every buffer it allocates (nothing is freed while it records, so no two
intermediates share memory in the trace itself). :func:`plan_memory` then walks the steps in
order: an intermediate is live from the first step that touches it to the last, and one whose
life has ended hands its buffer to the next intermediate of the same device and size (exactly:
a buffer is never read past the bytes it had). Steps are rewritten to name the buffer they now
use; the others are dropped. A replay runs the steps in order on one queue, so a buffer is
written by its new owner only after its old owner's last reader was enqueued before it.

Launch values of the plan's own buffers (intermediates, not inputs or outputs) are then made
once, here, and kept in the step's template: a replay makes values only for what the call binds.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.plans.steps import CopyStep, LaunchStep, LibraryStep, Step, UploadStep


def _touched(step: Step) -> list[int]:
    if isinstance(step, LaunchStep):
        return [key[1] for _, key in step.rebinds]
    if isinstance(step, UploadStep):
        return [step.dst[1]] if step.dst[0] == "buffer" else []
    if isinstance(step, CopyStep):
        return [w[1] for w in (step.dst, step.src) if w[0] == "buffer"]
    return [w[1] for w in (*step.args, *step.keywords.values()) if w[0] == "array"]


def _renamed(where: tuple[Any, ...], mapping: dict[int, int]) -> tuple[Any, ...]:
    if where[0] in ("buffer", "array") and where[1] in mapping:
        return (where[0], mapping[where[1]], *where[2:])
    return where


def share(steps: Sequence[Step], intermediates: dict[int, tuple[int, int]]) -> dict[int, int]:
    """Which buffer each intermediate uses (index -> index; itself for those that keep their own),
    ``intermediates`` giving each one's (runtime id, size)."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for number, step in enumerate(steps):
        for index in _touched(step):
            if index in intermediates:
                first.setdefault(index, number)
                last[index] = number
    mapping: dict[int, int] = {}
    free: dict[tuple[int, int], list[int]] = {}  # (runtime id, size) -> buffers whose owner's life ended
    ending: list[tuple[int, int]] = []  # (last step, buffer) of the live owners
    for index in sorted(first, key=lambda i: (first[i], i)):
        start = first[index]
        for entry in [e for e in ending if e[0] < start]:
            ending.remove(entry)
            free.setdefault(intermediates[entry[1]], []).append(entry[1])
        pool = free.get(intermediates[index])
        buffer = pool.pop() if pool else index
        mapping[index] = buffer
        ending.append((last[index], buffer))
    return mapping


def plan_memory(steps: Sequence[Step], buffers: list[Any], intermediates: dict[int, tuple[int, int]]) -> None:
    """Share intermediates' buffers (:func:`share`), rewrite ``steps`` to match, drop the buffers no
    longer used from ``buffers``, and make the launch values of the plan's own buffers once."""
    mapping = {i: b for i, b in share(steps, intermediates).items() if i != b}
    for step in steps:
        if isinstance(step, LaunchStep):
            step.rebinds = [(p, (k[0], mapping.get(k[1], k[1]), *k[2:])) for p, k in step.rebinds]
        elif isinstance(step, UploadStep):
            step.dst = _renamed(step.dst, mapping)
        elif isinstance(step, CopyStep):
            step.dst, step.src = _renamed(step.dst, mapping), _renamed(step.src, mapping)
        elif isinstance(step, LibraryStep):
            step.args = [_renamed(w, mapping) for w in step.args]
            step.keywords = {k: _renamed(w, mapping) for k, w in step.keywords.items()}
    for index in mapping:
        buffers[index] = None
    for step in steps:
        if isinstance(step, LaunchStep):
            kept = []
            for position, key in step.rebinds:
                if key[1] in intermediates:
                    step.template[position] = _value(step, key, buffers)
                else:
                    kept.append((position, key))
            step.rebinds = kept


def _value(step: LaunchStep, key: tuple[Any, ...], buffers: list[Any]) -> Any:
    if key[0] == "view":
        _, index, offset, shape, dtype, strides = key
        return np.ndarray(shape, dtype, buffers[index], offset, strides)
    _, index, shape, dtype = key
    return step.runtime.kernel_arg(buffers[index], shape, dtype)


__all__ = ["plan_memory", "share"]
