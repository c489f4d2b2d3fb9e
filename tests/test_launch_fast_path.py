"""A cached launcher's fast path (``Launcher._fast``: its usual specialization's matcher) and the
cpu runtime's per-kernel launch plans: whatever the arguments and sizes that come next, a launch
runs the specialization of *those* arguments, with *those* sizes, and errors stay the same."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import hetero
from hetero.core.errors import KernelLaunchError


@hetero.kernel
def scale(out, x, factor):
    i = hetero.global_id(0)
    if i < out.shape[0]:
        out[i] = x[i] * factor


def test_alternating_dtypes_and_devices_each_take_their_own_specialization(device: hetero.Device) -> None:
    launcher = scale[16]
    host = hetero.device("cpu")
    for round_ in range(3):  # the fast path is set by the first kind, then met by the others
        for where in (device, host):
            for dtype, factor in (("float32", np.float32(2.0)), ("int32", np.int32(3)), ("float32", 2.5)):
                x = hetero.asarray(np.arange(16, dtype=dtype), device=where)
                out = hetero.zeros(16, dtype=dtype, device=where)
                launcher(out, x, factor)
                expected = (np.arange(16, dtype=dtype) * np.dtype(dtype).type(factor)).astype(dtype)
                np.testing.assert_array_equal(out.numpy(), expected, err_msg=f"round {round_} {where.name} {dtype}")


def test_the_fast_path_keeps_checking_scalars_and_the_argument_count(device: hetero.Device) -> None:
    x = hetero.asarray(np.arange(8, dtype=np.float32), device=device)
    out = hetero.zeros(8, dtype="float32", device=device)
    launcher = scale[8]
    launcher(out, x, 2.0)
    launcher(out, x, 2.0)  # now on the fast path (a Python float for an f32 parameter)
    with pytest.raises(KernelLaunchError, match="factor.*overflows"):
        launcher(out, x, 1e300)  # the same key: the fast path still converts and checks the value
    with pytest.raises(KernelLaunchError):
        launcher(out, x)
    with pytest.raises(KernelLaunchError, match="factor"):
        launcher(out, x, factor=2.0)
    launcher(out, x, 5.0)
    np.testing.assert_array_equal(out.numpy(), np.arange(8, dtype=np.float32) * 5)


def test_a_view_after_whole_arrays_is_launched_as_the_view(device: hetero.Device) -> None:
    base = np.arange(32, dtype=np.float32)
    x = hetero.asarray(base, device=device)
    launcher = scale[16]
    out = hetero.zeros(16, dtype="float32", device=device)
    launcher(out, x[:16], np.float32(1.0))
    launcher(out, x[16:], np.float32(1.0))
    np.testing.assert_array_equal(out.numpy(), base[16:])
    launcher(out, x[1::2], np.float32(1.0))  # strided: another key, another specialization
    np.testing.assert_array_equal(out.numpy(), base[1::2])


def test_threads_launching_one_cpu_kernel_with_different_sizes_each_get_their_own() -> None:
    cpu = hetero.device("cpu")
    sizes = [1, 3, 7, 16, 33, 100]
    errors: list[str] = []

    def work(n: int) -> None:
        x = hetero.asarray(np.ones(n, dtype=np.float32), device=cpu)
        for _ in range(200):
            out = hetero.zeros(128, dtype="float32", device=cpu)
            scale[n](out, x, np.float32(1.0))  # a fresh launcher each time: sizes as new tuples too
            got = out.numpy()
            if got[:n].sum() != n or got[n:].any():
                errors.append(f"n={n}: {int(got.sum())} work-items ran")
                return

    threads = [threading.Thread(target=work, args=(n,)) for n in sizes]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
