"""Views and creations through hetero's torch backend: empty (its values unspecified in torch,
zeros here), diagonal (offsets, negative and past the edge, any two dims), repeat, slice_scatter
(steps, negative bounds, an empty slice) and round (half to even, with decimals), each compared
with torch eager."""

from __future__ import annotations

from typing import Any

import pytest

import hetero

torch = pytest.importorskip("torch")

import hetero.torch as ht  # noqa: E402  (after torch is known to be installed)
from torch_lowering_checks import EXACT, fresh_dynamo, same  # noqa: E402, F401 (the fixture applies by import)




_same = same


def _lowered(compiled: Any) -> None:
    assert not compiled.report.host_ops, str(compiled.report)


def test_diagonal_of_any_two_dims_and_offset(device: hetero.Device) -> None:
    def f(x: Any) -> Any:
        return (torch.diagonal(x, 0, 1, 2), torch.diagonal(x, 2, 0, 2), torch.diagonal(x, -1, 2, 0),
                torch.diagonal(x, 7, 1, 2), torch.diagonal(x, -1, -1, -2), torch.trace(x[0]))

    x = torch.arange(2 * 3 * 4, dtype=torch.float32).reshape(2, 3, 4)
    x[0, 0, 0], x[1, 1, 1] = float("nan"), -0.0
    compiled = ht.compile(f, device)
    _same(compiled(x), f(x))
    _lowered(compiled)


def test_repeat_tiles_with_leading_dims_and_zero_repeats(device: hetero.Device) -> None:
    def f(x: Any) -> Any:
        return x.repeat(2, 1, 3), x.repeat(1, 1), x.repeat(0, 2), x.repeat(2, 2, 1, 1)

    x = torch.tensor([[1.0, float("nan"), -0.0], [float("inf"), 2.0, 3.0]])
    compiled = ht.compile(f, device)
    _same(compiled(x), f(x))
    _lowered(compiled)


@pytest.mark.parametrize("dim,start,end,step", [(0, 1, 4, 1), (1, 0, None, 2), (1, -4, -1, 3), (0, 2, 2, 1), (1, None, 5, 4)])
def test_slice_scatter_replaces_the_slice(device: hetero.Device, dim: int, start: Any, end: Any, step: int) -> None:
    x = torch.arange(5 * 6, dtype=torch.float32).reshape(5, 6)
    src = -torch.ones_like(x[(slice(None),) * dim + (slice(start, end, step),)]) * 0.0 - 7.0
    compiled = ht.compile(lambda x, s: torch.slice_scatter(x, s, dim, start, end, step), device)
    _same([compiled(x, src)], [torch.slice_scatter(x, src, dim, start, end, step)])
    _lowered(compiled)


def test_empty_then_filled_is_torchs_and_circular_padding_lowers(device: hetero.Device) -> None:
    def f(x: Any) -> Any:
        e = torch.empty(2, 3)
        return torch.nn.functional.pad(x, (1, 2), mode="circular"), e.shape, torch.signal.windows.hann(5)

    x = torch.arange(12, dtype=torch.float32).reshape(1, 3, 4)
    compiled = ht.compile(f, device)
    got, want = compiled(x), f(x)
    _same([got[0], got[2]], [want[0], want[2]], rtol=1e-6, atol=1e-6)
    assert got[1] == want[1]
    _lowered(compiled)


@pytest.mark.parametrize("decimals", [0, 1, 3, -1, -2])
def test_round_is_half_to_even_with_torchs_decimals(device: hetero.Device, decimals: int) -> None:
    x = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5, -0.0, 0.125, 0.375, 1.005, 12.5, 150.0, 250.0, -350.0,
                      float("nan"), float("inf"), -float("inf"), 123456.789])
    compiled = ht.compile(lambda x: torch.round(x, decimals=decimals), device)
    _same([compiled(x)], [torch.round(x, decimals=decimals)])
    _lowered(compiled)
    integers = torch.tensor([-3, 0, 7])
    plain = ht.compile(lambda i: torch.round(i) + 0, device)
    _same([plain(integers)], [torch.round(integers) + 0])


def test_index_put_writes_and_accumulates_at_distinct_positions(device: hetero.Device) -> None:
    w = torch.tensor([[0.5, -1.0, 2.0, float("nan")]])

    def f(x: Any, i: Any, j: Any, v: Any) -> Any:
        return (torch.index_put(x, (i, j), v), torch.index_put(x, (i,), w, accumulate=True),
                x.index_add(1, j, torch.ones(3, 3)), x.index_fill(0, i, float("nan")), torch.index_put(x, (i, j), v[0]))

    x = torch.tensor([[1.0, -0.0, 2.0, 3.0], [float("inf"), 5.0, 6.0, 7.0], [8.0, 9.0, 10.0, 11.0]])
    i, j, v = torch.tensor([0, -1, 1]), torch.tensor([3, 0, 1]), torch.tensor([-1.0, -2.0, float("nan")])
    compiled = ht.compile(f, device)
    _same(compiled(x, i, j, v), f(x, i, j, v))
    _lowered(compiled)


def test_index_put_naming_a_position_twice_runs_in_torch(device: hetero.Device) -> None:
    def f(x: Any, i: Any, v: Any) -> Any:
        return torch.index_put(x, (i,), v, accumulate=True)

    x, i, v = torch.zeros(4), torch.tensor([1, 3, -3]), torch.tensor([1.0, 2.0, 4.0])  # -3 is 1 again
    compiled = ht.compile(f, device)
    _same([compiled(x, i, v)], [f(x, i, v)])
    assert "a position twice" in next(iter(compiled.report.host_ops["aten.index_put.default"].reasons))


@pytest.mark.parametrize("size", [(1, 1), (2, 3), (3, 5), (5, 7)])
def test_adaptive_average_pooling_uses_torchs_windows(device: hetero.Device, size: tuple[int, int]) -> None:
    x = torch.randn(2, 3, 6, 7, generator=torch.Generator().manual_seed(8))
    x[0, 0, 0, 0] = float("nan")
    compiled = ht.compile(lambda x: torch.nn.functional.adaptive_avg_pool2d(x, size), device)
    _same([compiled(x)], [torch.nn.functional.adaptive_avg_pool2d(x, size)], rtol=1e-5, atol=1e-6)
    unbatched = ht.compile(lambda x: torch.nn.functional.adaptive_avg_pool2d(x, size), device)
    _same([unbatched(x[1])], [torch.nn.functional.adaptive_avg_pool2d(x[1], size)], rtol=1e-5, atol=1e-6)
    _lowered(compiled)


def test_sort_and_argsort_give_torchs_values_and_indices(device: hetero.Device) -> None:
    def f(x: Any, y: Any) -> Any:
        return (torch.sort(x, dim=1), torch.sort(x, dim=0, descending=True), torch.argsort(y, stable=True),
                torch.sort(y, stable=True, descending=True))

    x = torch.tensor([[3.0, -1.0, 2.5, 0.0], [-0.5, 7.0, -3.0, 1.0]])
    y = torch.tensor([2.0, 1.0, 2.0, -0.0, 0.0, 1.0])  # ties, -0 == 0: stable keeps their order
    compiled = ht.compile(f, device)
    got, want = compiled(x, y), f(x, y)
    _same([got[0][0], got[0][1], got[1][0], got[1][1], got[2], got[3][0], got[3][1]],
          [want[0][0], want[0][1], want[1][0], want[1][1], want[2], want[3][0], want[3][1]])
    _lowered(compiled)


def test_an_unstable_sort_of_ties_or_nan_runs_in_torch(device: hetero.Device) -> None:
    x = torch.tensor([1.0, float("nan"), 1.0, 0.0])
    compiled = ht.compile(lambda x: torch.sort(x[:3]), device)
    got, want = compiled(x), torch.sort(x[:3])
    _same(list(got), list(want))
    ties = ht.compile(lambda x: torch.sort(x[2:] * 0), device)
    _same(list(ties(x)), list(torch.sort(x[2:] * 0)))
    assert "NaN" in next(iter(compiled.report.host_ops["aten.sort.default"].reasons))
    assert "ties" in next(iter(ties.report.host_ops["aten.sort.default"].reasons))
