"""A buffer pool for one OpenCL device: freed buffers are kept by size class and handed out again,
so code that allocates and frees the same sizes in a loop stops paying for a new ``cl.Buffer``
(and, on most drivers, for touching fresh pages) every time.

- **Size classes** (:func:`size_class`): up to :data:`POWER_OF_TWO_UP_TO` a request rounds up
  to a power of two (at least :data:`SMALLEST` bytes); above it, to a multiple of 1/16 of the
  next power of two (at most 12.5 % slack). A class past the device's largest allocation, or past
  what the pool may keep (so the buffer could never be kept), is the request itself. A request
  takes a kept buffer of exactly its class, else a new one.
- **Bounded**: at most ``limit`` bytes are kept. A buffer freed into a full pool pushes out the
  ones freed longest ago; one bigger than ``limit`` is released at once.
- **Out of memory**: when making a buffer fails with out of memory and buffers are kept, they are
  all released and the allocation is tried once more; a second failure is the error the caller sees.
- **Freeing**: hetero frees a buffer by dropping its last reference (see
  :class:`hetero.core.runtime_parts.Allocator`). So what an allocation returns is a
  :class:`PooledBuffer` handle around the ``cl.Buffer``; when the handle is collected its memory
  comes back here. The device's queue is in order, so work still queued on a freed buffer runs
  before anything queued by its next owner.
- **Contents**: a reused buffer holds its last owner's bytes, as uninitialised memory may
  (``hetero.empty``); ``hetero.zeros``/``full`` write every byte.
- **Accounting**: the scheduler's ledger and quotas count the bytes arrays ask for, while their
  handles live; kept buffers are not counted (they are released on out of memory, so placement
  may treat them as free), nor is size-class slack. :meth:`BufferPool.stats` reports both.
- **Closing**: :meth:`BufferPool.close` releases what is kept, and buffers freed afterwards are
  released, not kept.
"""

from __future__ import annotations

import collections
import dataclasses
import itertools
import threading
from collections.abc import Callable
from typing import Any

#: The smallest size class, in bytes.
SMALLEST = 256
#: Requests up to this many bytes round up to a power of two; larger ones to 1/16 of the next one.
POWER_OF_TWO_UP_TO = 1 << 20
#: The most bytes a pool keeps, unless the device has less than 8 times this (then 1/8 of its memory).
DEFAULT_LIMIT = 1 << 30


def size_class(nbytes: int, largest: int) -> int:
    """The size of the buffer a request of ``nbytes`` gets, on a device whose largest allocation
    is ``largest`` bytes (``nbytes`` itself where rounding up would pass it)."""
    if nbytes <= SMALLEST:
        size = SMALLEST
    elif nbytes <= POWER_OF_TWO_UP_TO:
        size = 1 << (nbytes - 1).bit_length()
    else:
        step = 1 << ((nbytes - 1).bit_length() - 4)
        size = -(-nbytes // step) * step
    return size if size <= largest else nbytes


class PooledBuffer:
    """The buffer of an OpenCL array: ``mem`` is the ``cl.Buffer`` (``size`` bytes, at least the
    ``nbytes`` asked for). When the last reference to this handle goes, ``mem`` goes back to the
    pool it came from; keep the handle, not ``mem`` alone, for as long as the memory is used."""

    __slots__ = ("__weakref__", "_pool", "mem", "nbytes", "size")

    def __init__(self, mem: Any, nbytes: int, size: int, pool: BufferPool) -> None:
        self.mem = mem
        self.nbytes = nbytes
        self.size = size
        self._pool = pool

    def __del__(self) -> None:
        self._pool.give_back(self.mem, self.size)

    @property
    def int_ptr(self) -> int:
        """The ``cl_mem`` handle as an int (PyOpenCL's ``int_ptr``)."""
        return int(self.mem.int_ptr)

    def __repr__(self) -> str:
        return f"<PooledBuffer {self.nbytes} bytes in a {self.size}-byte cl_mem 0x{self.int_ptr:x}>"


@dataclasses.dataclass(frozen=True)
class PoolStats:
    """What a pool keeps and has done: ``kept_bytes`` in ``kept_buffers`` free buffers (at most
    ``limit``); ``reused``/``made`` allocations served from it or by a new buffer; ``released`` buffers
    it let go (pushed out, too big, emptied on out of memory or closing)."""

    limit: int
    kept_bytes: int
    kept_buffers: int
    reused: int
    made: int
    released: int


class BufferPool:
    """Freed buffers of one device, by size class (see the module docstring).

    ``make(size)`` creates a buffer of ``size`` bytes (``cl.Buffer``), raising on failure;
    ``out_of_memory(error)`` says whether such a failure means memory ran out (then the pool is
    emptied and ``make`` tried once more). ``largest`` is the device's largest allocation.
    """

    def __init__(self, make: Callable[[int], Any], out_of_memory: Callable[[BaseException], bool],
                 limit: int, largest: int) -> None:
        self._make = make
        self._out_of_memory = out_of_memory
        self.limit = limit
        self.largest = largest
        self._round_up_to = min(largest, limit)  # a bigger buffer is never kept: no point rounding up to it
        self._lock = threading.Lock()
        # Each kept buffer has a number, in the order they came back: by number, oldest first,
        # and each size's numbers, oldest first. Taking, keeping and pushing out are O(1).
        self._kept_by_number: collections.OrderedDict[int, tuple[int, Any]] = collections.OrderedDict()
        self._numbers: dict[int, collections.deque[int]] = {}
        self._next_number = itertools.count()
        self._kept = 0
        # Buffers freed while the lock was held (by another thread, or by a collection this
        # thread's pool call set off): queued here, filed by the holder (its loop, or the
        # _settle() every pool call makes after letting go of the lock).
        self._returned: collections.deque[tuple[Any, int]] = collections.deque()
        self._closed = False
        self._reused = self._made = self._released = 0

    def allocate(self, nbytes: int) -> PooledBuffer:
        """A buffer of at least ``nbytes`` bytes: a kept one of its size class, else a new one."""
        size = size_class(nbytes, self._round_up_to)
        mem = None
        with self._lock:
            if self._returned:
                self._file_returned()
            numbers = self._numbers.get(size)
            if numbers:
                _, mem = self._kept_by_number.pop(numbers.pop())  # the last freed: likeliest in cache
                self._kept -= size
                self._reused += 1
        if self._returned:
            self._settle()
        if mem is None:
            mem = self._new(size)
        return PooledBuffer(mem, nbytes, size, self)

    def _new(self, size: int) -> Any:
        try:
            mem = self._make(size)
        except Exception as exc:
            if not self._out_of_memory(exc) or not self.release():
                raise
            mem = self._make(size)  # a second out of memory is the caller's
        with self._lock:
            self._made += 1
        return mem

    def give_back(self, mem: Any, size: int) -> None:
        """Keep ``mem`` (``size`` bytes, from :meth:`allocate`) for reuse, or release it."""
        if self._lock.acquire(blocking=False):
            try:
                self._keep(mem, size)
            finally:
                self._lock.release()
        else:  # another call holds the lock (another thread, or this one's, set off by a collection)
            self._returned.append((mem, size))
        if self._returned:
            self._settle()

    def release(self) -> int:
        """Release every kept buffer; the bytes released."""
        with self._lock:
            self._file_returned()
            released = self._kept
            self._released += len(self._kept_by_number)
            self._kept_by_number.clear()
            self._numbers.clear()
            self._kept = 0
        self._settle()
        return released

    def close(self) -> None:
        """Release every kept buffer and keep none from now on."""
        self._closed = True
        self.release()

    def stats(self) -> PoolStats:
        with self._lock:
            self._file_returned()
            stats = PoolStats(self.limit, self._kept, len(self._kept_by_number), self._reused, self._made, self._released)
        self._settle()
        return stats

    # -- keeping -----------------------------------------------------------------------------
    def _settle(self) -> None:
        """File returned buffers unless another call holds the lock (that call files them when done)."""
        while self._returned:
            if not self._lock.acquire(blocking=False):
                return
            try:
                self._file_returned()
            finally:
                self._lock.release()

    def _file_returned(self) -> None:
        """With the lock held: keep or release each returned buffer (the lock is not re-entrant, so
        a buffer freed by a collection during this call is queued, and filed by this loop)."""
        while self._returned:
            self._keep(*self._returned.popleft())

    def _keep(self, mem: Any, size: int) -> None:
        """With the lock held: keep ``mem``, pushing out the longest kept to stay within the limit."""
        if self._closed or size > self.limit:
            self._released += 1
            return  # dropping the last reference releases the cl_mem
        while self._kept + size > self.limit:
            _, (oldest_size, _) = self._kept_by_number.popitem(last=False)
            self._numbers[oldest_size].popleft()  # the oldest of all is the oldest of its size
            self._kept -= oldest_size
            self._released += 1
        number = next(self._next_number)
        self._kept_by_number[number] = (size, mem)
        numbers = self._numbers.get(size)
        if numbers is None:
            numbers = self._numbers[size] = collections.deque()
        numbers.append(number)
        self._kept += size
