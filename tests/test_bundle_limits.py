"""Hostile bundles cost nothing to reject (issue 12, item 8): zip bombs, unlisted members and
lying sizes are refused from the archive's directory before anything is inflated; an
inconsistent ABI is refused at load, not at launch; only regular files are opened."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from conftest import ROOT

import hetero
from hetero.compiler.build import bundle, bundle_registry
from hetero.compiler.build.bundle import read_bundle

SAXPY = "saxpy(f32, f32[:], f32[:])"
JACOBI = "jacobi(f32[:,:], f32[:,:])"
# Each hostile case runs in a child process with its address space capped, so a
# regression fails the test (MemoryError) instead of exhausting the machine.
_CAPPED = """
import json, resource, sys, time
resource.setrlimit(resource.RLIMIT_AS, ({cap}, {cap}))
sys.path.insert(0, {tests!r})
import hetero
from hetero.compiler.build.bundle import inspect_bundle
start = time.monotonic()
try:
    inspect_bundle({path!r})
    outcome = "accepted"
except hetero.BundleError as exc:
    outcome = str(exc)
# VmHWM, not ru_maxrss: Linux carries ru_maxrss over exec from the forked parent (pytest).
peak_kib = next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith("VmHWM:"))
print(json.dumps({{"outcome": outcome, "peak_kib": peak_kib, "seconds": time.monotonic() - start}}))
"""


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A real bundle of saxpy and jacobi for cpu and opencl, built by the CLI."""
    folder = tmp_path_factory.mktemp("small-bundle")
    out = folder / "small.hbundle"
    subprocess.run([sys.executable, "-m", "hetero.cli.main", "compile", "tests/kernels/corpus.py", "--targets", "cpu,opencl",
                    "--signature", SAXPY, "--signature", JACOBI, "--kernels", "saxpy,jacobi", "-o", str(out)],
                   cwd=ROOT, env={**os.environ, "HETERO_CACHE_DIR": str(folder / "cache")}, check=True,
                   capture_output=True, timeout=600)
    return out


def _members(path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _write(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def _add_zeros(archive: zipfile.ZipFile, name: str, nbytes: int) -> None:
    """A member of ``nbytes`` zero bytes, streamed (deflate makes it ~1000x smaller)."""
    chunk = bytes(1 << 20)
    info = zipfile.ZipInfo(name)
    info.compress_type = zipfile.ZIP_DEFLATED
    with archive.open(info, "w", force_zip64=True) as stream:
        for _ in range(nbytes >> 20):
            stream.write(chunk)


def _inspect_capped(path: Path, cap: int = 1536 << 20) -> dict[str, Any]:
    code = _CAPPED.format(cap=cap, tests=str(ROOT / "tests"), path=str(path))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _manifest_with(small: Path, change: Callable[[dict[str, Any]], None]) -> dict[str, bytes]:
    members = _members(small)
    manifest = json.loads(members["manifest.json"])
    change(manifest)
    members["manifest.json"] = json.dumps(manifest).encode()
    return members


def test_unlisted_bomb_members_are_rejected_before_inflating(small: Path, tmp_path: Path) -> None:
    path = tmp_path / "bomb.hbundle"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in _members(small).items():
            archive.writestr(name, data)
        for i in range(4):  # 4 x 200 MiB of zeros, each under the per-member limit, under the total
            _add_zeros(archive, f"artifacts/pad/{i}.bin", 200 << 20)
    assert path.stat().st_size < 2 << 20
    report = _inspect_capped(path)
    assert "not listed in the manifest" in report["outcome"] and "artifacts/pad/0.bin" in report["outcome"], report
    assert report["peak_kib"] < 400 << 10, report  # nothing inflated: well under 400 MiB


def test_listed_members_over_the_total_limit_are_rejected_before_inflating(small: Path, tmp_path: Path,
                                                                            monkeypatch: pytest.MonkeyPatch) -> None:
    members = _members(small)
    manifest = json.loads(members.pop("manifest.json"))
    entry = manifest["entries"][0]
    path = tmp_path / "total.hbundle"
    pads = [f"artifacts/pad/{i}.bin" for i in range(6)]
    for i, pad in enumerate(pads):  # six listed 200 MiB artifacts: 1.2 GiB in all, over the total limit
        manifest["entries"].append({**entry, "artifact_path": pad, "artifact_size": 200 << 20, "target": f"pad{i}",
                                    "artifact_kind": "cubin"})
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("manifest.json", json.dumps(manifest))
        for name, data in members.items():
            archive.writestr(name, data)
        for pad in pads:
            _add_zeros(archive, pad, 200 << 20)
    assert path.stat().st_size < 3 << 20
    report = _inspect_capped(path)
    assert "in all" in report["outcome"] and str(bundle.MAX_TOTAL_BYTES) in report["outcome"], report
    assert report["peak_kib"] < 400 << 10, report


def test_a_member_whose_directory_size_lies_is_rejected(small: Path, tmp_path: Path) -> None:
    members = _members(small)
    path = _write(tmp_path / "lying.hbundle", members)
    manifest = json.loads(members["manifest.json"])
    target = next(e for e in manifest["entries"] if e["dialect"] == "opencl")["artifact_path"]
    # Shrink the member's uncompressed size in the central directory only (the data is unchanged).
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(target)
    start = 0
    while True:
        central = data.find(b"PK\x01\x02", start)
        name_len = int.from_bytes(data[central + 28:central + 30], "little")
        if data[central + 46:central + 46 + name_len].decode() == target:
            break
        start = central + 4
    data[central + 24:central + 28] = (info.file_size - 7).to_bytes(4, "little")
    path.write_bytes(bytes(data))
    with pytest.raises(hetero.BundleError, match="size"):
        read_bundle(path)


def test_an_oversized_manifest_is_rejected_before_parsing(tmp_path: Path) -> None:
    path = tmp_path / "manifest-bomb.hbundle"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        _add_zeros(archive, "manifest.json", 64 << 20)
    report = _inspect_capped(path)
    assert "manifest.json" in report["outcome"] and "limit" in report["outcome"], report
    assert report["peak_kib"] < 300 << 10, report


def test_inspect_keeps_only_what_it_checks(small: Path) -> None:
    # Sources and IR are read to check them; artifacts are hashed as they stream past.
    assert read_bundle(small).members  # loading keeps every member for launches
    assert bundle.inspect_bundle(small).entries


def _reorder(manifest: dict[str, Any]) -> None:
    entry = next(e for e in manifest["entries"] if e["dialect"] == "opencl" and "saxpy" in e["kernel"])
    entry["abi"][0], entry["abi"][1] = entry["abi"][1], entry["abi"][0]


def _drop(manifest: dict[str, Any]) -> None:
    next(e for e in manifest["entries"] if e["dialect"] == "opencl")["abi"].pop()


def _axis(manifest: dict[str, Any]) -> None:
    entry = next(e for e in manifest["entries"] if e["dialect"] == "opencl")
    next(a for a in entry["abi"] if a["kind"] == "shape")["axis"] = 1 << 40


def _cpu_extra(manifest: dict[str, Any]) -> None:
    entry = next(e for e in manifest["entries"] if e["dialect"] == "cpu")
    entry["abi"].append({"kind": "shape", "param": entry["abi"][-1]["param"], "dtype": "i64", "axis": 0})


def _scalar_dtype(manifest: dict[str, Any]) -> None:
    entry = next(e for e in manifest["entries"] if e["dialect"] == "opencl" and "saxpy" in e["kernel"])
    entry["abi"][0]["dtype"] = "i64"


def _entry(manifest: dict[str, Any]) -> None:
    next(e for e in manifest["entries"] if e["dialect"] == "opencl")["entry"] = "main); system(\"x\""


def _dialect(manifest: dict[str, Any]) -> None:
    next(e for e in manifest["entries"] if e["dialect"] == "opencl")["dialect"] = "vulkan"


@pytest.mark.parametrize(("change", "message"), [
    (_reorder, "abi"), (_drop, "abi"), (_axis, "abi"), (_cpu_extra, "abi"), (_scalar_dtype, "abi"),
    (_entry, "entry point"), (_dialect, "dialect"),
], ids=["reordered", "dropped", "absurd-axis", "cpu-extra-shape", "scalar-dtype", "entry-name", "dialect"])
def test_a_hash_valid_bundle_with_an_inconsistent_abi_is_rejected_at_load(small: Path, tmp_path: Path,
                                                                          change: Any, message: str) -> None:
    bad = _write(tmp_path / "abi.hbundle", _manifest_with(small, change))
    bundle_registry.unload_all()
    with pytest.raises(hetero.BundleError, match=message) as info:
        hetero.load_bundle(bad)
    assert str(bad) in str(info.value)
    assert not bundle_registry._registry


def test_the_untouched_bundle_loads_and_runs(small: Path, device: hetero.Device) -> None:
    from kernels import corpus

    bundle_registry.unload_all()
    try:
        hetero.load_bundle(small)
        x = hetero.asarray(np.arange(8, dtype=np.float32), device=device)
        y = hetero.zeros(8, device=device)
        corpus.saxpy[8](np.float32(2.0), x, y)
        np.testing.assert_allclose(y.numpy(), 2 * np.arange(8), rtol=1e-6)
    finally:
        bundle_registry.unload_all()


def _in_child(code: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=timeout, cwd=ROOT)


@pytest.mark.parametrize("special", ["/dev/zero", "fifo", "directory"])
def test_only_regular_files_are_opened_as_bundles(tmp_path: Path, special: str) -> None:
    if special == "fifo":
        path = tmp_path / "pipe.hbundle"
        os.mkfifo(path)
    elif special == "directory":
        path = tmp_path / "dir.hbundle"
        path.mkdir()
    else:
        path = Path(special)
    result = _in_child(f"import hetero\ntry:\n    hetero.load_bundle({str(path)!r})\nexcept hetero.BundleError as e:\n"
                       f"    print(e)\n")
    assert "not a regular file" in result.stdout, result.stderr


def test_a_fifo_in_the_cache_dir_is_a_miss_not_a_hang(tmp_path: Path) -> None:
    code = f"""
import os, warnings
from hetero.compiler.build.cache import DiskStorage
storage = DiskStorage({str(tmp_path)!r})
digest = "ab" * 32
os.makedirs(storage.path_of(digest).parent)
os.mkfifo(storage.path_of(digest))
with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter("always")
    print(storage.load(digest), [str(w.message) for w in caught])
storage.store(digest, b"payload")
print(storage.load(digest))
"""
    result = _in_child(code)
    lines = result.stdout.splitlines()
    assert lines and lines[0].startswith("None") and "not a regular file" in lines[0], (result.stdout, result.stderr)
    assert lines[1] == "b'payload'"


def test_a_fifo_where_a_cpu_kernel_module_goes_is_replaced_not_read(tmp_path: Path) -> None:
    target = tmp_path / "module.py"
    os.mkfifo(target)
    code = (f"from pathlib import Path\nfrom hetero.backends.cpu.kernels import _write_atomically\n"
            f"_write_atomically(Path({str(target)!r}), b'x = 1\\n')\nprint(Path({str(target)!r}).read_bytes())\n")
    result = _in_child(code)
    assert result.stdout.strip() == "b'x = 1\\n'", (result.stdout, result.stderr)
