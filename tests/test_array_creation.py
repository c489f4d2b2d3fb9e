"""Creation and conversion on every device, against NumPy: ``asarray`` of Python data, the
``*_like`` functions, ``linspace``, ``eye``, ``meshgrid``, ``tril``/``triu``, ``astype``, the
joins (``concat``, ``stack``, ``tile``, ``repeat``, ``roll``), 0-d conversions, ``__array__``
and ``repr``; zero-size, 0-d and view inputs; and the errors.

Most arrays are float32 (and the few kernels they need are shared), so the test compiles few
distinct generated kernels on each device."""

from __future__ import annotations

import operator

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import hetero
from hetero.arraylib import cast as array_cast
from hetero.compiler.array_kernels import elementwise
from hetero.compiler.emit.registry import emitter_for
from hetero.core.target import Target
from hetero.core.types import scalar_type

BASE = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5


def _other_device(device: hetero.Device) -> hetero.Device | None:
    return next((d for d in hetero.devices() if d is not device), None)


# -- asarray of Python data ---------------------------------------------------------------
def test_asarray_of_python_data_takes_the_standards_default_dtypes(device: hetero.Device) -> None:
    cases = [([[True, False], [False, True]], np.bool_), ([[1, 2], [3, 4]], np.int64), ([[1.0, 2], [3, 4]], np.float32),
             ([True, 2], np.int64), (3, np.int64), (2.5, np.float32), (False, np.bool_), ([], np.float32)]
    for data, want in cases:
        x = hetero.asarray(data, device=device)
        assert x.dtype == want and x.device is device, data
        np.testing.assert_array_equal(x.numpy(), np.asarray(data, dtype=want))
    assert hetero.asarray([[1, 2]], dtype="int16", device=device).numpy().dtype == np.int16


def test_asarray_of_a_numpy_scalar_keeps_its_dtype(device: hetero.Device) -> None:
    # a NumPy scalar is typed, as a 0-d array is: only Python floats become float32
    for value in (np.float64(1.25), np.int8(-3), np.uint16(7), np.float16(0.5), np.bool_(True)):
        x = hetero.asarray(value, device=device)
        assert x.shape == () and x.dtype == value.dtype
        assert x.numpy()[()] == value


# -- *_like, linspace, eye, meshgrid --------------------------------------------------------
def test_like_functions_take_shape_dtype_and_device_from_x(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)[:, ::-2]  # a view: its shape counts, not its base's
    for make, fill in ((hetero.zeros_like, 0), (hetero.ones_like, 1)):
        y = make(x)
        assert y.shape == (2, 2, 4) and y.dtype == hetero.float32 and y.device is device
        assert (y.numpy() == fill).all()
    assert hetero.empty_like(x, dtype="int32").dtype == hetero.int32
    filled = hetero.full_like(x, 2.75, dtype="int16")  # a float value in an integer dtype truncates, as NumPy
    np.testing.assert_array_equal(filled.numpy(), np.full_like(BASE[:, ::-2], 2.75, dtype=np.int16))
    assert hetero.zeros_like(x, device="cpu").device.name == "cpu"
    assert hetero.ones_like(x[0, 0, 0]).shape == () and hetero.ones_like(x[:0]).shape == (0, 2, 4)
    with pytest.raises(hetero.ArrayError, match="hetero.zeros_like takes a hetero.Array.*asarray"):
        hetero.zeros_like(BASE)  # type: ignore[arg-type]


@pytest.mark.parametrize(("start", "stop", "num", "endpoint", "dtype"), [
    (0, 1, 5, True, None), (-2.5, 7.25, 13, False, None), (3, 3, 1, True, None), (0, 10, 0, True, None),
    (1, 0, 7, True, "float16"), (0, 9, 4, True, "int32"), (-1e3, 1e3, 101, True, "float32")])
def test_linspace_gives_numpys_values(device: hetero.Device, start: float, stop: float, num: int, endpoint: bool,
                                      dtype: str | None) -> None:
    got = hetero.linspace(start, stop, num, endpoint=endpoint, dtype=dtype, device=device)
    want = np.linspace(start, stop, num, endpoint=endpoint, dtype=dtype or np.float32)
    assert got.dtype == want.dtype and got.device is device
    np.testing.assert_array_equal(got.numpy(), want)


def test_linspace_errors(device: hetero.Device) -> None:
    with pytest.raises(hetero.ArrayError, match="linspace: num must be >= 0"):
        hetero.linspace(0, 1, -1, device=device)
    with pytest.raises(hetero.ArrayError, match="linspace: num must be an int"):
        hetero.linspace(0, 1, 2.5, device=device)  # type: ignore[arg-type]
    with pytest.raises(hetero.ArrayError, match="linspace: start must be a real number"):
        hetero.linspace(1j, 1, 3, device=device)  # type: ignore[arg-type]


@pytest.mark.parametrize(("n", "m", "k"), [(4, None, 0), (3, 5, 1), (5, 3, -2), (3, 4, 7), (3, 4, -9), (0, 2, 0), (1, 1, 0)])
def test_eye_matches_numpy(device: hetero.Device, n: int, m: int | None, k: int) -> None:
    got = hetero.eye(n, m, k=k, device=device)
    assert got.dtype == hetero.float32
    np.testing.assert_array_equal(got.numpy(), np.eye(n, m, k=k, dtype=np.float32))


def test_eye_of_another_dtype_and_its_errors(device: hetero.Device) -> None:
    np.testing.assert_array_equal(hetero.eye(3, 4, k=1, dtype="int32", device=device).numpy(), np.eye(3, 4, k=1, dtype=np.int32))
    with pytest.raises(hetero.ArrayError, match="eye: n_rows and n_cols must be >= 0"):
        hetero.eye(-1, device=device)
    with pytest.raises(hetero.ArrayError, match="eye: n_rows, n_cols and k must be ints"):
        hetero.eye(2.0, device=device)  # type: ignore[arg-type]


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid_gives_numpys_grids_as_read_only_views(device: hetero.Device, indexing: str) -> None:
    a, b, c = BASE[0, 0], BASE[1, :, 0], BASE[0, :2, 1]
    x = hetero.asarray(BASE, device=device)
    grids = hetero.meshgrid(x[0, 0, ::-1], x[1, :, 0], x[0, :2, 1], indexing=indexing)
    want = np.meshgrid(a[::-1], b, c, indexing=indexing)
    assert len(grids) == 3
    for got, expected in zip(grids, want, strict=True):
        assert got.shape == expected.shape and got.device is device
        np.testing.assert_array_equal(got.numpy(), expected)
    with pytest.raises(hetero.ArrayError, match="broadcast view"):
        grids[0][...] = 0
    assert hetero.meshgrid() == []
    one = hetero.meshgrid(x[0, 0], indexing=indexing)
    np.testing.assert_array_equal(one[0].numpy(), np.meshgrid(a, indexing=indexing)[0])


def test_meshgrid_errors(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)
    with pytest.raises(hetero.ArrayError, match="indexing must be 'xy' or 'ij'"):
        hetero.meshgrid(x[0, 0], indexing="yx")
    with pytest.raises(hetero.ArrayError, match="meshgrid takes 1-D hetero arrays, got a 2-d array.*reshape"):
        hetero.meshgrid(x[0])


# -- tril, triu ----------------------------------------------------------------------------
@pytest.mark.parametrize("k", [0, 1, -2, 9])
def test_tril_and_triu_on_the_last_two_axes_of_batches_and_views(device: hetero.Device, k: int) -> None:
    x = hetero.asarray(BASE, device=device)
    for view, host in ((x, BASE), (x[:, ::-1, 1:], BASE[:, ::-1, 1:]), (x[1], BASE[1])):
        np.testing.assert_array_equal(hetero.tril(view, k=k).numpy(), np.tril(host, k=k))
        np.testing.assert_array_equal(hetero.triu(view, k=k).numpy(), np.triu(host, k=k))
    assert hetero.tril(x[:, :0]).shape == (2, 0, 4)


def test_tril_needs_a_matrix(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)
    with pytest.raises(hetero.ArrayError, match="hetero.tril takes a hetero array of at least 2 dimensions"):
        hetero.tril(x[0, 0])
    with pytest.raises(hetero.ArrayError, match="hetero.triu: k must be an int"):
        hetero.triu(x, k=1.5)  # type: ignore[arg-type]


# -- astype -----------------------------------------------------------------------------------
SPECIAL = np.array([-3.7, 3.7, -0.5, 0.0, -0.0, 126.9, 255.5, 300.0, -129.0, np.nan, np.inf, -np.inf, 1e10, -1e10],
                   np.float32)


def test_astype_float_to_int_truncates_and_defines_what_numpy_leaves_to_the_platform(device: hetero.Device) -> None:
    x = hetero.asarray(SPECIAL, device=device)
    for dtype in ("int32", "uint8"):
        got = x.astype(dtype).numpy()
        info = np.iinfo(dtype)
        assert got.dtype == dtype
        inside = (SPECIAL > info.min - 1) & (SPECIAL < info.max + 1)  # where NumPy defines the answer
        np.testing.assert_array_equal(got[inside], SPECIAL[inside].astype(dtype))
        # NaN gives 0; values past the range (infinities too) saturate
        wide = SPECIAL.astype(np.float64)
        want = np.where(np.isnan(wide), 0, np.clip(np.trunc(np.nan_to_num(wide)), info.min, info.max))
        np.testing.assert_array_equal(got[~inside], want[~inside].astype(dtype))


def test_astype_to_bool_is_nonzero_and_between_numbers_is_numpys(device: hetero.Device) -> None:
    x = hetero.asarray(SPECIAL, device=device)
    np.testing.assert_array_equal(hetero.astype(x, hetero.bool_).numpy(), SPECIAL.astype(bool))  # NaN is True
    ints = np.array([-(2**40), -1, 0, 1, 2**24 + 1, 2**62], np.int64)
    np.testing.assert_array_equal(hetero.asarray(ints, device=device).astype("float32").numpy(), ints.astype(np.float32))
    flags = hetero.asarray([True, False], device=device)
    np.testing.assert_array_equal(flags.astype("float32").numpy(), [1.0, 0.0])
    halves = hetero.asarray(SPECIAL, device=device)[::-3].astype("float16")  # a view in, rounded to nearest
    with np.errstate(over="ignore"):  # 1e10 is an infinity in float16
        np.testing.assert_array_equal(halves.numpy(), SPECIAL[::-3].astype(np.float16))


def test_astype_from_float64_to_float16_rounds_once(device: hetero.Device) -> None:
    # just above halfway between 1 and the next float16: through float32 it would be exactly halfway, then 1.0
    host = np.array([1 + 2**-11 + 2**-40, -(1 + 2**-11 + 2**-40), 65519.99], np.float64)
    np.testing.assert_array_equal(hetero.asarray(host, device=device).astype("float16").numpy(), host.astype(np.float16))


CAST_PAIRS = [("float32", "int8"), ("float64", "uint64"), ("float16", "int64"), ("float64", "float16"), ("int64", "bool"),
              ("float32", "bool"), ("bool", "float16"), ("uint64", "float32")]


@pytest.mark.parametrize("dialect", ["opencl", "cuda", "hip", "cpu"])
def test_every_dialect_emits_the_cast_kernels(dialect: str) -> None:
    """The cast kernels of the GPU dialects this machine cannot run are at least emitted."""
    target = Target(dialect, "any", frozenset({"fp64", "fp16", "int64_atomics"}), "test")
    for source, result in CAST_PAIRS:
        tree, dtype = array_cast._builder(np.dtype(result))([np.dtype(source)], [True])
        function = elementwise.build(tree, scalar_type(dtype), 2, f"ew_astype_{source}_{result}")
        assert function.name in emitter_for(dialect).emit(function, target).text


def test_astype_copy_and_device(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)
    assert x.astype("float32", copy=False) is x
    copied = hetero.astype(x, "float32")
    assert copied is not x and copied.buffer is not x.buffer
    np.testing.assert_array_equal(copied.numpy(), BASE)
    moved = x[0].astype("int32", device="cpu")
    assert moved.device.name == "cpu"
    np.testing.assert_array_equal(moved.numpy(), BASE[0].astype(np.int32))
    assert x[0, 0, 0].astype("int32").shape == () and x[:0].astype("int32").shape == (0, 3, 4)
    # asarray with another dtype converts on the device, by the same kernel
    np.testing.assert_array_equal(hetero.asarray(x, dtype="int32").numpy(), BASE.astype(np.int32))
    with pytest.raises(hetero.ArrayError, match="hetero.astype takes a hetero.Array"):
        hetero.astype(BASE, "int32")  # type: ignore[arg-type]


# -- concat, stack ------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [0, 1, -1, None])
def test_concat_matches_numpy_for_views(device: hetero.Device, axis: int | None) -> None:
    x = hetero.asarray(BASE, device=device)
    parts = [x, x[:, ::-1], x[::-1, :, ::-1]]
    host = [BASE, BASE[:, ::-1], BASE[::-1, :, ::-1]]
    got = hetero.concat(parts, axis=axis)
    np.testing.assert_array_equal(got.numpy(), np.concatenate(host, axis=axis))
    assert got.device is device


def test_concat_promotes_and_takes_empty_parts(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)
    halves = hetero.asarray(BASE[:, :, :2].astype(np.float16), device=device)
    got = hetero.concat((halves, x[:, :, 2:], x[:, :, :0]), axis=2)
    assert got.dtype == hetero.float32
    np.testing.assert_array_equal(got.numpy(), np.concatenate([BASE[:, :, :2].astype(np.float16), BASE[:, :, 2:]], axis=2))
    assert hetero.concat([x[:0], x[:0]]).shape == (0, 3, 4)
    np.testing.assert_array_equal(hetero.concat([x[0, 0, 0], x[1, 1, 1]], axis=None).numpy(), [BASE[0, 0, 0], BASE[1, 1, 1]])


def test_concat_errors_name_the_shapes_axis_and_devices(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)
    with pytest.raises(hetero.ArrayError, match=r"concat: shapes \(2, 3, 4\) and \(2, 2, 4\) differ on an axis other than 0"):
        hetero.concat([x, x[:, :2]])
    with pytest.raises(hetero.ArrayError, match="concat joins arrays of one number of dimensions.*axis=None"):
        hetero.concat([x, x[0]])
    with pytest.raises(hetero.ArrayError, match="concat joins arrays.*at least 1"):
        hetero.concat([x[0, 0, 0], x[0, 0, 1]])
    with pytest.raises(hetero.ArrayError, match=r"concat: axis 3 is out of bounds for 3 dimension\(s\); pass an axis in \[-3, 3\)"):
        hetero.concat([x, x], axis=3)
    with pytest.raises(hetero.ArrayError, match="concat takes a tuple or list of hetero arrays"):
        hetero.concat(x)  # type: ignore[arg-type]
    with pytest.raises(hetero.ArrayError, match="concat needs at least one array"):
        hetero.concat([])
    with pytest.raises(hetero.ArrayError, match="concat takes hetero arrays, not ndarray.*asarray"):
        hetero.concat([x, BASE])  # type: ignore[list-item]
    other = _other_device(device)
    if other is not None:
        with pytest.raises(hetero.ArrayError, match=f"different devices, {device.name} and {other.name}.*to\\("):
            hetero.concat([x, x.to(other)])


@pytest.mark.parametrize("axis", [0, 2, -1])
def test_stack_matches_numpy(device: hetero.Device, axis: int) -> None:
    x = hetero.asarray(BASE, device=device)
    got = hetero.stack([x[0], x[1, ::-1], x[0, :, ::-1]], axis=axis)
    np.testing.assert_array_equal(got.numpy(), np.stack([BASE[0], BASE[1, ::-1], BASE[0, :, ::-1]], axis=axis))


def test_stack_errors(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)
    with pytest.raises(hetero.ArrayError, match=r"stack needs arrays of one shape, got \(3, 4\) and \(2, 4\).*concat"):
        hetero.stack([x[0], x[0, :2]])
    with pytest.raises(hetero.ArrayError, match="stack: axis 3 is out of bounds for 3 dimension"):
        hetero.stack([x[0], x[1]], axis=3)
    np.testing.assert_array_equal(hetero.stack([x[0, 0, 0], x[1, 0, 0]]).numpy(), [BASE[0, 0, 0], BASE[1, 0, 0]])


# -- tile, repeat, roll -------------------------------------------------------------------------
@pytest.mark.parametrize("reps", [(2,), (2, 1, 3), (1, 2, 1, 2), (0, 2), 3])
def test_tile_matches_numpy(device: hetero.Device, reps: int | tuple[int, ...]) -> None:
    x = hetero.asarray(BASE, device=device)[1, ::-1, 1:]
    np.testing.assert_array_equal(hetero.tile(x, reps).numpy(), np.tile(BASE[1, ::-1, 1:], reps))


def test_tile_of_0d_and_its_errors(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)
    np.testing.assert_array_equal(hetero.tile(x[0, 0, 1], (2, 3)).numpy(), np.tile(BASE[0, 0, 1], (2, 3)))
    with pytest.raises(hetero.ArrayError, match="tile: repetitions must be >= 0"):
        hetero.tile(x, (2, -1))


@pytest.mark.parametrize(("repeats", "axis"), [(2, None), (3, 1), ([1, 0, 2], 1), ([2, 2, 1, 1], -1), (0, 0)])
def test_repeat_matches_numpy(device: hetero.Device, repeats: int | list[int], axis: int | None) -> None:
    x = hetero.asarray(BASE, device=device)[:, :, ::-1]
    np.testing.assert_array_equal(hetero.repeat(x, repeats, axis=axis).numpy(), np.repeat(BASE[:, :, ::-1], repeats, axis=axis))


def test_repeat_counts_from_an_array_and_its_errors(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)
    counts = hetero.asarray([1, 3], device=device)  # read back: the result's shape depends on it
    np.testing.assert_array_equal(hetero.repeat(x, counts, axis=0).numpy(), np.repeat(BASE, [1, 3], axis=0))
    np.testing.assert_array_equal(hetero.repeat(x[0, 0, 2], 3).numpy(), np.repeat(BASE[0, 0, 2], 3))
    with pytest.raises(hetero.ArrayError, match="repeat: 2 repeats for 3 elements along axis 1"):
        hetero.repeat(x, [1, 2], axis=1)
    with pytest.raises(hetero.ArrayError, match="repeat: repetitions must be >= 0"):
        hetero.repeat(x, -1)
    with pytest.raises(hetero.ArrayError, match="array of repeats must be a 0-d or 1-d integer array"):
        hetero.repeat(x, x[0, 0, :3], axis=2)
    with pytest.raises(hetero.ArrayError, match="repeat: axis 3 is out of bounds"):
        hetero.repeat(x, 2, axis=3)


@pytest.mark.parametrize(("shift", "axis"), [(1, 0), (-5, 2), (7, None), ((1, -2), (1, 2)), (2, (0, 1)), ((1, 1), 2), (0, 1)])
def test_roll_matches_numpy(device: hetero.Device, shift: int | tuple[int, ...], axis: int | tuple[int, ...] | None) -> None:
    x = hetero.asarray(BASE, device=device)[::-1, :, ::-1]
    np.testing.assert_array_equal(hetero.roll(x, shift, axis=axis).numpy(), np.roll(BASE[::-1, :, ::-1], shift, axis=axis))


def test_roll_of_empty_and_0d_and_its_errors(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)
    assert hetero.roll(x[:, :0], 2, axis=1).shape == (2, 0, 4)
    assert float(hetero.roll(x[0, 0, 3], 1)) == BASE[0, 0, 3]
    with pytest.raises(hetero.ArrayError, match=r"roll: axis -4 is out of bounds for 3 dimension\(s\)"):
        hetero.roll(x, 1, axis=-4)
    with pytest.raises(hetero.ArrayError, match="roll: 2 shifts for 3 axes"):
        hetero.roll(x, (1, 2), axis=(0, 1, 2))


# -- 0-d conversions, __array__, repr ------------------------------------------------------------
def test_python_conversions_of_0d_arrays(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)
    index = hetero.asarray(2, device=device)
    assert operator.index(index) == 2 and [10, 11, 12][index] == 12
    assert float(x[0, 0, 1]) == -6.5 and int(x[0, 0, 1]) == -6 and bool(x[0, 0, 1]) is True


def test_index_takes_0d_integer_arrays_only_as_numpy(device: hetero.Device) -> None:
    for value in (True, 2.0, [3]):  # bool, float, and one element that is not 0-d: NumPy's TypeError
        x = hetero.asarray(value, device=device)
        np.testing.assert_raises(TypeError, operator.index, np.asarray(value))
        with pytest.raises(TypeError, match="only 0-d integer hetero arrays can be used as an index"):
            operator.index(x)


def test_array_protocol_copies_only_as_asked(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)
    np.testing.assert_array_equal(np.asarray(x), BASE)
    fresh = np.asarray(x, copy=True)
    fresh[0, 0, 0] = 99
    assert x.numpy()[0, 0, 0] == BASE[0, 0, 0]
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    with pytest.raises(ValueError, match="cannot avoid a copy: converting float32 to float64"):
        np.asarray(x, dtype=np.float64, copy=False)
    if device.runtime.host_memory:
        assert np.shares_memory(np.asarray(x, copy=False), x.numpy())
    else:
        with pytest.raises(ValueError, match=f"cannot avoid a copy: its data is on {device.name}"):
            np.asarray(x, copy=False)


def test_repr_shows_values_as_numpy_and_summarises_large_arrays(device: hetero.Device) -> None:
    x = hetero.asarray(BASE, device=device)
    prefix = "hetero.Array("
    assert repr(x[0, 0]) == f"{prefix}{np.array2string(BASE[0, 0], separator=', ', prefix=prefix)}, dtype=float32, " \
                            f"device={device.name})"
    assert repr(x[0, 0, 0]) == f"hetero.Array(-7.5, dtype=float32, device={device.name})"
    assert repr(x[:0, :2]) == f"hetero.Array([], shape=(0, 2, 4), dtype=float32, device={device.name})"
    big = np.arange(3 * 40 * 50, dtype=np.float32).reshape(3, 40, 50)
    large = hetero.asarray(big, device=device)[:, ::-1]
    text = repr(large)
    assert text == f"{prefix}{np.array2string(big[:, ::-1], separator=', ', prefix=prefix)}, shape=(3, 40, 50), " \
                   f"dtype=float32, device={device.name})"
    assert "..." in text and len(text) < 2000


# -- joins of random views (hypothesis, derandomized: the same examples and kernels every run) --------
VIEWS = st.tuples(st.lists(st.integers(0, 4), min_size=1, max_size=3), st.sampled_from(["plain", "flipped", "strided"]))


def _view(device: hetero.Device, shape: list[int], kind: str) -> tuple[hetero.Array, np.ndarray]:
    host = np.arange(int(np.prod(shape)) * 2, dtype=np.float32).reshape(*shape[:-1], shape[-1] * 2) - 3
    x = hetero.asarray(host, device=device)
    index = (Ellipsis, slice(None, None, -1)) if kind == "flipped" else (Ellipsis, slice(None, None, 2)) \
        if kind == "strided" else (Ellipsis, slice(0, shape[-1]))
    return x[index], host[index]


@settings(max_examples=15, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(view=VIEWS, op=st.sampled_from(["concat", "roll", "tile", "repeat", "tril", "stack"]), amount=st.integers(-3, 3),
       axis=st.integers(-3, 2))
def test_joins_of_random_views_match_numpy(device: hetero.Device, view: tuple[list[int], str], op: str, amount: int,
                                           axis: int) -> None:
    x, host = _view(device, *view)
    axis = axis % x.ndim
    if op == "concat":
        got, want = hetero.concat([x, x[..., ::-1]], axis=axis), np.concatenate([host, host[..., ::-1]], axis=axis)
    elif op == "stack":
        got, want = hetero.stack([x, x], axis=axis), np.stack([host, host], axis=axis)
    elif op == "roll":
        got, want = hetero.roll(x, amount, axis=axis), np.roll(host, amount, axis=axis)
    elif op == "tile":
        reps = (abs(amount), 2)[: 1 + axis % 2]
        got, want = hetero.tile(x, reps), np.tile(host, reps)
    elif op == "repeat":
        got, want = hetero.repeat(x, abs(amount), axis=axis), np.repeat(host, abs(amount), axis=axis)
    else:
        if x.ndim < 2:
            x, host = x[None], host[None]
        got, want = hetero.tril(x, k=amount), np.tril(host, k=amount)
    assert got.shape == want.shape
    np.testing.assert_array_equal(got.numpy(), want)
