"""The strided copy kernel (hetero.compiler.array_kernels.strided_copy): one IR definition that every dialect
emits, that ir_json round-trips as a checked kernel, and that NVRTC compiles for sm_90 here.
Its launches on this machine's devices are tested through views in tests/test_array_views.py."""

from __future__ import annotations

import pytest

from hetero.compiler.ir import json_form as ir_json
from hetero.compiler.build import pipeline
from hetero.compiler.array_kernels import strided_copy
from hetero.compiler.emit.registry import emitter_for
from hetero.core.target import Target
from hetero.core.types import u8, u64

FEATURES = frozenset({"fp64", "fp16", "int64_atomics"})
TARGETS = [Target("opencl", "any", FEATURES, "test"), Target("cuda", "sm_90", FEATURES, "nvcc 13.0"),
           Target("hip", "gfx90a", FEATURES, "hipcc 5.2"), Target("cpu", "x86_64", FEATURES, "numba")]


@pytest.mark.parametrize("target", TARGETS, ids=lambda t: t.dialect)
@pytest.mark.parametrize("rank", [0, 1, 3])
def test_every_dialect_emits_the_copy_kernel(target: Target, rank: int) -> None:
    function = strided_copy.build(rank, u64)
    source = emitter_for(target.dialect).emit(function, target)
    assert f"copy_r{rank}_u64" in source.text
    assert [arg.param for arg in source.abi if arg.kind != "shape"] == strided_copy.param_names(rank)


def test_the_copy_kernel_is_valid_ir_and_its_key_follows_the_ir() -> None:
    function = strided_copy.build(2, u8)
    assert ir_json.load(ir_json.dump(function)) == function  # what the frontend could have made
    assert strided_copy.build(2, u8) == function and strided_copy.build(3, u8) != function
    with pytest.raises(ValueError, match="rank"):
        strided_copy.build(-1, u8)
    assert "compile_function" in pipeline.__all__


def test_the_copy_kernel_compiles_to_sm90_through_nvrtc() -> None:
    pytest.importorskip("cuda.bindings.nvrtc", reason="cuda-bindings is not installed")
    from hetero.backends.cupy import nvrtc_compile

    if not nvrtc_compile.available():
        pytest.skip("libnvrtc cannot be loaded")
    from test_cuda_nvrtc import sm90_runtime

    runtime = sm90_runtime()
    target = runtime.kernel_target()
    source = emitter_for(target.dialect).emit(strided_copy.build(3, u64), target)
    kind, cubin = runtime.compile_source(source)
    assert kind == "cubin" and source.entry.encode() in cubin  # type: ignore[attr-defined]
