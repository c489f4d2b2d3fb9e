"""The Array type (the public API floor's base): :class:`hetero.Array` (:mod:`.ndarray`) with its
layout, strided views (:mod:`.views`), basic indexing (:mod:`.index`), operators and reduction
methods, ``repr``, type promotion (:mod:`.promotion`) and complex arrays' component views
(:mod:`.components`). ``import hetero`` loads this room and nothing heavier: no compiler, no
vendor library.

What an array does beyond its layout (copies, arithmetic, reductions, casts, matrix products,
advanced indexing) is the array library's, a floor above in :mod:`hetero.arraylib`; the Array
asks it through the hooks of :mod:`.hooks`, each answered when first asked.

May import: the floors below (core, the scheduler's usage ledger). ``from hetero.array import
Array`` keeps working: the names of :mod:`.ndarray`, the module this room grew from, are found
here too.
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
