"""Complex tensors and torch's FFT: ``_fft_r2c``, ``_fft_c2c``, ``_fft_c2r`` as
:mod:`hetero.xp.fft`'s n-D transforms (VkFFT on OpenCL devices, a counted host fallback
elsewhere), the conjugates, ``view_as_real``, and which layout and arithmetic lowerings take
complex tensors too (:func:`.registry.takes_complex`: the others, arithmetic included, refuse them).

torch's ``normalization`` argument is an ``fft_norm_mode``: 0 none, 1 by the square root of the
point count, 2 by the point count; which ``norm`` string that is depends on the direction (a
forward transform scaled by ``1/n`` is NumPy's ``"forward"``, an inverse one ``"backward"``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

import hetero
import hetero.xp as xp
from hetero.torch.backend.lowerings.registry import NotLowered, lowers, takes_complex

aten = torch.ops.aten

_FORWARD = {0: "backward", 1: "ortho", 2: "forward"}
_INVERSE = {0: "forward", 1: "ortho", 2: "backward"}


def _norm(normalization: int, forward: bool) -> str:
    table = _FORWARD if forward else _INVERSE
    if normalization not in table:
        raise NotLowered(f"fft normalization={normalization}")
    return table[normalization]


def _axes(x: hetero.Array, dim: Sequence[int]) -> tuple[int, ...]:
    axes = tuple(d % x.ndim for d in dim)
    if not axes or len(set(axes)) != len(axes):
        raise NotLowered(f"fft over dims {list(dim)}")
    return axes


@lowers(aten._fft_r2c.default)
def fft_r2c(x: hetero.Array, dim: Sequence[int], normalization: int, onesided: bool) -> Any:
    """The transform of a real tensor: the last dim's non-negative frequencies (``onesided``) or all."""
    if x.dtype.kind != "f":
        raise NotLowered(f"_fft_r2c of a {x.dtype} tensor")
    axes, norm = _axes(x, dim), _norm(normalization, forward=True)
    if onesided:
        return xp.fft.rfftn(x, axes=axes, norm=norm)
    return xp.fft.fftn(xp.astype(x, np.dtype(np.complex64 if x.dtype.itemsize <= 4 else np.complex128)),
                       axes=axes, norm=norm)


@lowers(aten._fft_c2c.default, complex_too=True)
def fft_c2c(x: hetero.Array, dim: Sequence[int], normalization: int, forward: bool) -> Any:
    if x.dtype.kind != "c":
        raise NotLowered(f"_fft_c2c of a {x.dtype} tensor")
    axes, norm = _axes(x, dim), _norm(normalization, forward)
    return (xp.fft.fftn if forward else xp.fft.ifftn)(x, axes=axes, norm=norm)


@lowers(aten._fft_c2r.default, complex_too=True)
def fft_c2r(x: hetero.Array, dim: Sequence[int], normalization: int, last_dim_size: int) -> Any:
    """The inverse of a one-sided transform: real, the last dim of ``last_dim_size`` points."""
    if x.dtype.kind != "c":
        raise NotLowered(f"_fft_c2r of a {x.dtype} tensor")
    axes, norm = _axes(x, dim), _norm(normalization, forward=False)
    sizes = [x.shape[a] for a in axes[:-1]] + [last_dim_size]
    return xp.fft.irfftn(x, s=sizes, axes=axes, norm=norm)


@lowers(aten._conj.default, aten._conj_physical.default, aten.conj_physical.default, complex_too=True)
def conj(x: hetero.Array) -> Any:
    return xp.conj(x) if x.dtype.kind == "c" else x


@lowers(aten.view_as_real.default, complex_too=True)
def view_as_real(x: hetero.Array) -> Any:
    if x.dtype.kind != "c":
        raise NotLowered(f"view_as_real of a {x.dtype} tensor")
    return xp.stack([xp.real(x), xp.imag(x)], axis=-1)


@lowers(aten.real.default, complex_too=True)
def real(x: hetero.Array) -> Any:
    return xp.real(x) if x.dtype.kind == "c" else x


@lowers(aten.imag.default, complex_too=True)
def imag(x: hetero.Array) -> Any:
    if x.dtype.kind != "c":
        raise NotLowered("imag of a real tensor (an error in torch)")
    return xp.imag(x)


# Layout operations move elements without looking at them; the casts keep torch's complex rules
# (casts.astype). Complex arithmetic stays in torch: torch multiplies by a real number (and adds
# with alpha=1) as by a complex one, (inf+0j)*2 = inf+nanj and (-0-1j)*2 = 0-2j, where the array
# API scales each part.
takes_complex(aten.view.default, aten._unsafe_view.default, aten.reshape.default, aten.alias.default,
              aten.lift_fresh_copy.default, aten.clone.default, aten.permute.default, aten.t.default,
              aten.transpose.int, aten.expand.default, aten.unsqueeze.default, aten.squeeze.dims, aten.squeeze.dim,
              aten.squeeze.default, aten.select.int, aten.slice.Tensor, aten.split_with_sizes.default,
              aten.split.Tensor, aten.cat.default, aten.constant_pad_nd.default, aten.flip.default,
              aten._to_copy.default, aten.copy.default, aten.neg.default)

__all__: list[str] = []
