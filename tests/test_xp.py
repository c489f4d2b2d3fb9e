"""hetero.xp, the array API namespace: how arrays name it, the inspection API, the data type
functions, and the decisions the standard leaves to the library (on every device)."""

from __future__ import annotations

import math

import numpy as np
import pytest

import hetero
import hetero.xp as xp


def test_arrays_name_the_namespace(device: hetero.Device) -> None:
    x = xp.asarray([1.0, 2.0], device=device)
    assert x.__array_namespace__() is xp
    assert x.__array_namespace__(api_version="2023.12") is xp
    with pytest.raises(ValueError, match="2024.12"):
        x.__array_namespace__(api_version="1999.01")
    assert xp.__array_api_version__ == "2024.12"


def test_default_dtypes_are_the_same_on_every_device(device: hetero.Device) -> None:
    info = xp.__array_namespace_info__()
    assert info.default_dtypes(device=device) == {"real floating": xp.float32, "complex floating": xp.complex64,
                                                  "integral": xp.int64, "indexing": xp.int64}
    assert xp.asarray(1.5, device=device).dtype == xp.float32
    assert xp.asarray(3, device=device).dtype == xp.int64
    assert xp.arange(3, device=device).dtype == xp.int64
    assert xp.zeros(2, device=device).dtype == xp.float32
    assert xp.full(2, True, device=device).dtype == xp.bool


def test_dtypes_follow_what_the_device_holds(device: hetero.Device) -> None:
    info = xp.__array_namespace_info__()
    held = info.dtypes(device=device)
    assert ("float64" in held) == ("complex128" in held) == device.fp64
    assert "complex64" in held
    assert set(info.dtypes(device=device, kind="integral")) == {f"{s}int{b}" for s in ("", "u") for b in (8, 16, 32, 64)}
    assert set(info.dtypes(device=device, kind=("bool", xp.float32))) == {"bool", "float32"}
    with pytest.raises(ValueError, match="unknown kind"):
        info.dtypes(device=device, kind="floating")


def test_every_device_is_listed_and_the_default_is_hetero_device() -> None:
    info = xp.__array_namespace_info__()
    assert [d.name for d in info.devices()] == [d.name for d in hetero.devices()]
    assert info.default_device() is hetero.device()
    capabilities = info.capabilities()
    assert capabilities["boolean indexing"] is True and capabilities["data-dependent shapes"] is True
    assert set(capabilities["host fallback"]) == {d.name for d in hetero.devices()}


def test_to_device_moves_and_device_is_an_attribute(device: hetero.Device) -> None:
    x = xp.asarray([1, 2, 3], device="cpu")
    moved = x.to_device(device)
    assert moved.device is device
    np.testing.assert_array_equal(moved.numpy(), [1, 2, 3])
    assert x.to_device("cpu") is x


def test_finfo_and_iinfo_are_plain_python_numbers() -> None:
    f = xp.finfo(xp.float32)
    assert (f.bits, f.eps, f.max, f.smallest_normal) == (32, float(np.finfo(np.float32).eps),
                                                        float(np.finfo(np.float32).max), float(np.finfo(np.float32).tiny))
    assert isinstance(f.eps, float) and f.dtype == xp.float32
    i = xp.iinfo(xp.uint16)
    assert (i.bits, i.min, i.max, i.dtype) == (16, 0, 65535, xp.uint16)
    assert xp.iinfo(xp.asarray([1], device="cpu", dtype=xp.int8)).max == 127
    with pytest.raises(hetero.ArrayError, match="iinfo"):
        xp.finfo(xp.int32)
    with pytest.raises(hetero.ArrayError, match="finfo"):
        xp.iinfo(xp.float64)


@pytest.mark.parametrize(("dtype", "kind", "expected"), [
    (xp.int8, "signed integer", True), (xp.uint8, "signed integer", False), (xp.uint64, "integral", True),
    (xp.float32, "real floating", True), (xp.float64, "numeric", True), (xp.bool, "numeric", False),
    (xp.bool, "bool", True), (xp.float32, "complex floating", False), (xp.int32, ("bool", "integral"), True),
    (xp.float32, xp.float32, True), (xp.float32, xp.float64, False),
])
def test_isdtype(dtype: np.dtype, kind: object, expected: bool) -> None:
    assert xp.isdtype(dtype, kind) is expected


def test_isdtype_refuses_what_is_not_a_kind() -> None:
    with pytest.raises(ValueError, match="unknown kind"):
        xp.isdtype(xp.int8, "integer")
    with pytest.raises(TypeError, match="dtype object"):
        xp.isdtype("int8", "integral")


def test_constants() -> None:
    assert (xp.e, xp.pi, xp.inf) == (math.e, math.pi, math.inf) and math.isnan(xp.nan) and xp.newaxis is None


def test_unstack_and_broadcast_arrays_are_views(device: hetero.Device) -> None:
    host = np.arange(6, dtype=np.int32).reshape(2, 3)
    x = xp.asarray(host, device=device)
    parts = xp.unstack(x, axis=1)
    assert len(parts) == 3 and all(p.base is not None for p in parts)
    for got, want in zip(parts, np.moveaxis(host, 1, 0), strict=True):
        np.testing.assert_array_equal(got.numpy(), want)
    a, b = xp.broadcast_arrays(x, xp.asarray([10, 20, 30], device=device, dtype=xp.int32))
    assert a.shape == b.shape == (2, 3)
    np.testing.assert_array_equal(b.numpy(), [[10, 20, 30], [10, 20, 30]])
    with pytest.raises(hetero.ArrayError, match="0-d"):
        xp.unstack(xp.asarray(1, device=device))


def test_real_input_to_conj_real_imag(device: hetero.Device) -> None:
    x = xp.asarray([1.5, -2.0], device=device)
    np.testing.assert_array_equal(xp.conj(x).numpy(), [1.5, -2.0])
    np.testing.assert_array_equal(xp.real(x).numpy(), [1.5, -2.0])
    np.testing.assert_array_equal(xp.imag(x).numpy(), [0.0, 0.0])


def test_from_dlpack_with_device_and_copy(device: hetero.Device) -> None:
    host = np.arange(4, dtype=np.float32)
    same = xp.from_dlpack(host)
    assert same.device.name == "cpu"
    moved = xp.from_dlpack(host, device=device)
    assert moved.device is device
    np.testing.assert_array_equal(moved.numpy(), host)
    with pytest.raises(TypeError, match="__dlpack__"):
        xp.from_dlpack([1, 2])


def test_from_dlpack_of_a_hetero_array_on_any_device(device: hetero.Device) -> None:
    """hetero's own arrays need no capsule (OpenCL devices export none): shared on their own
    device, copied when asked or moved, BufferError for copy=False across devices."""
    x = xp.asarray(np.arange(4, dtype=np.float32), device=device)
    shared = xp.from_dlpack(x)
    assert shared.device is device
    shared[0] = 7.0
    assert float(x[0]) == 7.0  # the same memory
    copied = xp.from_dlpack(x, copy=True)
    copied[1] = -1.0
    assert float(x[1]) == 1.0
    other = hetero.device("cpu") if device.name != "cpu" else next(d for d in hetero.devices() if d.name != "cpu")
    moved = xp.from_dlpack(x, device=other)
    assert moved.device is other
    np.testing.assert_array_equal(moved.numpy(), [7.0, 1.0, 2.0, 3.0])
    with pytest.raises(BufferError, match="copy=False"):
        xp.from_dlpack(x, device=other, copy=False)


def test_dlpack_export_to_the_host_copies_where_the_memory_is_not_the_hosts(device: hetero.Device) -> None:
    x = xp.asarray(np.arange(3, dtype=np.int32), device=device)

    class Capsule:  # hands NumPy the capsule hetero made for dl_device=(kDLCPU, 0)
        def __init__(self, capsule: object) -> None:
            self.capsule = capsule

        def __dlpack__(self, **_: object) -> object:
            return self.capsule

        def __dlpack_device__(self) -> tuple[int, int]:
            return (1, 0)

    for kwargs in ({"dl_device": (1, 0)}, {"dl_device": (1, 0), "copy": True, "max_version": (1, 0)}):
        np.testing.assert_array_equal(np.from_dlpack(Capsule(x.__dlpack__(**kwargs))), [0, 1, 2])
    if not device.runtime.host_memory:
        with pytest.raises(BufferError, match="copy=False forbids"):
            x.__dlpack__(dl_device=(1, 0), copy=False)


@pytest.mark.parametrize("make", [xp.empty, xp.zeros, xp.ones])
def test_dtype_none_is_the_default_float(device: hetero.Device, make: object) -> None:
    assert make((2,), dtype=None, device=device).dtype == xp.float32  # type: ignore[operator]


def test_roll_takes_shift_by_keyword(device: hetero.Device) -> None:
    x = xp.asarray([1, 2, 3], device=device)
    assert xp.roll(x, shift=1).numpy().tolist() == [3, 1, 2]
