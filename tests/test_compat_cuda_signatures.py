"""``cuda.jit`` signatures as Numba reads them: every scalar type name of ``numba.core.types``
(``f2``, ``double``, ``boolean``, ``complex128``, ``intp``, …), argument tuples without a return
type (``"(float32[::1], intp)"``), and the same kernel's answer on every device."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.compat.cuda import types as nbtypes
from hetero.core.errors import CompileError

numba_types = pytest.importorskip("numba.core.types")
sigutils = pytest.importorskip("numba.core.sigutils")


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


def numba_scalar_names() -> list[str]:
    """Every name in numba.core.types for a number or a bool (what a signature string may use)."""
    return sorted(n for n in dir(numba_types) if not n.startswith("_")
                  and isinstance(getattr(numba_types, n), (numba_types.Number, numba_types.Boolean)))


@pytest.mark.parametrize("name", numba_scalar_names())
def test_every_numba_scalar_name_reads_as_numba_reads_it(name: str) -> None:
    """A scalar and an array of it, as Numba's own parser reads them."""
    text = f"void({name}, {name}[:, ::1])"
    (scalar, array), _ = sigutils.normalize_signature(text)
    got = nbtypes.parse(text, "k").hetero_types("k")
    assert got[0] is not None and got[1] is not None
    assert got[0].dtype == np.dtype(str(scalar) if str(scalar) != "bool" else np.bool_), name
    assert got[1].ndim == array.ndim and got[1].dtype == got[0].dtype, name


@pytest.mark.parametrize("text", ["(float32[::1], intp)", "float32[::1], intp", "(float32[::1], int64,)"])
def test_a_signature_without_a_return_type_is_the_argument_types(text: str) -> None:
    args, returns = sigutils.normalize_signature(text)  # Numba accepts it
    assert returns is None and len(args) == 2
    got = nbtypes.parse(text, "k").hetero_types("k")
    assert [str(t) for t in got] == ["f32[:]", "i64"]


def test_a_tuple_of_one_array_type_is_a_signature() -> None:
    assert [str(t) for t in nbtypes.parse("(float64[:],)", "k").hetero_types("k")] == ["f64[:]"]


def test_names_that_are_not_types_are_still_refused() -> None:
    with pytest.raises(CompileError, match="cannot read the signature"):
        nbtypes.parse("void(float33[:])", "k")
    with pytest.raises(CompileError, match="cannot read the signature"):
        nbtypes.parse("void(__import__('os'))", "k")


@cuda.jit("(float32[::1], intp)")
def fill_index(out, n):
    i = cuda.grid(1)
    if i < n:
        out[i] = i * 0.5


@cuda.jit("void(double[:], boolean[:], complex128[:], complex128)")
def many_types(d, b, z, w):
    i = cuda.grid(1)
    if i < d.size:
        d[i] = d[i] + 0.25
        b[i] = not b[i]
        z[i] = z[i] * w


@cuda.jit("(f2[:],)")
def halves(h):
    i = cuda.grid(1)
    if i < h.size:
        h[i] = h[i] * h[i]


def test_kernels_with_numba_spellings_launch_on_every_device(on: hetero.Device) -> None:
    out = np.zeros(10, np.float32)
    fill_index[1, 16](out, 10)
    np.testing.assert_array_equal(out, np.arange(10, dtype=np.float32) * 0.5)
    features = on.runtime.kernel_target().features
    if "fp16" in features:
        h = np.arange(8, dtype=np.float16)
        halves[1, 8](h)
        np.testing.assert_array_equal(h, np.arange(8, dtype=np.float16) ** 2)
    if "fp64" in features:
        d, b, z = np.arange(8, dtype=np.float64), np.arange(8) % 2 == 0, (np.arange(8) + 1j).astype(np.complex128)
        many_types[1, 8](d, b, z, 2 - 1j)
        np.testing.assert_array_equal(d, np.arange(8) + 0.25)
        np.testing.assert_array_equal(b, np.arange(8) % 2 == 1)
        np.testing.assert_allclose(z, (np.arange(8) + 1j) * (2 - 1j))


def test_a_foreign_function_needs_its_return_type_as_in_numba() -> None:
    with pytest.raises(CompileError, match="return type"):
        cuda.declare_device("mul", "(float32, float32)", link="mul.cu")
    assert cuda.declare_device("mul", "double(double, f2)", link="mul.cu").param_types()[1].name == "f16"
