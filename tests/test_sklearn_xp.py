"""scikit-learn's array-API estimators on hetero arrays, on every device, against the same
estimators on NumPy (the cases of examples/sklearn_on_any_device.py: scalers, PCA with three
solvers, LinearDiscriminantAnalysis, Ridge, GaussianNB)."""

from __future__ import annotations

import importlib.util
import os
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import numpy as np
import pytest

import hetero
import hetero.xp as xp

pytest.importorskip("sklearn")
if os.environ.get("SCIPY_ARRAY_API") != "1" and "scipy" in sys.modules:
    pytest.skip("scikit-learn's array API dispatch needs SCIPY_ARRAY_API=1 before SciPy is imported; "
                "tests/conftest.py sets it", allow_module_level=True)

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "sklearn_on_any_device.py"


def _example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("sklearn_on_any_device", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


_before = dict(os.environ)
example = _example()
_changed_by_loading = {k for k in set(_before) | set(os.environ) if _before.get(k) != os.environ.get(k)}
CASES = {case.name: case for case in example.cases()}


@pytest.fixture(scope="module")
def digits() -> tuple[np.ndarray, np.ndarray]:
    data, target = example.digits()
    return data[:600], target[:600]


@pytest.fixture
def host_fallback_allowed(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setenv("HETERO_HOST_FALLBACK", "allow")  # LAPACK on OpenCL devices runs on the host
    hetero.reload_config()
    yield
    monkeypatch.undo()
    hetero.reload_config()


@pytest.mark.usefixtures("host_fallback_allowed")
@pytest.mark.parametrize("name", list(CASES))
def test_estimator_matches_numpy(device: hetero.Device, name: str, digits: tuple[np.ndarray, np.ndarray]) -> None:
    case = CASES[name]
    data, target = digits
    want, _ = example.run(case, data, target)
    got, _ = example.run(case, xp.asarray(data, device=device), xp.asarray(target, device=device))
    assert example.matches(case, got, want), f"{name} on {device.name} differs from NumPy"


def test_loading_the_example_changes_no_setting() -> None:
    # the example allows host fallbacks only when run as a script: at import it set
    # HETERO_HOST_FALLBACK for the whole test session, and the fallback warnings went quiet
    assert _changed_by_loading <= {"SCIPY_ARRAY_API"}, _changed_by_loading


def test_results_stay_on_the_device(device: hetero.Device, digits: tuple[np.ndarray, np.ndarray]) -> None:
    import sklearn
    from sklearn.preprocessing import StandardScaler

    x = xp.asarray(digits[0], device=device)
    with sklearn.config_context(array_api_dispatch=True):
        out = StandardScaler().fit_transform(x)
    assert isinstance(out, hetero.Array) and out.device is device
