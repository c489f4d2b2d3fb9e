"""Checkpoints and resuming (the public API floor): ``hetero.checkpoint.save`` / ``load``
(:mod:`.store`), the state tree's encoding (:mod:`.codec`), payload files (:mod:`.files`), the
manifest's shape (:mod:`.manifest`), and ``hetero.resumable`` for torch loops restarted by
``hetero-run`` (:mod:`.resume`, :mod:`.resume_data`).

May import: every floor below. ``hetero.checkpoint.save(...)`` keeps working: the names of
:mod:`.store`, the module this room grew from, are found here too.
"""

from __future__ import annotations

import importlib
from typing import Any

# The module this room grew from: its names stay reachable here, loaded on first use.
_ROOM_MODULE = "hetero.checkpoint.store"


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
