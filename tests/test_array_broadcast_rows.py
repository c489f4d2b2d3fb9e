"""Broadcasting by rows (hetero.arraylib.elementwise.grid, the rows kernels of
hetero.compiler.array_kernels.elementwise): a layout of rank 2 or more with a last axis of at
least ROWS_MIN_LAST elements is launched over (last extent, rows), with no per-element division;
its results are the bits NumPy gives, with fusion on and off, for broadcast rows and columns,
transposed and strided views, and ranks past 2."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import hetero
from hetero.arraylib import elementwise
from hetero.compiler.array_kernels import elementwise as kernels
from hetero.core.launch_counts import launch_counts

RNG = np.random.default_rng(46)
HOST = RNG.standard_normal((300, 64), dtype=np.float32)
CUBE = RNG.standard_normal((6, 9, 40), dtype=np.float32)

CASES: dict[str, Callable[[Callable[[np.ndarray], object]], tuple[object, object]]] = {
    # each case: given ``put`` (a host array onto the device), (hetero's operands..., NumPy's operands...)
    "matrix minus its column means": lambda put: (put(HOST), put(HOST.mean(axis=0))),
    "matrix times a column": lambda put: (put(HOST), put(HOST[:, :1].copy())),
    "transposed plus itself": lambda put: (put(HOST).T, put(HOST).T),  # type: ignore[attr-defined]
    "strided columns": lambda put: (put(HOST)[::3, 2:50], put(HOST[0, 2:50].copy())),  # type: ignore[index]
    "rank 3 minus a plane": lambda put: (put(CUBE), put(CUBE[0].copy())),
}
HOST_CASES = {
    "matrix minus its column means": (HOST, HOST.mean(axis=0)),
    "matrix times a column": (HOST, HOST[:, :1].copy()),
    "transposed plus itself": (HOST.T, HOST.T),
    "strided columns": (HOST[::3, 2:50], HOST[0, 2:50].copy()),
    "rank 3 minus a plane": (CUBE, CUBE[0].copy()),
}
OPS = {"matrix minus its column means": np.subtract, "matrix times a column": np.multiply,
       "transposed plus itself": np.add, "strided columns": np.subtract, "rank 3 minus a plane": np.subtract}


@pytest.mark.parametrize("fused", [True, False], ids=["fusion on", "fusion off"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_rows_launches_give_numpys_bits(device: hetero.Device, case: str, fused: bool) -> None:
    x, y = CASES[case](lambda host: hetero.asarray(host, device=device, copy=True))
    hx, hy = HOST_CASES[case]
    op = OPS[case]
    with hetero.fusion(fused):
        got = getattr(hetero, op.__name__)(x, y).numpy()
    np.testing.assert_array_equal(got, op(hx, hy))


def test_x_minus_its_mean_is_one_rows_launch(device: hetero.Device) -> None:
    x = hetero.asarray(HOST, device=device, copy=True)
    mean = x.mean(axis=0)
    mean._buffer  # noqa: B018  (computed before counting)
    before = launch_counts().get(device.name, 0)
    got = (x - mean).numpy()
    assert launch_counts()[device.name] == before + 1
    np.testing.assert_array_equal(got, HOST - mean.numpy())


def test_which_layouts_launch_by_rows(device: hetero.Device) -> None:
    assert elementwise.grid((1024,), device) is None  # rank 1: flat
    assert elementwise.grid((4096, elementwise.ROWS_MIN_LAST - 1), device) is None  # a short last axis: flat
    (last, rows), local_size = elementwise.grid((300, 64), device)  # type: ignore[misc]
    assert (last, rows) == (64, 300) and local_size is not None and local_size[0] == 64
    assert 300 % local_size[1] == 0 and 64 * local_size[1] <= min(elementwise.ROWS_GROUP_ITEMS, device.max_work_group_size)
    assert elementwise.grid((6, 9, 40), device)[0] == (40, 54)  # type: ignore[index]
    global_size, local_size = elementwise.grid((7, 48), device)  # type: ignore[misc]
    assert global_size == (48, 7) and local_size is not None and 7 % local_size[1] == 0  # whole rows that divide


def test_a_rows_kernel_needs_two_axes() -> None:
    tree = kernels.Apply("add", (kernels.Input(0, hetero.f32), kernels.Input(1, hetero.f32)), hetero.f32, hetero.f32)
    with pytest.raises(ValueError, match="rank 2 or more"):
        kernels.build(tree, hetero.f32, 1, "rows_of_one_axis", rows=True)
