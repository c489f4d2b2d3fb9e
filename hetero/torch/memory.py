"""Memory quotas reach torch: the active scheduler tasks' quotas become torch's per-process CUDA
memory fraction on each device (torch allocates through its own caching allocator, which hetero's
accounting does not see). The scheduler tells this module when a task with a quota starts or ends
(:data:`hetero.scheduler.inputs.QUOTAS_CHANGED`); it never imports torch, and when torch is not
imported yet it applies the fractions right after the program imports it.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence

from hetero.core.after_import import AfterImport, after_import
from hetero.scheduler.inputs import QUOTAS_CHANGED
from hetero.scheduler.quota import Task, active_tasks

_TORCH_SET: set[int] = set()  # CUDA indices whose torch memory fraction we changed
_active: Callable[[], Sequence[Task]] = active_tasks
_finder_lock = threading.Lock()
_finder: AfterImport | None = None


def quotas_changed(active: Callable[[], Sequence[Task]]) -> None:
    """The scheduler's call: apply the fractions now, and again once torch is imported if it is not yet."""
    global _active, _finder
    _active = active
    apply_torch_fractions()
    if "torch" not in sys.modules:  # a configured quota is set before a worker's program imports torch
        with _finder_lock:
            # a lambda: the function is looked up when torch arrives (a test may have replaced it)
            _finder = after_import("torch", lambda: apply_torch_fractions(), "apply the memory quota to torch",
                                   _finder)


def apply_torch_fractions() -> None:
    """Set torch's per-process memory fraction on each CUDA device to the active tasks'
    total quota there (1 where none has one). Only when torch is already imported and
    CUDA available: this never imports torch."""
    torch = sys.modules.get("torch")
    if torch is None:
        return
    try:
        if not torch.cuda.is_available():
            return
        count = torch.cuda.device_count()
    except Exception:  # noqa: BLE001  (a broken CUDA set-up is the backend's to report, not the quota's)
        return
    backend = "rocm" if getattr(getattr(torch, "version", None), "hip", None) else "cuda"
    active = list(_active())
    for index in range(count):
        name = f"{backend}:{index}"
        limits = [limit for t in active if t.quota and (limit := t.limit(name, backend)) is not None]
        if limits:
            total = torch.cuda.get_device_properties(index).total_memory
            torch.cuda.set_per_process_memory_fraction(min(1.0, sum(limits) / total), index)
            _TORCH_SET.add(index)
        elif index in _TORCH_SET:
            torch.cuda.set_per_process_memory_fraction(1.0, index)
            _TORCH_SET.discard(index)


QUOTAS_CHANGED.register(quotas_changed)
