"""Numba-CUDA kernels index as Numba does on every device: a negative index computed at run time
counts from the axis' end (Numba wraps it), for loads and stores, in 1-D and 2-D arrays. Before,
such an index read or wrote out of bounds with no error: a silent wrong result."""

from __future__ import annotations

import numpy as np

import hetero
from hetero.compat import cuda


@cuda.jit
def shift_left(src, dst, k):
    i = cuda.grid(1)
    if i < dst.size:
        dst[i - k] = src[i - k] * 2.0  # i - k < 0 for the first k items: counted from the end


@cuda.jit
def last_column(m, out):
    i = cuda.grid(1)
    if i < out.size:
        j = i - m.shape[1] + (m.shape[1] - 1) - i  # -1, computed at run time
        out[i] = m[i, j]


def test_a_negative_index_computed_at_run_time_counts_from_the_end(device: hetero.Device) -> None:
    with hetero.use_device(device):
        src = np.arange(16, dtype=np.float32)
        d_src, d_dst = cuda.to_device(src), cuda.to_device(np.zeros(16, np.float32))
        shift_left[1, 16](d_src, d_dst, 3)
        assert np.array_equal(d_dst.copy_to_host(), src * 2)
        m = np.arange(20, dtype=np.float32).reshape(4, 5)
        out = cuda.to_device(np.zeros(4, np.float32))
        last_column[1, 4](cuda.to_device(m), out)
        assert np.array_equal(out.copy_to_host(), m[:, -1])
