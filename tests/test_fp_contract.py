"""Same kernel, same answer: ``a * b + c`` is two roundings on every device, never a fused
multiply-add the vendor compiler chose by itself (OpenCL C and CUDA contract by default, the
CPU backend does not); ``hetero.math.fma`` asks for the single rounding explicitly."""

from __future__ import annotations

import numpy as np

import hetero
from hetero import f32
from hetero.compiler.ir import nodes as ir
from hetero.compiler.emit.base import EmittedSource
from hetero.compiler.build.pipeline import emit
from hetero.core.target import Target

# (1 + 2**-12)**2 = 1 + 2**-11 + 2**-24: rounded to f32 the 2**-24 is lost (a tie to even), so
# a * a - 1 is 2**-11 with two roundings and 2**-11 + 2**-24 with one.
A = np.float32(1 + 2**-12)
TWO_ROUNDINGS = np.float32(2**-11)
ONE_ROUNDING = np.float32(2**-11 + 2**-24)


@hetero.kernel
def multiply_add(a: hetero.Array[f32], b: hetero.Array[f32], c: hetero.Array[f32], out: hetero.Array[f32]) -> None:
    i = hetero.global_id(0)
    out[i] = a[i] * b[i] + c[i]


@hetero.kernel
def explicit_fma(a: hetero.Array[f32], b: hetero.Array[f32], c: hetero.Array[f32], out: hetero.Array[f32]) -> None:
    i = hetero.global_id(0)
    out[i] = hetero.math.fma(a[i], b[i], c[i])


def _run(kernel: hetero.kernels.kernel.Kernel, device: hetero.Device) -> np.ndarray:
    a = hetero.asarray(np.full(8, A), device=device)
    c = hetero.asarray(np.full(8, -1.0, np.float32), device=device)
    out = hetero.empty(8, "float32", device=device)
    kernel[8](a, a, c, out)
    return out.numpy()


def test_multiply_then_add_is_never_contracted(device: hetero.Device) -> None:
    got = _run(multiply_add, device)
    assert (got == TWO_ROUNDINGS).all(), f"{device.name} fused a * b + c into one rounding: {got[0]!r}"


def test_fma_rounds_once(device: hetero.Device) -> None:
    assert (_run(explicit_fma, device) == ONE_ROUNDING).all()


def _source(dialect: str, arch: str) -> EmittedSource:
    function = multiply_add._lowered(multiply_add._parse("f32[:], f32[:], f32[:], f32[:]"))
    assert isinstance(function, ir.Function)
    return emit(function, Target(dialect, arch, frozenset({"fp64"}), "test"))


def test_gpu_dialects_tell_their_compiler_not_to_contract() -> None:
    # No GPU here: the emitted source and options are what keep CUDA and HIP builds from contracting.
    assert "--fmad=false" in _source("cuda", "sm_90").options
    assert "#pragma clang fp contract(off)" in _source("hip", "gfx90a").text
    assert "#pragma OPENCL FP_CONTRACT OFF" in _source("opencl", "generic").text
