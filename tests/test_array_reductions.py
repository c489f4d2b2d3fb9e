"""Reductions and scans on every device (hetero.arraylib.reductions), against NumPy.

Integer and bool results are compared exactly. Float results are compared with a bound that
grows with the number of elements folded, as a summation's rounding error does: for a sum or
mean of ``n`` elements ``|ours - exact| <= 4 (n + 1) eps sum|x|`` (``eps`` of the result dtype,
``exact`` computed in float64), for var/std the same with ``sum x**2``, for a product
``4 (n + 1) eps |exact|``; min/max/argmin/argmax are exact. hetero folds in a fixed tree
order, NumPy pairwise or in sequence, so bits differ from NumPy within that bound; the same
call twice on one device gives the same bits.
"""

from __future__ import annotations

import dataclasses
import warnings
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetero
from hetero.compiler.ir import json_form as ir_json
from hetero.compiler.array_kernels import reduction, scan
from hetero.compiler.emit.registry import emitter_for
from hetero.core.launch_counts import launch_counts
from hetero.core.target import Target
from hetero.core.types import bool_t, f16, f32, f64, i8, i32, i64, u16, u64

# derandomize: the same examples every run, so the CPU target (Numba compiles each new kernel once,
# then caches it) does not pay for fresh kernels on every run.
SETTINGS = settings(max_examples=25, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture])
DTYPES = ["bool", "int8", "int32", "uint16", "int64", "float16", "float32", "float64"]
FLOATS = ["float16", "float32", "float64"]
ALL_OPS = ["sum", "prod", "min", "max", "any", "all", "argmin", "argmax", "mean", "var", "std"]
VIEWS = ["plain", "flipped", "strided", "transposed", "broadcast"]


def _values(shape: tuple[int, ...], dtype: str, seed: int, op: str = "sum") -> np.ndarray:
    rng = np.random.default_rng(seed)
    if dtype == "bool":
        return rng.integers(0, 2, shape).astype(bool)
    if op == "prod":  # keeps products of many elements representable
        return rng.choice([-1, 1, 2] if dtype[0] != "u" else [1, 2], shape).astype(dtype)
    if dtype.startswith(("int", "uint")):
        low = 0 if dtype.startswith("u") else -5
        return rng.integers(low, 6, shape).astype(dtype)
    return rng.normal(0.5, 2.0, shape).astype(dtype)


def _view(host: np.ndarray, kind: str, device: hetero.Device) -> tuple[np.ndarray, hetero.Array]:
    """The same view of ``host`` in NumPy and on ``device``."""
    if kind == "broadcast" and host.ndim:
        base = host[:1]
        x = hetero.asarray(np.ascontiguousarray(base), device=device)
        return np.broadcast_to(base, host.shape), hetero.broadcast_to(x, host.shape)
    if kind in ("flipped", "strided") and host.ndim:
        wide = np.repeat(host, 2, axis=-1) if kind == "strided" else host
        x = hetero.asarray(np.ascontiguousarray(wide), device=device)
        if kind == "flipped":
            return wide[::-1, ...], x[::-1, ...]
        key = (..., slice(None, None, 2))
        return wide[key], x[key]
    if kind == "transposed":
        x = hetero.asarray(np.ascontiguousarray(host.T), device=device)
        return host.T.T, x.T
    return host, hetero.asarray(host, device=device)


def _reference(op: str, host: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    wide = host.astype(np.float64) if host.dtype.kind == "f" else host
    if op in ("argmin", "argmax"):
        return np.asarray(getattr(np, op)(host, axis=axis, keepdims=keepdims))
    if op in ("sum", "prod"):
        return np.asarray(getattr(np, op)(wide, axis=axis, keepdims=keepdims)).astype(
            np.int64 if host.dtype.kind in "bi" else np.uint64 if host.dtype.kind == "u" else host.dtype)
    if op in ("min", "max", "any", "all"):
        return np.asarray(getattr(np, op)(host, axis=axis, keepdims=keepdims))
    return np.asarray(getattr(np, op)(wide, axis=axis, keepdims=keepdims))


def _bound(op: str, host: np.ndarray, axis: Any, keepdims: bool, exact: np.ndarray) -> np.ndarray:
    """The rounding bound of the module docstring, per output element."""
    eps = np.finfo(host.dtype).eps
    wide = host.astype(np.float64)
    count = wide.size if axis is None else int(np.prod([host.shape[a] for a in np.atleast_1d(axis)]))
    if op in ("sum", "mean"):
        scale = np.sum(np.abs(wide), axis=axis, keepdims=keepdims) / (count if op == "mean" else 1)
    elif op in ("var", "std"):
        scale = np.mean(wide**2, axis=axis, keepdims=keepdims)
        scale = np.sqrt(scale) if op == "std" else scale
    else:
        scale = np.abs(exact)
    return 4 * (count + 1) * eps * np.asarray(scale) + np.finfo(host.dtype).tiny


def _check(op: str, ours: hetero.Array, host: np.ndarray, axis: Any, keepdims: bool) -> None:
    exact = _reference(op, host, axis, keepdims)
    got = ours.numpy()
    assert got.shape == exact.shape, (op, got.shape, exact.shape)
    if op in ("mean", "var", "std") or (op in ("sum", "prod") and host.dtype.kind == "f"):
        assert got.dtype == host.dtype
        bound = _bound(op, host, axis, keepdims, exact)
        assert np.all((np.abs(got.astype(np.float64) - exact) <= bound) | (np.isnan(got) & np.isnan(exact))), (op, got, exact)
    else:
        assert got.dtype == exact.dtype, (op, got.dtype, exact.dtype)
        np.testing.assert_array_equal(got, exact)


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, tuple[int, ...], Any, bool, str, int]:
    op = draw(st.sampled_from(ALL_OPS))
    dtype = draw(st.sampled_from(FLOATS if op in ("mean", "var", "std") else DTYPES))
    shape = tuple(draw(st.lists(st.integers(0, 5), max_size=3)))
    ndim = len(shape)
    if op in ("argmin", "argmax") or not ndim:
        axis = draw(st.none() | st.integers(-ndim, ndim - 1)) if ndim else None
    else:
        axis = draw(st.none() | st.integers(-ndim, ndim - 1)
                    | st.lists(st.integers(-ndim, ndim - 1), max_size=ndim, unique_by=lambda a: a % ndim).map(tuple))
    return op, dtype, shape, axis, draw(st.booleans()), draw(st.sampled_from(VIEWS)), draw(st.integers(0, 2**16))


@SETTINGS
@given(case=cases())
def test_reductions_match_numpy(device: hetero.Device, case: tuple[str, str, tuple[int, ...], Any, bool, str, int]) -> None:
    op, dtype, shape, axis, keepdims, view, seed = case
    host, x = _view(_values(shape, dtype, seed, op), view, device)
    if host.size == 0 and _reference_raises(op, host, axis):
        with pytest.raises(ValueError, match="empty"):
            getattr(hetero, op)(x, axis=axis, keepdims=keepdims)
        return
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # NumPy's "mean of empty slice"
        _check(op, getattr(hetero, op)(x, axis=axis, keepdims=keepdims), host, axis, keepdims)


def _reference_raises(op: str, host: np.ndarray, axis: Any) -> bool:
    try:
        getattr(np, op)(host, axis=axis)
    except ValueError:
        return True
    return False


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_large_reductions_fold_several_work_groups_deterministically(device: hetero.Device, dtype: str) -> None:
    host = _values((100_000,), dtype, 7)
    x = hetero.asarray(host, device=device)
    for op in ("sum", "max", "argmin", "any") + (("mean", "var", "std") if dtype == "float32" else ()):
        first = getattr(hetero, op)(x)
        _check(op, first, host, None, False)
        assert getattr(hetero, op)(x).numpy().tobytes() == first.numpy().tobytes(), op  # same bits again
    few_long = host.reshape(4, 25_000)  # few outputs, long segments: cut into parts, merged
    _check("sum", hetero.sum(x.reshape(4, 25_000), axis=1), few_long, 1, False)
    _check("argmax", hetero.argmax(x.reshape(4, 25_000)[:, ::-1], axis=1), few_long[:, ::-1], 1, False)
    _check("max", hetero.max(x.reshape(25_000, 4).T, axis=1), host.reshape(25_000, 4).T, 1, False)
    many = host.reshape(1000, 100)
    _check("sum", hetero.sum(x.reshape(1000, 100), axis=0), many, 0, False)


def test_nan_propagates_as_numpy_says(device: hetero.Device) -> None:
    host = np.array([[1.0, np.nan, 3.0, np.nan], [np.nan, 5.0, -1.0, 2.0], [0.0, 1.0, 2.0, 2.0]], np.float32)
    x = hetero.asarray(host, device=device)
    for op in ("max", "min", "argmax", "argmin", "sum", "mean", "any"):
        for axis in (None, 0, 1):
            np.testing.assert_array_equal(getattr(hetero, op)(x, axis=axis).numpy(), getattr(np, op)(host, axis=axis))
    big = np.zeros(50_000, np.float64)
    big[[31_337, 40_000]] = np.nan
    assert hetero.argmax(hetero.asarray(big, device=device)).numpy() == 31_337
    assert np.isnan(hetero.max(hetero.asarray(big, device=device)).numpy())


def test_ties_give_the_first_occurrence(device: hetero.Device) -> None:
    host = np.array([3, 7, 7, 1, 1, 7], np.int16)
    x = hetero.asarray(np.tile(host, 300), device=device)
    assert hetero.argmax(x).numpy() == 1 and hetero.argmin(x).numpy() == 3
    assert hetero.argmax(x[::-1]).numpy() == np.argmax(np.tile(host, 300)[::-1])


def test_empty_inputs_follow_numpy(device: hetero.Device) -> None:
    x = hetero.asarray(np.zeros((0, 3), np.float32), device=device)
    assert hetero.sum(x).numpy() == 0 and hetero.prod(x).numpy() == 1
    assert not hetero.any(x).numpy() and hetero.all(x).numpy()
    with np.errstate(all="ignore"):
        assert np.isnan(hetero.mean(x).numpy()) and np.isnan(hetero.var(x).numpy()) and np.isnan(hetero.std(x).numpy())
    np.testing.assert_array_equal(hetero.sum(x, axis=0).numpy(), np.zeros(3, np.float32))
    assert hetero.max(x, axis=1).shape == (0,) and hetero.argmax(x, axis=1).shape == (0,)
    for op in ("min", "max", "argmin", "argmax"):
        with pytest.raises(ValueError, match=rf"{op}\(\) of an empty segment"):
            getattr(hetero, op)(x)
    zero_d = hetero.asarray(np.float32(2.5), device=device)
    assert hetero.sum(zero_d).numpy() == 2.5 and hetero.argmax(zero_d).numpy() == 0 and hetero.var(zero_d).numpy() == 0
    assert hetero.sum(zero_d, keepdims=True).shape == ()


def test_bad_arguments_name_the_problem(device: hetero.Device) -> None:
    x = hetero.asarray(np.ones((2, 3), np.int32), device=device)
    with pytest.raises(hetero.ArrayError, match=r"axis 2 is out of bounds for an array of 2 dimension"):
        hetero.sum(x, axis=2)
    with pytest.raises(hetero.ArrayError, match=r"axis -3 is out of bounds"):
        x.max(axis=(0, -3))
    with pytest.raises(hetero.ArrayError, match="repeated axis"):
        hetero.sum(x, axis=(1, -1))
    for op in ("mean", "var", "std"):
        with pytest.raises(TypeError, match=r"floating-point.*astype"):
            getattr(hetero, op)(x)
    with pytest.raises(hetero.ArrayError, match="one axis"):
        hetero.argmax(x, axis=(0, 1))  # type: ignore[arg-type]
    with pytest.raises(hetero.ArrayError, match="needs axis="):
        hetero.cumulative_sum(x)
    with pytest.raises(hetero.ArrayError, match="at least one dimension"):
        hetero.cumulative_sum(hetero.asarray(np.int32(1), device=device))
    with pytest.raises(hetero.ArrayError, match="hetero.Array"):
        hetero.sum(np.ones(3))  # type: ignore[arg-type]
    with pytest.raises(hetero.ArrayError, match="correction must be >= 0"):
        hetero.var(hetero.asarray(np.ones(3, np.float32), device=device), correction=-1)


def test_dtype_rules(device: hetero.Device) -> None:
    ints = hetero.asarray(np.array([100, 100, 100], np.int8), device=device)
    assert hetero.sum(ints).dtype == np.int64 and hetero.sum(ints).numpy() == 300  # no int8 wrap
    assert hetero.sum(hetero.asarray(np.array([200, 200], np.uint8), device=device)).dtype == np.uint64
    assert hetero.sum(hetero.asarray(np.array([True, True]), device=device)).numpy() == 2
    assert hetero.sum(ints, dtype=hetero.float32).dtype == np.float32
    assert hetero.sum(ints, dtype="int8").numpy() == np.sum(np.array([100] * 3, np.int8), dtype=np.int8)
    halves = hetero.asarray(np.full(4096, 1.0, np.float16), device=device)
    assert hetero.sum(halves).dtype == np.float16 and hetero.sum(halves).numpy() == 4096  # folds in float32
    assert hetero.argmax(ints).dtype == np.int64 and hetero.any(ints).dtype == np.bool_
    assert hetero.max(ints).dtype == np.int8 and hetero.mean(halves).dtype == np.float16
    assert hetero.cumulative_sum(ints).dtype == np.int64


def test_var_correction_and_numerical_soundness(device: hetero.Device) -> None:
    host = (1e4 + np.arange(1000) % 7).astype(np.float32)  # a large mean: one-pass formulas lose it all
    x = hetero.asarray(host, device=device)
    for correction in (0, 1, 2.5):
        np.testing.assert_allclose(hetero.var(x, correction=correction).numpy(),
                                   np.var(host.astype(np.float64), ddof=correction), rtol=1e-4)
    np.testing.assert_allclose(x.std(correction=1).numpy(), np.std(host.astype(np.float64), ddof=1), rtol=1e-4)
    one = hetero.asarray(np.ones(1, np.float32), device=device)
    with np.errstate(all="ignore"):
        assert np.isnan(hetero.var(one, correction=1).numpy())  # 0 / 0, as NumPy
        assert np.isinf(hetero.var(hetero.asarray(np.array([1.0, 2.0], np.float32), device=device),
                                   correction=3).numpy())


def test_methods_match_functions(device: hetero.Device) -> None:
    host = np.arange(12, dtype=np.float32).reshape(3, 4)
    x = hetero.asarray(host, device=device)
    np.testing.assert_array_equal(x.sum(axis=0).numpy(), host.sum(axis=0))
    np.testing.assert_array_equal(x.max(axis=1, keepdims=True).numpy(), host.max(axis=1, keepdims=True))
    np.testing.assert_array_equal(x.argmin(axis=1).numpy(), host.argmin(axis=1))
    np.testing.assert_array_equal(x.cumulative_prod(axis=0).numpy(), np.cumprod(host, axis=0))
    assert x.all().numpy() == host.all() and x.any(axis=0).numpy().tolist() == host.any(axis=0).tolist()


@st.composite
def scan_cases(draw: st.DrawFn) -> tuple[str, str, tuple[int, ...], int, bool, str, int]:
    op = draw(st.sampled_from(["sum", "prod"]))
    shape = tuple(draw(st.lists(st.integers(0, 5), min_size=1, max_size=3)))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    return (op, draw(st.sampled_from(DTYPES)), shape, axis, draw(st.booleans()), draw(st.sampled_from(VIEWS)),
            draw(st.integers(0, 2**16)))


def _cumulative_reference(op: str, host: np.ndarray, axis: int, include_initial: bool) -> np.ndarray:
    out = np.int64 if host.dtype.kind in "bi" else np.uint64 if host.dtype.kind == "u" else host.dtype
    wide = host.astype(np.float64) if host.dtype.kind == "f" else host.astype(out)
    result = (np.cumsum if op == "sum" else np.cumprod)(wide, axis=axis)
    if include_initial:
        shape = list(host.shape)
        shape[axis] = 1
        result = np.concatenate([np.full(shape, 0 if op == "sum" else 1, result.dtype), result], axis=axis)
    return result.astype(out)


@SETTINGS
@given(case=scan_cases())
def test_scans_match_numpy(device: hetero.Device, case: tuple[str, str, tuple[int, ...], int, bool, str, int]) -> None:
    op, dtype, shape, axis, include_initial, view, seed = case
    host, x = _view(_values(shape, dtype, seed, "prod" if op == "prod" else "sum"), view, device)
    function = hetero.cumulative_sum if op == "sum" else hetero.cumulative_prod
    got = function(x, axis=axis, include_initial=include_initial).numpy()
    exact = _cumulative_reference(op, host, axis, include_initial)
    assert got.shape == exact.shape and got.dtype == exact.dtype
    if host.dtype.kind == "f":
        eps = np.finfo(host.dtype).eps
        scale = np.cumsum(np.abs(host.astype(np.float64)), axis=axis) if op == "sum" else np.abs(exact[...])
        bound = 4 * (host.shape[axis] + 1) * eps * (np.max(scale) if scale.size else 0)
        np.testing.assert_allclose(got.astype(np.float64), exact.astype(np.float64), rtol=0, atol=bound + 1e-30)
    else:
        np.testing.assert_array_equal(got, exact)


def test_large_scans_are_exact_for_ints_and_deterministic(device: hetero.Device) -> None:
    ints = _values((3, 40_000), "int32", 3)
    x = hetero.asarray(ints, device=device)
    np.testing.assert_array_equal(hetero.cumulative_sum(x, axis=1).numpy(), np.cumsum(ints, axis=1, dtype=np.int64))
    np.testing.assert_array_equal(hetero.cumulative_sum(x, axis=0).numpy(), np.cumsum(ints, axis=0, dtype=np.int64))
    floats = hetero.asarray(_values((100_000,), "float32", 4), device=device)
    first = hetero.cumulative_sum(floats).numpy()
    assert hetero.cumulative_sum(floats).numpy().tobytes() == first.tobytes()
    exact = np.cumsum(floats.numpy().astype(np.float64))
    bound = 4 * 100_001 * np.finfo(np.float32).eps * np.abs(floats.numpy()).sum()
    assert np.max(np.abs(first - exact)) <= bound


def test_reductions_are_counted_launches(device: hetero.Device) -> None:
    from hetero.fault.injection import inject

    x = hetero.asarray(np.arange(10, dtype=np.float32), device=device)
    x.sum()  # compiled outside the count and the drill
    before = launch_counts().get(device.name, 0)
    x.sum()
    assert launch_counts().get(device.name, 0) > before
    with inject(f"{device.name}:launch:every=1:sticky"), pytest.raises(hetero.ContextCorruptedError):
        x.sum()


# -- the kernels themselves: every dialect, NVRTC ------------------------------------------------
FEATURES = frozenset({"fp64", "fp16", "int64_atomics"})
TARGETS = [Target("opencl", "any", FEATURES, "test"), Target("cuda", "sm_90", FEATURES, "nvcc 13.0"),
           Target("hip", "gfx90a", FEATURES, "hipcc 5.2"), Target("cpu", "x86_64", FEATURES, "numba")]
KERNELS: list[reduction.Reduction | scan.Scan] = [
    reduction.Reduction("sum", f32, f32, f32, 1, 2), reduction.Reduction("sum", f16, f32, f16, 0, 1, finish="divide"),
    reduction.Reduction("prod", i8, i64, i64, 2, 1), reduction.Reduction("max", f64, f64, f64, 1, 1, merge=True),
    reduction.Reduction("min", u16, u64, u16, 0, 0), reduction.Reduction("any", bool_t, i32, bool_t, 1, 1),
    reduction.Reduction("all", f32, i32, bool_t, 0, 2), reduction.Reduction("argmax", f32, f32, i64, 1, 1),
    reduction.Reduction("argmin", i32, i32, i64, 1, 1, merge=True),
    reduction.Reduction("sumsq", f32, f32, f32, 1, 1, finish="sqrt"),
    reduction.Reduction("sum", f32, f32, f32, 1, 1, columns=True),
    reduction.Reduction("argmin", f64, f64, i64, 2, 2, columns=True),
    reduction.Reduction("sumsq", f16, f32, f16, 1, 1, finish="divide", columns=True),
    reduction.Reduction("sum", f32, f32, f32, 0, 1, contiguous=True), reduction.Reduction("sum", f32, f32, f32, 0, 1, contiguous=True, lanes=True),
    reduction.Reduction("argmax", f32, f32, i64, 1, 1, merge=True, contiguous=True, lanes=True),
    reduction.Reduction("sumsq", f16, f32, f16, 1, 2, finish="sqrt", lanes=True),
    reduction.Reduction("any", bool_t, i32, bool_t, 0, 1, contiguous=True, lanes=True),
    reduction.Reduction("argmin", f32, f32, i64, 1, 2, columns=True, contiguous=True, lanes=True),
    reduction.Reduction("sumsq", f16, f32, f16, 1, 1, finish="sqrt", columns=True, contiguous=True, lanes=True),
    reduction.Reduction("sum", f32, f32, f32, 0, 1, contiguous=True, per_item=8),
    reduction.Reduction("argmax", f32, f32, i64, 1, 2, per_item=8),
    reduction.Reduction("argmin", f32, f32, i64, 1, 1, merge=True, contiguous=True, per_item=4),
    reduction.Reduction("sumsq", f16, f32, f16, 1, 1, finish="sqrt", per_item=8),
    scan.Scan("sum", i32, i64, i64, 1), scan.Scan("prod", f16, f32, f16, 0), scan.Scan("sum", f64, f64, f64, 2),
]


def _build(spec: reduction.Reduction | scan.Scan) -> Any:
    return reduction.build(spec) if isinstance(spec, reduction.Reduction) else scan.build(spec)


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.dialect)
def test_every_dialect_emits_every_kernel(target: Target) -> None:
    for spec in KERNELS:
        function = _build(spec)
        assert ir_json.load(ir_json.dump(function)) == function
        source = emitter_for(target.dialect).emit(function, target)
        assert [a.param for a in source.abi if a.kind != "shape"] == spec.param_names()


def test_a_device_without_fp64_refuses_float64_reductions() -> None:
    target = Target("opencl", "any", frozenset({"int64_atomics"}), "test")
    with pytest.raises(hetero.CompileError, match="fp64|double"):
        emitter_for("opencl").emit(_build(reduction.Reduction("sum", f64, f64, f64, 0, 1)), target)


def test_float64_reductions_on_a_device_without_fp64_name_the_operation_and_the_device(
        device: hetero.Device, monkeypatch: pytest.MonkeyPatch) -> None:
    """Not the kernel's name (reduce_sum_f64_f64_f64_o0_i1_first) nor the target's stable id: the
    user's operation, the device's name and the remedy elementwise operations give."""
    from hetero.arraylib import reductions

    target = device.runtime.kernel_target()
    assert target is not None
    lacking = dataclasses.replace(target, features=frozenset(target.features - {"fp64"}))
    monkeypatch.setattr(device.runtime, "kernel_target", lambda: lacking)
    monkeypatch.setattr(reductions, "_kernels", {})  # kernels built by earlier tests were built with fp64
    x = hetero.asarray(np.arange(12.0).reshape(3, 4), device=device)
    calls = [("sum", lambda: x.sum()), ("mean", lambda: x.mean(axis=0)), ("var", lambda: hetero.var(x)),
             ("min", lambda: x.min()), ("argmax", lambda: x.argmax(axis=1)), ("any", lambda: x.any()),
             ("cumulative_sum", lambda: hetero.cumulative_sum(x, axis=1)),
             ("sum", lambda: hetero.sum(hetero.asarray(np.ones(3, np.complex128), device=device)))]
    for what, call in calls:
        with pytest.raises(hetero.UnsupportedDtypeError) as caught:
            call()
        text = str(caught.value)
        assert text.startswith(f"hetero.{what} on float64 needs fp64, which {device.name} lacks; convert to "
                               "float32 first"), text
        assert "reduce_" not in text and "scan_" not in text and target.arch not in text
    assert hetero.asarray(np.arange(12, dtype=np.float32), device=device).sum().item() == 66.0  # float32 runs there


def test_bad_kernel_specs_are_refused() -> None:
    with pytest.raises(ValueError, match="no kernel"):
        reduction.build(reduction.Reduction("median", f32, f32, f32, 0, 1))
    with pytest.raises(ValueError, match="no kernel"):
        scan.build(scan.Scan("max", f32, f32, f32, 0))
    with pytest.raises(ValueError, match="no kernel"):
        reduction.build(reduction.Reduction("sum", f32, f32, f32, 1, 1, merge=True, columns=True))
    with pytest.raises(ValueError, match="no kernel"):
        reduction.build(reduction.Reduction("sum", f32, f32, f32, 1, 2, contiguous=True))
    with pytest.raises(ValueError, match="no kernel"):
        reduction.build(reduction.Reduction("sum", f32, f32, f32, 1, 1, columns=True, lanes=True))
    with pytest.raises(ValueError, match="no kernel"):
        reduction.build(reduction.Reduction("sum", f32, f32, f32, 2, 1, columns=True, contiguous=True, lanes=True))


def test_every_kernel_compiles_to_sm90_through_nvrtc() -> None:
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings is not installed")
    from hetero.backends.cupy import nvrtc_compile

    if not nvrtc_compile.available():
        pytest.skip("libnvrtc cannot be loaded")
    from test_cuda_nvrtc import sm90_runtime

    runtime = sm90_runtime()
    target = runtime.kernel_target()
    for spec in KERNELS:
        source = emitter_for(target.dialect).emit(_build(spec), target)
        kind, cubin = runtime.compile_source(source)
        assert kind == "cubin" and source.entry.encode() in cubin, spec.name  # type: ignore[attr-defined]


def _one_part(values: np.ndarray) -> np.float32:
    """One part folded as hetero.compiler.array_kernels.reduction documents, in float32: lane
    ``t`` folds elements ``t, t + W, t + 2W ...`` in order, then the tree over the lanes (step
    W/2 down to 1: lane ``t`` takes in lane ``t + step`` where that lane holds an element)."""
    W = reduction.GROUP
    values = np.asarray(values, np.float32)
    rows = values.size // W
    lanes = values[:W].copy()
    for r in range(1, rows):
        lanes = lanes + values[r * W:(r + 1) * W]  # float32 + float32: one rounding per lane, as the kernel
    tail = values[rows * W:] if rows else values[:0]
    lanes[:tail.size] = lanes[:tail.size] + tail
    active = min(values.size, W)
    step = W // 2
    while step:
        takers = max(0, min(step, active - step))
        lanes[:takers] = lanes[:takers] + lanes[step:step + takers]
        step //= 2
    return np.float32(lanes[0])


def _documented_sum(values: np.ndarray) -> np.float32:
    """The float32 sum of 1-D ``values`` in the documented order: parts of ``chunk`` elements
    (hetero.arraylib.reductions.parts_of), each folded by :func:`_one_part`, then the partials
    folded by :func:`_one_part` again (the merge stage)."""
    from hetero.arraylib.reductions import parts_of

    parts, chunk = parts_of(values.size)
    partials = np.array([_one_part(values[c * chunk:(c + 1) * chunk]) for c in range(parts)], np.float32)
    return _one_part(partials) if parts > 1 else partials[0]


@pytest.mark.parametrize("n", [1, 100, 128, 129, 30_001, 16_384 * 3 + 5, 1 << 20])
def test_float_sums_follow_the_documented_order_bit_for_bit(device: hetero.Device, n: int) -> None:
    """The documented order, computed in NumPy with float32 arithmetic, gives the kernel's bits;
    so does a second run; and a row of a matrix sums as the same row alone."""
    host = _values((n,), "float32", 11)
    x = hetero.asarray(host, device=device)
    first = hetero.sum(x).numpy()
    assert first.tobytes() == _documented_sum(host).tobytes()
    assert hetero.sum(x).numpy().tobytes() == first.tobytes()
    assert hetero.mean(x).numpy().tobytes() == np.float32(_documented_sum(host) / np.float32(n)).tobytes()
    rows = hetero.asarray(np.stack([host, host[::-1]]), device=device)
    assert hetero.sum(rows, axis=1).numpy().tobytes() == np.array(
        [_documented_sum(host), _documented_sum(host[::-1].copy())], np.float32).tobytes()


@pytest.mark.parametrize("form", [(False, 8), (True, 1)], ids=["items_x8", "lanes"])
def test_every_form_of_the_segment_stage_gives_the_same_bits(device: hetero.Device, monkeypatch: pytest.MonkeyPatch,
                                                              form: tuple[bool, int]) -> None:
    """One work-item per lane (the GPUs' form), a work-group of 16 items holding 8 lanes each
    (Intel's CPU runtime's) and one work-item per part (the CPU target's and PoCL's) fold in one
    order, so each agrees bit for bit with the first, arg-reductions, NaN and short parts included;
    so do the two forms of the ``columns`` stage (a work-item per output, or per 512 outputs)."""
    from hetero.arraylib import reductions

    host = _values((3, 70_001), "float32", 14)
    host[1, 50_000] = np.nan
    host[2, 123] = host[2].max()  # a tie: the first index wins
    x = hetero.asarray(host, device=device)
    short = hetero.asarray(_values((5, 77), "float32", 16), device=device)  # parts shorter than a row
    tall = _values((3001, 700), "float32", 15)  # the columns stage: 12 chunks, 2 blocks of outputs on the CPU
    tall[2000, 5] = np.nan
    m = hetero.asarray(tall, device=device)
    calls = [lambda: hetero.sum(x), lambda: hetero.sum(x, axis=1), lambda: hetero.max(x, axis=1),
             lambda: hetero.argmax(x, axis=1), lambda: hetero.argmin(x), lambda: hetero.var(x, axis=1),
             lambda: hetero.sum(short, axis=1), lambda: hetero.argmax(short, axis=1), lambda: hetero.min(short, axis=1),
             lambda: hetero.sum(m, axis=0), lambda: hetero.max(m, axis=0), lambda: hetero.argmin(m, axis=0),
             lambda: hetero.std(m, axis=0)]
    results = {}
    for lanes, per_item in ((False, 1), form):
        monkeypatch.setattr(reductions, "lanes_form", lambda device, lanes=lanes: lanes)
        monkeypatch.setattr(reductions, "column_lanes_form", lambda device, lanes=lanes: lanes)
        monkeypatch.setattr(reductions, "items_per_lane_group", lambda device, per_item=per_item: per_item)
        results[lanes, per_item] = [call().numpy().tobytes() for call in calls]
    assert results[False, 1] == results[form]


def test_each_device_uses_the_form_that_reads_rows_as_vectors(device: hetero.Device) -> None:
    """The CPU target and PoCL fold a part in one work-item, Intel's CPU runtime in 16 items of 8
    lanes, GPUs in 128 items of one lane; every CPU device folds columns 512 outputs per item
    (the forms measured fastest: benchmarks/array_reductions.py)."""
    from hetero.arraylib import reductions

    lanes, per_item = reductions.lanes_form(device), reductions.items_per_lane_group(device)
    assert reductions.column_lanes_form(device) == (device.kind is hetero.Kind.CPU)
    if device.kind is not hetero.Kind.CPU:
        assert (lanes, per_item) == (False, 1)
    elif device.backend == "oneapi":
        assert (lanes, per_item) == (False, 8)
    else:
        assert lanes


def test_a_reduction_refuses_lanes_per_item_it_cannot_split() -> None:
    for per_item in (0, 3, 128):
        with pytest.raises(ValueError, match="no kernel"):
            reduction.build(reduction.Reduction("sum", f32, f32, f32, 0, 1, per_item=per_item))
    with pytest.raises(ValueError, match="no kernel"):
        reduction.build(reduction.Reduction("sum", f32, f32, f32, 0, 1, lanes=True, per_item=8))


# -- the ``columns`` stage: sum(axis=0) of a C-ordered matrix and its kin -------------------------
def _documented_column_sums(matrix: np.ndarray) -> np.ndarray:
    """float32 ``matrix.sum(axis=0)`` folded as the ``columns`` stage documents: chunks of rows
    in order per column, then the merge stage's tree over each column's partials."""
    from hetero.arraylib.reductions import COLUMN_CHUNK, COLUMN_PARTS

    rows, cols = matrix.shape
    parts = max(1, min(COLUMN_PARTS, rows // COLUMN_CHUNK))
    chunk = -(-rows // parts)
    out = np.empty(cols, np.float32)
    for m in range(cols):
        partials = []
        for c in range(parts):
            values = matrix[c * chunk:min((c + 1) * chunk, rows), m]
            if values.size:
                acc = values[0]
                for v in values[1:]:
                    acc = np.float32(acc + v)
                partials.append(acc)
        out[m] = _one_part(np.array(partials, np.float32))  # the merge stage
    return out


def test_column_sums_follow_the_documented_order_bit_for_bit(device: hetero.Device) -> None:
    host = _values((3001, 5), "float32", 12)  # 11 chunks of 273 rows (the last shorter)
    got = hetero.sum(hetero.asarray(host, device=device), axis=0).numpy()
    assert got.tobytes() == _documented_column_sums(host).tobytes()


@pytest.mark.parametrize("op", ["sum", "mean", "max", "min", "argmax", "argmin", "var", "std", "any", "all"])
def test_column_layouts_match_numpy(device: hetero.Device, op: str) -> None:
    """Layouts the ``columns`` stage takes: a tall matrix (several chunks), outputs not a multiple
    of a work-group, two reduced axes, a flipped view, NaN and ties across chunk boundaries."""
    kind = "bool" if op in ("any", "all") else ("int32" if op in ("argmax", "argmin") else "float32")
    host = _values((1300, 3, 131), kind, 13, op)
    if kind == "int32":
        host = (host % 3).astype(np.int32)  # many ties, some across chunk boundaries
    x = hetero.asarray(host, device=device)
    for view, want in ((x, host), (x[::-1, :, ::-1], host[::-1, :, ::-1])):
        for axis in (0, (0, 1)):
            got = getattr(hetero, op)(view, axis=axis).numpy() if op not in ("argmax", "argmin") or axis == 0 \
                else None
            if got is None:
                continue
            expected = getattr(np, op)(want, axis=axis)
            if kind == "float32":
                np.testing.assert_allclose(got, expected, rtol=2e-5, atol=1e-5)
            else:
                np.testing.assert_array_equal(got, expected)
    if kind == "float32" and op not in ("var", "std"):
        poisoned = host.copy()
        poisoned[700, 1, 5] = np.nan
        got = getattr(hetero, op)(hetero.asarray(poisoned, device=device), axis=0).numpy()
        expected = getattr(np, op)(poisoned, axis=0)
        np.testing.assert_array_equal(np.isnan(got), np.isnan(expected) if op not in ("argmax", "argmin") else False)
        if op in ("argmax", "argmin"):
            assert got[1, 5] == 700  # NaN is above everything: the index of the first NaN
