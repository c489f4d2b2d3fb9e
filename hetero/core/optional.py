"""Optional libraries, imported when a feature first needs them. A library that is missing (or
does not import) raises one :class:`~hetero.core.errors.MissingDependencyError` whose message is
one line naming the feature, the library and the extra that installs it::

    >>> require("aiohttp", extra="serve", feature="hetero serve")
    MissingDependencyError: hetero serve needs aiohttp: pip install 'hetero[serve]'

Every optional import of the library and its commands goes through :func:`require` (ONNX Runtime,
aiohttp, prometheus_client, torch, libclang). The vendor stacks behind the backends (PyOpenCL,
CuPy) are not imported here: a backend that cannot load them is *unavailable, with the reason
and the remedy* (:class:`~hetero.core.errors.BackendUnavailableError`), as discovery must be lenient.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from hetero.core.errors import MissingDependencyError


def require(module: str, *, extra: str, feature: str, package: str | None = None) -> ModuleType:
    """``module``, imported; or :class:`MissingDependencyError` saying that ``feature`` needs it and
    that ``pip install 'hetero[extra]'`` brings it. ``package``: the name to show when it is not the
    module's (``libclang`` for ``clang.cindex``). A library that is installed but fails to import
    (one of its own dependencies missing) is named with the reason."""
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        missing = exc.name
        itself = missing is None or missing == module or module.startswith(f"{missing}.")
        cause = "" if itself else f"it does not import: {exc}"
        raise MissingDependencyError(module, extra, feature, package, cause) from exc


__all__ = ["MissingDependencyError", "require"]
