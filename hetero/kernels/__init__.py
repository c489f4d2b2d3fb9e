"""Kernels and their launches (the public API floor): ``@hetero.kernel`` and :class:`Kernel`
(:mod:`.kernel`), what a launch passes (:mod:`.launch_args`, :mod:`.launch_values`), kernels the
array library generates as IR (:mod:`.generated`), split launches over several devices
(:mod:`.split`), streams (:mod:`.stream`) and the cost model's calibration (:mod:`.calibration`).

May import: every floor below (core, language, the compiler, backends through the registry, the
scheduler, fault) and the array room beside it. ``from hetero.kernels import Kernel`` keeps
working: the names of :mod:`.kernel`, the module this room grew from, are found here too.
"""

from __future__ import annotations

import importlib
from typing import Any

# The module this room grew from: its names stay reachable here, loaded on first use.
_ROOM_MODULE = "hetero.kernels.kernel"


def __getattr__(name: str) -> Any:
    try:
        return importlib.import_module(f"{__name__}.{name}")  # a module of this room
    except ModuleNotFoundError as error:
        if error.name != f"{__name__}.{name}":
            raise
    module = importlib.import_module(_ROOM_MODULE)
    try:
        value = getattr(module, name)
    except AttributeError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    globals()[name] = value
    return value
