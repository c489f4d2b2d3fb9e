"""The one syntax of a list of devices, wherever hetero takes one: ``hetero-run --devices``,
``hetero serve --devices``, ``hetero calibrate --devices``, :class:`hetero.onnx.Pool`'s
``devices=`` and ``kernel.split(devices=...)``.

A list is a comma-separated string (``"cpu,oneapi:0"``; spaces around the commas, or spaces
alone as ``hetero calibrate --devices cpu oneapi:0`` always took, are accepted too) or a Python
sequence of names and :class:`~hetero.core.device.Device` objects, whose strings may themselves
hold commas. A name is a backend (``oneapi``), a device (``cuda:1``) or ``all``/``auto``; what
``all`` and a bare backend stand for is the caller's (every device of the backend for
``hetero-run``, its first for a pool). Only the syntax is checked here, before any backend
opens; :func:`hetero.device` says whether the name is present.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from hetero.core.device import Device
from hetero.core.errors import DeviceSpecError

#: ``cpu``, ``oneapi:0``, ``all``: a backend name (as entry points name them), an optional index.
_NAME = re.compile(r"^[a-z][a-z0-9_-]*(:[0-9]+)?$")
_SEPARATORS = re.compile(r"[,\s]+")


def parse_devices(spec: str | Device | Iterable[str | Device], what: str = "devices") -> list[str | Device]:
    """The entries of the device list ``spec``, in order (repeats kept: the caller decides what one
    means), names lower-cased, Devices as given. Raises :class:`DeviceSpecError` (a ``ValueError``; ``what`` names the option
    in it) for an empty list or an entry that is not a name."""
    items: list[str | Device] = [spec] if isinstance(spec, (str, Device)) else list(spec)
    found: list[str | Device] = []
    for item in items:
        if isinstance(item, Device):
            entries: list[str | Device] = [item]
        elif isinstance(item, str):
            entries = [part.lower() for part in _SEPARATORS.split(item.strip()) if part]
        else:
            raise DeviceSpecError(_shown(items), repr(item), what)
        for entry in entries:
            if isinstance(entry, str) and not _NAME.match(entry):
                raise DeviceSpecError(_shown(items), entry, what)
            found.append(entry)
    if not found:
        raise DeviceSpecError(_shown(items), "", what)
    return found


def _shown(items: list[str | Device]) -> str:
    """The list as the user wrote it (near enough), for the error."""
    return items[0] if len(items) == 1 and isinstance(items[0], str) else ",".join(
        item.name if isinstance(item, Device) else str(item) for item in items)


__all__ = ["parse_devices"]
