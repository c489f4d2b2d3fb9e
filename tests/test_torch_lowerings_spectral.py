"""Complex tensors and torch.fft through hetero's torch backend: complex tensors travel to the
device and back, the FFTs (each norm, real and complex input, one-sided and inverse) give torch's
values, the conjugate and view_as_real lower, a complex to real cast keeps the real part as
torch's does, and an operation whose lowering takes real tensors only runs a complex one in torch
on the host, counted with the reason."""

from __future__ import annotations

import warnings
from typing import Any

import pytest

import hetero

torch = pytest.importorskip("torch")

import hetero.torch as ht  # noqa: E402  (after torch is known to be installed)
from torch_lowering_checks import EXACT, fresh_dynamo, same  # noqa: E402, F401 (the fixture applies by import)


def nn_pad(z: Any) -> Any:
    return torch.nn.functional.pad(z, (1, 2))


TOLERANCE = {"rtol": 1e-5, "atol": 1e-4}  # float32 transforms summed in another order



def _same(got: Any, want: Any) -> None:
    same(got, want, **TOLERANCE)


@pytest.mark.parametrize("norm", [None, "ortho", "forward"])
def test_the_ffts_of_real_and_complex_tensors_are_torchs(device: hetero.Device, norm: str | None) -> None:
    def f(x: Any, z: Any) -> Any:
        return (torch.fft.fft(x, norm=norm), torch.fft.rfft2(x, norm=norm), torch.fft.ifft(z, dim=0, norm=norm),
                torch.fft.fftn(z, norm=norm), torch.fft.irfft(z, n=8, norm=norm), torch.fft.hfft(z, norm=norm),
                torch.fft.ihfft(x, norm=norm), torch.fft.irfftn(z, s=(4, 6), norm=norm))

    torch.manual_seed(7)
    x, z = torch.randn(4, 6), torch.randn(4, 5, dtype=torch.complex64)
    compiled = ht.compile(f, device)
    _same(compiled(x, z), f(x, z))
    assert not compiled.report.host_ops, str(compiled.report)


def test_complex_tensors_travel_and_their_layout_operations_lower(device: hetero.Device) -> None:
    def f(z: Any, w: Any, x: Any) -> Any:
        y = -torch.cat([z, w.conj()], dim=0)[1:, ::2].transpose(0, 1)
        return (y, torch.view_as_real(z), z.to(torch.complex128), x.to(torch.complex64).reshape(3, 2),
                z.real * 1, nn_pad(z))

    z = torch.tensor([[1 + 2j, -0.0 - 1j, float("inf") + 0j], [float("nan") + 1j, 3 - 4j, 0.5j]], dtype=torch.complex64)
    w, x = torch.randn(2, 3, dtype=torch.complex64), torch.tensor([[-0.0, 1.5, 2.0], [float("nan"), 0.0, -3.0]])
    compiled = ht.compile(f, device)
    _same(compiled(z, w, x), f(z, w, x))
    assert not compiled.report.host_ops, str(compiled.report)


def test_a_complex_to_real_cast_keeps_the_real_part_as_torch(device: hetero.Device) -> None:
    def f(z: Any) -> Any:
        with torch.no_grad():
            return z.to(torch.float32) * 1, z.to(torch.int32) * 1

    z = torch.tensor([1.5 + 2j, -2.7 - 1j, -0.0 + 5j], dtype=torch.complex64)
    compiled = ht.compile(f, device)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # torch's "discards the imaginary part", once a process
        _same(compiled(z), f(z))
    assert not compiled.report.host_ops, str(compiled.report)


def test_complex_arithmetic_runs_in_torch_on_the_host_with_torchs_special_values(device: hetero.Device) -> None:
    def f(z: Any, w: Any) -> Any:
        return torch.exp(z * 2 + w), z.flip(0)  # torch: (inf+0j)*2 = inf+nanj, (-0-1j)*2 = 0-2j

    z = torch.tensor([1 + 2j, -0.0 - 1j, float("inf") + 0j], dtype=torch.complex64)
    w = torch.tensor([0.5j, 1.0, -2.0], dtype=torch.complex64)
    compiled = ht.compile(f, device)
    _same(compiled(z, w), f(z, w))
    reason = {"a complex tensor (its lowering takes real tensors only)"}
    host = compiled.report.host_ops
    assert host["aten.exp.default"].reasons == reason and host["aten.mul.Tensor"].reasons == reason
    assert "aten.flip.default" not in host
