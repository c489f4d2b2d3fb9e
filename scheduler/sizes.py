"""Memory sizes as people write them (``"512MiB"``, ``"1.5g"``, ``1073741824``) and as tables
show them (``"1.5 GiB"``).

Imports nothing of hetero's, so :mod:`hetero.config` can parse the ``quota`` setting with the
same rules as :func:`hetero.scheduler.task` without an import cycle.
"""

from __future__ import annotations

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "kb": 1 << 10, "kib": 1 << 10, "m": 1 << 20, "mb": 1 << 20, "mib": 1 << 20,
          "g": 1 << 30, "gb": 1 << 30, "gib": 1 << 30, "t": 1 << 40, "tb": 1 << 40, "tib": 1 << 40}


def parse_size(value: float | str, what: str = "size") -> int:
    """Bytes from ``1073741824``, ``"1GiB"``, ``"512 MiB"``, ``"1.5g"`` (binary units: 1 GB = 2**30)."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a number of bytes or a size such as '512MiB', got {value!r}")
    if isinstance(value, (int, float)):
        number = value
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "").replace("_", "")
        digits = text.rstrip("kmgtib")
        unit = text[len(digits):]
        if unit not in _UNITS:
            raise ValueError(f"{what} {value!r}: unknown unit {unit!r}; write bytes or e.g. '512MiB', '1GiB', '1.5g'")
        try:
            number = float(digits) * _UNITS[unit]
        except ValueError:
            raise ValueError(f"{what} {value!r} is not a size; write bytes or e.g. '512MiB', '1GiB'") from None
    else:
        raise TypeError(f"{what} must be a number of bytes or a size such as '512MiB', got {type(value).__name__}")
    if not number >= 0:  # negative, or NaN
        raise ValueError(f"{what} {value!r} must not be negative")
    return int(number)


def format_size(nbytes: int) -> str:
    """``16 GiB``, ``1.5 GiB``, ``512 MiB``, ``0 B``: short, for tables and messages."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes} B"
