"""The array API standard's ``fft`` extension (2024.12) for hetero arrays, as one namespace:
``from hetero import array_fft as fft; fft.fftshift(x)``.

What works: ``fftfreq``, ``rfftfreq`` (the sample frequencies, computed on the device by
generated kernels from an index ``arange``: float32 by default, hetero's default real float,
or the ``dtype`` given) and ``fftshift``, ``ifftshift`` (a roll by half of each axis, one strided
copy per block on the device: :func:`hetero.array_manipulation.roll`).

What does not yet: the transforms ``fft ifft fftn ifftn rfft irfft rfftn irfftn hfft ihfft``. Each
takes or returns complex arrays, and hetero arrays have no complex dtypes yet
(:mod:`hetero.dtypes`), so each raises :class:`hetero.UnsupportedDtypeError` saying so and how to
compute it meanwhile (NumPy on the host, or CuPy's cuFFT on the array's buffer through DLPack).
"""

from __future__ import annotations

import numbers
import operator
from collections.abc import Sequence
from typing import Any

from hetero import array_functions as fn
from hetero import dtypes
from hetero.array import Array, arange
from hetero.array_cast import astype
from hetero.array_lapack import check_float
from hetero.array_manipulation import roll
from hetero.device import Device
from hetero.errors import ArrayError, UnsupportedDtypeError
from hetero.registry import device as resolve_device


def _length(function: str, n: Any) -> int:
    try:
        count = operator.index(n)
    except TypeError:
        raise ArrayError(f"hetero.fft.{function}: n must be an int, got {n!r}") from None
    if count < 1:
        raise ArrayError(f"hetero.fft.{function}: n is the window length and must be at least 1, got {count}")
    return count


def _spacing(function: str, d: Any) -> float:
    if isinstance(d, bool) or not isinstance(d, numbers.Real) or float(d) == 0:
        raise ArrayError(f"hetero.fft.{function}: d is the sample spacing and must be a non-zero real number, got {d!r}")
    return float(d)


def _dtype(function: str, dtype: Any, device: Device) -> Any:
    kind = dtypes.float32 if dtype is None else dtypes.as_dtype(dtype)
    check_float(f"fft.{function}", kind, device)  # a real floating dtype; float64 only with fp64
    return kind


def fftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: str | Device | None = None) -> Array:
    """The sample frequencies of a length-``n`` transform with spacing ``d``:
    ``[0, 1, ..., ceil(n/2)-1, -floor(n/2), ..., -1] / (d*n)``, of ``dtype`` (float32 by default)."""
    count, spacing = _length("fftfreq", n), _spacing("fftfreq", d)
    target = resolve_device(device)
    kind = _dtype("fftfreq", dtype, target)
    index = arange(count, dtype=dtypes.int64, device=target)
    signed = fn.where(fn.less(index, (count + 1) // 2), index, fn.subtract(index, count))
    return fn.multiply(astype(signed, kind), 1.0 / (spacing * count))


def rfftfreq(n: int, /, *, d: float = 1.0, dtype: Any = None, device: str | Device | None = None) -> Array:
    """The non-negative sample frequencies of a length-``n`` real transform: ``[0, 1, ..., n//2] / (d*n)``."""
    count, spacing = _length("rfftfreq", n), _spacing("rfftfreq", d)
    target = resolve_device(device)
    kind = _dtype("rfftfreq", dtype, target)
    index = arange(count // 2 + 1, dtype=dtypes.int64, device=target)
    return fn.multiply(astype(index, kind), 1.0 / (spacing * count))


def _shift(function: str, x: Any, axes: int | Sequence[int] | None, sign: int) -> Array:
    if not isinstance(x, Array):
        raise ArrayError(f"hetero.fft.{function} takes a hetero.Array, got {type(x).__name__}")
    chosen = list(range(x.ndim)) if axes is None else [axes] if not isinstance(axes, Sequence) else list(axes)
    try:
        resolved = [operator.index(a) for a in chosen]
    except TypeError:
        raise ArrayError(f"hetero.fft.{function}: axes must be None, an int or a sequence of ints, got {axes!r}") from None
    for a in resolved:
        if not -x.ndim <= a < x.ndim:
            raise ArrayError(f"hetero.fft.{function}: axis {a} is out of range for shape {x.shape}")
    if not resolved:
        return x.copy()
    return roll(x, [sign * (x.shape[a] // 2) for a in resolved], axis=resolved)


def fftshift(x: Array, /, *, axes: int | Sequence[int] | None = None) -> Array:
    """``x`` with the zero-frequency element moved to the centre of each axis in ``axes`` (all by default)."""
    return _shift("fftshift", x, axes, 1)


def ifftshift(x: Array, /, *, axes: int | Sequence[int] | None = None) -> Array:
    """The inverse of :func:`fftshift` (they differ for odd lengths)."""
    return _shift("ifftshift", x, axes, -1)


def _complex(function: str, x: Any) -> UnsupportedDtypeError:
    shown = f"{x.dtype}{list(x.shape)} on {x.device.name}" if isinstance(x, Array) else type(x).__name__
    return UnsupportedDtypeError(
        f"hetero.fft.{function} needs complex arrays (as input or result), and hetero arrays have no complex dtypes "
        f"yet (given {shown}); meanwhile compute it with NumPy on the host (numpy.fft.{function}(x.numpy())) or, for "
        f"arrays on cuda/rocm, with CuPy's cuFFT on the same memory (cupy.fft.{function}(cupy.from_dlpack(x)))")


def fft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The 1-D discrete Fourier transform: not yet supported (complex dtypes), see the module docstring."""
    raise _complex("fft", x)


def ifft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The 1-D inverse transform: not yet supported (complex dtypes)."""
    raise _complex("ifft", x)


def fftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str = "backward") -> Array:
    """The n-D transform: not yet supported (complex dtypes)."""
    raise _complex("fftn", x)


def ifftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str = "backward") -> Array:
    """The n-D inverse transform: not yet supported (complex dtypes)."""
    raise _complex("ifftn", x)


def rfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The 1-D transform of real input (a complex result): not yet supported."""
    raise _complex("rfft", x)


def irfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The inverse of :func:`rfft` (complex input): not yet supported."""
    raise _complex("irfft", x)


def rfftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str = "backward") -> Array:
    """The n-D transform of real input (a complex result): not yet supported."""
    raise _complex("rfftn", x)


def irfftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str = "backward") -> Array:
    """The inverse of :func:`rfftn` (complex input): not yet supported."""
    raise _complex("irfftn", x)


def hfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The transform of a Hermitian-symmetric signal (complex input): not yet supported."""
    raise _complex("hfft", x)


def ihfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The inverse of :func:`hfft` (a complex result): not yet supported."""
    raise _complex("ihfft", x)


__all__ = ["fft", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifftn", "ifftshift", "ihfft", "irfft", "irfftn",
           "rfft", "rfftfreq", "rfftn"]
