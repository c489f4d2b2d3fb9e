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
    if transposed or weight.ndim != 4 or x.ndim not in (3, 4):
        raise NotLowered("a convolution other than 2-D, or transposed")
    if x.ndim == 3:  # unbatched
        return convolution(xp.expand_dims(x, axis=0), weight, bias, stride, padding, dilation, transposed,
                           output_padding, groups)[0]
    if groups != 1:  # each group its own product, the outputs side by side
        c, o = x.shape[1] // groups, weight.shape[0] // groups
        return xp.concat([convolution(x[:, g * c:(g + 1) * c], weight[g * o:(g + 1) * o],
                                      None if bias is None else bias[g * o:(g + 1) * o], stride, padding, dilation,
                                      transposed, output_padding, 1) for g in range(groups)], axis=1)
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
    if ceil_mode or x.ndim not in (3, 4) or x.dtype.kind != "f":
        raise NotLowered("max pooling with ceil_mode, or of a tensor that is not 3-D or 4-D float")
    if x.ndim == 3:  # unbatched
        values, index = max_pool2d(xp.expand_dims(x, axis=0), kernel_size, stride, padding, dilation, ceil_mode)
        return values[0], index[0]
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


def _window_slices(i: int, j: int, oh: int, ow: int, stride: tuple[int, int], dilation: tuple[int, int]) -> tuple[slice, slice]:
    """The rows and columns of a padded input that window offset (i, j) reads, one per output position."""
    (sh, sw), (dh, dw) = stride, dilation
    return slice(i * dh, i * dh + sh * (oh - 1) + 1, sh), slice(j * dw, j * dw + sw * (ow - 1) + 1, sw)


def _fold(parts: Any, shape: tuple[int, int, int, int], kernel: tuple[int, int], stride: tuple[int, int],
          padding: tuple[int, int], dilation: tuple[int, int], dtype: Any, device: Any) -> Any:
    """col2im: ``parts(i, j)`` (n, c, oh, ow) summed into the input positions window offset (i, j)
    read, offsets in row-major order; the padding cropped."""
    n, c, h, w = shape
    (kh, kw), (ph, pw) = kernel, padding
    grad = hetero.zeros((n, c, h + 2 * ph, w + 2 * pw), dtype=dtype, device=device)
    for i in range(kh):
        for j in range(kw):
            part = parts(i, j)
            rows, cols = _window_slices(i, j, part.shape[2], part.shape[3], stride, dilation)
            grad[:, :, rows, cols] += part
    return grad[:, :, ph: ph + h, pw: pw + w] if ph or pw else grad


@lowers(aten.convolution_backward.default)
def convolution_backward(grad_out: hetero.Array, x: hetero.Array, weight: hetero.Array, bias_sizes: Any,
                         stride: Sequence[int], padding: Sequence[int], dilation: Sequence[int], transposed: bool,
                         output_padding: Sequence[int], groups: int, output_mask: Sequence[bool]) -> Any:
    """The gradients of :func:`convolution`: of the input (the weights' transpose times the output
    gradient, folded back over the windows), of the weights (the output gradient times the
    windows) and of the bias (the output gradient summed over batch and positions)."""
    if transposed or groups != 1 or x.ndim != 4:
        raise NotLowered("a convolution backward other than 2-D, groups=1, not transposed")
    _floats(grad_out, x, weight)
    stride2, padding2, dilation2 = _pair(stride), _pair(padding), _pair(dilation)
    n, c, h, w = x.shape
    o, _, kh, kw = weight.shape
    _, _, oh, ow = grad_out.shape
    flat_grad = xp.reshape(grad_out, (n, o, oh * ow))
    grad_input = grad_weight = grad_bias = None
    if output_mask[0]:
        columns = xp.matmul(xp.permute_dims(xp.reshape(weight, (o, c * kh * kw)), (1, 0)), flat_grad)
        columns = xp.reshape(columns, (n, c, kh * kw, oh, ow))
        grad_input = _fold(lambda i, j: columns[:, :, i * kw + j], (n, c, h, w), (kh, kw), stride2, padding2,
                           dilation2, x.dtype, x.device)
    if output_mask[1]:
        ph, pw = padding2
        padded = constant_pad_nd(x, (pw, pw, ph, ph), 0.0) if ph or pw else x
        windows = xp.stack([padded[(slice(None), slice(None), *_window_slices(i, j, oh, ow, stride2, dilation2))]
                            for i in range(kh) for j in range(kw)], axis=2)
        columns = xp.reshape(xp.permute_dims(xp.reshape(windows, (n, c * kh * kw, oh * ow)), (1, 0, 2)),
                             (c * kh * kw, n * oh * ow))
        outputs = xp.reshape(xp.permute_dims(flat_grad, (1, 0, 2)), (o, n * oh * ow))
        grad_weight = xp.reshape(xp.matmul(outputs, xp.permute_dims(columns, (1, 0))), (o, c, kh, kw))
    if output_mask[2]:
        grad_bias = xp.sum(grad_out, axis=(0, 2, 3))
    return grad_input, grad_weight, grad_bias


@lowers(aten.max_pool2d_with_indices_backward.default)
def max_pool2d_backward(grad_out: hetero.Array, x: hetero.Array, kernel_size: Sequence[int], stride: Sequence[int],
                        padding: Sequence[int], dilation: Sequence[int], ceil_mode: bool, indices: hetero.Array) -> Any:
    """Each output's gradient added to the input position its index names (window offsets in
    row-major order)."""
    if ceil_mode or x.ndim != 4 or x.dtype.kind != "f":
        raise NotLowered("max pooling backward with ceil_mode, or of a tensor that is not 4-D float")
    kh, kw = _pair(kernel_size)
    stride2 = _pair(stride) if stride else (kh, kw)
    (ph, pw), (dh, dw) = _pair(padding), _pair(dilation)
    n, c, h, w = x.shape
    _, _, oh, ow = grad_out.shape
    rows = xp.reshape(hetero.arange(oh, dtype="int64", device=x.device) * stride2[0] - ph, (oh, 1))
    cols = xp.reshape(hetero.arange(ow, dtype="int64", device=x.device) * stride2[1] - pw, (1, ow))
    zero = hetero.zeros((), dtype=grad_out.dtype, device=x.device)

    def part(i: int, j: int) -> Any:
        return xp.where(indices == (rows + i * dh) * w + cols + j * dw, grad_out, zero)
    return _fold(part, (n, c, h, w), (kh, kw), stride2, (ph, pw), (dh, dw), grad_out.dtype, x.device)


def _channel(v: hetero.Array, ndim: int) -> Any:
    """A per-channel vector shaped to broadcast over (N, C, ...)."""
    return xp.reshape(v, (1, v.shape[0]) + (1,) * (ndim - 2))


def _batch_norm(x: hetero.Array, weight: hetero.Array | None, bias: hetero.Array | None, mean: Any, rstd: Any) -> Any:
    out = (x - _channel(mean, x.ndim)) * _channel(rstd, x.ndim)
    if weight is not None:
        out = out * _channel(weight, x.ndim)
    if bias is not None:
        out = out + _channel(bias, x.ndim)
    return out


@lowers(aten._native_batch_norm_legit_functional.default)
def batch_norm_training(x: hetero.Array, weight: hetero.Array | None, bias: hetero.Array | None,
                        running_mean: hetero.Array, running_var: hetero.Array, training: bool, momentum: float,
                        eps: float) -> Any:
    """Batch statistics (the biased variance normalises; the running variance takes the unbiased
    one, as torch), and the running averages' new values."""
    if x.dtype.kind != "f" or x.ndim < 2:
        raise NotLowered("batch norm of a non-float tensor or of fewer than 2 dimensions")
    if not training:
        out, save_mean, save_rstd = batch_norm_inference(x, weight, bias, running_mean, running_var, momentum, eps)
        return out, save_mean, save_rstd, running_mean, running_var
    axes = (0, *range(2, x.ndim))
    count = x.size // x.shape[1]
    mean = xp.mean(x, axis=axes)
    centered = x - _channel(mean, x.ndim)
    var = xp.mean(centered * centered, axis=axes)
    rstd = 1.0 / xp.sqrt(var + eps)
    out = _batch_norm(x, weight, bias, mean, rstd)
    new_mean = running_mean * (1.0 - momentum) + mean * momentum
    new_var = running_var * (1.0 - momentum) + var * (momentum * count / max(count - 1, 1))
    return out, mean, rstd, new_mean, new_var


@lowers(aten._native_batch_norm_legit_no_training.default)
def batch_norm_inference(x: hetero.Array, weight: hetero.Array | None, bias: hetero.Array | None,
                         running_mean: hetero.Array, running_var: hetero.Array, momentum: float, eps: float) -> Any:
    if x.dtype.kind != "f" or x.ndim < 2:
        raise NotLowered("batch norm of a non-float tensor or of fewer than 2 dimensions")
    rstd = 1.0 / xp.sqrt(running_var + eps)
    empty = hetero.zeros((0,), dtype=x.dtype, device=x.device)
    return _batch_norm(x, weight, bias, running_mean, rstd), empty, empty


@lowers(aten.avg_pool2d.default)
def avg_pool2d(x: hetero.Array, kernel_size: Sequence[int], stride: Sequence[int] = (), padding: Sequence[int] = (0,),
               ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int | None = None) -> Any:
    """The windows' means: their sum in row-major window order, divided by the window's size
    (``divisor_override`` where given)."""
    kh, kw = _pair(kernel_size)
    (sh, sw), (ph, pw) = (_pair(stride) if stride else (kh, kw)), _pair(padding)
    if ceil_mode or x.ndim not in (3, 4) or x.dtype.kind != "f" or ((ph or pw) and not count_include_pad):
        raise NotLowered("average pooling with ceil_mode, padding not counted, or of a tensor that is not 3-D or 4-D float")
    if x.ndim == 3:
        return avg_pool2d(xp.expand_dims(x, axis=0), kernel_size, stride, padding, ceil_mode, count_include_pad,
                          divisor_override)[0]
    n, c, h, w = x.shape
    oh, ow = (h + 2 * ph - kh) // sh + 1, (w + 2 * pw - kw) // sw + 1
    if oh <= 0 or ow <= 0:
        raise NotLowered("average pooling with an empty output")
    padded = constant_pad_nd(x, (pw, pw, ph, ph), 0.0) if ph or pw else x
    total = None
    for i in range(kh):
        for j in range(kw):
            rows, cols = _window_slices(i, j, oh, ow, (sh, sw), (1, 1))
            part = padded[:, :, rows, cols]
            total = part if total is None else total + part
    return total / float(divisor_override or kh * kw)


@lowers(aten.avg_pool2d_backward.default)
def avg_pool2d_backward(grad_out: hetero.Array, x: hetero.Array, kernel_size: Sequence[int], stride: Sequence[int],
                        padding: Sequence[int], ceil_mode: bool, count_include_pad: bool,
                        divisor_override: int | None) -> Any:
    kh, kw = _pair(kernel_size)
    stride2, padding2 = (_pair(stride) if stride else (kh, kw)), _pair(padding)
    if ceil_mode or x.ndim != 4 or x.dtype.kind != "f" or (any(padding2) and not count_include_pad):
        raise NotLowered("average pooling backward with ceil_mode, padding not counted, or not 4-D float")
    share = grad_out / float(divisor_override or kh * kw)
    return _fold(lambda i, j: share, x.shape, (kh, kw), stride2, padding2, (1, 1), grad_out.dtype, x.device)


@lowers(aten.embedding.default)
def embedding(weight: hetero.Array, indices: hetero.Array, padding_idx: int = -1, scale_grad_by_freq: bool = False,
              sparse: bool = False) -> Any:
    """The rows of ``weight`` the indices name (an index out of range is an error, as in torch)."""
    if indices.dtype.kind not in "iu":
        raise NotLowered("embedding indices that are not integers")
    rows = xp.take(weight, xp.reshape(indices, (-1,)), axis=0)
    return xp.reshape(rows, indices.shape + weight.shape[1:])


@lowers(aten.gelu.default)
def gelu(x: hetero.Array, *, approximate: str = "none") -> Any:
    if approximate != "tanh" or x.dtype.kind != "f":
        raise NotLowered("the exact gelu (it needs erf, which hetero's array API lacks yet); approximate='tanh' lowers")
    return 0.5 * x * (1.0 + xp.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


def _adaptive_mean(x: hetero.Array, axis: int, size: int) -> Any:
    """Adaptive average over ``axis`` to ``size`` outputs: output ``i`` averages inputs
    ``floor(i*n/size)`` to ``ceil((i+1)*n/size)``, torch's windows."""
    n = x.shape[axis]
    if n % size == 0:  # equal windows: one reshape and one mean
        shape = x.shape[:axis] + (size, n // size) + x.shape[axis + 1:]
        return xp.mean(xp.reshape(x, shape), axis=axis + 1)
    lead = (slice(None),) * axis
    parts = [xp.mean(x[lead + (slice((i * n) // size, -((-(i + 1) * n) // size)),)], axis=axis, keepdims=True)
             for i in range(size)]
    return xp.concat(parts, axis=axis)


@lowers(aten._adaptive_avg_pool2d.default)
def adaptive_avg_pool2d(x: hetero.Array, output_size: Sequence[int]) -> Any:
    """The mean of each window, rows then columns (the mean of a rectangle is the mean of its rows'
    means: within float32 rounding of torch's one sum)."""
    if x.dtype.kind != "f" or x.ndim not in (3, 4) or len(output_size) != 2 or min(output_size) < 1 or 0 in x.shape[-2:]:
        raise NotLowered("adaptive average pooling of a tensor that is not 3-D or 4-D float, or to an empty size")
    return _adaptive_mean(_adaptive_mean(x, x.ndim - 2, output_size[0]), x.ndim - 1, output_size[1])
