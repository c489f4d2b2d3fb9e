"""Module paths the documentation named before hetero's modules moved into rooms by floor and job
(2026-12-07), still importable: ``import hetero.plugin`` gives :mod:`hetero.core.plugin` itself
(the same module object, so its counters and registries are the ones hetero uses), with a
:class:`DeprecationWarning` that names the new path. ``import hetero`` installs the finder first
in ``sys.meta_path`` (an old package's submodules would otherwise be found in the new package's
folder and run a second time under the old name); for any other name it costs one dict lookup.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import sys
import warnings
from collections.abc import Sequence
from types import ModuleType

#: old module path -> where it lives now (the paths README.md and docs/ named before the move).
MOVED: dict[str, str] = {
    "hetero.plugin": "hetero.core.plugin",
    "hetero.launch_counts": "hetero.core.launch_counts",
    "hetero.resume": "hetero.checkpoint.resume",
    "hetero.array_advanced_index": "hetero.arraylib.advanced_index",
    "hetero.array_blas": "hetero.arraylib.linalg.blas",
    "hetero.array_complex": "hetero.arraylib.complex.elementwise",
    "hetero.array_components": "hetero.array.components",
    "hetero.array_fft": "hetero.arraylib.fft.transforms",
    "hetero.array_host_fallback": "hetero.arraylib.host_fallback",
    "hetero.array_linalg": "hetero.arraylib.linalg.namespace",
    "hetero.fault.guard": "hetero.recovery.guard",
    "hetero.fault.snapshot": "hetero.recovery.snapshot",
    "hetero.fault.launch": "hetero.launcher",
    "hetero.fault.launch.config": "hetero.launcher.config",
    "hetero.fault.launch.state": "hetero.launcher.state",
    "hetero.fault.launch.supervisor": "hetero.launcher.supervisor",
    "hetero.fault.launch.worker_main": "hetero.launcher.worker_main",
}


class _Alias(importlib.abc.Loader):
    """Loads an old path as the module that lives at the new one (nothing is executed twice)."""

    def __init__(self, old: str, new: str) -> None:
        self.old = old
        self.new = new

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        warnings.warn(f"{self.old} moved to {self.new} (docs/architecture.md); import it from there",
                      DeprecationWarning, stacklevel=2)
        return importlib.import_module(self.new)

    def exec_module(self, module: ModuleType) -> None:
        pass  # the module at the new path is already executed


class MovedModuleFinder(importlib.abc.MetaPathFinder):
    """Finds the old paths of :data:`MOVED`, before any other finder looks for them."""

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        new = MOVED.get(fullname)
        if new is None:
            return None
        return importlib.util.spec_from_loader(fullname, _Alias(fullname, new))


def install() -> None:
    """Put the finder first in ``sys.meta_path``, once."""
    if not any(isinstance(finder, MovedModuleFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, MovedModuleFinder())
