"""Creation and conversion on every device, against NumPy: ``asarray`` of Python data, the
``*_like`` functions, ``linspace``, ``eye``, ``meshgrid``, ``tril``/``triu``, ``astype``, the
joins (``concat``, ``stack``, ``tile``, ``repeat``, ``roll``), 0-d conversions, ``__array__``
and ``repr``; zero-size, 0-d and view inputs; and the errors.

Most arrays are float32 (and the few kernels they need are shared), so the test compiles few
distinct generated kernels on each device."""

from __future__ import annotations

import numpy as np
import pytest

import hetero

BASE = np.arange(24, dtype=np.float32).reshape(2, 3, 4) - 7.5


def _other_device(device: hetero.Device) -> hetero.Device | None:
    return next((d for d in hetero.devices() if d is not device), None)


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
