"""Array sizes, fill values and ranges that cannot be represented are refused with a
hetero error before any memory is allocated (issue 12, item 7)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import hetero

# Each shape's element count times 4 bytes overflows int64: NumPy's int64 product
# wraps (the first gave nbytes=8, and a bounds-checked kernel then crashed the process).
OVERFLOWING_SHAPES = [(6148914691236517206, 3), (1 << 31, 1 << 31), (1 << 70,), (1 << 62, 2)]


@pytest.mark.parametrize("shape", OVERFLOWING_SHAPES, ids=str)
def test_shapes_whose_byte_count_overflows_int64_are_refused(device: hetero.Device, shape: tuple[int, ...]) -> None:
    for make in (hetero.empty, hetero.zeros, hetero.ones):
        with pytest.raises(hetero.ArrayError, match=r"bytes.*2\*\*63"):
            make(shape, hetero.float32, device=device)
    with pytest.raises(hetero.ArrayError, match="bytes"):
        hetero.full(shape, 1.0, hetero.float32, device=device)


def test_sizes_are_python_ints_even_past_int64() -> None:
    # A zero-length dimension makes a valid empty array however big the others are.
    a = hetero.empty((0, 1 << 62, 1 << 62), hetero.float32, device="cpu")
    assert a.nbytes == 0 and a.size == 0 and a.shape == (0, 1 << 62, 1 << 62)


def test_the_largest_representable_request_reaches_the_allocator(device: hetero.Device) -> None:
    # Just under the limit: the device itself refuses (a hetero DeviceError), nothing crashes.
    with pytest.raises(hetero.HeteroError):
        hetero.empty((1 << 30, 1 << 30), hetero.float32, device=device)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf")])
def test_full_refuses_nan_and_infinity_in_integer_dtypes(device: hetero.Device, value: float) -> None:
    with pytest.raises(hetero.ArrayError, match="no NaN or infinity"):
        hetero.full((3,), value, hetero.int32, device=device)


@pytest.mark.parametrize("value, dtype", [(1 << 70, hetero.int32), (1 << 31, hetero.int32), (300, hetero.uint8),
                                          (-1, hetero.uint32), (1 << 70, None), (1 << 2000, hetero.float64)])
def test_full_refuses_values_the_dtype_cannot_hold(device: hetero.Device, value: int, dtype: Any) -> None:
    with pytest.raises(hetero.ArrayError, match="does not fit|cannot fill"):
        hetero.full((3,), value, dtype, device=device)


def test_full_refuses_non_numbers(device: hetero.Device) -> None:
    with pytest.raises(hetero.ArrayError, match="fill_value"):
        hetero.full((3,), "seven", hetero.int32, device=device)


def test_full_keeps_valid_values(device: hetero.Device) -> None:
    assert hetero.full((2,), (1 << 31) - 1, hetero.int32, device=device).numpy().tolist() == [(1 << 31) - 1] * 2
    assert hetero.full((2,), -(1 << 63), hetero.int64, device=device).numpy().tolist() == [-(1 << 63)] * 2
    assert np.isnan(hetero.full((2,), float("nan"), hetero.float32, device=device).numpy()).all()
    assert hetero.full((2,), 3, device=device).dtype == hetero.int64
    assert hetero.full((2,), True, hetero.int8, device=device).numpy().tolist() == [1, 1]


@pytest.mark.parametrize("args, match", [((0, 10, 0), "step"), ((0, float("nan")), "finite"),
                                         ((0, float("inf")), "finite"), ((0, 1e30), "elements"),
                                         ((0, "10"), "number")])
def test_arange_refuses_bad_ranges(device: hetero.Device, args: tuple[Any, ...], match: str) -> None:
    with pytest.raises(hetero.ArrayError, match=match):
        hetero.arange(*args, device=device)


def test_arange_keeps_numpy_semantics(device: hetero.Device) -> None:
    assert hetero.arange(5, device=device).numpy().tolist() == [0, 1, 2, 3, 4]
    assert hetero.arange(10, 0, -3, device=device).numpy().tolist() == [10, 7, 4, 1]
    assert hetero.arange(0, 1, 0.25, device=device).numpy().tolist() == [0, 0.25, 0.5, 0.75]
    assert hetero.arange(3, 1, device=device).size == 0


def test_a_torch_bfloat16_tensor_is_an_unsupported_dtype(device: hetero.Device) -> None:
    torch = pytest.importorskip("torch")
    tensor = torch.zeros(3, dtype=torch.bfloat16)
    with pytest.raises(hetero.UnsupportedDtypeError, match=r"bfloat16.*float\(\)"):
        hetero.asarray(tensor, device=device)
    with pytest.raises(hetero.UnsupportedDtypeError, match="bfloat16"):
        hetero.empty((3,), torch.bfloat16, device=device)
