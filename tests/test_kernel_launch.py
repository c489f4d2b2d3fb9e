"""Launching kernels: errors name the parameter or device; sources and caches behave."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

import hetero
from conftest import ROOT, run_python
from kernels import corpus


def test_arrays_on_different_devices_are_refused() -> None:
    others = [d for d in hetero.devices() if d.name != "cpu"]
    if not others:
        pytest.skip("needs a second device")
    x = hetero.zeros(4, device="cpu")
    y = hetero.zeros(4, device=others[0])
    with pytest.raises(hetero.KernelLaunchError) as info:
        corpus.saxpy[4](1.0, x, y)
    assert "x on cpu" in str(info.value) and f"y on {others[0].name}" in str(info.value)


def test_wrong_arguments_name_the_parameter(device: hetero.Device) -> None:
    x = hetero.zeros(4, device=device)
    with pytest.raises(hetero.KernelLaunchError, match="takes 3 argument"):
        corpus.saxpy[4](1.0, x)
    with pytest.raises(hetero.KernelLaunchError, match="parameter 'x' is declared f32"):
        corpus.saxpy[4](1.0, hetero.zeros(4, dtype="int32", device=device), x)
    with pytest.raises(hetero.KernelLaunchError, match="parameter 'a' is a scalar"):
        corpus.saxpy[4](x, x, x)
    with pytest.raises(hetero.KernelLaunchError, match="numpy array"):
        corpus.saxpy[4](1.0, np.zeros(4, np.float32), x)
    with pytest.raises(hetero.KernelLaunchError, match="got str"):
        corpus.triad[4](x, x, x, "3")
    with pytest.raises(hetero.KernelLaunchError, match="launch kernel saxpy with sizes"):
        corpus.saxpy(1.0, x, x)


def test_bad_sizes(device: hetero.Device) -> None:
    x = hetero.zeros(4, device=device)
    with pytest.raises(hetero.KernelLaunchError, match="global size"):
        corpus.saxpy[-1](1.0, x, x)
    with pytest.raises(hetero.KernelLaunchError, match="local size"):
        corpus.saxpy[(4,), (1 << 20,)](1.0, x, x)
    corpus.saxpy[0](1.0, x, x)  # nothing to do is fine


def test_source_shows_the_generated_code(device: hetero.Device) -> None:
    text = corpus.saxpy.source(device, "f32, f32[:], f32[:]")
    dialect = device.runtime.kernel_target().dialect
    if dialect == "opencl":
        assert "__kernel" in text and "get_group_id(0)" in text  # the global id, made in 64 bits
    else:
        assert "numba" in text
    assert text == corpus.saxpy.source(device, "saxpy(f32, f32[:], f32[:])")


def test_source_before_launch_asks_for_a_signature() -> None:
    @hetero.kernel
    def never_launched(x):
        x[0] = 1.0

    with pytest.raises(hetero.CompileError, match="pass a signature"):
        never_launched.source("cpu")


CACHE_SCRIPT = """
import json, sys
sys.path.insert(0, {tests!r})
import numpy as np, hetero
from hetero.compiler.build.stats import stats
from kernels import corpus
results = {{}}
for dev in hetero.devices():
    x = hetero.asarray(np.arange(8, dtype=np.float32), device=dev)
    y = hetero.zeros(8, device=dev)
    corpus.saxpy[8](2.0, x, y)
    results[dev.name] = y.numpy().tolist()
print(json.dumps({{"builds": stats.builds, "disk_hits": stats.disk_hits, "lowered": stats.lowered, "results": results}}))
"""


def test_disk_cache_hit_after_process_restart(tmp_path: Path) -> None:
    env = {"HETERO_CACHE_DIR": str(tmp_path)}
    code = CACHE_SCRIPT.format(tests=str(ROOT / "tests"))
    first = json.loads(run_python(code, env).stdout.strip().splitlines()[-1])
    second = json.loads(run_python(code, env).stdout.strip().splitlines()[-1])
    assert first["builds"] == len(first["results"]) and first["disk_hits"] == 0
    assert second["builds"] == 0 and second["disk_hits"] == len(second["results"])
    assert second["lowered"] == 0  # the cached record of the specialization skips the frontend too
    assert first["results"] == second["results"]
    assert all(r == [2.0 * i for i in range(8)] for r in second["results"].values())


def test_corrupted_cache_entry_is_rebuilt(tmp_path: Path) -> None:
    env = {"HETERO_CACHE_DIR": str(tmp_path)}
    code = CACHE_SCRIPT.format(tests=str(ROOT / "tests"))
    first = json.loads(run_python(code, env).stdout.strip().splitlines()[-1])
    entries = list((tmp_path / "kernels").rglob("*.bin"))
    entries = [p for p in entries if "modules" not in p.parts]
    assert entries
    for path in entries:
        data = bytearray(path.read_bytes())
        data[-1] ^= 0xFF  # flip one payload byte
        path.write_bytes(bytes(data))
    result = run_python(code, env)
    again = json.loads(result.stdout.strip().splitlines()[-1])
    assert again["builds"] == len(first["results"])  # every artifact rebuilt (records too)
    assert again["results"] == first["results"]
    assert "CacheWarning" in result.stderr or "checksum" in result.stderr


def test_cache_cli_info_and_clear(tmp_path: Path) -> None:
    env = {**os.environ, "HETERO_CACHE_DIR": str(tmp_path)}
    run_python(CACHE_SCRIPT.format(tests=str(ROOT / "tests")), {"HETERO_CACHE_DIR": str(tmp_path)})
    import subprocess
    import sys

    info = subprocess.run([sys.executable, "-m", "hetero.cli.main", "cache", "info", "--json"], capture_output=True,
                          text=True, env=env, check=True)
    assert json.loads(info.stdout)["entries"] > 0
    subprocess.run([sys.executable, "-m", "hetero.cli.main", "cache", "clear"], capture_output=True, text=True, env=env, check=True)
    info = subprocess.run([sys.executable, "-m", "hetero.cli.main", "cache", "info", "--json"], capture_output=True,
                          text=True, env=env, check=True)
    assert json.loads(info.stdout)["entries"] == 0


@hetero.kernel
def _choose(out: hetero.Array[hetero.i32], flag: hetero.bool_) -> None:
    i = hetero.global_id(0)
    if i < out.shape[0]:
        out[i] = 1 if flag else 2


def test_a_bool_scalar_argument_launches_on_every_device(device: hetero.Device) -> None:
    """OpenCL declares bool parameters uchar; PyOpenCL refused to pack a bool (Python's or NumPy's) into
    that slot (``std::bad_cast``), so no bool argument launched on an OpenCL device."""
    for flag, want in ((True, 1), (np.bool_(True), 1), (False, 2), (np.bool_(False), 2), (1, 1), (0, 2)):
        out = hetero.zeros(4, dtype="int32", device=device)
        _choose[4](out, flag)
        assert out.numpy().tolist() == [want] * 4, (flag, device.name)


@hetero.func
def fn_twice(x: hetero.f64) -> hetero.f64:
    return x * 2.0


@hetero.func
def twice(x: hetero.f64) -> hetero.f64:
    return x + x


@hetero.kernel
def atomic_add_double_global(total: hetero.Array[hetero.f64], x: hetero.Array[hetero.f64]) -> None:
    # named as hetero's OpenCL helper for this very atomic, and calling functions whose generated
    # names once met each other's and the kernel's
    i = hetero.global_id(0)
    if i < x.shape[0]:
        hetero.atomic_add(total, 0, twice(x[i]) + fn_twice(x[i]))


def test_kernel_and_function_names_never_clash_with_the_names_hetero_generates(device: hetero.Device) -> None:
    if not device.info.fp64:
        pytest.skip(f"{device.name} has no float64")
    x = hetero.asarray(np.arange(8, dtype=np.float64), device=device)
    total = hetero.zeros(1, dtype="float64", device=device)
    atomic_add_double_global[8](total, x)
    assert total.numpy()[0] == 4 * np.arange(8).sum()
