"""A TEST TOOL, not an allocator: a buffer maker for :class:`hetero.backends.opencl.pool.BufferPool`
that fails with a genuine PyOpenCL out-of-memory error (``CL_MEM_OBJECT_ALLOCATION_FAILURE``, built
as a failing ``clCreateBuffer`` builds it) a set number of times, then makes real buffers. It lets a
test walk the pool's out-of-memory path without exhausting a device."""

from __future__ import annotations

from collections.abc import Callable
from types import ModuleType
from typing import Any

from hetero.backends.opencl import errors as opencl_errors


class OutOfMemoryMaker:
    """Calls ``make(size)`` after failing the first ``failures`` calls; ``calls`` lists every size asked for."""

    def __init__(self, cl: ModuleType, make: Callable[[int], Any], failures: int) -> None:
        self.cl = cl
        self.make = make
        self.failures = failures
        self.calls: list[int] = []

    def __call__(self, size: int) -> Any:
        self.calls.append(size)
        if len(self.calls) <= self.failures:
            raise opencl_errors.pyopencl_error(self.cl, opencl_errors.CL_MEM_OBJECT_ALLOCATION_FAILURE, "clCreateBuffer",
                                               "injected by the test tool OutOfMemoryMaker")
        return self.make(size)
