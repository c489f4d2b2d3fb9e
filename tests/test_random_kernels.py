"""Property test: random arithmetic expression kernels agree with NumPy on every device.

Each example writes a kernel computing ``out[i] = <expression of x[i], y[i]>`` into a
module file, compiles it for every device, and compares with the same expression
evaluated by NumPy (whose NEP 50 scalar rules match hetero's weak literals).
"""

from __future__ import annotations

import importlib.util
import itertools
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetero

_counter = itertools.count()
N = 64


def _expressions(kind: str) -> st.SearchStrategy[str]:
    literals = ["0.5", "2.0", "-1.25", "3.0"] if kind == "f" else ["1", "2", "-3", "7"]
    leaves = st.sampled_from(["x[i]", "y[i]", *literals])
    binary = ["+", "-", "*"] + (["&", "|", "^"] if kind == "i" else [])

    def extend(children: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(children, st.sampled_from(binary), children).map(lambda t: f"({t[0]} {t[1]} {t[2]})"),
            st.tuples(st.sampled_from(["min", "max"]), children, children).map(lambda t: f"{t[0]}({t[1]}, {t[2]})"),
            children.map(lambda c: f"abs({c})"),
            children.map(lambda c: f"(-{c})"),
        )

    return st.recursive(leaves, extend, max_leaves=8).filter(lambda e: "x[i]" in e or "y[i]" in e)


def _scalar(v: object) -> bool:
    return isinstance(v, (int, float))


def _numpy_eval(expr: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    # Python scalars stay Python scalars (weak, NEP 50) until they meet an array, as in hetero.
    names = {
        "x": x, "y": y,
        "abs": lambda v: abs(v) if _scalar(v) else np.abs(v),
        "min": lambda a, b: min(a, b) if _scalar(a) and _scalar(b) else np.minimum(a, b),
        "max": lambda a, b: max(a, b) if _scalar(a) and _scalar(b) else np.maximum(a, b),
    }
    with np.errstate(all="ignore"):
        return np.asarray(eval(expr.replace("x[i]", "x").replace("y[i]", "y"), names))


def _make_kernel(expr: str, folder: Path) -> hetero.Kernel:
    name = f"random_kernel_{next(_counter)}"
    path = folder / f"{name}.py"
    path.write_text(
        "import hetero\n\n"
        "@hetero.kernel\n"
        f"def {name}(x, y, out):\n"
        "    i = hetero.global_id(0)\n"
        "    if i < out.shape[0]:\n"
        f"        out[i] = {expr}\n"
    )
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return getattr(module, name)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["f", "i"]), data=st.data())
def test_random_expressions_match_numpy_on_every_device(tmp_path_factory, kind: str, data: st.DataObject) -> None:
    expr = data.draw(_expressions(kind))
    rng = np.random.default_rng(len(expr))
    if kind == "f":
        x, y = rng.uniform(-10, 10, N).astype(np.float32), rng.uniform(-10, 10, N).astype(np.float32)
    else:
        x, y = rng.integers(-1000, 1000, N, dtype=np.int32), rng.integers(-1000, 1000, N, dtype=np.int32)
    want = _numpy_eval(expr, x, y)
    assert want.dtype == x.dtype, (expr, want.dtype)
    kernel = _make_kernel(expr, tmp_path_factory.mktemp("kernels"))
    for device in hetero.devices():
        out = hetero.zeros(N, dtype=x.dtype, device=device)
        kernel[N](hetero.asarray(x, device=device), hetero.asarray(y, device=device), out)
        got = out.numpy()
        if kind == "i":
            np.testing.assert_array_equal(got, want, err_msg=f"{device.name}: {expr}")
        else:
            # A compiler may contract a*b+c into one FMA: allow rounding of the intermediate magnitudes.
            scale = np.abs(x).max() + np.abs(y).max() + 16
            tolerance = 1e-5 * scale ** min(expr.count("*") + 1, 4)
            assert np.all(np.abs(got - want) <= tolerance), (device.name, expr, got[:4], want[:4])
