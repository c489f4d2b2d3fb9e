"""The fft extension (hetero.arraylib.fft.transforms) on every device: sample frequencies, shifts and the ten
transforms against NumPy (values, dtypes, shapes, n/axis/s/axes/norm), the OpenCL host fallback
announced once, and clear refusals."""

from __future__ import annotations

import logging
import types
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
from warnings import catch_warnings as recorded_warnings

import hetero
from hetero.arraylib.fft import transforms as fft
from hetero.arraylib.fft import vkfft
from hetero.arraylib import host_fallback as array_host_fallback
from hetero.arraylib.linalg import lapack as array_lapack


def test_sample_frequencies_match_numpy(device: hetero.Device) -> None:
    array_host_fallback.reset()
    for n in (1, 2, 7, 8):
        for d in (1.0, 0.25):
            got = fft.fftfreq(n, d=d, device=device)
            assert got.dtype == np.float32 and got.shape == (n,) and got.device is device
            np.testing.assert_allclose(got.numpy(), np.fft.fftfreq(n, d=d), rtol=1e-6)
            got = fft.rfftfreq(n, d=d, dtype=hetero.float64, device=device)
            assert got.dtype == np.float64 and got.shape == (n // 2 + 1,)
            np.testing.assert_allclose(got.numpy(), np.fft.rfftfreq(n, d=d), rtol=1e-15)
    assert array_host_fallback.counts() == {}  # computed on the device


def test_shifts_match_numpy(device: hetero.Device) -> None:
    a = np.arange(5 * 6 * 2, dtype=np.float32).reshape(5, 6, 2)
    x = hetero.asarray(a, device=device)
    for axes in (None, 0, -1, (0, 1), [2, 0]):
        for ours, numpys in ((fft.fftshift, np.fft.fftshift), (fft.ifftshift, np.fft.ifftshift)):
            got = ours(x, axes=axes)
            assert got.dtype == x.dtype and got.shape == x.shape
            np.testing.assert_array_equal(got.numpy(), numpys(a, axes=axes))
    np.testing.assert_array_equal(fft.ifftshift(fft.fftshift(x)).numpy(), a)


def test_bad_arguments(device: hetero.Device) -> None:
    with pytest.raises(hetero.ArrayError, match="at least 1"):
        fft.fftfreq(0, device=device)
    with pytest.raises(hetero.ArrayError, match="non-zero"):
        fft.rfftfreq(4, d=0, device=device)
    with pytest.raises(hetero.UnsupportedDtypeError, match="floating"):
        fft.fftfreq(4, dtype=hetero.int32, device=device)
    with pytest.raises(hetero.ArrayError, match="out of range"):
        fft.fftshift(hetero.asarray(np.zeros(3, np.float32), device=device), axes=1)


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """``host_fallback: allow`` for one test (OpenCL devices compute the transforms on the host)."""
    monkeypatch.setenv("HETERO_HOST_FALLBACK", "allow")
    hetero.reload_config()
    array_host_fallback.reset()
    yield
    monkeypatch.undo()
    hetero.reload_config()


_RNG = np.random.default_rng(5)


def _signal(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    real = _RNG.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        return (real + 1j * _RNG.standard_normal(shape)).astype(dtype)
    return real.astype(dtype)


def _close(got: hetero.Array, want: np.ndarray, dtype: Any) -> None:
    assert got.dtype == np.dtype(dtype), (got.dtype, dtype)
    assert got.shape == want.shape, (got.shape, want.shape)
    scale = max(float(np.abs(want).max(initial=0.0)), 1.0)
    tolerance = 1e-4 if np.dtype(dtype) in (np.float32, np.complex64) else 1e-10
    np.testing.assert_allclose(got.numpy(), want, rtol=0, atol=tolerance * scale)


_ONE_AXIS = [  # (name, input dtype, result dtype)
    ("fft", np.complex64, np.complex64), ("ifft", np.complex64, np.complex64),
    ("rfft", np.float32, np.complex64), ("irfft", np.complex64, np.float32),
    ("hfft", np.complex64, np.float32), ("ihfft", np.float32, np.complex64)]


@pytest.mark.parametrize(("name", "given", "result"), _ONE_AXIS)
def test_one_axis_transforms_match_numpy(device: hetero.Device, quiet: None, fft_path: str, name: str, given: Any,
                                        result: Any) -> None:
    a = _signal((3, 10), given)
    x = hetero.asarray(a, device=device)
    ours, numpys = getattr(fft, name), getattr(np.fft, name)
    for kwargs in ({}, {"n": 7}, {"n": 16}, {"axis": 0}, {"axis": 0, "n": 5}, {"norm": "ortho"}, {"norm": "forward"},
                   {"axis": -2, "n": 4, "norm": "ortho"}):
        got = ours(x, **kwargs)
        assert got.device is device
        _close(got, numpys(a, **kwargs), result)
    if device.fp64:  # complex128 / float64 keep their precision
        wide = a.astype(np.complex128 if np.dtype(given).kind == "c" else np.float64)
        _close(ours(hetero.asarray(wide, device=device), n=6), numpys(wide, n=6), np.result_type(result, np.float64))


@pytest.mark.parametrize(("name", "given", "result"), [
    ("fftn", np.complex64, np.complex64), ("ifftn", np.complex64, np.complex64),
    ("rfftn", np.float32, np.complex64), ("irfftn", np.complex64, np.float32)])
def test_n_dimensional_transforms_match_numpy(device: hetero.Device, quiet: None, fft_path: str, name: str, given: Any,
                                              result: Any) -> None:
    a = _signal((4, 5, 6), given)
    x = hetero.asarray(a, device=device)
    ours, numpys = getattr(fft, name), getattr(np.fft, name)
    for kwargs in ({}, {"axes": (0, 2)}, {"axes": [2, 0]}, {"s": (3, 8)}, {"s": (2, 3, 4), "axes": (1, 0, 2)},
                   {"axes": (1,), "norm": "ortho"}, {"norm": "forward"}):
        reference = dict(kwargs)
        if "s" in kwargs and "axes" not in kwargs:  # the standard's default: the last len(s) axes
            reference["axes"] = tuple(range(a.ndim - len(kwargs["s"]), a.ndim))
        _close(ours(x, **kwargs), numpys(a, **reference), result)
    # -1 in s: the input's size on that axis (for irfftn's last axis, 2*(m-1))
    _close(ours(x, s=(-1, 3), axes=(0, 2)), numpys(a, s=(4, 3), axes=(0, 2)), result)
    last = 2 * (6 - 1) if name == "irfftn" else 6
    _close(ours(x, s=(3, -1), axes=(0, 2)), numpys(a, s=(3, last), axes=(0, 2)), result)


def test_round_trips_and_real_input(device: hetero.Device, quiet: None, fft_path: str) -> None:
    a = _signal((2, 9), np.float32)
    x = hetero.asarray(a, device=device)
    _close(fft.irfft(fft.rfft(x), n=9), a, np.float32)
    _close(fft.ifft(fft.fft(x)), a.astype(np.complex64), np.complex64)  # real input taken as complex
    _close(fft.fft(hetero.asarray(a.astype(np.float16), device=device)), np.fft.fft(a.astype(np.float16)), np.complex64)
    _close(fft.irfftn(fft.rfftn(x), s=(2, 9)), a, np.float32)
    _close(fft.hfft(fft.ihfft(x), n=9), a, np.float32)


def _without_vkfft(monkeypatch: pytest.MonkeyPatch) -> None:
    """As on a machine without pyvkfft: the OpenCL devices' transforms fall back to the host."""
    monkeypatch.setattr(array_host_fallback, "_vkfft_missing", ["pyvkfft is not installed (a test says so)"])


@pytest.fixture(params=["device library", "host"])
def fft_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Run a test on each path the device's transforms can take: its library (VkFFT on OpenCL
    where pyvkfft is installed) and the host fallback (skipped where that is the same path)."""
    if request.param == "host":
        device = request.getfixturevalue("device")
        if not vkfft.serves(device):
            pytest.skip(f"{device.name}'s transforms take one path here")
        _without_vkfft(monkeypatch)
    return str(request.param)


def test_opencl_devices_compute_on_the_host_warning_once(device: hetero.Device, monkeypatch: pytest.MonkeyPatch,
                                                         caplog: pytest.LogCaptureFixture) -> None:
    _without_vkfft(monkeypatch)
    monkeypatch.setenv("HETERO_HOST_FALLBACK", "warn")
    hetero.reload_config()
    array_host_fallback.reset()
    x = hetero.asarray(_signal((8,), np.complex64), device=device)
    try:
        with caplog.at_level(logging.INFO, logger="hetero.array.ndarray"), recorded_warnings(record=True) as caught:
            for _ in range(3):
                fft.fft(x)
            fft.ifft(x)
        warnings = [r.getMessage() for r in caplog.records if r.name == "hetero.array.ndarray"]
        assert [str(w.message) for w in caught if issubclass(w.category, hetero.PerformanceWarning)] == warnings
        if device.backend in ("cpu", "cuda", "rocm"):  # NumPy on host memory, or cuFFT / hipFFT
            assert warnings == [] and array_host_fallback.counts() == {}
            assert array_host_fallback.host_functions(device) == ()
            return
        assert len(warnings) == 2, warnings
        assert "fft.fft" in warnings[0] and device.name in warnings[0] and "HETERO_HOST_FALLBACK" in warnings[0]
        assert array_host_fallback.counts() == {("fft.fft", device.name): 3, ("fft.ifft", device.name): 1}
        assert set(array_host_fallback.FFT_FUNCTIONS) <= set(array_host_fallback.host_functions(device))
        monkeypatch.setenv("HETERO_HOST_FALLBACK", "error")
        hetero.reload_config()
        with pytest.raises(hetero.ArrayError, match=rf"fft\.rfftn.*{device.name}.*HETERO_HOST_FALLBACK"):
            fft.rfftn(hetero.asarray(np.ones((2, 2), np.float32), device=device))
    finally:
        monkeypatch.undo()
        hetero.reload_config()


def test_transforms_refuse_bad_arguments(device: hetero.Device, quiet: None) -> None:
    c = hetero.asarray(_signal((4, 6), np.complex64), device=device)
    r = hetero.asarray(_signal((4, 6), np.float32), device=device)
    with pytest.raises(ValueError, match="norm must be one of"):
        fft.fft(c, norm="sideways")
    with pytest.raises(ValueError, match="norm must be one of"):
        fft.rfftn(r, norm=None)  # type: ignore[arg-type]
    with pytest.raises(hetero.ArrayError, match="at least 1"):
        fft.fft(c, n=0)
    with pytest.raises(hetero.ArrayError, match="out of range"):
        fft.ifft(c, axis=2)
    with pytest.raises(hetero.UnsupportedDtypeError, match="real floating.*hetero.real"):
        fft.rfft(c)
    with pytest.raises(hetero.UnsupportedDtypeError, match="floating-point.*astype"):
        fft.fft(hetero.asarray(np.arange(4, dtype=np.int32), device=device))
    with pytest.raises(hetero.ArrayError, match="same length"):
        fft.fftn(c, s=(3,), axes=(0, 1))
    with pytest.raises(hetero.ArrayError, match="unique"):
        fft.fftn(c, axes=(0, 0))
    with pytest.raises(hetero.ArrayError, match="pass n"):
        fft.irfft(hetero.asarray(np.ones((3, 1), np.complex64), device=device))
    with pytest.raises(hetero.ArrayError, match="hetero.Array"):
        fft.fft(np.ones(4, np.complex64))  # type: ignore[arg-type]


@pytest.mark.parametrize("n", [-1, 0, -7, np.int64(-1)])
@pytest.mark.parametrize("name", [name for name, _, _ in _ONE_AXIS])
def test_a_length_below_one_is_refused_as_numpy_does(device: hetero.Device, quiet: None, name: str, n: Any) -> None:
    # n=-1 used to mean "the input's length" here; NumPy (and the standard: n is None or >= 1) refuse it
    given = {each: kind for each, kind, _ in _ONE_AXIS}[name]
    a = _signal((3, 8), given)
    with pytest.raises(ValueError, match=rf"Invalid number of FFT data points \({n}\)"):
        getattr(np.fft, name)(a, n=n)
    with pytest.raises(ValueError, match=rf"(?i)invalid number of FFT data points \({n}\)"):
        getattr(fft, name)(hetero.asarray(a, device=device), n=n)


@pytest.mark.parametrize("name", ["fftn", "ifftn", "rfftn", "irfftn"])
def test_sizes_in_s_are_checked_as_numpy_does(device: hetero.Device, quiet: None, name: str) -> None:
    a = _signal((4, 6), np.float32 if name == "rfftn" else np.complex64)
    x = hetero.asarray(a, device=device)
    ours, numpys = getattr(fft, name), getattr(np.fft, name)
    for s in ((0, 4), (4, 0), (-2, 4), (4, -7)):  # below 1, and not -1: refused by both
        with pytest.raises(ValueError, match=rf"Invalid number of FFT data points \({min(s)}\)"):
            numpys(a, s=s, axes=(0, 1))
        with pytest.raises(ValueError, match=rf"(?i)invalid number of FFT data points \({min(s)}\)"):
            ours(x, s=s, axes=(0, 1))
    # -1 (of any integer type): the input's size on that axis, for both
    result = {"fftn": np.complex64, "ifftn": np.complex64, "rfftn": np.complex64, "irfftn": np.float32}[name]
    _close(ours(x, s=(np.int64(-1), 4), axes=(0, 1)), numpys(a, s=(np.int64(-1), 4), axes=(0, 1)), result)


@pytest.mark.parametrize(("backend", "library", "on_device"), [
    ("cpu", "numpy", True), ("cuda", "cuFFT", True), ("rocm", "hipFFT", True),
    ("oneapi", "numpy (host fallback)", False), ("opencl", "numpy (host fallback)", False)])
def test_which_library_runs_the_transforms(backend: str, library: str, on_device: bool,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    _without_vkfft(monkeypatch)
    fake = types.SimpleNamespace(backend=backend, name=f"{backend}:0")
    choice = array_lapack.choose(fake, array_host_fallback.FFT_LIBRARIES)  # type: ignore[arg-type]
    assert (choice.library, choice.on_device) == (library, on_device)
    listed = set(array_host_fallback.host_functions(fake))  # type: ignore[arg-type]
    assert set(array_host_fallback.FFT_FUNCTIONS) <= listed if not on_device else not listed


@pytest.mark.parametrize("backend", ["oneapi", "opencl"])
def test_opencl_devices_name_vkfft_where_pyvkfft_imports(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    fake = types.SimpleNamespace(backend=backend, name=f"{backend}:0")
    monkeypatch.setattr(array_host_fallback, "_vkfft_missing", [None])
    assert array_host_fallback.fft_library(backend) == "VkFFT"
    assert not set(array_host_fallback.FFT_FUNCTIONS) & set(array_host_fallback.host_functions(fake))  # type: ignore[arg-type]
    _without_vkfft(monkeypatch)
    assert array_host_fallback.fft_library(backend) is None
    assert "pyvkfft" in str(array_host_fallback.vkfft_missing())


def test_vkfft_runs_the_transforms_on_the_device_buffer(device: hetero.Device, monkeypatch: pytest.MonkeyPatch) -> None:
    if not vkfft.serves(device):
        pytest.skip(f"VkFFT does not serve {device.name}: " + (array_host_fallback.vkfft_missing() or "not OpenCL"))
    from hetero.core.launch_counts import launch_counts

    monkeypatch.setenv("HETERO_HOST_FALLBACK", "error")  # a host fallback would raise
    hetero.reload_config()
    try:
        a = _signal((6, 32), np.complex64)
        x = hetero.asarray(a, device=device)
        _close(fft.fft(x), np.fft.fft(a), np.complex64)
        apps = len(vkfft._apps)
        before = launch_counts()[device.name]
        _close(fft.fft(x), np.fft.fft(a), np.complex64)
        assert len(vkfft._apps) == apps  # the compiled plan is reused
        assert launch_counts()[device.name] > before  # counted as a launch, as a CLBlast call is
        odd = _signal((5, 7, 9), np.float32)  # odd lengths (Bluestein / mixed radix), three axes
        _close(fft.rfftn(hetero.asarray(odd, device=device)), np.fft.rfftn(odd), np.complex64)
        inconsistent = _signal((3, 4, 5), np.complex64)  # imaginary DC terms: NumPy ignores them, so must we
        _close(fft.irfftn(hetero.asarray(inconsistent, device=device), axes=(0, 2)),
               np.fft.irfftn(inconsistent, axes=(0, 2)), np.float32)
        tiny, flat = _signal((2, 1), np.complex64), _signal((1, 3), np.float32)  # length-1 axes: identities
        for ours, numpys, given, kwargs, result in (
                (fft.fft, np.fft.fft, tiny, {"n": 1}, np.complex64), (fft.irfft, np.fft.irfft, tiny, {"n": 1}, np.float32),
                (fft.irfftn, np.fft.irfftn, tiny, {"s": (2, 1), "axes": (0, 1)}, np.float32), (fft.fftn, np.fft.fftn, tiny[:1], {}, np.complex64),
                (fft.rfftn, np.fft.rfftn, flat, {}, np.complex64), (fft.rfft, np.fft.rfft, flat, {"axis": 0}, np.complex64)):
            _close(ours(hetero.asarray(given, device=device), **kwargs), numpys(given, **kwargs), result)
        with pytest.raises(hetero.ArrayError, match="HETERO_HOST_FALLBACK"):  # four axes: left to the host
            fft.fftn(hetero.asarray(_signal((2, 2, 2, 2), np.complex64), device=device))
    finally:
        monkeypatch.undo()
        hetero.reload_config()
