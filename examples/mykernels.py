"""Kernels for ``hetero compile`` (docs/kernels.md: bundles), also imported by the docs' examples.

    hetero compile examples/mykernels.py --targets opencl,cpu \
        --signature 'saxpy(f32, f32[:], f32[:])' -o mykernels.hbundle
"""

import hetero
from hetero import f32


@hetero.kernel
def saxpy(a: f32, x: hetero.Array[f32], y: hetero.Array[f32]):
    i = hetero.global_id(0)
    if i < x.shape[0]:
        y[i] = a * x[i] + y[i]

