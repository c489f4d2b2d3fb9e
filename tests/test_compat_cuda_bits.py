"""CUDA's bit intrinsics (cuda.popc, clz, ffs, brev) on every device, in Numba's types, against
Python's own integer arithmetic on each value's bit pattern (hetero.language.bits)."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.core.errors import CompileError


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


@cuda.jit
def bits(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[0, i] = cuda.popc(x[i])
        out[1, i] = cuda.clz(x[i])
        out[2, i] = cuda.ffs(x[i])
        out[3, i] = cuda.brev(x[i])


def _mask(value: int, width: int) -> int:
    return int(value) & ((1 << width) - 1)


def reference(x: np.ndarray) -> np.ndarray:
    width = x.dtype.itemsize * 8
    wide = 64 if width == 64 else 32
    rows = [[bin(_mask(v, width)).count("1") for v in x],
            [width - _mask(v, width).bit_length() for v in x],
            [(_mask(v, width) & -_mask(v, width)).bit_length() for v in x],
            [int(format(_mask(v, width), f"0{wide}b")[::-1], 2) for v in x]]
    return np.array(rows, dtype=np.uint64)


@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.int64, np.uint64, np.int8, np.uint16])
def test_bit_intrinsics_match_python(on: hetero.Device, dtype: type) -> None:
    info = np.iinfo(dtype)
    rng = np.random.default_rng(11)
    x = rng.integers(info.min, info.max, 60, dtype=dtype, endpoint=True)
    x[:4] = [0, 1, info.max, info.min]
    out = np.zeros((4, x.size), np.uint64)
    bits[2, 32](x, out)
    np.testing.assert_array_equal(out, reference(x))


@cuda.jit
def typed(x, out):
    out[0] = cuda.popc(x[0]) - 1  # popc of an int32 is an int32 (Numba's type): 0 - 1 is -1


def test_results_take_numbas_types(on: hetero.Device) -> None:
    out = np.zeros(1, np.int64)
    typed[1, 1](np.zeros(1, np.int32), out)
    assert out[0] == -1


@cuda.jit
def on_float(x, out):
    out[0] = cuda.popc(x[0])


def test_a_float_argument_is_refused(on: hetero.Device) -> None:
    with pytest.raises(CompileError, match="takes an integer"):
        on_float[1, 1](np.zeros(1, np.float32), np.zeros(1, np.int64))


def _bit_count(out, a8, a16, a32, a64, u64v):  # type: ignore[no-untyped-def]
    i = cuda.grid(1)
    if i < a8.size:
        out[0, i] = a8[i].bit_count()
        out[1, i] = a16[i].bit_count()
        out[2, i] = a32[i].bit_count()
        out[3, i] = a64[i].bit_count()
        out[4, i] = u64v[i].bit_count()


def test_int_bit_count_counts_the_bits_of_the_magnitude_as_python_does(device: hetero.Device) -> None:
    a8 = np.array([0, 1, -1, -5, 127, -128, 85, -86], dtype=np.int8)
    a16 = np.array([0, 1, -1, -32768, 32767, 4369, -4369, 256], dtype=np.int16)
    a32 = np.array([0, 1, -1, -2**31, 2**31 - 1, 123456789, -123456789, 65535], dtype=np.int32)
    a64 = np.array([0, 1, -1, -2**63, 2**63 - 1, 2**40 + 7, -(2**40 + 7), 3], dtype=np.int64)
    u64v = np.array([0, 1, 2**64 - 1, 2**63, 255, 2**32, 12345, 7], dtype=np.uint64)
    out = np.zeros((5, 8), dtype=np.int64)
    with hetero.use_device(device):
        d_out = cuda.to_device(out)
        cuda.jit(_bit_count)[1, 8](d_out, *(cuda.to_device(a) for a in (a8, a16, a32, a64, u64v)))
        got = d_out.copy_to_host()
    for row, values in enumerate((a8, a16, a32, a64, u64v)):
        assert got[row].tolist() == [int(v).bit_count() for v in values.tolist()], (row, device.name)
