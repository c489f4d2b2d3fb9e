"""Linear algebra of the array API on hetero arrays: ``matmul`` (and ``@``, ``@=``),
``vecdot``, ``tensordot``, ``matrix_transpose``, and :func:`explain_op`, which says which
library runs them.

``matmul(x1, x2)`` follows the standard: a 1-D ``x1`` of K elements is a ``(1, K)`` matrix
and a 1-D ``x2`` a ``(K, 1)`` one, the added axis removed from the result (two vectors give
a 0-d array); the axes before the last two are batch axes and broadcast; the result's dtype
is the promoted dtype of the operands (:mod:`hetero.array.promotion`; integers too, which wrap as
NumPy's integer matmul does; bool is refused, as the standard takes numeric dtypes). K = 0
gives zeros. The operands may be any views (strides, offsets, transposes). Operands on two
devices, shapes that do not align or batch shapes that do not broadcast raise
:class:`hetero.ArrayError` naming both; float64 on a device without fp64 raises
:class:`hetero.UnsupportedDtypeError` (never a silent float32).

The multiply runs on the device's BLAS where there is one, else on hetero's tiled kernel:
:mod:`hetero.arraylib.linalg.blas` has the table, and ``hetero.explain_op("matmul", x1, x2)`` the
answer for given operands. Float results match NumPy to rounding only: every BLAS sums in its
own order (blocked, in parallel, fused multiply-adds), so the tests allow a relative error of
``4 * K * eps`` of the dtype times the sum of ``|a| |b|`` per element; integer results are exact.
"""

from __future__ import annotations

import dataclasses
import math
import operator
from collections.abc import Sequence
from typing import Any

import numpy as np

from hetero.core import dtypes
from hetero.array.ndarray import Array, empty, zeros
from hetero.arraylib.linalg.blas import Choice, choose, multiply
from hetero.array.components import imag_part, is_complex, real_part
from hetero.array.hooks import MATMUL
from hetero.arraylib.copy import assign
from hetero.array.views import matrix_transpose, moveaxis, permute_dims, reshape
from hetero.core.device import Device
from hetero.core.errors import ArrayError, UnsupportedDtypeError
from hetero.array.promotion import promote


def _checked(x: Any, name: str, what: str, scalars: bool = False) -> Array:
    if not isinstance(x, Array):
        raise ArrayError(f"hetero.{what}: {name} must be a hetero.Array, got {type(x).__name__}; make one with "
                         "hetero.asarray(value, device=...)")
    if x.ndim == 0 and not scalars:
        raise ArrayError(f"hetero.{what}: {name} is 0-d; it needs arrays of at least one dimension "
                         "(multiply by a scalar with *)")
    if x.dtype.kind == "c":  # the products run on the real parts (_complex_product); no kernel sees complex
        raise UnsupportedDtypeError(f"hetero.{what}: complex {name} reached a real product")
    return x


def _any_complex(x1: Any, x2: Any) -> bool:
    return any(isinstance(x, Array) and is_complex(x.dtype) for x in (x1, x2))


def _parts(x: Array) -> tuple[Array, Array | None]:
    """``x``'s real and imaginary parts as float views (None for the imaginary part of a real ``x``)."""
    return (real_part(x), imag_part(x)) if is_complex(x.dtype) else (x, None)


def _complex_product(x1: Array, x2: Array, product: Any, conjugate_first: bool = False) -> Array:
    """``product(x1, x2)`` of a bilinear real ``product`` (matmul) where an operand is complex:
    (a + bi)(c + di) = (ac - bd) + (ad + bc)i, each term a real product of the parts' views
    (four products at most; with ``conjugate_first``, b's sign flips: conj(x1) x2)."""
    for name, x in (("x1", x1), ("x2", x2)):
        if not isinstance(x, Array):
            raise ArrayError(f"hetero.matmul: {name} must be a hetero.Array, got {type(x).__name__}")
    (a, b), (c, d) = _parts(x1), _parts(x2)
    real = product(a, c)
    imag: Array | None = None
    if b is not None and d is not None:
        bd = product(b, d)
        real = real + bd if conjugate_first else real - bd
    if d is not None:
        imag = product(a, d)
    if b is not None:
        bc = product(b, c)
        imag = (-bc if conjugate_first else bc) if imag is None else (imag - bc if conjugate_first else imag + bc)
    kind = np.result_type(x1.dtype, x2.dtype)
    out = empty(real.shape, kind, device=real.device)
    assign(real_part(out), real)
    if imag is not None:
        assign(imag_part(out), imag)
    else:
        assign(imag_part(out), 0)
    return out


def _device(x1: Array, x2: Array, what: str) -> Device:
    if x1.device is not x2.device:
        raise ArrayError(f"hetero.{what}: operands are on different devices, {x1.device.name} and {x2.device.name}; "
                         f"move one first, e.g. x2.to('{x1.device.name}')")
    return x1.device


def _has_fp64(device: Device) -> bool:
    target = device.runtime.kernel_target()
    return "fp64" in target.features if target is not None else bool(device.info.fp64)


def _dtype(x1: Array, x2: Array, device: Device, what: str) -> np.dtype[Any]:
    if dtypes.bool_ in (x1.dtype, x2.dtype):
        raise UnsupportedDtypeError(f"hetero.{what} takes numeric arrays, not bool ({x1.dtype} and {x2.dtype}); "
                                    "convert first, e.g. hetero.asarray(x, dtype='int8')")
    result = promote(x1.dtype, x2.dtype)
    if dtypes.float64 in (result, x1.dtype, x2.dtype) and not _has_fp64(device):
        raise UnsupportedDtypeError(f"hetero.{what} of {x1.dtype} and {x2.dtype} computes in float64, which "
                                    f"{device.name} lacks (no fp64); convert to float32 first "
                                    "(hetero.asarray(x, dtype='float32')) or use a device with fp64")
    return result


@dataclasses.dataclass(frozen=True)
class _Plan:
    a: Array  # (..., M, K)
    b: Array  # (..., K, N)
    batch: tuple[int, ...]
    shape: tuple[int, ...]  # the result's, with the axes of 1-D operands removed
    dtype: np.dtype[Any]
    device: Device

    @property
    def full(self) -> tuple[int, ...]:
        return (*self.batch, self.a.shape[-2], self.b.shape[-1])


def _plan(x1: Any, x2: Any, what: str = "matmul") -> _Plan:
    x1, x2 = _checked(x1, "x1", what), _checked(x2, "x2", what)
    device = _device(x1, x2, what)
    a = x1 if x1.ndim > 1 else x1[None, :]
    b = x2 if x2.ndim > 1 else x2[:, None]
    if a.shape[-1] != b.shape[-2]:
        which = "second-to-last" if x2.ndim > 1 else "only"
        raise ArrayError(f"hetero.{what}: shapes {x1.shape} and {x2.shape} do not align: x1's last axis has "
                         f"{a.shape[-1]} elements, x2's {which} axis {b.shape[-2]}; they must be equal")
    try:
        batch = tuple(np.broadcast_shapes(a.shape[:-2], b.shape[:-2]))
    except ValueError:
        raise ArrayError(f"hetero.{what}: the batch axes of shapes {x1.shape} and {x2.shape} ({a.shape[:-2]} and "
                         f"{b.shape[:-2]}) do not broadcast (the standard's rule: trailing axes equal or 1)") from None
    dtype = _dtype(x1, x2, device, what)
    shape = batch + ((a.shape[-2],) if x1.ndim > 1 else ()) + ((b.shape[-1],) if x2.ndim > 1 else ())
    return _Plan(a, b, batch, shape, dtype, device)


def matmul(x1: Array, x2: Array, /) -> Array:
    """``x1 @ x2`` by the standard's rules (see the module docstring); complex operands as real
    products of their parts' views."""
    if _any_complex(x1, x2):
        return _complex_product(x1, x2, matmul)
    plan = _plan(x1, x2)
    K = plan.a.shape[-1]
    if K == 0 and all(plan.full):
        out = zeros(plan.full, plan.dtype, device=plan.device)
    else:
        out = empty(plan.full, plan.dtype, device=plan.device)
        if out.size:
            multiply(out, plan.a, plan.b, choose(plan.device, plan.a, plan.b, plan.dtype, plan.batch))
    return out if out.shape == plan.shape else reshape(out, plan.shape)


def _inplace(x1: Array, x2: Array) -> Array:
    """``x1 @= x2``: the product written into ``x1``, which must have the result's shape and dtype."""
    plan = _plan(x1, x2)
    if plan.shape != x1.shape or plan.dtype != x1.dtype:
        raise ArrayError(f"x1 @= x2 writes into x1 ({x1.dtype}{list(x1.shape)}), but the product is "
                         f"{plan.dtype}{list(plan.shape)}; write y = x1 @ x2 instead")
    assign(x1, matmul(x1, x2))
    return x1


def vecdot(x1: Array, x2: Array, /, *, axis: int = -1) -> Array:
    """The dot product of ``x1`` and ``x2`` along ``axis`` (of equal length), the other axes
    broadcast (``x1`` conjugated when complex, as the standard says); a batch of 1 x K by K x 1 matmuls."""
    if _any_complex(x1, x2):
        return _complex_product(x1, x2, lambda a, b: vecdot(a, b, axis=axis), conjugate_first=True)
    x1, x2 = _checked(x1, "x1", "vecdot"), _checked(x2, "x2", "vecdot")
    ndim = max(x1.ndim, x2.ndim)
    index = operator.index(axis)
    if not -ndim <= index < ndim:
        raise ArrayError(f"hetero.vecdot: axis {axis} is out of range for shapes {x1.shape} and {x2.shape}")
    index = index - ndim if index >= 0 else index
    if -index > min(x1.ndim, x2.ndim) or x1.shape[index] != x2.shape[index]:
        raise ArrayError(f"hetero.vecdot: shapes {x1.shape} and {x2.shape} differ along axis {axis}; the vectors "
                         "must have the same length")
    a = moveaxis(x1, index, -1)[..., None, :]
    b = moveaxis(x2, index, -1)[..., :, None]
    product = matmul(a, b)
    return reshape(product, product.shape[:-2])


def _axes_pair(axes: int | Sequence[Sequence[int]], x1: Array, x2: Array) -> tuple[list[int], list[int]]:
    if isinstance(axes, int) or isinstance(axes, np.integer):
        count = int(axes)
        if count < 0 or count > min(x1.ndim, x2.ndim):
            raise ArrayError(f"hetero.tensordot: axes={axes} must be between 0 and {min(x1.ndim, x2.ndim)} for "
                             f"shapes {x1.shape} and {x2.shape}")
        return list(range(x1.ndim - count, x1.ndim)), list(range(count))
    try:
        first, second = ([operator.index(a) for a in part] for part in axes)
    except (TypeError, ValueError):
        raise ArrayError(f"hetero.tensordot: axes must be an int or two sequences of axes, got {axes!r}") from None
    if len(first) != len(second):
        raise ArrayError(f"hetero.tensordot: axes {axes!r} name {len(first)} axes of x1 but {len(second)} of x2")
    return [a % x1.ndim for a in first], [a % x2.ndim for a in second]


def tensordot(x1: Array, x2: Array, /, *, axes: int | Sequence[Sequence[int]] = 2) -> Array:
    """The sum of products over ``axes`` (the last ``axes`` of ``x1`` with the first of ``x2``,
    or two sequences of axes): one matmul of the operands reshaped to matrices (0-d operands
    too, as matrices of one element)."""
    if _any_complex(x1, x2):
        return _complex_product(x1, x2, lambda a, b: tensordot(a, b, axes=axes))
    x1, x2 = _checked(x1, "x1", "tensordot", scalars=True), _checked(x2, "x2", "tensordot", scalars=True)
    first, second = _axes_pair(axes, x1, x2)
    for p, q in zip(first, second, strict=True):
        if x1.shape[p] != x2.shape[q]:
            raise ArrayError(f"hetero.tensordot: axis {p} of x1 {x1.shape} and axis {q} of x2 {x2.shape} differ in length")
    free1 = [a for a in range(x1.ndim) if a not in first]
    free2 = [b for b in range(x2.ndim) if b not in second]
    k = math.prod(x1.shape[a] for a in first)
    a = reshape(permute_dims(x1, free1 + first), (math.prod(x1.shape[i] for i in free1), k))
    b = reshape(permute_dims(x2, second + free2), (k, math.prod(x2.shape[i] for i in free2)))
    return reshape(matmul(a, b), tuple(x1.shape[i] for i in free1) + tuple(x2.shape[i] for i in free2))


@dataclasses.dataclass(frozen=True)
class Explanation:
    """What :func:`explain_op` found: the operation, its operands, the device and the :class:`Choice`."""

    op: str
    operands: str
    device: str
    choice: Choice

    @property
    def library(self) -> str:
        return self.choice.library

    @property
    def routine(self) -> str:
        return self.choice.routine

    def __str__(self) -> str:
        return f"{self.op} of {self.operands} on {self.device} runs {self.choice}"


_EXPLAINED = {"matmul": "matmul", "@": "matmul", "vecdot": "vecdot"}


def explain_op(op: str, x1: Array, x2: Array, /, **kwargs: Any) -> Explanation:
    """Which library (or hetero kernel) runs ``op`` (``"matmul"``/``"@"``, ``"vecdot"``; ``tensordot``
    is one matmul of its operands reshaped to matrices) on these operands, and why not a vendor BLAS where none runs; runs nothing.
    ``print(hetero.explain_op("matmul", x, w))``."""
    name = _EXPLAINED.get(op)
    if name is None:
        raise ArrayError(f"hetero.explain_op: no explanation for {op!r}; it explains {', '.join(_EXPLAINED)}")
    if name == "vecdot":
        axis = kwargs.get("axis", -1)
        x1, x2 = moveaxis(_checked(x1, "x1", op), axis, -1)[..., None, :], moveaxis(_checked(x2, "x2", op), axis, -1)[..., :, None]
    plan = _plan(x1, x2, name)
    shown = " and ".join(f"{x.dtype}{list(x.shape)}" for x in (x1, x2))
    if plan.a.shape[-1] == 0 or not all(plan.full):
        choice = Choice("hetero", "", "no multiply: the result is empty or all zeros (K = 0)")
    else:
        choice = choose(plan.device, plan.a, plan.b, plan.dtype, plan.batch)
    return Explanation(name, shown, plan.device.name, choice)


MATMUL.register(lambda x1, x2, inplace=False: _inplace(x1, x2) if inplace else matmul(x1, x2))

__all__ = ["Explanation", "explain_op", "matmul", "matrix_transpose", "tensordot", "vecdot"]
