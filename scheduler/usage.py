"""Who uses which device in this process: bytes accounted per (task, device), and the
active tasks holding each device. The placement policies read it (binpack, spread,
priority); quotas are checked against it.

Allocations made inside a scheduler task are accounted to it (quotas, holds). Those made
outside any task are only counted per device (:meth:`Ledger.outside`): placement sees
them, quotas do not. They are every eager array operation's allocation, so they cost no lock:
each allocation and free is queued (``deque.append`` is atomic) and the queue is applied when
someone reads the counts or the generation, or once :data:`OUTSIDE_BATCH` changes have queued
(a read sees every change queued before it). One lock guards everything else; waiters (queued
low-priority placements) sleep on the same condition and wake when a task ends.

Frees arrive from finalizers (``Array.__del__``, ``weakref.finalize``), which the garbage
collector may run on any thread at any allocation, including one made while this thread is
inside the ledger's lock: taking the lock there would deadlock. So :meth:`Ledger.refund` and
:meth:`Ledger.forget_outside` take no lock: they queue the free (``deque.append`` is atomic)
and apply it at once when the lock is free; else whoever holds it, or the next reader,
applies it (every locked method settles the queue first and last).
"""

from __future__ import annotations

import collections
import dataclasses
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from hetero.core.errors import QuotaExceeded
from hetero.scheduler.request import PRIORITY_RANK

#: Outside-a-task allocations and frees queued before an allocation applies them (if the lock is
#: free): bounds the queue of a program that never asks placement anything.
OUTSIDE_BATCH = 256

if TYPE_CHECKING:
    from hetero.scheduler.quota import Task


@dataclasses.dataclass(frozen=True)
class DeviceLoad:
    """One device's accounted usage: bytes, holding tasks, their highest priority and names."""

    used: int = 0
    tasks: int = 0
    held_by: str | None = None
    holders: tuple[str, ...] = ()


_FREE = DeviceLoad()


class Ledger:
    """The process's usage table. Use the module's ``LEDGER``."""

    def __init__(self) -> None:
        self.changed = threading.Condition(threading.Lock())
        self._used: dict[str, int] = {}  # device name -> bytes, all tasks
        self._holds: dict[str, dict[Task, None]] = {}  # device name -> active tasks holding it (ordered)
        self._outside: dict[str, int] = {}  # device name -> bytes hetero allocated outside any task
        self._outside_lock = threading.Lock()  # not ``changed``: outside allocations wake no waiter
        self._refunds: collections.deque[tuple[Task, str, int]] = collections.deque()  # queued by finalizers
        #: outside-a-task allocations (+bytes) and frees (-bytes), not yet in ``_outside``
        self._outside_changes: collections.deque[tuple[str, int]] = collections.deque()
        self._generation = 0

    @property
    def generation(self) -> int:
        """Bumped on every change: cached placement decisions compare it to know they are stale
        (queued outside-a-task changes are applied first, so they count)."""
        if self._outside_changes:
            _settle_if_free(self._outside_lock, self._settle_outside)
        return self._generation

    # -- memory ----------------------------------------------------------------------
    def charge(self, task: Task, device: str, nbytes: int, limit: int | None) -> None:
        """Account ``nbytes`` on ``device`` to ``task``, or raise QuotaExceeded (nothing changes then)."""
        with self.changed:
            self.settle()
            used = task.used.get(device, 0)
            if limit is not None and used + nbytes > limit:
                raise QuotaExceeded(device, task.name, limit, used, nbytes)
            task.used[device] = used + nbytes
            self._used[device] = self._used.get(device, 0) + nbytes
            if task.active and task not in self._holds.get(device, ()):
                self._holds.setdefault(device, {})[task] = None
                task.held.add(device)
            self._generation += 1
            self.settle()

    def refund(self, task: Task, device: str, nbytes: int) -> None:
        """Give back what :meth:`charge` took (the array was freed, or the allocation failed).
        Safe from a finalizer: queued, applied now if the lock is free (see the module docstring)."""
        self._refunds.append((task, device, nbytes))
        _settle_if_free(self.changed, self.settle)

    def settle(self) -> None:
        """Apply the queued refunds (call with :attr:`changed` held); waiters wake if there were any."""
        settled = False
        while True:
            try:
                task, device, nbytes = self._refunds.popleft()
            except IndexError:
                break
            left = task.used.get(device, 0) - nbytes
            if left > 0:
                task.used[device] = left
            else:
                task.used.pop(device, None)
            total = self._used.get(device, 0) - nbytes
            if total > 0:
                self._used[device] = total
            else:
                self._used.pop(device, None)
            settled = True
        if settled:
            self._generation += 1
            self.changed.notify_all()

    def _settled_generation(self) -> int:
        self.settle()
        return self.generation  # the property: outside changes too

    def note_outside(self, device: str, nbytes: int) -> None:
        """``nbytes`` allocated on ``device`` outside any task (until :meth:`forget_outside`).
        Queued, as every outside change is (see the module docstring)."""
        changes = self._outside_changes
        changes.append((device, nbytes))
        if len(changes) >= OUTSIDE_BATCH:
            _settle_if_free(self._outside_lock, self._settle_outside)

    def forget_outside(self, device: str, nbytes: int) -> None:
        """The end of :meth:`note_outside`'s allocation. Safe from a finalizer (queued, no lock)."""
        self._outside_changes.append((device, -nbytes))

    def _settle_outside(self) -> None:
        """Apply the queued outside changes (call with ``_outside_lock`` held): load-based
        placements re-decide (first-fit's cached ones do not read the generation)."""
        changes = self._outside_changes
        outside = self._outside
        settled = False
        while True:
            try:
                device, nbytes = changes.popleft()
            except IndexError:
                break
            left = outside.get(device, 0) + nbytes
            if left > 0:
                outside[device] = left
            else:
                outside.pop(device, None)
            settled = True
        if settled:
            self._generation += 1

    def outside(self, device: str) -> int:
        """Bytes hetero holds on ``device`` for allocations made outside any task."""
        if self._outside_changes:
            with self._outside_lock:  # a reader waits for the queue: it sees every change made before it
                self._settle_outside()
        return self._outside.get(device, 0)

    # -- holds -----------------------------------------------------------------------
    def hold(self, task: Task, device: str) -> None:
        """``task`` (active) now holds ``device``: it counts among its tasks and priority holders."""
        with self.changed:
            self.settle()
            if not task.active or task in self._holds.get(device, ()):
                return
            self._holds.setdefault(device, {})[task] = None
            task.held.add(device)
            self._generation += 1

    def release_holds(self, task: Task) -> None:
        """``task`` ended: it holds nothing any more (its accounted bytes stay until freed)."""
        with self.changed:
            self.settle()
            for device in task.held:
                holders = self._holds.get(device)
                if holders is not None:
                    holders.pop(task, None)
                    if not holders:
                        del self._holds[device]
            task.held.clear()
            self._generation += 1
            self.changed.notify_all()

    def holders(self, device: str) -> list[Task]:
        with self.changed:
            self.settle()
            return list(self._holds.get(device, ()))

    # -- reading ---------------------------------------------------------------------
    def load(self, device: str, exclude: Task | None = None) -> DeviceLoad:
        """``device``'s usage, its holders leaving out ``exclude`` (the task asking: its own
        holds must not push it off the device it is on; its bytes count like anyone's)."""
        with self.changed:
            self.settle()
            return self._load(device, exclude)

    def _load(self, device: str, exclude: Task | None = None) -> DeviceLoad:
        holders = self._holds.get(device)
        used = self._used.get(device, 0)
        if holders and exclude is not None and exclude in holders:
            holders = {t: None for t in holders if t is not exclude}
        if not holders:
            return DeviceLoad(used) if used else _FREE
        top = max(holders, key=lambda t: PRIORITY_RANK[t.priority]).priority
        return DeviceLoad(used, len(holders), top, tuple(t.name for t in holders))

    def snapshot(self) -> dict[str, DeviceLoad]:
        """Every device with usage or holders, by name (others are free)."""
        with self.changed:
            self.settle()
            return {name: self._load(name) for name in {*self._used, *self._holds}}

    def used(self, device: str) -> int:
        with self.changed:
            self.settle()
            return self._used.get(device, 0)

    def wait(self, generation: int, timeout: float | None) -> bool:
        """Sleep until usage changes from ``generation`` (or ``timeout`` seconds pass); True if it changed."""
        with self.changed:
            self.settle()
            return self.changed.wait_for(lambda: self._settled_generation() != generation, timeout)


def _settle_if_free(lock: threading.Lock | threading.Condition, settle: Callable[[], None]) -> None:
    """``settle()`` under ``lock`` if it is free now; else its holder (or the next reader) will."""
    if lock.acquire(blocking=False):
        try:
            settle()
        finally:
            lock.release()


LEDGER = Ledger()
