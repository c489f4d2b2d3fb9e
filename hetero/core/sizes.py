"""Memory sizes as people write them (``"512MiB"``, ``"1.5g"``, ``1073741824``) and as tables
show them (``"1.5 GiB"``).

On the ground floor (imports nothing of hetero's): :mod:`hetero.core.config` parses the ``quota`` setting with the
same rules as :func:`hetero.scheduler.task` without an import cycle.
"""

from __future__ import annotations

import decimal
import math
import re

# SI units are powers of ten and IEC units powers of two, as the standards (and df -H,
# systemd, Kubernetes) have it; the one-letter forms are binary, as docker's ``-m 1g``.
_UNITS = {"": 1, "b": 1,
          "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
          "kib": 1 << 10, "mib": 1 << 20, "gib": 1 << 30, "tib": 1 << 40,
          "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
#: The largest size accepted: no memory is larger than 2**64 bytes.
MAX_SIZE = 1 << 64
#: The forms :func:`parse_size` takes, for error messages.
SIZE_FORMS = ("a whole number of bytes (1073741824), or a number and a unit: KiB, MiB, GiB, TiB (binary: "
              "1GiB = 2**30 bytes; also k, m, g, t), or KB, MB, GB, TB (decimal: 1GB = 10**9 bytes), e.g. '512MiB'")
_SIZE = re.compile(r"(?P<number>[0-9]*\.?[0-9]+(?:e[+-]?[0-9]+)?)(?P<unit>[a-z]*)")


def parse_size(value: float | str, what: str = "size") -> int:
    """Bytes from ``1073741824``, ``"1GiB"``, ``"512 MiB"``, ``"1GB"``, ``"1.5g"``.

    IEC units are binary (1 GiB = 2**30 bytes; ``k``, ``m``, ``g``, ``t`` too), SI units
    decimal (1 GB = 10**9 bytes). A size without a unit is bytes and must be whole; with
    a unit it is rounded down to whole bytes. ValueError (TypeError for a non-size type)
    naming ``what`` and :data:`SIZE_FORMS` otherwise: infinity, NaN, ``1e400``, negative.
    """
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise TypeError(f"{what} must be a number of bytes or a size such as '512MiB', got {value!r}")
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{what} {value!r} is not a finite size; write {SIZE_FORMS}")
    text = str(value).strip().lower().replace(" ", "").replace("_", "")
    if text.startswith("-"):
        raise ValueError(f"{what} {value!r} must not be negative")
    match = _SIZE.fullmatch(text)
    if match is None:
        raise ValueError(f"{what} {value!r} is not a size; write bytes or e.g. '512MiB', '1GiB'; the forms: {SIZE_FORMS}")
    unit = match["unit"]
    if unit not in _UNITS:
        raise ValueError(f"{what} {value!r} is not a size; write bytes or e.g. '512MiB', '1GiB', '1GB': unknown "
                         f"unit {unit!r} (the forms: {SIZE_FORMS})")
    exact = decimal.Decimal(match["number"]) * _UNITS[unit]  # exact: 1.5GiB is 1610612736, not a float's guess
    if exact > MAX_SIZE:
        raise ValueError(f"{what} {value!r} is larger than any memory (at most 2**64 bytes); write {SIZE_FORMS}")
    if unit in ("", "b") and exact != exact.to_integral_value():
        raise ValueError(f"{what} {value!r} is not a whole number of bytes; write {SIZE_FORMS}")
    return int(exact)


def format_size(nbytes: int) -> str:
    """``16 GiB``, ``1.5 GiB``, ``512 MiB``, ``0 B``: short, for tables and messages."""
    for unit, scale in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if abs(nbytes) >= scale:
            value = nbytes / scale
            return f"{value:.0f} {unit}" if value == int(value) else f"{value:.1f} {unit}"
    return f"{nbytes} B"
