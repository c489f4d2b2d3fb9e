"""How a split launch's data travels: host views or staged copies of the source arrays, the
bytes each part moves, what those copies cost by the cost model, and merging ``combine``
arrays. Used by :mod:`hetero.kernels.split.launch`."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.array.ndarray import Array
from hetero.core.device import Device
from hetero.scheduler import cost_model as cost_models
from hetero.scheduler import split_plan
from hetero.kernels.split.check import Layout

# Copy costs assumed for a device ``hetero calibrate`` has not measured (latency s, bytes/s).
DEFAULT_COPY = {False: (20e-6, 5e9), True: (2e-6, 10e9)}  # keyed by the runtime's host_memory


class Staging:
    """Host-side access to the source arrays: views when the source is host memory, else host
    copies of what the other devices' parts need (broadcast arrays whole, split arrays only
    the rows in ``spans``), downloaded before any part starts, while the source's queue is free."""

    def __init__(self, source: Device, names: list[str], layout: Layout, args: Sequence[Any],
                 spans: Sequence[tuple[int, int]]) -> None:
        self.host = source.runtime.host_memory
        self.lock = threading.Lock()
        self.copies: dict[int, np.ndarray] = {}
        if self.host:
            return
        for i, name in enumerate(names):
            role = layout.roles.get(name)
            if role not in ("split", "broadcast") or not args[i].nbytes:
                continue
            if role == "broadcast":
                self.copies[i] = args[i].numpy().reshape(-1).view(np.uint8)
                continue
            flat = self.copies[i] = np.empty(args[i].nbytes, np.uint8)
            for lo, hi in spans:
                byte_span = self.rows(args[i], lo, hi)
                if byte_span is not None:
                    source.runtime.download(flat[byte_span[0]:byte_span[1]], args[i].buffer, byte_span[0])

    def flat(self, index: int, array: Array) -> np.ndarray:
        return array.buffer if self.host else self.copies[index]  # type: ignore[no-any-return]

    def whole(self, index: int, array: Array) -> np.ndarray:
        return self.flat(index, array)

    @staticmethod
    def rows(array: Array, lo: int, hi: int) -> tuple[int, int] | None:
        """The byte range of rows ``[lo, hi)`` (clamped to the array), or None when empty."""
        if not array.shape:
            return None
        hi = min(hi, array.shape[0])
        if hi <= lo:
            return None
        row = array.nbytes // array.shape[0]
        return lo * row, hi * row


def bytes_moved(names: list[str], layout: Layout, args: Sequence[Any]) -> tuple[float, float, float, float]:
    """(bytes in per row, bytes out per row, fixed bytes in, fixed bytes out) of a part off the source."""
    per_row_in = per_row_out = fixed_in = fixed_out = 0.0
    for name, arg in zip(names, args, strict=True):
        role = layout.roles.get(name)
        if role is None or not arg.nbytes:
            continue
        if role == "split":
            row = arg.nbytes / max(arg.shape[0], 1) if arg.shape else 0.0
            per_row_in += row
            per_row_out += row if name in layout.written else 0.0
        else:
            fixed_in += arg.nbytes
            fixed_out += arg.nbytes if role == "combine" else 0.0
    return per_row_in, per_row_out, fixed_in, fixed_out


def copy_law(model: cost_models.CostModel, source: Device, device: Device,
              moved: tuple[float, float, float, float]) -> split_plan.PartTime:
    """Seconds of copies for a part of ``rows`` rows on ``device`` (none on the source itself)."""
    if device is source:
        return lambda rows: 0.0

    def law(d: Device, direction: str) -> Any:
        fitted = model.transfer(d.stable_id, direction)
        if fitted is not None:
            return fitted
        latency, bandwidth = DEFAULT_COPY[bool(d.runtime.host_memory)]
        return lambda nbytes: latency + nbytes / bandwidth if nbytes > 0 else 0.0

    legs_in = [law(device, "h2d")] + ([] if source.runtime.host_memory else [law(source, "d2h")])
    legs_out = [law(device, "d2h")] + ([] if source.runtime.host_memory else [law(source, "h2d")])

    def seconds(rows: int) -> float:
        bytes_in = moved[0] * rows + moved[2]
        bytes_out = moved[1] * rows + moved[3]
        return sum(leg(bytes_in) for leg in legs_in) + sum(leg(bytes_out) for leg in legs_out)

    return seconds


def identity(op: str, dtype: np.dtype[Any]) -> Any:
    if op == "sum":
        return 0
    info = np.finfo(dtype) if dtype.kind == "f" else np.iinfo(dtype)
    return info.max if op == "min" else info.min


def merge(array: Array, partials: list[np.ndarray], op: str) -> None:
    """Fold the other parts' results into ``array`` (which holds the source part's, or the data)."""
    if not partials or not array.nbytes:
        return
    host = array.numpy()
    result = host if array.device.runtime.host_memory else host.copy()
    for part in partials:
        if op == "sum":
            np.add(result, part, out=result, casting="unsafe")
        elif op == "min":
            np.minimum(result, part, out=result)
        else:
            np.maximum(result, part, out=result)
    if not array.device.runtime.host_memory:
        array.device.runtime.upload(array.buffer, result)
