"""The kernel corpus: one kernel per pattern users write (each checked against NumPy
in tests/test_kernels.py). Kept in a file so the compiler can read their source."""

from __future__ import annotations

import math

import hetero
from hetero import f32, f64, i32, i64

TILE = 8


@hetero.kernel
def saxpy(a: f32, x: hetero.Array[f32], y: hetero.Array[f32]):
    i = hetero.global_id(0)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]


@hetero.kernel
def daxpy(a: f64, x: hetero.Array[f64], y: hetero.Array[f64]):
    i = hetero.global_id(0)
    if i < len(x):
        y[i] = a * x[i] + y[i]


@hetero.kernel
def matmul_tiled(a, b, c):
    """c = a @ b with TILE x TILE tiles in work-group memory; sizes are multiples of TILE."""
    tile_a = hetero.local_array((TILE, TILE), f32)
    tile_b = hetero.local_array((TILE, TILE), f32)
    col = hetero.local_id(0)
    row = hetero.local_id(1)
    gcol = hetero.global_id(0)
    grow = hetero.global_id(1)
    acc = 0.0
    for t in range(a.shape[1] // TILE):
        tile_a[row, col] = a[grow, t * TILE + col]
        tile_b[row, col] = b[t * TILE + row, gcol]
        hetero.barrier()
        for k in range(TILE):
            acc += tile_a[row, k] * tile_b[k, col]
        hetero.barrier()
    c[grow, gcol] = acc


@hetero.kernel
def reduce_sum(x, total):
    """Sum of x: a tree reduction per work-group (64 items) in local memory, then one atomic_add."""
    scratch = hetero.local_array(64, f32)
    lid = hetero.local_id(0)
    i = hetero.global_id(0)
    scratch[lid] = x[i] if i < x.shape[0] else 0.0
    hetero.barrier()
    stride = hetero.local_size(0) // 2
    while stride > 0:
        if lid < stride:
            scratch[lid] += scratch[lid + stride]
        hetero.barrier()
        stride //= 2
    if lid == 0:
        hetero.atomic_add(total, 0, scratch[0])


@hetero.kernel
def reduce_sum_i64(x: hetero.Array[i64], total: hetero.Array[i64]):
    i = hetero.global_id(0)
    if i < x.shape[0]:
        hetero.atomic_add(total, 0, x[i])


@hetero.kernel
def jacobi(src, dst):
    """One Jacobi sweep of the 2-D Laplace equation; the border is copied."""
    j = hetero.global_id(0)
    i = hetero.global_id(1)
    n = src.shape[0]
    m = src.shape[1]
    if i < n and j < m:
        if i == 0 or j == 0 or i == n - 1 or j == m - 1:
            dst[i, j] = src[i, j]
        else:
            dst[i, j] = 0.25 * (src[i - 1, j] + src[i + 1, j] + src[i, j - 1] + src[i, j + 1])


@hetero.kernel
def histogram(values, bins, counts):
    i = hetero.global_id(0)
    if i < values.shape[0]:
        b = values[i] % bins
        hetero.atomic_add(counts, b, 1)


@hetero.kernel
def scan_blocks(x, out):
    """Exclusive prefix sum of each block of 2*L elements (Blelloch), L = local size = 32."""
    temp = hetero.local_array(64, i32)
    lid = hetero.local_id(0)
    n = 2 * hetero.local_size(0)
    base = hetero.group_id(0) * n
    temp[2 * lid] = x[base + 2 * lid]
    temp[2 * lid + 1] = x[base + 2 * lid + 1]
    offset = 1
    d = n // 2
    while d > 0:  # up-sweep
        hetero.barrier()
        if lid < d:
            ai = offset * (2 * lid + 1) - 1
            bi = offset * (2 * lid + 2) - 1
            temp[bi] += temp[ai]
        offset *= 2
        d //= 2
    if lid == 0:
        temp[n - 1] = 0
    d = 1
    while d < n:  # down-sweep
        offset //= 2
        hetero.barrier()
        if lid < d:
            ai = offset * (2 * lid + 1) - 1
            bi = offset * (2 * lid + 2) - 1
            t = temp[ai]
            temp[ai] = temp[bi]
            temp[bi] += t
        d *= 2
    hetero.barrier()
    out[base + 2 * lid] = temp[2 * lid]
    out[base + 2 * lid + 1] = temp[2 * lid + 1]


@hetero.kernel
def softmax_rows(x, out):
    row = hetero.global_id(0)
    if row >= x.shape[0]:
        return
    cols = x.shape[1]
    biggest = x[row, 0]
    for j in range(1, cols):
        biggest = max(biggest, x[row, j])
    total = 0.0
    for j in range(cols):
        e = math.exp(x[row, j] - biggest)
        out[row, j] = e
        total += e
    for j in range(cols):
        out[row, j] = out[row, j] / total


@hetero.kernel
def transpose_tiled(src, dst):
    """dst = src.T through a padded local tile (no bank conflicts on GPUs)."""
    tile = hetero.local_array((TILE, TILE + 1), f32)
    lx = hetero.local_id(0)
    ly = hetero.local_id(1)
    x = hetero.group_id(0) * TILE + lx
    y = hetero.group_id(1) * TILE + ly
    tile[ly, lx] = src[y, x]
    hetero.barrier()
    tx = hetero.group_id(1) * TILE + lx
    ty = hetero.group_id(0) * TILE + ly
    dst[ty, tx] = tile[lx, ly]


@hetero.kernel
def mandelbrot(out, max_iter: i32):
    px = hetero.global_id(0)
    py = hetero.global_id(1)
    height = out.shape[0]
    width = out.shape[1]
    if px >= width or py >= height:
        return
    cr = -2.0 + 3.0 * f32(px) / f32(width)
    ci = -1.5 + 3.0 * f32(py) / f32(height)
    zr = 0.0
    zi = 0.0
    n = 0
    while n < max_iter:
        if zr * zr + zi * zi > 4.0:
            break
        t = zr * zr - zi * zi + cr
        zi = 2.0 * zr * zi + ci
        zr = t
        n += 1
    out[py, px] = n


@hetero.func
def clamp(v, lo, hi):
    return min(max(v, lo), hi)


@hetero.func
def smoothstep(edge0: f32, edge1: f32, v: f32) -> f32:
    t = clamp((v - edge0) / (edge1 - edge0), 0.0, 1.0)
    return t * t * (3.0 - 2.0 * t)


@hetero.kernel
def apply_smoothstep(x, out):
    i = hetero.global_id(0)
    if i < x.shape[0]:
        out[i] = smoothstep(0.25, 0.75, x[i])


@hetero.kernel
def floor_ops(a: hetero.Array[i32], b: hetero.Array[i32], q: hetero.Array[i32], r: hetero.Array[i32]):
    i = hetero.global_id(0)
    if i < a.shape[0]:
        q[i] = a[i] // b[i]
        r[i] = a[i] % b[i]


@hetero.kernel
def triad(a, b, c, s: f32):
    i = hetero.global_id(0)
    if i < a.shape[0]:
        a[i] = b[i] + s * c[i]
