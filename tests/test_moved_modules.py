"""The module paths hetero's documentation named before its modules moved into rooms still import,
as the very module at the new path, with a DeprecationWarning naming it."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

import hetero
from hetero.core.moved import MOVED


@pytest.mark.parametrize("old", sorted(MOVED))
def test_an_old_path_imports_the_module_that_lives_at_the_new_one(old: str) -> None:
    code = (f"import warnings, importlib, hetero\n"
            f"with warnings.catch_warnings(record=True) as caught:\n"
            f"    warnings.simplefilter('always')\n"
            f"    old = importlib.import_module({old!r})\n"
            f"assert old is importlib.import_module({MOVED[old]!r}), old\n"
            f"assert any({MOVED[old]!r} in str(w.message) and w.category is DeprecationWarning for w in caught), caught\n"
            f"assert callable(hetero.device) and hetero.device('cpu').name == 'cpu'\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False, timeout=120)
    assert result.returncode == 0, result.stderr


def test_the_old_plugin_interface_path_keeps_third_party_backends_working() -> None:
    with pytest.warns(DeprecationWarning, match="hetero.core.plugin"):
        plugin = importlib.import_module("hetero.plugin")
    assert plugin.BackendRegistration is hetero.core.plugin.BackendRegistration


def test_a_name_that_never_existed_is_still_a_module_not_found_error() -> None:
    with pytest.raises(ModuleNotFoundError):
        importlib.import_module("hetero.array_nonexistent")
