# mypy: ignore-errors
# (kernel-language source: hetero types as annotations, arrays indexed as the compiler reads them)
"""The kernels ``hetero calibrate`` times on every device: small, standard, and covering the
two regimes a scheduler cares about (memory-bound streams and a compute-bound product).

Kept in a file of their own so the compiler can read their source, and apart from the
tests (production code never imports test code).
"""

from __future__ import annotations

from hetero.array.ndarray import Array
from hetero.kernels.kernel import kernel
from hetero.language import global_id
from hetero.core.types import f32


@kernel
def saxpy(a: f32, x: Array[f32], y: Array[f32]):
    i = global_id(0)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]


@kernel
def triad(a: Array[f32], b: Array[f32], c: Array[f32], s: f32):
    i = global_id(0)
    if i < a.shape[0]:
        a[i] = b[i] + s * c[i]


@kernel
def copy(src: Array[f32], dst: Array[f32]):
    i = global_id(0)
    if i < src.shape[0]:
        dst[i] = src[i]


@kernel
def matmul(a: Array[f32], b: Array[f32], c: Array[f32]):
    """c = a @ b, one work-item per element of c (rows along launch axis 0)."""
    row = global_id(0)
    col = global_id(1)
    if row < c.shape[0] and col < c.shape[1]:
        acc = 0.0
        for k in range(a.shape[1]):
            acc += a[row, k] * b[k, col]
        c[row, col] = acc


STREAMS = {"saxpy": saxpy, "triad": triad, "copy": copy}
