"""torch's type promotion and its casts through hetero's torch backend: a binary operation on an
integer and a float tensor, true division of integers and the float math functions of integers
compute in the dtype torch computes in (torch.result_type, its default float) and give torch's
values; a float to integer cast truncates as torch does for every value the integer holds, and
sends NaN, infinities and out-of-range values (undefined in C, each device its own) to torch on
the host, counted with the reason."""

from __future__ import annotations

from typing import Any

import pytest

import hetero

torch = pytest.importorskip("torch")

import hetero.torch as ht  # noqa: E402  (after torch is known to be installed)
from torch_lowering_checks import EXACT, fresh_dynamo, same  # noqa: E402, F401 (the fixture applies by import)

TOLERANCE = {"rtol": 1e-5, "atol": 1e-5}



_same = same


def test_an_integer_and_a_float_tensor_compute_in_torchs_promoted_dtype(device: hetero.Device) -> None:
    def f(i: Any, x: Any, d: Any) -> Any:
        return (x - i, i - x, i / x, x * i, torch.maximum(i, x), i == x, torch.where(i > 0, i, x),
                torch.remainder(x, i), i * 2.5, (i > 0) * 3, (x > 0) + i, x * d, i - d, torch.remainder(i, -3))

    i = torch.tensor([[-7, 0, 3], [5, -2, 9]])
    x = torch.tensor([[2.0, float("nan"), -0.0], [float("inf"), -3.5, 1e-3]])
    d = torch.tensor(0.1, dtype=torch.float64)  # a 0-d float64: torch keeps x's float32, an int tensor gets float32
    compiled = ht.compile(f, device)
    _same(compiled(i, x, d), f(i, x, d))
    assert not compiled.report.host_ops, str(compiled.report)


def test_true_division_of_integers_gives_torchs_default_float(device: hetero.Device) -> None:
    def f(a: Any, b: Any) -> Any:
        return a / b, a / 2, (a > 0) / b, torch.true_divide(a, -b)

    a = torch.tensor([7, -7, 7, -7, 0, 0, 5, 1 << 40])
    b = torch.tensor([2, 2, -2, -2, 0, -3, 0, 3])
    b_nonzero = torch.where(b == 0, 1, b)  # an integer floor division by zero raises in torch
    compiled = ht.compile(f, device)
    _same(compiled(a, b), f(a, b))
    floor = ht.compile(lambda a, b: torch.div(a, b, rounding_mode="floor"), device)
    _same([floor(a, b_nonzero)], [torch.div(a, b_nonzero, rounding_mode="floor")])
    assert not compiled.report.host_ops and not floor.report.host_ops


def test_empty_tensors_of_mixed_kinds(device: hetero.Device) -> None:
    def f(i: Any, x: Any) -> Any:
        return i - x, i / i, torch.exp(i), x.long()

    i, x = torch.zeros((0, 3), dtype=torch.int64), torch.zeros((0, 3))
    compiled = ht.compile(f, device)
    _same(compiled(i, x), f(i, x))
    assert not compiled.report.host_ops, str(compiled.report)


def test_float_functions_of_integer_tensors_give_torchs_default_float(device: hetero.Device) -> None:
    def f(i: Any) -> Any:
        return torch.exp(i), torch.sqrt(i), torch.sigmoid(i), torch.rsqrt(i), torch.reciprocal(i), torch.log(i.bool())

    i = torch.tensor([-3, 0, 1, 4, 10])
    compiled = ht.compile(f, device)
    _same(compiled(i), f(i), **TOLERANCE)
    assert not compiled.report.host_ops, str(compiled.report)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_a_float_to_integer_cast_in_range_truncates_on_the_device(device: hetero.Device, dtype: torch.dtype) -> None:
    info = torch.iinfo(dtype)
    x = torch.tensor([-0.0, 0.0, 0.5, 0.999, 2.7, 7.5, float(info.max) * 0.75, 12.0, 3.0, 100.25])
    if info.min < 0:
        x = torch.cat([x, torch.tensor([-0.5, -2.7, -7.5, float(info.min)])])
    compiled = ht.compile(lambda x: x.to(dtype) + 0, device)
    _same([compiled(x)], [x.to(dtype) + 0])
    assert not compiled.report.host_ops, str(compiled.report)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), -float("inf"), 300.0, -1.5, 1e20])
def test_a_float_to_integer_cast_of_a_value_the_integer_cannot_hold_runs_in_torch(device: hetero.Device,
                                                                                  value: float) -> None:
    dtype = torch.uint8 if abs(value) < 1e3 else torch.int64
    x = torch.tensor([1.5, value, 2.0])
    compiled = ht.compile(lambda x: x.to(dtype) * 1, device)
    with torch.no_grad():
        _same([compiled(x)], [x.to(dtype) * 1])  # whatever torch gives on this CPU: its own cast ran
    reasons = compiled.report.host_ops["aten._to_copy.default"].reasons
    assert any("float to integer cast" in r and "range" in r for r in reasons), reasons


@pytest.mark.parametrize("divisor", [3, -3, 1, -1])
def test_integer_fmod_takes_the_dividends_sign_and_roll_lowers(device: hetero.Device, divisor: int) -> None:
    def f(i: Any, x: Any) -> Any:
        return torch.fmod(i, divisor), torch.roll(x, 2, 0), torch.fft.fftshift(x)

    i, x = torch.tensor([-7, -6, -1, 0, 1, 5, 7, -(1 << 40) - 1]), torch.arange(5, dtype=torch.float32)
    compiled = ht.compile(f, device)
    _same(compiled(i, x), f(i, x))
    assert not compiled.report.host_ops, str(compiled.report)
