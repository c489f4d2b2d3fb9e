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

import hetero

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
