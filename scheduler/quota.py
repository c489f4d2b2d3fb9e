"""Tasks and their memory quotas: several tasks (threads, or one per launcher worker) share
a device, each limited to its own number of bytes there.

    >>> with hetero.scheduler.task("train", quota={"cuda:0": "8GiB", "cpu": "2GiB"}) as t:
    ...     x = hetero.empty(1 << 20, device="cuda:0")    # accounted to "train" on cuda:0
    >>> t.usage("cuda:0")                                 # bytes still alive

An allocation that would take a task past its quota raises :class:`hetero.QuotaExceeded`
before the vendor allocator is called. Accounted bytes are given back when the array's
buffer is freed. Outside any task hetero's allocator does no bookkeeping: the hook in
``hetero.empty`` is one ``ContextVar.get``.

A thread enters a task with ``with``; other threads join the same task by entering the
object (``with t:``). :func:`set_process_task` gives every thread of a process that entered
none one task (a launcher worker capped as a whole).

Quota keys are device names (``"cuda:0"``), backends (``"cuda"``: each of its devices) or
``"*"``; a single value (``quota="1GiB"``) applies to every device. Values are bytes or
sizes (``"512MiB"``). With torch imported and CUDA available, entering a task also sets
``torch.cuda.set_per_process_memory_fraction`` on each CUDA device to the sum of the
active tasks' quotas there (torch's caching allocator then enforces it for tensors);
when no task with a quota remains, the fraction goes back to 1.
"""

from __future__ import annotations

import contextvars
import os
import threading
import weakref
from collections.abc import Callable, Mapping
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from hetero.core.registry import APPLY_QUOTA
from hetero.scheduler import context
from hetero.scheduler.context import CURRENT_TASK
from hetero.scheduler.inputs import QUOTAS_CHANGED
from hetero.scheduler.request import PRIORITIES, PRIORITY_RANK, parse_size
from hetero.scheduler.usage import LEDGER

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self is 3.11+; hetero supports 3.10

    from hetero.core.device import Device

# Per context: tokens of the tasks entered there, innermost last (so a Task object can be
# entered in several threads at once, each restoring its own previous task).
_TOKENS: contextvars.ContextVar[tuple[tuple[Task, contextvars.Token[Task | None]], ...]] = contextvars.ContextVar(
    "hetero_task_tokens", default=())
_ACTIVE: dict[Task, None] = {}  # tasks entered somewhere (their quotas reach torch: hetero.torch.memory)

T = TypeVar("T")
Quota = int | str | Mapping[str, int | str] | None


class Task:
    """A named unit of work with an optional memory quota per device and a priority class.

    Enter it (``with task:``) in every thread that works for it; allocations there are
    accounted to it. ``preempted`` is set when the ``priority`` policy gives a device this
    task holds to a higher-priority request (cooperative: check it and yield if you can).
    """

    def __init__(self, name: str, quota: Quota = None, priority: str = "normal") -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"a task needs a non-empty name, got {name!r}")
        priority = str(priority).lower()
        if priority not in PRIORITY_RANK:
            raise ValueError(f"task {name!r}: priority {priority!r} is not one of {', '.join(PRIORITIES)}")
        self.name = name
        self.priority = priority
        self.quota = _parse_quota(name, quota)
        self.used: dict[str, int] = {}  # device name -> accounted bytes (guarded by the ledger's lock)
        self.held: set[str] = set()  # devices this task holds while active
        self.active = 0  # how many `with` blocks (any thread) are inside it
        self.preempted = threading.Event()
        self._limits: dict[str, int | None] = {}

    def __repr__(self) -> str:
        return f"<hetero.scheduler.Task {self.name!r} priority={self.priority} quota={self.quota or None}>"

    # -- quota -----------------------------------------------------------------------
    def limit(self, device: str | Device, backend: str | None = None) -> int | None:
        """The quota in bytes on ``device`` (name or Device), or None when unlimited."""
        name = device if isinstance(device, str) else device.info.name
        if name in self._limits:
            return self._limits[name]
        if backend is None:
            backend = device.info.backend if not isinstance(device, str) else name.partition(":")[0]
        quota = self.quota
        found = quota.get(name, quota.get(backend, quota.get("*")))
        self._limits[name] = found
        return found

    def usage(self, device: str | Device | None = None) -> Any:
        """Accounted bytes on ``device`` (name or Device), or a dict of all devices."""
        with LEDGER.changed:
            LEDGER.settle()
            if device is None:
                return dict(self.used)
            return self.used.get(device if isinstance(device, str) else device.info.name, 0)

    def allocate(self, device: Device, nbytes: int, make: Callable[[Any], T]) -> T:
        """Check the quota, allocate ``nbytes`` on ``device``, wrap the buffer with ``make``
        and account it until the buffer is freed (the allocation hook of ``hetero.empty``)."""
        info = device.info
        LEDGER.charge(self, info.name, nbytes, self.limit(info.name, info.backend))
        try:
            buffer = device.runtime.allocate(nbytes)
            made = make(buffer)
        except BaseException:
            LEDGER.refund(self, info.name, nbytes)
            raise
        try:  # the buffer itself where it takes weak references: views of it keep the memory alive
            weakref.finalize(buffer, LEDGER.refund, self, info.name, nbytes)
        except TypeError:
            weakref.finalize(made, LEDGER.refund, self, info.name, nbytes)
        return made

    # -- entering --------------------------------------------------------------------
    def __enter__(self) -> Self:
        _activate(self)
        _TOKENS.set((*_TOKENS.get(), (self, CURRENT_TASK.set(self))))
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        tokens = _TOKENS.get()
        if not tokens or tokens[-1][0] is not self:
            raise RuntimeError(f"task {self.name!r} is left in a thread/context where it is not the innermost "
                               "task entered; leave tasks in the reverse order of entering them, where entered")
        _TOKENS.set(tokens[:-1])
        CURRENT_TASK.reset(tokens[-1][1])
        _deactivate(self)


def _activate(task: Task) -> None:
    with LEDGER.changed:
        task.active += 1
        first = task.active == 1
        if first:
            _ACTIVE[task] = None
            task.preempted.clear()
    if first and task.quota:
        QUOTAS_CHANGED.call(active_tasks)


def _deactivate(task: Task) -> None:
    with LEDGER.changed:
        task.active -= 1
        last = task.active == 0
        if last:
            _ACTIVE.pop(task, None)
    if last:
        LEDGER.release_holds(task)
        if task.quota:
            QUOTAS_CHANGED.call(active_tasks)


def active_tasks() -> list[Task]:
    """The tasks entered somewhere in this process now (the process task included)."""
    with LEDGER.changed:
        return list(_ACTIVE)


def _parse_quota(task: str, quota: Quota) -> dict[str, int]:
    if quota is None:
        return {}
    if isinstance(quota, Mapping):
        items = {str(key).strip().lower(): value for key, value in quota.items()}
    else:
        items = {"*": quota}
    parsed: dict[str, int] = {}
    for key, value in items.items():
        if not key:
            raise ValueError(f"task {task!r}: an empty quota key; use a device ('cuda:0'), a backend ('cuda') or '*'")
        try:
            parsed[key] = parse_size(value, f"quota for {key}")
        except ValueError as exc:
            raise ValueError(f"task {task!r}: {exc}") from None
    return parsed


def task(name: str | Task, quota: Quota = None, priority: str = "normal") -> Task:
    """A task to enter with ``with``: a new one named ``name``, or ``name`` itself when it is a
    Task (to join it from another thread: ``with hetero.scheduler.task(t):``)."""
    if isinstance(name, Task):
        if quota is not None or priority != "normal":
            raise ValueError(f"task {name.name!r} already exists; its quota and priority are fixed when it is made")
        return name
    return Task(name, quota, priority)


def current_task() -> Task | None:
    """The task entered in this thread / asyncio task, else the process's (:func:`set_process_task`), or None."""
    return context.current_task()


def set_process_task(task: Task | None) -> Task | None:
    """Make ``task`` the task of every thread of this process that entered none (a launcher
    worker capped as a whole: ``set_process_task(Task("worker3", quota={"cuda": "20GiB"}))``);
    None removes it. The task stays active (holding its devices, torch fraction applied) while
    set. Returns the previous one. Costs allocations outside tasks one more check while set."""
    previous = context._process_task
    if task is previous:
        return previous
    if task is not None:
        _activate(task)
    context.set_process_default(task)
    if previous is not None:
        _deactivate(previous)
    return previous


def apply_configured_quota(name: str | None = None) -> Task | None:
    """Make the configured quota (``HETERO_QUOTA`` / the config's ``quota``) the process's task
    (:func:`set_process_task`), named ``name`` (default ``process <pid>``). Nothing when no quota
    is configured or a process task is already set (an explicit one wins; calling twice is
    harmless). Called when backends are first listed and by the ``hetero-run`` worker bootstrap.
    When torch is not imported yet, its CUDA memory fractions are set right after it is
    (:mod:`hetero.torch.memory`). Returns the process task."""
    from hetero.core.config import get_config

    quota = get_config().quota
    if quota and context._process_task is None:
        set_process_task(Task(name or f"process {os.getpid()}", quota=dict(quota)))
    return context._process_task




APPLY_QUOTA.register(apply_configured_quota)  # the registry applies HETERO_QUOTA before any backend opens
