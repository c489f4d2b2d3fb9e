"""``repr(hetero.Array)``: the values as NumPy's repr shows them, with the dtype and device.

Up to NumPy's print threshold (``np.get_printoptions()["threshold"]``, 1000 elements) the whole
array is shown; past it, as NumPy does, only ``edgeitems`` (3) elements at each end of every
long axis, with ``...`` between, and the shape. Only the elements shown are downloaded: one
view per corner of the array (2**k downloads for k long axes), joined on the host.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from hetero.array.ndarray import Array

_PREFIX = "hetero.Array("


def array_repr(x: Array) -> str:
    """``hetero.Array([1., 2.], dtype=float32, device=cpu)``; summarised past the threshold."""
    options = np.get_printoptions()
    edge, threshold = int(options["edgeitems"]), int(options["threshold"])
    shown = f"shape={x.shape}, " if x.size == 0 and x.ndim != 1 else ""
    if x.size <= threshold:
        body = np.array2string(x._host(), separator=", ", prefix=_PREFIX)
    else:
        # One element past the edge on each long axis keeps it longer than 2 * edgeitems, so
        # NumPy summarises it; that element sits under the "..." and never shows.
        body = np.array2string(_corners(x, edge), separator=", ", prefix=_PREFIX, threshold=0, edgeitems=edge)
        shown = f"shape={x.shape}, "
    return f"{_PREFIX}{body}, {shown}dtype={x.dtype}, device={x.device.name})"


def _corners(x: Array, edge: int) -> np.ndarray:
    """The host array of ``x``'s first ``edge + 1`` and last ``edge`` elements along each axis
    longer than ``2 * edge`` (other axes whole)."""

    def part(view: Array, axis: int) -> np.ndarray:
        if axis == view.ndim:
            return np.ascontiguousarray(view._host())
        size = view.shape[axis]
        if size <= 2 * edge:
            return part(view, axis + 1)
        lead = (slice(None),) * axis
        head = part(view[(*lead, slice(0, edge + 1))], axis + 1)
        tail = part(view[(*lead, slice(size - edge, size))], axis + 1)
        return np.concatenate([head, tail], axis=axis)

    return part(x, 0)


__all__ = ["array_repr"]
