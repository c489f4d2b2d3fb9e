"""The cpu target runs a barrier-free kernel as flat blocks of work-items. A variable its code may
read before assigning (a loop carrying it) must not be given per-work-item storage there: that
storage is for values crossing barriers, and its index named loops the flat layout lacks."""

from __future__ import annotations

import numpy as np

import hetero


@hetero.kernel
def carried(out: hetero.Array[hetero.i64]):
    i = hetero.global_id(0)
    n = 0
    while n < 3:
        if n > 0:
            acc = acc + i  # noqa: F821 (assigned on the first iteration, in the else)
        else:
            acc = i
        n += 1
    out[i] = acc


def test_a_loop_carried_variable_in_a_barrier_free_kernel(device: hetero.Device) -> None:
    out = hetero.zeros(100, hetero.i64, device=device)
    carried[100](out)
    np.testing.assert_array_equal(out.numpy(), 3 * np.arange(100))
