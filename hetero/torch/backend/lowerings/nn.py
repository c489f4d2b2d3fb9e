"""Products and the network operations core ATen keeps whole: ``mm``, ``addmm``, ``bmm`` (through
hetero's matmul, which picks the device's BLAS routine or its own kernel), ``_softmax``,
``_log_softmax``, ``native_layer_norm``, and 2-D ``convolution`` (groups 1) as im2col products:
the input's padded windows gathered by strided slices, one product with the weights. A product's
sums run in another order than torch's, so results agree within float32 rounding (docs/torch.md)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

import hetero
import hetero.xp as xp
from hetero.torch.backend.lowerings.registry import NotLowered, lowers
from hetero.torch.backend.lowerings.shapes import constant_pad_nd

aten = torch.ops.aten


def _floats(*arrays: hetero.Array) -> None:
    if any(a.dtype.kind != "f" for a in arrays) or len({a.dtype for a in arrays}) > 1:
        raise NotLowered("a product of non-float or mixed-dtype tensors")


@lowers(aten.mm.default, aten.bmm.default)
def mm(a: hetero.Array, b: hetero.Array) -> Any:
    _floats(a, b)
    return xp.matmul(a, b)


@lowers(aten.addmm.default)
def addmm(bias: hetero.Array, a: hetero.Array, b: hetero.Array, *, beta: Any = 1, alpha: Any = 1) -> Any:
    _floats(bias, a, b)
    product = xp.matmul(a, b)
    if alpha != 1:
        product = product * alpha
    if beta == 0:
        return product  # torch ignores bias (even NaN) with beta = 0
    return product + (bias if beta == 1 else bias * beta)


def _dim(x: hetero.Array, dim: int) -> int:
    return dim % x.ndim if x.ndim else 0


@lowers(aten._softmax.default)
def softmax(x: hetero.Array, dim: int, half_to_float: bool) -> Any:
    if half_to_float or x.dtype.kind != "f":
        raise NotLowered("softmax of a non-float tensor or half_to_float")
    if x.ndim == 0:
        return xp.exp(x - x)
    axis = _dim(x, dim)
    e = xp.exp(x - xp.max(x, axis=axis, keepdims=True))
    return e / xp.sum(e, axis=axis, keepdims=True)


@lowers(aten._log_softmax.default)
def log_softmax(x: hetero.Array, dim: int, half_to_float: bool) -> Any:
    if half_to_float or x.dtype.kind != "f":
        raise NotLowered("log_softmax of a non-float tensor or half_to_float")
    if x.ndim == 0:
        return x - x
    axis = _dim(x, dim)
    shifted = x - xp.max(x, axis=axis, keepdims=True)
    return shifted - xp.log(xp.sum(xp.exp(shifted), axis=axis, keepdims=True))


@lowers(aten.native_layer_norm.default)
def layer_norm(x: hetero.Array, normalized_shape: Sequence[int], weight: hetero.Array | None,
               bias: hetero.Array | None, eps: float) -> Any:
    if x.dtype.kind != "f":
        raise NotLowered("layer_norm of a non-float tensor")
    axes = tuple(range(x.ndim - len(normalized_shape), x.ndim))
    mean = xp.mean(x, axis=axes, keepdims=True)
    centered = x - mean
    rstd = 1.0 / xp.sqrt(xp.mean(centered * centered, axis=axes, keepdims=True) + eps)
    out = centered * rstd
    if weight is not None:
        out = out * weight
    if bias is not None:
        out = out + bias
    return out, mean, rstd


@lowers(aten.convolution.default)
def convolution(x: hetero.Array, weight: hetero.Array, bias: hetero.Array | None, stride: Sequence[int],
                padding: Sequence[int], dilation: Sequence[int], transposed: bool, output_padding: Sequence[int],
                groups: int) -> Any:
    if transposed or groups != 1 or x.ndim != 4 or weight.ndim != 4:
        raise NotLowered("a convolution other than 2-D, groups=1, not transposed")
    _floats(x, weight, *(() if bias is None else (bias,)))
    sh, sw = (stride * 2)[:2] if len(stride) == 1 else stride
    ph, pw = (padding * 2)[:2] if len(padding) == 1 else padding
    dh, dw = (dilation * 2)[:2] if len(dilation) == 1 else dilation
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise NotLowered("a convolution with an empty output")
    padded = constant_pad_nd(x, (pw, pw, ph, ph), 0.0) if ph or pw else x
    windows = [padded[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
               for i in range(kh) for j in range(kw)]
    columns = xp.reshape(xp.stack(windows, axis=2), (n, c * kh * kw, oh * ow))
    out = xp.matmul(xp.reshape(weight, (o, c * kh * kw)), columns)  # (n, o, oh * ow)
    out = xp.reshape(out, (n, o, oh, ow))
    if bias is not None:
        out = out + xp.reshape(bias, (1, o, 1, 1))
    return out


__all__: list[str] = []


@lowers(aten.max_pool2d_with_indices.default)
def max_pool2d(x: hetero.Array, kernel_size: Sequence[int], stride: Sequence[int] = (), padding: Sequence[int] = (0,),
               dilation: Sequence[int] = (1,), ceil_mode: bool = False) -> Any:
    """The windows' largest values and their flat indices into each input plane (the first
    largest in the window's row-major order, NaN largest: torch's choice)."""
    if ceil_mode or x.ndim != 4 or x.dtype.kind != "f":
        raise NotLowered("max pooling with ceil_mode, or of a tensor that is not 4-D float")
    kh, kw = _pair(kernel_size)
    sh, sw = _pair(stride) if stride else (kh, kw)
    ph, pw = _pair(padding)
    dh, dw = _pair(dilation)
    n, c, h, w = x.shape
    oh = (h + 2 * ph - dh * (kh - 1) - 1) // sh + 1
    ow = (w + 2 * pw - dw * (kw - 1) - 1) // sw + 1
    if oh <= 0 or ow <= 0:
        raise NotLowered("max pooling with an empty output")
    padded = constant_pad_nd(x, (pw, pw, ph, ph), float("-inf")) if ph or pw else x
    windows = xp.stack([padded[:, :, i * dh: i * dh + sh * (oh - 1) + 1: sh, j * dw: j * dw + sw * (ow - 1) + 1: sw]
                        for i in range(kh) for j in range(kw)], axis=2)  # (n, c, kh * kw, oh, ow)
    values = xp.max(windows, axis=2)
    which = xp.argmax(windows, axis=2)  # int64, the first largest
    rows = xp.reshape(hetero.arange(oh, dtype="int64", device=x.device) * sh - ph, (oh, 1))
    cols = xp.reshape(hetero.arange(ow, dtype="int64", device=x.device) * sw - pw, (1, ow))
    index = (rows + (which // kw) * dh) * w + cols + (which % kw) * dw
    return values, index


def _pair(value: Sequence[int]) -> tuple[int, int]:
    return (value[0], value[0]) if len(value) == 1 else (value[0], value[1])
