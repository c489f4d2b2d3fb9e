"""The launches of hetero's Gram kernel (:mod:`hetero.compiler.array_kernels.gram`): a product
with a small output and a deep K, split over K in fixed chunks whose partial sums are merged in
a fixed order (the same bits every run), reading a transposed operand in place.

:func:`multiply` orients the product so the kernel's column operand has contiguous columns:
``a @ b`` itself where ``b``'s columns are contiguous (PCA's ``x.T @ x``: ``b`` is ``x``),
else ``(b.T @ a.T).T`` where ``a``'s rows are (the merge writes the transposed result in
place), else ``b`` copied first. A batch runs one partial launch and one merge per matrix, in
order on the device's queue (they share one partials array).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from hetero.array.ndarray import Array, empty
from hetero.arraylib.elementwise import whole
from hetero.compiler.array_kernels import gram as kernel
from hetero.core import dtypes
from hetero.core.device import Device
from hetero.core.types import f32, scalar_type
from hetero.kernels.generated import SpecializationCache

_partials = SpecializationCache(kernel.build)
_merges = SpecializationCache(kernel.build_merge)
#: The OpenCL platform whose CPU driver vectorises only innermost loops (see the kernel's docstring).
_POCL = "Portable Computing Language"


def layout_for(device: Device) -> str:
    """The kernel layout that vectorises on ``device``: ``columns`` on PoCL's CPU driver (it runs a
    work-group as a loop over its work-items and vectorises innermost loops), else ``items``
    (Intel's CPU runtime and GPUs vectorise across work-items)."""
    pocl_cpu = device.info.extra.get("platform") == _POCL and device.info.kind.value == "cpu"
    return "columns" if pocl_cpu else "items"


def _accumulator(out: np.dtype[Any]) -> Any:
    return f32 if out == dtypes.float16 else scalar_type(out)


def spec(device: Device, a: np.dtype[Any], b: np.dtype[Any], out: np.dtype[Any]) -> kernel.Gram:
    """The partial-sum kernel for a product of ``a`` and ``b`` elements into ``out`` on ``device``."""
    return kernel.Gram(scalar_type(a), scalar_type(b), _accumulator(out), layout_for(device))


def describe(device: Device, a: np.dtype[Any], b: np.dtype[Any], out: np.dtype[Any], k: int) -> str:
    """What runs a product of depth ``k``, for explain_op: the kernels and how K is split."""
    chunk = kernel.chunk_for(k)
    return (f"Gram kernel {spec(device, a, b, out).name} (K = {k} in {-(-k // chunk)} chunks of {chunk}, one "
            f"work-group each, partials merged in chunk order by gram_merge: the same bits every run)")


def _columns_contiguous(x: Array) -> bool:
    return x.strides[-1] == 1 or x.shape[-1] == 1


Layout = Callable[[Array, Array, Array], tuple[tuple[int, ...], list[tuple[int, ...]]]]


def multiply(out: Array, a: Array, b: Array, layout: Layout) -> None:
    """``out[...] = a @ b`` (as :func:`hetero.arraylib.linalg.blas.multiply`); ``layout`` gives the
    batch merged to a shape and the ``[out, a, b]`` batch element strides (empty for one matrix)."""
    device = out.device
    M, N, K = out.shape[-2], out.shape[-1], a.shape[-1]
    transposed = not _columns_contiguous(b) and (a.strides[-2] == 1 or M == 1)
    if not transposed and not _columns_contiguous(b):
        b = b.copy()
    shape, (c_bs, a_bs, b_bs) = layout(out, a, b)
    if transposed:  # c.T = b.T @ a.T: b.T's rows step by b's column stride, a.T's columns are a's rows
        rows, cols = (b, b.strides[-1], b.strides[-2], b_bs), (a, a.strides[-1], a_bs)
        M, N, c_rs, c_cs = N, M, 1, out.strides[-2]
    else:
        rows, cols = (a, a.strides[-2], a.strides[-1], a_bs), (b, b.strides[-2], b_bs)
        c_rs, c_cs = out.strides[-2], 1
    row_x, row_rs, row_cs, row_bs = rows
    col_x, col_rs, col_bs = cols
    partial = spec(device, row_x.dtype, col_x.dtype, out.dtype)
    merge = kernel.GramMerge(partial.acc, scalar_type(out.dtype))
    global_size, local_size, mtiles, chunks = partial.launch(M, N, K)
    partials = empty((chunks * M * N,), partial.acc.dtype, device=device)
    first, second = _partials.get(partial, device), _merges.get(merge, device)
    merge_size = -(-M * N // kernel.MERGE_GROUP) * kernel.MERGE_GROUP
    for index in np.ndindex(*shape):
        c_at, row_at, col_at = (x.offset + sum(i * s for i, s in zip(index, bs, strict=True))
                                for x, bs in ((out, c_bs), (row_x, row_bs), (col_x, col_bs)))
        first.run(global_size, [whole(partials), whole(row_x), whole(col_x), M, N, K, kernel.chunk_for(K), mtiles,
                                row_at, row_rs, row_cs, col_at, col_rs], local_size)
        second.run((merge_size,), [whole(out), whole(partials), M * N, N, chunks, c_at, c_rs, c_cs],
                   (kernel.MERGE_GROUP,))


__all__ = ["describe", "layout_for", "multiply", "spec"]
