"""The ``fft`` transforms on OpenCL devices with VkFFT (through ``pyvkfft``), on the device's buffers.

OpenCL has no FFT library hetero links; VkFFT generates and builds OpenCL kernels for each
transform shape at run time, and ``pyvkfft`` (``pip install pyvkfft``, built against the
system's OpenCL headers) drives it. Where it imports, the transforms of
:mod:`hetero.arraylib.fft.transforms` run here on ``oneapi`` and ``opencl`` devices, in the device's own
in-order queue (ordered with hetero's kernels, through the runtime's ``call_library`` as a
CLBlast GEMM is); where it does not, they stay a host fallback.

One primitive serves every transform: the operand cropped or zero-padded to the transform
lengths, cast to the working dtype, its transformed axes moved last in order (a contiguous copy
when they are not already), then one VkFFT transform of those axes (the leading ones batched);
``norm="backward"``'s 1/N on the inverse is VkFFT's own, in its kernels, and the other scales
(``ortho``, ``forward``) one multiply. ``c2c`` is a complex transform,
``r2c`` real to the ``n//2 + 1`` non-negative frequencies along the last axis (complex along
the others), ``c2r`` the inverse (its source is copied first: VkFFT may overwrite it). Up to
:data:`MAX_AXES` axes per transform; more (rare) are refused here and left to the host.

Apps (VkFFT's compiled plans) are cached per (queue, shape, dtype, axes count, kind), at most
:data:`CACHED_APPS`, least recently used first out.
"""

from __future__ import annotations

import collections
import math
import threading
from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.arraylib import functions as fn
from hetero.array.ndarray import Array, empty, zeros
from hetero.arraylib.cast import astype
from hetero.arraylib.complex.elementwise import imag, real
from hetero.arraylib.host_fallback import VKFFT_BACKENDS, vkfft_missing
from hetero.array.views import permute_dims
from hetero.core.device import Device
from hetero.core.launch_counts import counter as launch_counter

#: The most axes one VkFFT transform takes here (pyvkfft's ``ndim``).
MAX_AXES = 3
#: Compiled VkFFT apps kept per process.
CACHED_APPS = 64
_lock = threading.Lock()
_apps: collections.OrderedDict[tuple[Any, ...], Any] = collections.OrderedDict()


def serves(device: Device) -> bool:
    """Whether the transforms run on ``device`` with VkFFT."""
    return device.backend in VKFFT_BACKENDS and vkfft_missing() is None


def scale(norm: str, inverse: bool, points: int) -> float:
    """The factor ``norm`` puts on an unnormalised transform of ``points`` points."""
    if norm == "ortho":
        return 1.0 / math.sqrt(points)
    if (norm == "backward") == inverse:
        return 1.0 / points
    return 1.0


def _fit(x: Array, axes: Sequence[int], sizes: Sequence[int]) -> Array:
    """``x`` cropped or zero-padded to ``sizes`` along ``axes`` (NumPy's ``n``/``s`` rule)."""
    crop = tuple(slice(0, min(sizes[axes.index(a)], n)) if a in axes else slice(None) for a, n in enumerate(x.shape))
    cropped = x[crop]
    target = tuple(sizes[axes.index(a)] if a in axes else n for a, n in enumerate(x.shape))
    if cropped.shape == target:
        return cropped
    padded = zeros(target, x.dtype, device=x.device)
    padded[tuple(slice(0, n) for n in cropped.shape)] = cropped
    return padded


def _cl_array(runtime: Any, x: Array) -> Any:
    import pyopencl.array as cla

    return cla.Array(runtime.queue, x.shape, x.dtype, data=x.buffer.mem)


def _app(runtime: Any, shape: tuple[int, ...], dtype: np.dtype[Any], ndim: int, r2c: bool, scaled: bool) -> Any:
    key = (id(runtime.queue), shape, dtype.str, ndim, r2c, scaled)
    with _lock:
        app = _apps.get(key)
        if app is not None:
            _apps.move_to_end(key)
            return app
    from pyvkfft.opencl import VkFFTApp

    # norm=1: VkFFT scales the inverse by 1/N in its own kernels (NumPy's "backward"); 0: unscaled
    app = VkFFTApp(shape, dtype, runtime.queue, ndim=ndim, inplace=False, norm=1 if scaled else 0, r2c=r2c)
    with _lock:
        _apps[key] = app
        while len(_apps) > CACHED_APPS:
            _apps.popitem(last=False)
    return app


def _raw(function: str, x: Array, axes: list[int], lengths: list[int], kind: str, inverse: bool,
         result: np.dtype[Any], scaled: bool = False) -> Array:
    """One VkFFT transform of ``x`` (already of the working dtype and fitted) over ``axes``:
    unnormalised, or with an inverse scaled by 1/N in VkFFT's kernels where ``scaled``."""
    device = x.device
    runtime: Any = device.runtime
    rest = [a for a in range(x.ndim) if a not in axes]
    order = rest + axes
    moved = permute_dims(x, order) if order != list(range(x.ndim)) else x
    if kind == "c2r" or not (moved.is_contiguous and moved.offset == 0):
        moved = moved.copy()  # VkFFT reads offset 0 of a contiguous buffer (and c2r may overwrite it)
    if kind == "c2r":  # NumPy's irfft: the imaginary parts of the zero and Nyquist terms are not data
        imaginary = imag(moved)
        imaginary[..., 0] = 0
        if lengths[-1] % 2 == 0:
            imaginary[..., -1] = 0
    out_shape = (*moved.shape[:len(rest)], *lengths[:-1], lengths[-1] // 2 + 1 if kind == "r2c" else lengths[-1])
    out = empty(out_shape, result, device=device)
    if out.size:
        real_shape = out_shape if kind == "c2r" else moved.shape  # pyvkfft's shape: the real array's for r2c/c2r
        real_dtype = result if kind == "c2r" else moved.dtype
        app = _app(runtime, tuple(real_shape), np.dtype(real_dtype), len(axes), kind != "c2c", scaled)
        src, dst = _cl_array(runtime, moved), _cl_array(runtime, out)

        def run() -> None:
            (app.ifft if inverse else app.fft)(src, dst)

        runtime.call_library(f"VkFFT {function}", run)
        next(launch_counter(device.name))
    back = [0] * len(order)
    for position, axis in enumerate(order):
        back[axis] = position
    return permute_dims(out, back) if back != list(range(len(back))) else out


def transform(function: str, x: Array, axes: Sequence[int], lengths: Sequence[int], kind: str, inverse: bool,
              norm: str, work: np.dtype[Any], result: np.dtype[Any]) -> Array:
    """The ``kind`` (``"c2c"``, ``"r2c"``, ``"c2r"``) transform of ``x`` over ``axes`` (distinct,
    at most :data:`MAX_AXES`) of ``lengths`` points (for ``c2r`` the real output's; the input's
    last axis then has ``lengths[-1]//2 + 1``), in ``work`` dtype, giving ``result`` dtype, scaled
    as ``norm`` says. A ``c2r`` over several axes is NumPy's: the complex inverse over the others
    first, then the real one along the last axis."""
    axes, lengths = list(axes), list(lengths)
    if len(axes) > MAX_AXES:
        raise ValueError(f"{function}: VkFFT transforms up to {MAX_AXES} axes here, got {len(axes)}")
    sizes = list(lengths)
    if kind == "c2r":
        sizes[-1] = lengths[-1] // 2 + 1
    if x.dtype != work:
        x = astype(x, work)
    x = _fit(x, axes, sizes)
    # A length-1 axis transforms to itself (VkFFT refuses one): it drops out, and a real
    # transform along a length-1 last axis is the complex one of the rest (r2c: of x as
    # complex; c2r: the real part of it).
    scaled = inverse and norm == "backward"  # VkFFT's own 1/N: no pass of its own (a 2-step c2r: 1/N1 x 1/N2)
    if kind == "r2c" and lengths[-1] == 1:
        x, kind = astype(x, result), "c2c"
    real_part = kind == "c2r" and lengths[-1] == 1
    others = [(a, n) for a, n in zip(axes[:-1], lengths[:-1], strict=True) if n > 1]
    if kind == "c2c" or real_part:
        others += [(axes[-1], lengths[-1])] if lengths[-1] > 1 and not real_part else []
        out = _raw(function, x, [a for a, _ in others], [n for _, n in others], "c2c", inverse, work, scaled) \
            if others and x.size else x.copy()
        if real_part:
            out = astype(real(out), result)
    elif kind == "c2r":
        if others and x.size:
            x = _raw(function, x, [a for a, _ in others], [n for _, n in others], "c2c", True, work, scaled)
        out = _raw(function, x, axes[-1:], lengths[-1:], "c2r", True, result, scaled)
    else:  # r2c
        kept = others + [(axes[-1], lengths[-1])]
        out = _raw(function, x, [a for a, _ in kept], [n for _, n in kept], "r2c", inverse, result)
    factor = 1.0 if scaled else scale(norm, inverse, math.prod(lengths))
    if factor != 1.0 and out.size:
        out = fn.multiply(out, factor)
        if out.dtype != result:
            out = astype(out, result)
    return out.copy() if not out.is_contiguous else out


__all__ = ["CACHED_APPS", "MAX_AXES", "scale", "serves", "transform"]
