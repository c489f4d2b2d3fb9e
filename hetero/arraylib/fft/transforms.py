"""The array API standard's ``fft`` extension (2024.12) for hetero arrays, as one namespace:
``hetero.xp.fft`` (``from hetero.xp import fft; fft.fftshift(x)``).

What works: ``fftfreq``, ``rfftfreq`` (the sample frequencies, computed on the device by
generated kernels from an index ``arange``: float32 by default, hetero's default real float,
or the ``dtype`` given) and ``fftshift``, ``ifftshift`` (a roll by half of each axis, one strided
copy per block on the device: :func:`hetero.arraylib.manipulation.roll`).

The transforms ``fft ifft fftn ifftn rfft irfft rfftn irfftn hfft ihfft`` run where
:func:`hetero.arraylib.host_fallback.fft_library` says: NumPy's pocketfft on ``cpu`` (on the array's
host memory), CuPy's cuFFT / hipFFT on ``cuda`` / ``rocm`` (on the device buffer), VkFFT on OpenCL
devices where ``pyvkfft`` is installed (:mod:`hetero.arraylib.fft.vkfft`, on the device buffer; up to
three axes a transform), and otherwise NumPy on the host: a counted, announced, configurable host
fallback (:mod:`hetero.arraylib.host_fallback`, functions named ``"fft.fft"`` ...). Dtypes follow the standard:
complex64 stays complex64 and complex128 complex128 (which needs fp64); ``rfft``, ``rfftn`` and
``ihfft`` take real floating input (float32 and float16 give complex64, float64 complex128);
``irfft``, ``irfftn`` and ``hfft`` give the real dtype of their complex input. The complex
transforms also take real floating input, as its complex partner (as NumPy does). ``norm`` is
``"backward"`` (default), ``"ortho"`` or ``"forward"``; anything else is a ValueError. ``n`` is
None (the input's length) or at least 1: -1, 0 and below are a ValueError, as in NumPy; an entry
of ``s`` is -1 (the input's size on that axis) or at least 1.
"""

from __future__ import annotations

import dataclasses
import numbers
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hetero.arraylib.fft import vkfft
from hetero.arraylib import functions as fn
from hetero.core import dtypes
from hetero.array.ndarray import Array, arange
from hetero.arraylib.cast import astype
from hetero.arraylib.complex.elementwise import conj
from hetero.arraylib.host_fallback import FFT_LIBRARIES
from hetero.arraylib.linalg.lapack import call, check_float
from hetero.arraylib.manipulation import roll
from hetero.core.device import Device
from hetero.core.errors import ArrayError, UnsupportedDtypeError
from hetero.core.named_device import device as resolve_device


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


_NORMS = ("backward", "ortho", "forward")
_REAL_OF: dict[np.dtype[Any], np.dtype[Any]] = {dtypes.complex64: dtypes.float32, dtypes.complex128: dtypes.float64}
_COMPLEX_OF: dict[np.dtype[Any], np.dtype[Any]] = {
    dtypes.float16: dtypes.complex64, dtypes.float32: dtypes.complex64, dtypes.float64: dtypes.complex128}


def _input(function: str, x: Any, norm: Any) -> Array:
    if not isinstance(x, Array):
        raise ArrayError(f"hetero.fft.{function} takes a hetero.Array, got {type(x).__name__}; make one with "
                         "hetero.asarray(value, device=...)")
    if norm not in _NORMS:
        raise ValueError(f"hetero.fft.{function}: norm must be one of 'backward', 'ortho', 'forward', got {norm!r}")
    if x.ndim == 0:
        raise ArrayError(f"hetero.fft.{function} takes an array with at least one axis, got a 0-d array; "
                         "reshape it first (hetero.reshape(x, (1,)))")
    return x


def _complex_dtype(function: str, x: Array) -> np.dtype[Any]:
    """The complex dtype ``function`` computes in for ``x``: its own, or the complex partner of a
    real floating one (float16 and float32 give complex64)."""
    if x.dtype in _REAL_OF:
        check_float(f"fft.{function}", _REAL_OF[x.dtype], x.device)  # complex128 needs fp64
        return x.dtype
    if x.dtype in _COMPLEX_OF:
        return _COMPLEX_OF[x.dtype]
    raise UnsupportedDtypeError(f"hetero.fft.{function} takes floating-point arrays (complex ones, or real ones "
                                f"taken as complex), got {x.dtype}; convert first, e.g. hetero.astype(x, hetero.complex64)")


def _real_dtype(function: str, x: Array) -> np.dtype[Any]:
    """The real floating dtype ``function`` (rfft, rfftn, ihfft) computes in for ``x`` (float32 for float16)."""
    if x.dtype in _REAL_OF:
        raise UnsupportedDtypeError(f"hetero.fft.{function} takes real floating-point input, got {x.dtype}; pass the "
                                    "real parts (hetero.real(x)), or use hetero.fft.fft / ifft for complex input")
    check_float(f"fft.{function}", x.dtype, x.device)
    return dtypes.float32 if x.dtype == dtypes.float16 else x.dtype


def _axis(function: str, x: Array, axis: Any) -> int:
    try:
        a = operator.index(axis)
    except TypeError:
        raise ArrayError(f"hetero.fft.{function}: axis must be an int, got {axis!r}") from None
    if not -x.ndim <= a < x.ndim:
        raise ArrayError(f"hetero.fft.{function}: axis {a} is out of range for shape {x.shape}")
    return a % x.ndim


def _points(function: str, n: Any, default: int) -> int:
    """The transform length: ``n``, or ``default`` (from the input's shape) when ``n`` is None. Any
    other ``n`` below 1, -1 included, is a ValueError, as in NumPy (the standard: None or >= 1)."""
    if n is None:
        if default < 1:
            raise ArrayError(f"hetero.fft.{function}: the transform axis gives {default} points; pass n (at least 1)")
        return default
    return _count(function, n, "n", "None for the input's length along the axis")


def _count(function: str, value: Any, name: str, default: str) -> int:
    """``value``, a number of points given as ``name``, if it is an int of at least 1."""
    try:
        count = operator.index(value)
    except TypeError:
        raise ArrayError(f"hetero.fft.{function}: {name} must be an int, got {value!r}") from None
    if count < 1:
        raise ArrayError(f"hetero.fft.{function}: invalid number of FFT data points ({count}) specified: {name} must "
                         f"be at least 1, or {default}")
    return count


def _axes_and_sizes(function: str, x: Array, s: Any, axes: Any) -> tuple[list[int], list[int | None]]:
    """The standard's ``s`` and ``axes``: all axes when both are None, the last ``len(s)`` when only
    ``s`` is given; ``s`` entries of -1 (or absent ``s``) leave an axis at its input size (None)."""
    if s is not None and not isinstance(s, Sequence):
        raise ArrayError(f"hetero.fft.{function}: s must be None or a sequence of ints, got {s!r}")
    if axes is not None and not isinstance(axes, Sequence):
        raise ArrayError(f"hetero.fft.{function}: axes must be None or a sequence of ints, got {axes!r}")
    if axes is None:
        chosen = list(range(x.ndim)) if s is None else list(range(x.ndim - len(s), x.ndim))
        if s is not None and len(s) > x.ndim:
            raise ArrayError(f"hetero.fft.{function}: s has {len(s)} entries, more than the {x.ndim} axes of {x.shape}")
    else:
        chosen = [_axis(function, x, a) for a in axes]
    if len(set(chosen)) != len(chosen):
        raise ArrayError(f"hetero.fft.{function}: axes must be unique, got {axes!r}")
    if s is not None and len(s) != len(chosen):
        raise ArrayError(f"hetero.fft.{function}: s and axes must have the same length, got s={s!r}, axes={axes!r}")
    sizes: list[int | None] = [None] * len(chosen)
    for i, value in enumerate(s or ()):
        if not isinstance(value, bool) and isinstance(value, numbers.Integral) and value == -1:
            continue  # the input's size on that axis, as NumPy has it (np.int64(-1) too)
        sizes[i] = _count(function, value, f"s[{i}]", "-1 for the input's size on that axis")
    return chosen, sizes


_SWAPPED = {"backward": "forward", "forward": "backward", "ortho": "ortho"}


@dataclasses.dataclass(frozen=True)
class _Plan:
    """A transform as VkFFT runs it (:func:`hetero.arraylib.fft.vkfft.transform`): ``kind`` over
    ``axes`` of ``lengths`` points, ``inverse`` or not, ``norm``; the Hermitian transforms
    conjugate their input (``hfft``) or output (``ihfft``) around a real one."""

    axes: tuple[int, ...]
    lengths: tuple[int, ...]
    kind: str
    inverse: bool
    norm: str
    conjugate_input: bool = False
    conjugate_output: bool = False


def _one_axis(function: str, x: Array, compute: Callable[..., Any], work: np.dtype[Any],
              result: np.dtype[Any], plan: _Plan) -> Array:
    """``function`` of ``x``: VkFFT on an OpenCL device that has it, else the table's library (or the host)."""
    if x.size and len(plan.axes) <= vkfft.MAX_AXES and vkfft.serves(x.device):
        source = conj(x) if plan.conjugate_input else x
        out = vkfft.transform(f"fft.{function}", source, plan.axes, plan.lengths, plan.kind, plan.inverse,
                              plan.norm, work, result)
        return conj(out) if plan.conjugate_output else out
    return call(f"fft.{function}", [x], compute, work, [result], FFT_LIBRARIES)[0]


def fft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The 1-D discrete Fourier transform along ``axis``, cropped or zero-padded to ``n`` points;
    ``norm`` scales the forward transform by 1 (``backward``), 1/sqrt(n) (``ortho``) or 1/n (``forward``)."""
    x = _input("fft", x, norm)
    a, kind = _axis("fft", x, axis), _complex_dtype("fft", x)
    count = _points("fft", n, x.shape[a])
    return _one_axis("fft", x, lambda xp, v: xp.fft.fft(v, n=count, axis=a, norm=norm), kind, kind,
                     _Plan((a,), (count,), "c2c", False, norm))


def ifft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The 1-D inverse discrete Fourier transform (``backward`` scales it by 1/n)."""
    x = _input("ifft", x, norm)
    a, kind = _axis("ifft", x, axis), _complex_dtype("ifft", x)
    count = _points("ifft", n, x.shape[a])
    return _one_axis("ifft", x, lambda xp, v: xp.fft.ifft(v, n=count, axis=a, norm=norm), kind, kind,
                     _Plan((a,), (count,), "c2c", True, norm))


def _n_dim(function: str, x: Array, s: Any, axes: Any, norm: str, work: np.dtype[Any], result: np.dtype[Any],
           kind: str, inverse: bool, last_default: Callable[[int], int] | None = None) -> Array:
    chosen, sizes = _axes_and_sizes(function, x, s, axes)
    lengths = [x.shape[a] if size is None else size for a, size in zip(chosen, sizes, strict=True)]
    if last_default is not None and chosen and sizes[-1] is None:
        lengths[-1] = last_default(x.shape[chosen[-1]])
    for a, count in zip(chosen, lengths, strict=True):
        if count < 1:
            raise ArrayError(f"hetero.fft.{function}: axis {a} gives {count} points; pass s (entries at least 1)")
    if not chosen:
        raise ArrayError(f"hetero.fft.{function}: axes is empty, there is nothing to transform; "
                         "pass at least one axis (or None for all)")

    def compute(xp: Any, v: Any) -> Any:
        return getattr(xp.fft, function)(v, s=lengths, axes=chosen, norm=norm)

    return _one_axis(function, x, compute, work, result, _Plan(tuple(chosen), tuple(lengths), kind, inverse, norm))


def fftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
         norm: str = "backward") -> Array:
    """The n-D discrete Fourier transform over ``axes`` (all by default, or the last ``len(s)``),
    each cropped or zero-padded to its entry of ``s`` (-1: the input's size)."""
    x = _input("fftn", x, norm)
    kind = _complex_dtype("fftn", x)
    return _n_dim("fftn", x, s, axes, norm, kind, kind, "c2c", False)


def ifftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str = "backward") -> Array:
    """The n-D inverse discrete Fourier transform, ``axes`` and ``s`` as in :func:`fftn`."""
    x = _input("ifftn", x, norm)
    kind = _complex_dtype("ifftn", x)
    return _n_dim("ifftn", x, s, axes, norm, kind, kind, "c2c", True)


def rfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The 1-D transform of real input: the ``n//2 + 1`` non-negative frequency terms, complex64 for
    float32 (and float16) input, complex128 for float64."""
    x = _input("rfft", x, norm)
    a, work = _axis("rfft", x, axis), _real_dtype("rfft", x)
    count = _points("rfft", n, x.shape[a])
    return _one_axis("rfft", x, lambda xp, v: xp.fft.rfft(v, n=count, axis=a, norm=norm), work, _COMPLEX_OF[work],
                     _Plan((a,), (count,), "r2c", False, norm))


def irfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The inverse of :func:`rfft`: ``n`` real points (by default ``2*(m-1)`` for ``m`` input points)
    from the non-negative frequency terms; float32 for complex64 input, float64 for complex128."""
    x = _input("irfft", x, norm)
    a, kind = _axis("irfft", x, axis), _complex_dtype("irfft", x)
    count = _points("irfft", n, 2 * (x.shape[a] - 1))
    return _one_axis("irfft", x, lambda xp, v: xp.fft.irfft(v, n=count, axis=a, norm=norm), kind, _REAL_OF[kind],
                     _Plan((a,), (count,), "c2r", True, norm))


def rfftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
          norm: str = "backward") -> Array:
    """The n-D transform of real input: the last axis in ``axes`` keeps ``s[-1]//2 + 1`` terms."""
    x = _input("rfftn", x, norm)
    work = _real_dtype("rfftn", x)
    return _n_dim("rfftn", x, s, axes, norm, work, _COMPLEX_OF[work], "r2c", False)


def irfftn(x: Array, /, *, s: Sequence[int] | None = None, axes: Sequence[int] | None = None,
           norm: str = "backward") -> Array:
    """The inverse of :func:`rfftn`: real output, the last axis in ``axes`` of ``s[-1]`` points
    (by default ``2*(m-1)``)."""
    x = _input("irfftn", x, norm)
    kind = _complex_dtype("irfftn", x)
    return _n_dim("irfftn", x, s, axes, norm, kind, _REAL_OF[kind], "c2r", True, last_default=lambda m: 2 * (m - 1))


def hfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The transform of a Hermitian-symmetric signal given by its first half: ``n`` real points (by
    default ``2*(m-1)``); float32 for complex64 input, float64 for complex128."""
    x = _input("hfft", x, norm)
    a, kind = _axis("hfft", x, axis), _complex_dtype("hfft", x)
    count = _points("hfft", n, 2 * (x.shape[a] - 1))
    return _one_axis("hfft", x, lambda xp, v: xp.fft.hfft(v, n=count, axis=a, norm=norm), kind, _REAL_OF[kind],
                     _Plan((a,), (count,), "c2r", True, _SWAPPED[norm], conjugate_input=True))


def ihfft(x: Array, /, *, n: int | None = None, axis: int = -1, norm: str = "backward") -> Array:
    """The inverse of :func:`hfft` for real input: the ``n//2 + 1`` non-negative frequency terms."""
    x = _input("ihfft", x, norm)
    a, work = _axis("ihfft", x, axis), _real_dtype("ihfft", x)
    count = _points("ihfft", n, x.shape[a])
    return _one_axis("ihfft", x, lambda xp, v: xp.fft.ihfft(v, n=count, axis=a, norm=norm), work, _COMPLEX_OF[work],
                     _Plan((a,), (count,), "r2c", False, _SWAPPED[norm], conjugate_output=True))


__all__ = ["fft", "fftfreq", "fftn", "fftshift", "hfft", "ifft", "ifftn", "ifftshift", "ihfft", "irfft", "irfftn",
           "rfft", "rfftfreq", "rfftn"]
