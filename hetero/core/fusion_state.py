"""What every floor needs to know about fused elementwise work: whether any is recorded and
not yet computed, and how to compute it all (:mod:`hetero.arraylib.fusion` answers).

Elementwise operations on arrays are recorded, not run (:mod:`hetero.arraylib.fusion`): the
array they return has no buffer until its value is needed (its buffer is read). Anything
that writes into an array (a kernel launch, for the arrays it writes; a copy or host write)
calls :func:`before_write` first, and waiting for a device calls :func:`flush`, so recorded
work always reads its inputs as they were when it was recorded. :data:`PENDING` holds weak
references to the recorded arrays (an array dropped before it was needed is never computed).
"""

from __future__ import annotations

import os
import threading
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from hetero.core.hooks import Hook

#: Arrays whose value is recorded and not yet computed, by id(), as weak references, oldest first
#: (an array's entry goes when it is computed or dropped).
PENDING: dict[int, weakref.ref[Any]] = {}
LOCK = threading.RLock()
#: ``realize(array)``: compute one recorded array's value into its own new buffer.
REALIZE: Hook[Callable[[Any], None]] = Hook("realize", "computing a recorded (fused) array")


#: Whether elementwise operations are recorded and fused (``hetero.fusion(False)`` turns it off;
#: ``HETERO_FUSION=0`` starts a process with it off).
ENABLED = os.environ.get("HETERO_FUSION", "1").strip().lower() not in ("0", "off", "false", "no")


def flush(device: Any = None) -> None:
    """Compute every recorded array still alive (a no-op when none is); with ``device``, those
    recorded on it (what waiting for that device needs: the others stay recorded, whichever
    thread recorded them)."""
    if not PENDING:
        return
    with LOCK:
        realize = REALIZE.get()
        while True:
            due = [array for ref in list(PENDING.values()) if (array := ref()) is not None
                   and array._pending is not None and (device is None or array._pending.device is device)]
            if not due:
                return
            for array in due:
                realize(array)


def before_write(arrays: Iterable[Any]) -> None:
    """Compute the recorded arrays that read any of ``arrays`` (hetero arrays about to be
    written: by a launch, a copy, a host write), so they see the values from before."""
    if not PENDING:
        return
    written = {id(buffer) for array in arrays if (buffer := getattr(array, "_buf", None)) is not None}
    if not written:
        return
    with LOCK:
        due = [array for ref in list(PENDING.values()) if (array := ref()) is not None
               and array._pending is not None and not written.isdisjoint(array._pending.reads)]
        if due:
            realize = REALIZE.get()
            for array in due:
                realize(array)


def record(array: Any) -> None:
    """Note ``array`` as recorded (:func:`flush` computes it unless it is dropped first)."""
    key = id(array)
    PENDING[key] = weakref.ref(array, lambda _: PENDING.pop(key, None))


def computed(array: Any) -> None:
    """``array``'s recorded value is being computed: it is no longer pending."""
    PENDING.pop(id(array), None)


__all__ = ["ENABLED", "LOCK", "PENDING", "REALIZE", "before_write", "computed", "flush", "record"]
