"""A launch of more than 2**32 work-items: every work-item's global index (``hetero.global_id``,
``cuda.grid(1)``) and the global size are exact 64-bit integers on every device.

Intel's CPU OpenCL runtime computed ``get_global_id`` in 32 bits in kernels with a barrier (the
last thread of a 22121216 x 256 launch got 1368063999, not 5663031295), so the OpenCL emitter
makes both from the group id, the group size and the local id, in 64 bits. The source test
runs everywhere; the real launch (2**32 + 256 work-items, a few seconds per device) is ``slow``.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.compiler.build import pipeline
from hetero.compiler.frontend.signature import parse_signature
from hetero.core.target import opencl_target


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


@cuda.jit
def last_index(out, n):
    """The barrier (and shared memory) is what made Intel's runtime wrap the index."""
    flag = cuda.shared.array(1, np.int64)
    if cuda.threadIdx.x == 0:
        flag[0] = 1
    cuda.syncthreads()
    i = cuda.grid(1)
    if i == n - 1:
        out[0] = i * flag[0]
        out[1] = cuda.gridsize(1)


@hetero.kernel
def indices(out: hetero.Array[hetero.i64]):
    out[0] = hetero.global_id(0) + hetero.global_size(1)


def test_opencl_source_makes_the_global_index_and_size_in_64_bits() -> None:
    target = opencl_target("cl_khr_fp16 cl_khr_int64_base_atomics", True, "test", "test")
    _, types = parse_signature("i64[:]")
    text = pipeline.emit(pipeline.lower(indices.py_func, types), target).text
    assert "get_global_id" not in text and "get_global_size" not in text
    assert "(long)get_group_id(0) * (long)get_local_size(0) + (long)get_local_id(0)" in text
    assert "(long)get_num_groups(1) * (long)get_local_size(1)" in text


@pytest.mark.slow
def test_a_launch_past_2_32_work_items_indexes_the_last_one_exactly(on: hetero.Device) -> None:
    blocks, threads = 2**24 + 1, 256  # 2**32 + 256 work-items
    n = blocks * threads
    out = np.zeros(2, np.int64)
    last_index[blocks, threads](out, n)
    assert out.tolist() == [n - 1, n]
