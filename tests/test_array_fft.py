"""The fft extension (hetero.array_fft) on every device: sample frequencies and shifts against
NumPy; the transforms, which need complex dtypes hetero does not have yet, refuse clearly."""

from __future__ import annotations

import numpy as np
import pytest

import hetero
from hetero import array_fft as fft
from hetero import array_host_fallback


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


@pytest.mark.parametrize("name", ["fft", "ifft", "fftn", "ifftn", "rfft", "irfft", "rfftn", "irfftn", "hfft", "ihfft"])
def test_transforms_say_complex_dtypes_are_missing(name: str) -> None:
    x = hetero.asarray(np.ones(8, np.float32), device="cpu")
    with pytest.raises(hetero.UnsupportedDtypeError, match=rf"fft\.{name} needs complex.*numpy\.fft\.{name}"):
        getattr(fft, name)(x)
