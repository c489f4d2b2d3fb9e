"""The scheduler task of the running thread / asyncio task: a ContextVar, in a module of its
own so that ``hetero.empty`` can read it without loading the rest of the scheduler
(``import hetero`` stays light; the quota machinery loads when a task is first made).

A process may also have a default task (:func:`hetero.scheduler.set_process_task`: a
launcher worker capped as a whole), used by every thread that entered none.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hetero.scheduler.quota import Task

#: The task allocations are accounted to; None outside every task (no bookkeeping then).
CURRENT_TASK: contextvars.ContextVar[Task | None] = contextvars.ContextVar("hetero_task", default=None)
_process_task: Task | None = None


def current_task() -> Task | None:
    """The task entered in this thread / asyncio task, else the process's default task, else None."""
    return CURRENT_TASK.get() or _process_task


def _task_or_process_default() -> Task | None:
    return CURRENT_TASK.get() or _process_task


def task_getter() -> Callable[[], Task | None]:
    """The bare ContextVar read while no process default is set (no cost added to allocations
    outside tasks), the fallback otherwise."""
    return CURRENT_TASK.get if _process_task is None else _task_or_process_default


#: What every allocation (``hetero.empty`` and all that allocate through it) calls to find the task
#: to account it to: :func:`task_getter`'s answer, re-pointed by :func:`set_process_default`.
allocation_task: Callable[[], Task | None] = task_getter()


def set_process_default(task: Task | None) -> None:
    """Record the process's default task and re-point :data:`allocation_task` at the right getter."""
    global _process_task, allocation_task
    _process_task = task
    allocation_task = task_getter()
