"""The scheduler task of the running thread / asyncio task: a single ContextVar, in a module
of its own so that ``hetero.empty`` can read it without loading the rest of the scheduler
(``import hetero`` stays light; the quota machinery loads when a task is first made)."""

from __future__ import annotations

import contextvars
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from hetero.scheduler.quota import Task

#: The task allocations are accounted to; None outside every task (no bookkeeping then).
CURRENT_TASK: contextvars.ContextVar[Task | None] = contextvars.ContextVar("hetero_task", default=None)
