"""The array API's inspection API for hetero: ``hetero.xp.__array_namespace_info__()``.

Decided once, for every device:

- the default floating-point dtype is **float32** on every device (not only where fp64 is
  missing), so one program gives the same dtypes on every vendor, and the default complex dtype
  complex64; float64 and complex128 are there wherever the device has fp64 (``dtypes(device=d)``
  lists what each device holds);
- the default integral dtype and the index dtype are **int64**;
- the default device is :func:`hetero.device` with no argument: ``HETERO_DEVICE`` or the
  config's ``device``, else the scheduler's choice (``"auto"``);
- ``capabilities()`` adds, beside the standard's keys, ``"host fallback"``: per device, the
  functions that compute on the host there because the device has no vendor library for them
  (see :mod:`hetero.arraylib.host_fallback`).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.core.device import Device
from hetero.core.registry import device as _device
from hetero.core.registry import devices as _devices
from hetero.arraylib.dtype_functions import KINDS

_NAMES = ("bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float32", "float64",
          "complex64", "complex128")


def _holds(device: Device, kind: np.dtype[Any]) -> bool:
    return kind.itemsize // (2 if kind.kind == "c" else 1) < 8 or device.fp64


class Info:
    """What the namespace holds; one object per call of ``__array_namespace_info__()``."""

    def capabilities(self) -> dict[str, Any]:
        from hetero.arraylib.host_fallback import host_functions

        return {
            "boolean indexing": True,
            "data-dependent shapes": True,
            "max dimensions": None,  # kernels are generated per rank: no limit
            "host fallback": {each.name: host_functions(each) for each in _devices()},
        }

    def default_device(self) -> Device:
        return _device()

    def devices(self) -> list[Device]:
        """Every device of every backend present (quarantined or not: an array may live anywhere)."""
        return list(_devices())

    def _resolve(self, device: Any) -> Device:
        return self.default_device() if device is None else _device(device)

    def default_dtypes(self, *, device: Any = None) -> dict[str, np.dtype[Any]]:
        self._resolve(device)  # an unknown device is an error here too
        return {"real floating": dtypes.float32, "complex floating": np.dtype(np.complex64), "integral": dtypes.int64,
                "indexing": dtypes.int64}

    def dtypes(self, *, device: Any = None, kind: Any = None) -> dict[str, np.dtype[Any]]:
        where = self._resolve(device)
        held = {name: np.dtype(name) for name in _NAMES if _holds(where, np.dtype(name))}
        if kind is None:
            return held
        kinds = kind if isinstance(kind, tuple) else (kind,)
        for each in kinds:
            if isinstance(each, str) and each not in KINDS:
                raise ValueError(f"dtypes: unknown kind {each!r}; the standard's kinds are {', '.join(map(repr, KINDS))}")
        return {name: d for name, d in held.items() if any(d.kind in KINDS[k] for k in kinds if isinstance(k, str))
                or any(d == k for k in kinds if isinstance(k, np.dtype))}


def __array_namespace_info__() -> Info:  # noqa: N807 (the standard's name)
    """The inspection API (2024.12): capabilities, default device and dtypes, devices, dtypes."""
    return Info()


__all__ = ["Info", "__array_namespace_info__"]
