"""Integer literals too big for i64 are u64 (as in Numba and C), never a wrapped negative i64."""

from __future__ import annotations

import numpy as np

import hetero


@hetero.kernel
def big_literals(out: hetero.Array[hetero.u64], flags: hetero.Array[hetero.i32]):
    if hetero.global_id(0) == 0:
        y = 0xDF900294D8F554A5
        flags[0] = 1 if y > 0 else 0
        w = 1 << 63
        out[0] = w >> 62
        out[1] = y


def test_a_literal_of_2_to_the_63_or_more_is_unsigned(device: hetero.Device) -> None:
    out = hetero.zeros(2, hetero.u64, device=device)
    flags = hetero.zeros(1, hetero.i32, device=device)
    big_literals[1](out, flags)
    assert flags.numpy()[0] == 1
    np.testing.assert_array_equal(out.numpy(), np.array([2, 0xDF900294D8F554A5], dtype=np.uint64))
