"""Elementwise operations on every device (hetero.arraylib.elementwise): each operator and
function against NumPy, special values, promotion, broadcasting, views, in-place forms, the
errors; and the generated kernels' CUDA C through NVRTC."""

from __future__ import annotations

import operator
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetero
from hetero.arraylib import elementwise as array_elementwise
from hetero.array import promotion
from hetero.compiler.array_kernels import elementwise
from hetero.compiler.emit.registry import emitter_for
from hetero.core.launch_counts import launch_counts
from hetero.core.target import Target
from hetero.core.types import f32, i32, scalar_type

SETTINGS = settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
OPS = array_elementwise.OPS
ALL_DTYPES = ["bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
              "float16", "float32", "float64"]
#: Operations whose results are rounded by each device's math library (ulp bounds, not bits).
ROUNDED = set(elementwise.elementwise_ops.MATH_UNARY) | {"atan2", "hypot", "logaddexp", "pow", "divide",
                                                          "reciprocal"}
FLOATS = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.5, 1.5, 2.5, -0.5, -1.5, 3.0, -7.25, 1e-30, 1e30, 0.75,
                   -0.25], dtype=np.float32)


def _values(dtype: str, second: bool, op: str) -> np.ndarray:
    """Operands for ``op`` of ``dtype`` covering its special values."""
    if dtype == "bool":
        return np.array([True, False, True, False] * 4) ^ second
    if dtype.startswith("float"):
        values = np.roll(FLOATS, 5) if second else FLOATS
        if op in ("acos", "asin", "atanh"):
            values = np.clip(values, -1, 1)
        return values.astype(dtype)
    info = np.iinfo(dtype)
    if op in ("bitwise_left_shift", "bitwise_right_shift") and second:
        counts = [0, 1, 3, info.bits - 1, info.bits, info.bits + 8, 2, 5] * 2
        return np.array([c if info.kind == "u" or i % 5 else -1 for i, c in enumerate(counts)], dtype=dtype)
    if op == "pow" and second:
        return np.array([0, 1, 2, 3, 0, 5, 1, 2] * 2, dtype=dtype)
    edges = [info.min, info.max, 0, 1, 7, info.min + 1, 3, 100 % info.max]
    if info.kind == "i":
        edges += [-1, -7, -100 % info.max * -1, 2, -3, 5, 9, -2]
    else:
        edges += [2, 5, 9, 13, 21, 33, 64, 3]
    values = np.array(edges, dtype=dtype)
    return np.array([0, 3, 0, 1, -1 % info.max, 2, 7, 0] * 2, dtype=dtype) if second and info.kind == "u" else (
        np.roll(values, 3) if second else values)


def _dtypes_for(op: str) -> list[str]:
    category = OPS[op][1]
    return {"bitwise": ["int32", "uint8", "bool"], "shift": ["int32", "uint8"], "logical": ["bool"],
            "float_only": ["float32"], "arith": ["float32", "int32", "uint8"], "numeric": ["float32", "int8"],
            "minmax": ["float32", "int16"], "compare": ["float32", "int32"], "rounding": ["float32", "int32"],
            "predicate": ["float32", "int32"]}.get(category, ["float32", "int16"])


def _numpy(op: str, *args: Any) -> np.ndarray:
    with np.errstate(all="ignore"):
        want = np.asarray(getattr(np, op)(*args))
        if op == "floor_divide" and want.dtype.kind == "f":  # the standard's: ±inf over finite, finite over ±inf
            a, b = np.broadcast_arrays(*(np.asarray(x, want.dtype) for x in args))
            edge = (np.isinf(a) & np.isfinite(b)) | (np.isfinite(a) & np.isinf(b))
            want = np.where(edge, a / b, want)
        return want


def _check(op: str, got: np.ndarray, want: np.ndarray) -> None:
    assert got.dtype == want.dtype, f"{op}: {got.dtype} != NumPy's {want.dtype}"
    if op in ROUNDED and got.dtype.kind == "f":
        ulp = 4 * np.finfo(got.dtype).eps
        np.testing.assert_allclose(got, want, rtol=ulp, atol=np.finfo(got.dtype).tiny, err_msg=op)
    else:
        np.testing.assert_array_equal(got, want, err_msg=op)
    if got.dtype.kind == "f" and op not in {"maximum", "minimum"} | ROUNDED:  # the same zeros' signs
        same = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[same]), np.signbit(want[same]), err_msg=f"{op}: signed zeros")


@pytest.mark.parametrize("op", sorted(OPS))
def test_every_function_matches_numpy_with_special_values(device: hetero.Device, op: str) -> None:
    arity = OPS[op][0]
    for dtype in _dtypes_for(op):
        hosts = [_values(dtype, k == 1, op) for k in range(arity)]
        got = getattr(hetero, op)(*[hetero.asarray(h, device=device) for h in hosts]).numpy()
        _check(op, got, _numpy(op, *hosts))


def test_clip_is_one_kernel_of_two_nodes(device: hetero.Device) -> None:
    host = FLOATS.copy()
    x = hetero.asarray(host, device=device)
    before = launch_counts().get(device.name, 0)
    got = hetero.clip(x, -1.0, 2.0)
    got._buffer  # noqa: B018  (recorded until its value is needed: fusion)
    assert launch_counts()[device.name] == before + 1
    np.testing.assert_array_equal(got.numpy(), np.clip(host, np.float32(-1), np.float32(2)))
    lows = hetero.asarray(np.linspace(-3, 0, 16, dtype=np.float32), device=device)
    np.testing.assert_array_equal(hetero.clip(x, lows).numpy(), np.clip(host, lows.numpy(), None))
    np.testing.assert_array_equal(hetero.clip(x, max=np.nan).numpy(), np.clip(host, None, np.nan))


BINARY_OPERATORS = [operator.add, operator.sub, operator.mul, operator.truediv, operator.floordiv, operator.mod,
                    operator.pow, operator.lt, operator.le, operator.eq, operator.ne, operator.ge, operator.gt]
BITWISE_OPERATORS = [operator.and_, operator.or_, operator.xor, operator.lshift, operator.rshift]


@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_every_operator_and_its_reflected_form_with_scalars(device: hetero.Device, dtype: str) -> None:
    host = np.array([[1, 2, 3], [4, 5, 6]], dtype=dtype)
    x = hetero.asarray(host, device=device)
    with np.errstate(all="ignore"):
        for op in BINARY_OPERATORS + (BITWISE_OPERATORS if dtype == "int32" else []):
            _check(op.__name__, op(x, x).numpy(), op(host, host))
            _check(op.__name__, op(x, 2).numpy(), op(host, 2))
            _check(op.__name__, op(3, x).numpy(), op(3, host))
        for unary in (operator.neg, operator.pos, abs) + ((operator.invert,) if dtype == "int32" else ()):
            _check(unary.__name__, unary(x).numpy(), unary(host))


@pytest.mark.parametrize("symbol", ["+=", "-=", "*=", "/=", "//=", "%=", "**=", "&=", "|=", "^=", "<<=", ">>="])
def test_in_place_operators_write_through_views(device: hetero.Device, symbol: str) -> None:
    dtype = "float32" if symbol in ("/=",) else "int32"
    host = np.arange(1, 25, dtype=dtype).reshape(4, 6)
    x = hetero.asarray(host, device=device)
    operand = np.array([1, 2, 3], dtype=dtype)
    view, host_view = x[1:, ::-2], host[1:, ::-2]
    namespace = {"v": view, "o": hetero.asarray(operand, device=device)}
    exec(f"v {symbol} o", namespace)
    assert namespace["v"] is view
    exec(f"h {symbol} o", {"h": host_view, "o": operand})
    np.testing.assert_array_equal(x.numpy(), host)


def test_in_place_overlapping_operands_read_their_values_first(device: hetero.Device) -> None:
    host = np.arange(10, dtype=np.int64)
    x = hetero.asarray(host, device=device)
    x[1:] += x[:-1]
    host[1:] += host[:-1].copy()
    np.testing.assert_array_equal(x.numpy(), host)
    y = hetero.asarray(np.arange(5, dtype=np.float32), device=device)
    y += y
    np.testing.assert_array_equal(y.numpy(), 2 * np.arange(5, dtype=np.float32))


def test_in_place_refuses_what_the_target_cannot_hold(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(4, dtype=np.int32), device=device)
    with pytest.raises(TypeError, match="int32 array: the result is float64"):
        x += 1.5
    with pytest.raises(TypeError, match="float64"):
        x /= 2
    with pytest.raises(hetero.ArrayError, match=r"shape \(4,\).*\(3, 4\)"):
        x += hetero.zeros((3, 4), dtype="int32", device=device)
    with pytest.raises(hetero.ArrayError, match="broadcast view"):
        b = hetero.broadcast_to(hetero.zeros(4, dtype="int32", device=device), (3, 4))
        b += 1
    np.testing.assert_array_equal(x.numpy(), np.arange(4))


DTYPES = st.sampled_from(["bool", "int8", "uint8", "int32", "int64", "uint64", "float16", "float32", "float64"])
SAMPLED_OPS = st.sampled_from(["add", "subtract", "multiply", "floor_divide", "remainder", "maximum", "minimum",
                               "less", "equal", "bitwise_xor", "logical_and", "copysign", "divide"])


@st.composite
def views(draw: st.DrawFn, shape: tuple[int, ...], dtype: str) -> tuple[np.ndarray, Any]:
    """A host array of ``shape`` made as a strided, flipped or offset view, and the basic index
    that makes it from its (larger) base."""
    base_shape = tuple(2 * n + 1 for n in shape)
    key = tuple(draw(st.sampled_from([slice(1, 1 + 2 * n, 2), slice(2 * n - 1, None, -2) if n else slice(0, 0),
                                      slice(1, 1 + n)])) for n in shape)
    rng = np.random.default_rng(draw(st.integers(0, 2**16)))
    if dtype == "bool":
        base = rng.integers(0, 2, base_shape).astype(bool)
    elif dtype.startswith("float"):
        base = (rng.standard_normal(base_shape) * 4).astype(dtype)
        base.flat[:: 7] = np.nan
    else:
        info = np.iinfo(dtype)
        base = rng.integers(max(info.min, -200), min(info.max, 200), base_shape, endpoint=True).astype(dtype)
    return np.asarray(base), key  # 0-d: an array, not a NumPy scalar (asarray would make that float32)


def _refused_bool(op: str, result: np.dtype[Any], operands: tuple[str, ...] = ()) -> bool:
    """Arithmetic on bools: NumPy computes or/and (or, for ``//`` ``%`` ``**``, int8), the
    standard (and hetero) refuse it."""
    return OPS[op][1] == "arith" and (result == np.bool_ or bool(operands) and all(d == "bool" for d in operands))


@SETTINGS
@given(op=SAMPLED_OPS, dtypes=st.tuples(DTYPES, DTYPES), data=st.data(),
       shape=st.lists(st.integers(0, 4), max_size=3).map(tuple))
def test_binary_operations_broadcast_views_of_mixed_dtypes(device: hetero.Device, op: str, dtypes: tuple[str, str],
                                                             data: st.DataObject, shape: tuple[int, ...]) -> None:
    second = data.draw(st.lists(st.booleans(), min_size=len(shape), max_size=len(shape)))
    other = tuple(1 if squash else n for n, squash in zip(shape, second))[data.draw(st.integers(0, len(shape))):]
    hosts, arrays = [], []
    for view_shape, dtype in ((shape, dtypes[0]), (other, dtypes[1])):
        base, key = data.draw(views(view_shape, dtype))
        hosts.append(base[key])
        arrays.append(hetero.asarray(base, device=device)[key])
    try:
        want = _numpy(op, *hosts)
    except TypeError:
        want = None
    if want is None or _refused_bool(op, want.dtype, dtypes):
        with pytest.raises(TypeError, match=op):
            getattr(hetero, op)(*arrays)
        return
    _check(op, getattr(hetero, op)(*arrays).numpy(), want)


@SETTINGS
@given(dtype=DTYPES, value=st.one_of(st.booleans(), st.integers(-300, 300), st.floats(-1e5, 1e5, width=32)),
       op=st.sampled_from(["add", "multiply", "greater", "maximum"]), reflected=st.booleans())
def test_python_scalars_are_weak(device: hetero.Device, dtype: str, value: Any, op: str, reflected: bool) -> None:
    host = np.arange(-2, 4).astype(dtype)
    x = hetero.asarray(host, device=device)
    args = (value, x) if reflected else (x, value)
    host_args = (value, host) if reflected else (host, value)
    try:
        want = _numpy(op, *host_args)
    except (OverflowError, TypeError) as exc:
        with pytest.raises(type(exc)):
            getattr(hetero, op)(*args)
        return
    if _refused_bool(op, want.dtype):
        with pytest.raises(TypeError, match="takes numbers, not bool"):
            getattr(hetero, op)(*args)
        return
    _check(op, getattr(hetero, op)(*args).numpy(), want)


def test_zero_size_and_zero_d_arrays(device: hetero.Device) -> None:
    empty = hetero.zeros((0, 3), device=device)
    assert (empty + 1).shape == (0, 3) and (empty < empty).dtype == np.bool_
    scalar = hetero.asarray(np.float32(2.5), device=device)
    assert (scalar * scalar).shape == () and float(scalar * scalar) == 6.25
    np.testing.assert_array_equal((scalar + hetero.ones((2, 2), device=device)).numpy(), np.full((2, 2), 3.5))


def test_special_values_of_division_rounding_and_overflow(device: hetero.Device) -> None:
    def on(values: Any, dtype: str) -> hetero.Array:
        return hetero.asarray(np.array(values, dtype=dtype), device=device)

    q = (on([1, -1, 0, -0.0], "float32") / on([0, 0, 0, 1], "float32")).numpy()
    np.testing.assert_array_equal(q, [np.inf, -np.inf, np.nan, -0.0])
    assert np.signbit(q[3])
    # the standard's floor_divide of infinities (NumPy's gives NaN and -1.0 here, the note's allowance)
    f = (on([np.inf, np.inf, -np.inf, -1, 1, 1, -1, np.inf], "float64")
         // on([2, -2, 2, np.inf, -np.inf, np.inf, -np.inf, np.inf], "float64")).numpy()
    np.testing.assert_array_equal(f, [np.inf, -np.inf, -np.inf, -0.0, -0.0, 0.0, 0.0, np.nan])
    assert np.signbit(f[3:7]).tolist() == [True, True, False, False]
    assert (on([7, -7, 0], "int32") // on([0, 0, 0], "int32")).numpy().tolist() == [0, 0, 0]
    assert (on([7, -7, 0], "int64") % on([0, 0, 0], "int64")).numpy().tolist() == [0, 0, 0]
    assert (on([-2**31], "int32") // on([-1], "int32")).numpy().tolist() == [-2**31]
    assert hetero.round(on([0.5, 1.5, 2.5, -0.5, -2.5], "float32")).numpy().tolist() == [0, 2, 2, -0.0, -2]
    assert np.isnan(hetero.sign(on([np.nan], "float32")).numpy()).all()
    assert (on([127], "int8") + on([1], "int8")).numpy().tolist() == [-128]
    assert (on([0], "uint8") - on([1], "uint8")).numpy().tolist() == [255]
    assert (on([1, 1, -8, -8], "int32") << on([31, 40, 40, 1], "int32")).numpy().tolist() == [-2**31, 0, 0, -16]
    assert (on([-8, 8], "int32") >> on([40, 40], "int32")).numpy().tolist() == [-1, 0]
    picked = hetero.maximum(on([np.nan, 1, 2], "float32"), on([1, np.nan, 3], "float32")).numpy()
    np.testing.assert_array_equal(picked, [np.nan, np.nan, 3])
    assert hetero.nextafter(on([1], "float32"), on([2], "float32")).numpy()[0] == np.nextafter(np.float32(1), 2)


def test_f16_and_f64_compute_as_numpy(device: hetero.Device) -> None:
    halves = np.array([0.1, 1000, 65504, -3.3, 6e-5], dtype=np.float16)
    x = hetero.asarray(halves, device=device)
    doubles = np.array([1e-300, 1e300, 0.1], dtype=np.float64)
    y = hetero.asarray(doubles, device=device)
    with np.errstate(over="ignore"):  # overflow to inf is part of what is checked
        _check("add", (x + x).numpy(), halves + halves)
        _check("multiply", (x * 3.1).numpy(), halves * 3.1)
        np.testing.assert_allclose(hetero.exp(x).numpy(), np.exp(halves), rtol=2e-3)
        _check("multiply", (y * y).numpy(), doubles * doubles)


def test_equality_returns_arrays_and_arrays_hash_by_identity(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(3, dtype=np.int32), device=device)
    assert (x == x).numpy().tolist() == [True, True, True] and (x != 1).numpy().tolist() == [True, False, True]
    assert hash(x) == object.__hash__(x)
    assert {x: 1}[x] == 1 and (x == None) is False  # noqa: E711  (None is no operand: Python's identity test)
    with pytest.raises(ValueError, match="3 elements is ambiguous"):
        bool(x == x)
    assert bool(x[1] == 1) and int(x[2]) == 2


def test_errors_name_the_operation_the_dtype_and_the_remedy(device: hetero.Device) -> None:
    floats = hetero.ones(3, device=device)
    with pytest.raises(TypeError, match=r"hetero.bitwise_and is not defined for float32"):
        floats & floats
    with pytest.raises(TypeError, match="bitwise_left_shift"):
        hetero.bitwise_left_shift(floats, 1)
    with pytest.raises(TypeError, match="bool"):
        hetero.add(hetero.asarray([True], device=device), hetero.asarray([False], device=device))
    small = hetero.zeros(3, dtype="uint8", device=device)
    with pytest.raises(OverflowError, match="300 does not fit the uint8"):
        small + 300
    with pytest.raises(hetero.ArrayError, match="do not broadcast"):
        floats + hetero.ones(4, device=device)
    with pytest.raises(ValueError, match="negative integer powers"):
        hetero.asarray([2, 3], dtype="int32", device=device) ** -1
    with pytest.raises(hetero.ArrayError, match="hetero arrays and Python or NumPy scalars, not list"):
        hetero.add(floats, [1, 2, 3])


def test_operands_on_two_devices_name_both_and_the_remedy() -> None:
    names = [d.name for d in hetero.devices()]
    if len(names) < 2:
        pytest.skip("one device here")
    a = hetero.ones(2, device=names[0])
    b = hetero.ones(2, device=names[1])
    with pytest.raises(hetero.ArrayError, match=rf"{names[0]} and {names[1]}.*\.to\('{names[0]}'\)"):
        a + b


def test_fp64_on_a_device_without_it_raises(monkeypatch: pytest.MonkeyPatch) -> None:
    device = hetero.device("cpu")
    no_fp64 = Target("cpu", "x86_64", frozenset(), "numba")
    monkeypatch.setattr(array_elementwise, "device_target", lambda name, dev: no_fp64)
    x = hetero.asarray(np.ones(3, np.float64), device=device)
    with pytest.raises(TypeError, match="needs fp64, which cpu lacks; convert to float32"):
        hetero.cosh(x)


def test_the_promotion_table_is_numpys() -> None:
    for a in ALL_DTYPES:
        for b in ALL_DTYPES:
            assert hetero.result_type(a, b) == np.result_type(a, b), (a, b)
            assert hetero.can_cast(a, b) == np.can_cast(a, b), (a, b)
    assert hetero.result_type("float32", 1.0) == np.float32 and hetero.result_type("int8", 1.5) == np.float64
    assert hetero.result_type("bool", 1) == np.int64 and hetero.result_type("float16", 2) == np.float16
    with pytest.raises(promotion.ScalarOverflowError):
        hetero.result_type("uint8", 300)


def test_float_functions_of_two_integer_dtypes_take_numpys_float() -> None:
    """copysign(int8, uint8) is float16 in NumPy (both fit it) though int8 and uint8 promote to
    int16, whose float is float32: the float comes from the operands, not their promotion (found
    by hypothesis's CI profile)."""
    integers = [d for d in ALL_DTYPES if np.dtype(d).kind in "biu"]
    for op, (arity, category) in OPS.items():
        if arity != 2 or category != "float":
            continue
        ufunc = getattr(np, op)
        for a in integers:
            for b in integers:
                want = ufunc.resolve_dtypes((np.dtype(a), np.dtype(b), None))[-1]
                assert array_elementwise.plan_dtypes(op, [np.dtype(a), np.dtype(b)])[1] == want, (op, a, b)


def test_a_tree_of_several_nodes_is_one_kernel(device: hetero.Device) -> None:
    """What fusion will hand the builder: (in_0 * in_1) + s_0, in f32 and i32 leaves."""
    def build(leaf_dtypes: list[np.dtype[Any]], is_array: list[bool]) -> tuple[elementwise.Node, np.dtype[Any]]:
        product = elementwise.Apply("multiply", (elementwise.Input(0, f32), elementwise.Input(1, i32)), scalar_type("float64"),
                                    scalar_type("float64"))
        return elementwise.Apply("add", (product, elementwise.Scalar(0, f32)), scalar_type("float64"),
                                 scalar_type("float64")), np.dtype("float64")

    a, b = np.arange(6, dtype=np.float32).reshape(2, 3), np.arange(3, dtype=np.int32)
    got = array_elementwise.evaluate("test_fma", (hetero.asarray(a, device=device), hetero.asarray(b, device=device),
                                                  np.float32(0.5)), build)
    np.testing.assert_array_equal(got.numpy(), a.astype(np.float64) * b + 0.5)


FEATURES = frozenset({"fp64", "fp16", "int64_atomics"})
TARGETS = [Target("opencl", "any", FEATURES, "test"), Target("cuda", "sm_90", FEATURES, "nvcc 13.0"),
           Target("hip", "gfx90a", FEATURES, "hipcc 5.2"), Target("cpu", "x86_64", FEATURES, "numba")]


def _kernels(dtype: str) -> list[Any]:
    functions = []
    for op, (arity, _) in sorted(OPS.items()):
        try:
            tree, result = array_elementwise._single_tree(op, [np.dtype(dtype)] * arity, [True] * arity)
        except TypeError:
            continue
        functions.append(elementwise.build(tree, scalar_type(result), 2, f"ew_{op}_{dtype}"))
    return functions


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.dialect)
def test_every_dialect_emits_every_operation(target: Target) -> None:
    for dtype in ("float16", "float64", "int8", "uint64", "bool"):
        for function in _kernels(dtype):
            source = emitter_for(target.dialect).emit(function, target)
            assert function.name in source.text


def test_the_generated_kernels_compile_to_sm90_through_nvrtc() -> None:
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings is not installed")
    from hetero.backends.cupy import nvrtc_compile

    if not nvrtc_compile.available():
        pytest.skip("libnvrtc cannot be loaded")
    from test_cuda_nvrtc import sm90_runtime

    runtime = sm90_runtime()
    target = runtime.kernel_target()
    for dtype in ("float32", "float16", "float64", "int32", "int8", "uint64", "bool"):
        for function in _kernels(dtype):
            source = emitter_for(target.dialect).emit(function, target)
            kind, cubin = runtime.compile_source(source)
            assert kind == "cubin" and source.entry.encode() in cubin, function.name


def test_numpy_scalars_on_the_left_stay_on_the_device(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(3, dtype=np.float32), device=device)
    y = np.float32(2) * x
    assert isinstance(y, hetero.Array) and y.device is device and y.numpy().tolist() == [0, 2, 4]
    with pytest.raises(TypeError, match="hetero.asarray"):
        np.ones(3, np.float32) + x  # a host array: convert it first, no silent host computation
    with pytest.raises(TypeError, match="hetero.asarray"):
        x == np.arange(3, dtype=np.float32)  # never Python's silent identity answer
