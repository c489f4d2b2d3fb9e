"""The array door (the public API floor): :class:`hetero.Array` (:mod:`.ndarray`), its views,
indexing, operators and fusion, and the array library behind ``hetero.xp``: elementwise functions,
reductions and scans, creation, manipulation, sorting, searching, sets, take/put, and the rooms
:mod:`.linalg`, :mod:`.fft` and :mod:`.complex`. Each operation is a kernel generated as IR by
:mod:`hetero.compiler.array_kernels` and launched through :mod:`hetero.kernels`, or a vendor
library's call.

May import: every floor below and the kernels room beside it. ``from hetero.array import Array``
keeps working: the names of :mod:`.ndarray`, the module this room grew from, are found here too.
"""

from __future__ import annotations

import importlib
from typing import Any

# The module this room grew from: its names stay reachable here, loaded on first use.
_ROOM_MODULE = "hetero.array.ndarray"


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
