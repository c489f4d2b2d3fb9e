"""The buffers a trace saw, found again by what a runtime is handed.

A runtime method receives a buffer (or, on ``cpu``, a NumPy view into one). A plan step must
name, for every buffer it touches, whether it is an input's (bound anew at each call), an
output's (allocated anew at each call), one the trace allocated for an intermediate (kept by
the plan and reused), or one from outside (an array the function closed over: the same
object at every call). :class:`BufferTable` answers that: by identity, and on host-memory
devices by address, so a NumPy view of a buffer's bytes is found as ``(buffer, byte offset)``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

#: Where a buffer-like object lies: (index in the table, byte offset into that buffer).
Ref = tuple[int, int]


def _address(array: np.ndarray) -> int:
    return int(array.__array_interface__["data"][0])


class BufferTable:
    """Buffers by index, found by identity or (host memory) by address range."""

    def __init__(self) -> None:
        self.buffers: list[Any] = []
        self._by_id: dict[int, int] = {}
        self._ranges: list[tuple[int, int, int]] = []  # (start, end, index) of host-memory buffers

    def add(self, buffer: Any) -> int:
        index = self._by_id.get(id(buffer))
        if index is not None:
            return index
        index = len(self.buffers)
        self.buffers.append(buffer)  # held: an id() is only meaningful while its object lives
        self._by_id[id(buffer)] = index
        if isinstance(buffer, np.ndarray) and buffer.nbytes:
            start = _address(buffer)
            self._ranges.append((start, start + buffer.nbytes, index))
        return index

    def find(self, obj: Any) -> Ref | None:
        """Where ``obj`` (a buffer, or a NumPy view into a host-memory buffer) lies; None when
        it is none of the table's."""
        index = self._by_id.get(id(obj))
        if index is not None:
            return index, 0
        if isinstance(obj, np.ndarray) and self._ranges:
            address = _address(obj)
            for start, end, index in self._ranges:
                if start <= address < end:
                    return index, address - start
        return None


__all__ = ["BufferTable", "Ref"]
