"""Run a function right after the program imports a module (torch), without importing it: a
one-shot ``sys.meta_path`` finder that lets the import go as it would have and then calls the
function. Memory quotas (:mod:`hetero.torch.memory`) and fault rules for torch ops
(:mod:`hetero.torch.injection`) use it when they are set before the program imports torch.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
from collections.abc import Callable
from typing import Any


class AfterImport(importlib.abc.MetaPathFinder):
    """One shot: when ``name`` is imported, let the import finish, then call ``then``; an error in
    ``then`` is printed (``hetero: could not <what> (...)``) and never breaks the import."""

    def __init__(self, name: str, then: Callable[[], None], what: str) -> None:
        self.name, self.then, self.what = name, then, what

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> importlib.machinery.ModuleSpec | None:
        if name != self.name:
            return None
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(self)
        spec = None
        for finder in list(sys.meta_path):  # the import as it would have gone without this finder
            find = getattr(finder, "find_spec", None)
            if find is not None and (spec := find(name, path, target)) is not None:
                break
        loader = spec.loader if spec is not None else None
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        exec_module = loader.exec_module

        def exec_then(module: Any) -> None:
            exec_module(module)
            try:
                self.then()
            except Exception as exc:  # noqa: BLE001 - what hetero adds must never break the program's import
                print(f"hetero: could not {self.what} ({type(exc).__name__}: {exc})", file=sys.stderr)

        # This spec's own loader instance: nothing else sees the change.
        loader.exec_module = exec_then  # type: ignore[method-assign]
        return spec


def after_import(name: str, then: Callable[[], None], what: str, pending: AfterImport | None = None) -> AfterImport:
    """Call ``then`` once ``name`` is imported (see :class:`AfterImport`); ``pending``: the finder an
    earlier call returned, reused while it still waits. Returns the finder waiting now."""
    if pending is not None and pending in sys.meta_path:
        return pending
    finder = AfterImport(name, then, what)
    sys.meta_path.insert(0, finder)
    return finder
