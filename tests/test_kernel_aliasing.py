"""A launch whose array arguments share memory computes what the Python reading of the kernel says.

OpenCL C and CUDA/HIP kernels declare array parameters ``restrict``, which lets the vendor compiler
assume they never overlap; hetero detects a launch where they do and runs a variant without it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import hetero
from conftest import run_python
from hetero.compiler.emit.registry import emitter_for
from hetero.compiler.frontend.python import lower_kernel
from hetero.compiler.build.stats import stats
from hetero.core.types import ArrayType, f32


@hetero.kernel
def twice(x: hetero.Array[hetero.f32], y: hetero.Array[hetero.f32]):
    i = hetero.global_id(0)
    if i < y.shape[0]:
        y[i] = 5.0
        y[i] = x[i] * 2.0 + y[i]


@hetero.kernel
def add3(a: hetero.Array[hetero.f32], b: hetero.Array[hetero.f32], out: hetero.Array[hetero.f32]):
    i = hetero.global_id(0)
    if i < out.shape[0]:
        out[i] = 1.0
        out[i] = a[i] + b[i] + out[i]


def test_aliased_arguments_follow_the_python_reading(device: hetero.Device) -> None:
    a = hetero.asarray(np.ones(64, np.float32), device=device)
    twice[64](a, a)  # y[i] = 5; y[i] = 5 * 2 + 5
    np.testing.assert_array_equal(a.numpy(), np.full(64, 15.0, np.float32))


def test_separate_arguments_still_take_the_restrict_variant(device: hetero.Device) -> None:
    x = hetero.asarray(np.ones(64, np.float32), device=device)
    y = hetero.zeros(64, device=device)
    twice[64](x, y)
    np.testing.assert_array_equal(y.numpy(), np.full(64, 7.0, np.float32))
    twice[64](y, y)  # now aliased: 5 * 2 + 5
    np.testing.assert_array_equal(y.numpy(), np.full(64, 15.0, np.float32))
    twice[64](x, y)  # and back
    np.testing.assert_array_equal(y.numpy(), np.full(64, 7.0, np.float32))


def test_any_pair_of_three_arrays_may_alias(device: hetero.Device) -> None:
    for pick in ((0, 2), (1, 2), (0, 1, 2)):
        arrays = [hetero.asarray(np.full(32, 3.0, np.float32), device=device) for _ in range(3)]
        for position in pick[1:]:
            arrays[position] = arrays[pick[0]]
        add3[32](*arrays)
        want = 3.0 if len(pick) == 3 else 5.0  # out = 1; then 1 + 1 + 1, or 1 + 3 + 1 with one input apart
        np.testing.assert_array_equal(arrays[2].numpy(), np.full(32, want, np.float32), err_msg=str(pick))


def test_the_alias_free_variant_is_compiled_once(device: hetero.Device) -> None:
    a = hetero.asarray(np.ones(16, np.float32), device=device)
    twice[16](a, a)
    before = stats.emitted + stats.disk_hits + stats.builds
    for _ in range(3):
        twice[16](a, a)
    assert stats.emitted + stats.disk_hits + stats.builds == before


def test_generated_source_says_what_it_assumes(opencl_device_fixture: hetero.Device) -> None:
    text = twice.source(opencl_device_fixture, "f32[:], f32[:]")
    assert "restrict" in text  # the default: the arrays a launch passes do not overlap
    target = opencl_device_fixture.runtime.kernel_target()
    fn = lower_kernel(twice.py_func, (ArrayType(f32, 1), ArrayType(f32, 1)))
    assert "restrict" not in emitter_for(target.dialect).emit(fn, target, restrict=False).text


class _Pointer:
    """A stand-in for CuPy's MemoryPointer: a device address."""

    def __init__(self, ptr: int) -> None:
        self.ptr = ptr


class _Array:
    def __init__(self, buffer: object, nbytes: int) -> None:
        self._buffer = buffer
        self.nbytes = nbytes


def test_overlap_is_found_by_buffer_identity_and_by_device_address_ranges() -> None:
    from hetero.kernels.launch_args import shares_memory

    one = object()
    assert shares_memory([_Array(one, 8), _Array(one, 8)], (0, 1))
    assert not shares_memory([_Array(object(), 8), _Array(object(), 8)], (0, 1))
    # two DLPack views of one tensor: distinct pointer objects, overlapping bytes
    assert shares_memory([_Array(_Pointer(1000), 400), 2.0, _Array(_Pointer(1200), 400)], (0, 2))
    assert not shares_memory([_Array(_Pointer(1000), 200), _Array(_Pointer(1200), 400)], (0, 1))  # adjacent
    assert not shares_memory([_Array(one, 0), _Array(one, 0)], (0, 1))  # empty arrays touch nothing


@pytest.mark.parametrize(("dialect", "arch", "keyword"), [("cuda", "sm_90", "__restrict__"), ("hip", "gfx90a", "__restrict__"),
                                                          ("opencl", "any", "restrict")])
def test_every_c_dialect_has_a_variant_without_restrict(dialect: str, arch: str, keyword: str) -> None:
    from hetero.core.target import Target

    target = Target(dialect, arch, frozenset({"fp64", "fp16", "int64_atomics"}), "test")
    emitter = emitter_for(dialect)
    fn = lower_kernel(twice.py_func, (ArrayType(f32, 1), ArrayType(f32, 1)))
    assert emitter.declares_restrict
    assert keyword in emitter.emit(fn, target).text
    assert keyword not in emitter.emit(fn, target, restrict=False).text
    assert not emitter_for("cpu").declares_restrict  # Numba assumes nothing: no check on cpu launches


TWICE_MODULE = '''
import hetero
from hetero import f32


@hetero.kernel
def twice(x: hetero.Array[f32], y: hetero.Array[f32]):
    i = hetero.global_id(0)
    if i < y.shape[0]:
        y[i] = 5.0
        y[i] = x[i] * 2.0 + y[i]
'''


def test_a_bundled_kernel_launched_with_aliased_arrays_is_emitted_afresh_from_its_ir(tmp_path: Path) -> None:
    module = tmp_path / "aliasing_kernels.py"
    module.write_text(TWICE_MODULE)
    out = tmp_path / "twice.hbundle"
    subprocess.run([sys.executable, "-m", "hetero.cli.main", "compile", str(module), "--targets", "opencl",
                    "--signature", "f32[:], f32[:]", "-o", str(out), "-q"], check=True, capture_output=True,
                   env={**os.environ, "HETERO_CACHE_DIR": str(tmp_path / "c0")}, timeout=600)
    code = f"""
import json, sys
sys.path.insert(0, {str(tmp_path)!r})
import numpy as np, hetero
from hetero.compiler.build.stats import stats
hetero.load_bundle({str(out)!r})
import aliasing_kernels
results = {{}}
for dev in hetero.devices():
    if dev.backend not in ("oneapi", "opencl"):
        continue
    a = hetero.asarray(np.ones(8, np.float32), device=dev)
    aliasing_kernels.twice[8](a, a)
    results[dev.name] = a.numpy().tolist()
print(json.dumps({{"results": results, "lowered": stats.lowered}}))
"""
    report = json.loads(run_python(code, {"HETERO_CACHE_DIR": str(tmp_path / "c1")}).stdout.strip().splitlines()[-1])
    assert report["results"] and report["lowered"] == 0  # the bundle's IR, emitted without restrict
    for name, got in report["results"].items():
        assert got == [15.0] * 8, name
