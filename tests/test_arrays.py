"""Arrays on every device: creation, bit-exact copies between every device pair, and errors."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero.core import dtypes

SHAPES = [(), (0,), (1,), (7, 3, 5), (1025,)]


def _random(dtype: np.dtype, shape: tuple[int, ...], seed: int = 0) -> np.ndarray:
    """Random *bits*: NaN payloads, infinities and denormals included, so the copy must be bit-exact."""
    rng = np.random.default_rng(seed)
    count = int(np.prod(shape, dtype=np.int64))
    raw = rng.integers(0, 256, size=count * dtype.itemsize, dtype=np.uint8)
    if dtype == np.bool_:
        raw = raw % 2
    return raw.view(dtype).reshape(shape)


@pytest.mark.parametrize("dtype", dtypes.SUPPORTED, ids=str)
def test_round_trip_between_every_device_pair_is_bit_exact(device_pair: tuple[hetero.Device, hetero.Device], dtype: np.dtype) -> None:
    a, b = device_pair
    for shape in SHAPES:
        data = _random(dtype, shape)
        on_a = hetero.asarray(data, device=a, copy=True)
        on_b = on_a.to(b)
        back = on_b.to(a)
        assert on_b.device is b and back.device is a
        assert on_b.shape == shape and on_b.dtype == dtype
        assert on_b.numpy().tobytes() == data.tobytes(), f"{a.name}->{b.name} {shape}"
        assert back.numpy().tobytes() == data.tobytes(), f"{a.name}->{b.name}->{a.name} {shape}"


def test_copyto_between_every_device_pair(device_pair: tuple[hetero.Device, hetero.Device]) -> None:
    a, b = device_pair
    data = np.arange(4096, dtype=np.float32).reshape(64, 64)
    src = hetero.asarray(data, device=a)
    dst = hetero.zeros((64, 64), device=b)
    hetero.copyto(dst, src)
    assert np.array_equal(dst.numpy(), data)
    host = np.empty_like(data)
    hetero.copyto(host, dst)
    assert np.array_equal(host, data)


def test_creation_functions(device: hetero.Device) -> None:
    assert np.array_equal(hetero.zeros((2, 3), device=device).numpy(), np.zeros((2, 3), np.float32))
    assert np.array_equal(hetero.ones(4, dtype="int16", device=device).numpy(), np.ones(4, np.int16))
    full = hetero.full((3,), 2.5, device=device)
    assert full.dtype == np.float32 and np.array_equal(full.numpy(), [2.5, 2.5, 2.5])
    assert hetero.full(2, 7, device=device).dtype == np.int64
    assert hetero.full(2, True, device=device).dtype == np.bool_
    assert np.array_equal(hetero.arange(5, device=device).numpy(), np.arange(5))
    ramp = hetero.arange(0.0, 1.0, 0.25, device=device)
    assert ramp.dtype == np.float32 and np.array_equal(ramp.numpy(), [0, 0.25, 0.5, 0.75])
    empty = hetero.empty((4, 0), dtype=np.uint8, device=device)
    assert empty.shape == (4, 0) and empty.nbytes == 0 and empty.numpy().shape == (4, 0)
    assert hetero.asarray([[1.0, 2.0]], device=device).dtype == np.float32
    assert hetero.asarray(np.array([1.0]), device=device).dtype == np.float64


def test_array_properties(device: hetero.Device) -> None:
    x = hetero.empty((3, 4), dtype="float64", device=device)
    assert (x.shape, x.ndim, x.size, x.nbytes, len(x), x.device) == ((3, 4), 2, 12, 96, 3, device)
    assert "device=" + device.name in repr(x)


def test_copy_is_independent(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(10, dtype=np.int32), device=device)
    y = x.copy()
    hetero.copyto(x, np.zeros(10, np.int32))
    assert np.array_equal(y.numpy(), np.arange(10)) and not np.any(x.numpy())


def test_to_same_device_returns_the_same_array(device: hetero.Device) -> None:
    x = hetero.zeros(3, device=device)
    assert x.to(device) is x and x.to(device.name) is x


def test_numpy_protocol(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(6, dtype=np.int8).reshape(2, 3), device=device)
    assert np.array_equal(np.asarray(x), np.arange(6).reshape(2, 3))
    assert np.asarray(x, dtype=np.float32).dtype == np.float32


def test_asarray_on_cpu_shares_memory_with_numpy() -> None:
    host = np.arange(8, dtype=np.float32)
    x = hetero.asarray(host, device="cpu")
    host[0] = 42
    assert x.numpy()[0] == 42
    x.numpy()[1] = 7
    assert host[1] == 7
    assert hetero.asarray(host, device="cpu", copy=True).numpy()[0] == 42
    host[0] = 0
    assert hetero.asarray(host, device="cpu", copy=True).numpy() is not host


def test_non_contiguous_sources_are_copied_or_refused() -> None:
    host = np.arange(12, dtype=np.int32).reshape(3, 4).T
    assert np.array_equal(hetero.asarray(host, device="cpu").numpy(), host)
    with pytest.raises(hetero.ArrayError, match="non-contiguous"):
        hetero.asarray(host, device="cpu", copy=False)


@pytest.mark.parametrize("bad", [np.zeros(2, "datetime64[s]"), np.array(["a", "b"]), np.zeros(2, object)])
def test_unsupported_dtypes_are_refused_with_the_list(bad: np.ndarray) -> None:
    with pytest.raises(hetero.UnsupportedDtypeError) as info:
        hetero.asarray(bad, device="cpu")
    assert "supported" in str(info.value)


def test_unsupported_dtype_argument() -> None:
    with pytest.raises(hetero.UnsupportedDtypeError, match="float32"):
        hetero.zeros(3, dtype="datetime64[s]", device="cpu")
    with pytest.raises(hetero.UnsupportedDtypeError, match="unknown dtype"):
        hetero.zeros(3, dtype="floatz", device="cpu")
    with pytest.raises(hetero.UnsupportedDtypeError, match="byte order"):
        hetero.asarray(np.zeros(3, ">f4"), device="cpu")


def test_ragged_input_is_refused() -> None:
    with pytest.raises(hetero.ArrayError, match="ragged"):
        hetero.asarray([[1, 2], [3]], device="cpu")


def test_bad_shapes_are_refused() -> None:
    with pytest.raises(hetero.ArrayError, match="negative"):
        hetero.empty((2, -1), device="cpu")
    with pytest.raises(hetero.ArrayError, match="shape must be"):
        hetero.empty("big", device="cpu")  # type: ignore[arg-type]


def test_copyto_mismatch_is_an_error(device: hetero.Device) -> None:
    x = hetero.zeros((2, 2), device=device)
    with pytest.raises(hetero.ArrayError, match="shape"):
        hetero.copyto(x, np.zeros(3, np.float32))
    with pytest.raises(hetero.ArrayError, match="does not match"):
        hetero.copyto(x, hetero.zeros(4, device=device))
    with pytest.raises(hetero.ArrayError, match="destination"):
        hetero.copyto(np.zeros(3, np.float32), x)
    with pytest.raises(hetero.ArrayError, match="cannot cast"):
        hetero.copyto(x, np.zeros((2, 2), np.float64).astype(np.complex64))


def test_copy_to_an_unavailable_device_says_why() -> None:
    unavailable = [s for s in hetero.backend_statuses() if not s.available]
    if not unavailable:
        pytest.skip("every installed backend is available on this machine")
    x = hetero.zeros(3, device="cpu")
    with pytest.raises(hetero.BackendUnavailableError) as info:
        x.to(f"{unavailable[0].name}:0")
    assert unavailable[0].reason in str(info.value)


def test_copy_to_a_misspelled_device() -> None:
    with pytest.raises(hetero.DeviceNotFoundError, match="did you mean"):
        hetero.zeros(3, device="cpu").to("cpuu")


def test_staged_copies_between_non_host_devices_go_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    import hetero.array.ndarray

    staged = [d for d in hetero.devices() if not d.runtime.host_memory]
    if len(staged) < 2:
        pytest.skip("needs two devices without host memory (e.g. oneapi:0 and opencl:0)")
    monkeypatch.setattr(hetero.array.ndarray, "STAGING_BYTES", 4096)
    monkeypatch.setattr(hetero.array.ndarray._staging, "buffer", None, raising=False)
    data = _random(np.dtype(np.float64), (2500,), seed=9)  # 20000 bytes: five chunks, the last one short
    for a in staged:
        for b in staged:
            if a is not b:
                moved = hetero.asarray(data, device=a).to(b)
                assert moved.numpy().tobytes() == data.tobytes(), f"{a.name}->{b.name}"
