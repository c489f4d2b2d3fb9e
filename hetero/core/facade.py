"""A room's package that keeps the names of the module it grew from: ``from hetero.kernels import
Kernel`` still works now that :class:`Kernel` lives in :mod:`hetero.kernels.kernel`. The package's
``__getattr__`` (PEP 562) finds its own modules by name first, then the old module's names, each
loaded on first use (so ``import hetero.kernels.hooks`` does not load the compiler) and kept.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from typing import Any


def room_attributes(package: str, grew_from: str) -> Callable[[str], Any]:
    """The ``__getattr__`` of ``package``, whose names not found otherwise come from ``grew_from``."""

    def __getattr__(name: str) -> Any:
        try:
            return importlib.import_module(f"{package}.{name}")  # a module of this room
        except ModuleNotFoundError as error:
            if error.name != f"{package}.{name}":
                raise
        try:
            value = getattr(importlib.import_module(grew_from), name)
        except AttributeError:
            raise AttributeError(f"module {package!r} has no attribute {name!r}") from None
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
