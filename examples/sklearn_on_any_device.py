"""scikit-learn's array-API estimators on every hetero device, checked against NumPy.

    python examples/sklearn_on_any_device.py [--devices cpu oneapi:0 opencl:0] [--estimators PCA Ridge ...]

scikit-learn dispatches to any array API namespace (``sklearn.config_context(array_api_dispatch=True)``,
with ``SCIPY_ARRAY_API=1`` set before SciPy is first imported). Given hetero arrays, an estimator
finds ``hetero.xp`` through ``x.__array_namespace__()`` and runs there, on the arrays' device: an
NVIDIA or AMD GPU, Intel's OpenCL runtime, PoCL or the CPU alike. This script fits and applies each
estimator on scikit-learn's bundled digits (1797 x 64, float32) first with NumPy, then on each
device, compares the results (PCA's components up to sign), and prints a table of the times.
Functions a device has no vendor library for (LAPACK on OpenCL) compute on the host, reported
once per function and device; this script allows that (``HETERO_HOST_FALLBACK=allow``) and counts it.
"""

from __future__ import annotations

import os

os.environ.setdefault("SCIPY_ARRAY_API", "1")  # before SciPy (scikit-learn imports it) is loaded

import argparse  # noqa: E402 (SCIPY_ARRAY_API must be set first)
import dataclasses  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

import hetero  # noqa: E402
import hetero.xp as xp  # noqa: E402


@dataclasses.dataclass(frozen=True)
class Case:
    """One estimator: how to make it, what it outputs after fitting, how close results must be."""

    name: str
    make: Callable[[], Any]
    output: str  # "transform", "predict" or "predict_proba"
    supervised: bool
    rtol: float = 1e-3
    atol: float = 1e-3
    sign_free: bool = False  # PCA: components (and so transforms) are defined up to sign per axis


def cases() -> list[Case]:
    from sklearn.decomposition import PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.linear_model import Ridge
    from sklearn.naive_bayes import GaussianNB
    from sklearn.preprocessing import MinMaxScaler, Normalizer, StandardScaler

    return [
        Case("StandardScaler", StandardScaler, "transform", False),
        Case("MinMaxScaler", MinMaxScaler, "transform", False),
        Case("Normalizer", Normalizer, "transform", False),
        Case("PCA(covariance_eigh)", lambda: PCA(n_components=8, svd_solver="covariance_eigh"), "transform", False,
             rtol=1e-2, atol=1e-2, sign_free=True),
        Case("PCA(full)", lambda: PCA(n_components=8, svd_solver="full"), "transform", False,
             rtol=1e-2, atol=1e-2, sign_free=True),
        Case("PCA(randomized)", lambda: PCA(n_components=8, svd_solver="randomized", random_state=0,
                                            power_iteration_normalizer="QR"), "transform", False,
             rtol=5e-2, atol=5e-2, sign_free=True),
        Case("LinearDiscriminantAnalysis", LinearDiscriminantAnalysis, "predict", True, rtol=0, atol=0),
        Case("Ridge", lambda: Ridge(alpha=1.0, solver="svd"), "predict", True, rtol=1e-3, atol=1e-3),
        Case("GaussianNB", GaussianNB, "predict", True, rtol=0, atol=0),
    ]


def digits() -> tuple[np.ndarray, np.ndarray]:
    from sklearn.datasets import load_digits

    data, target = load_digits(return_X_y=True)
    return data.astype(np.float32), target.astype(np.int64)


def run(case: Case, data: Any, target: Any) -> tuple[np.ndarray, float]:
    """Fit and apply ``case`` on ``data`` (NumPy or hetero arrays): the output as NumPy, seconds taken."""
    import sklearn

    estimator = case.make()
    start = time.perf_counter()
    with sklearn.config_context(array_api_dispatch=True):
        estimator.fit(data, target) if case.supervised else estimator.fit(data)
        out = getattr(estimator, case.output)(data)
    result = out.numpy() if isinstance(out, hetero.Array) else np.asarray(out)
    return result, time.perf_counter() - start


def matches(case: Case, got: np.ndarray, want: np.ndarray) -> bool:
    if got.shape != want.shape:
        return False
    if case.sign_free:  # flip each column of got to agree in sign with want's
        signs = np.sign(np.sum(got * want, axis=0))
        got = got * np.where(signs == 0, 1, signs)
    if case.rtol == 0 and case.atol == 0:
        return bool(np.mean(got == want) >= 0.99)  # labels: a near-tie may fall the other way on float32
    scale = float(np.max(np.abs(want))) or 1.0
    return bool(np.allclose(got, want, rtol=case.rtol, atol=case.atol * scale))


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--devices", nargs="+", default=None, help="devices (default: every device present)")
    parser.add_argument("--estimators", nargs="+", default=None, help="names of the cases to run (default: all)")
    args = parser.parse_args(argv)
    if "HETERO_HOST_FALLBACK" not in os.environ:  # this script reports the host fallbacks itself, below
        os.environ["HETERO_HOST_FALLBACK"] = "allow"
        hetero.reload_config()
    chosen = [c for c in cases() if args.estimators is None or c.name.split("(")[0] in args.estimators
              or c.name in args.estimators]
    names = args.devices or [d.name for d in hetero.devices()]
    data, target = digits()
    reference = {case.name: (run(case, data, target), run(case, data, target))[1] for case in chosen}  # warm, as below
    rows: list[list[str]] = []
    failures = 0
    for name in names:
        device = hetero.device(name)
        x, y = xp.asarray(data, device=device), xp.asarray(target, device=device)
        for case in chosen:
            run(case, x, y)  # the first run builds the device's kernels (cached on disk for next time)
            got, seconds = run(case, x, y)
            ok = matches(case, got, reference[case.name][0])
            failures += not ok
            rows.append([case.name, name, f"{1e3 * seconds:.1f}", f"{1e3 * reference[case.name][1]:.1f}",
                         "yes" if ok else "NO"])
    header = ["estimator", "device", "hetero ms", "NumPy ms", "matches NumPy"]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))
    from hetero.arraylib.host_fallback import counts

    for (function, device_name), count in sorted(counts().items()):
        print(f"computed on the host: {function} on {device_name} ({count} call(s))")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
