"""Kernel bundles: ``hetero compile`` builds one file for many targets; a fresh process
loads it and runs the kernels on every local device without the compiler; tampered
bundles are rejected; an edited kernel or another arch falls back to compiling."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys
import zipfile
from pathlib import Path
from typing import Any

import pytest
from conftest import ROOT, run_python
from kernels import corpus

import hetero
from hetero.compiler.build import bundle_registry
from hetero.compiler.ir import json_form as ir_json
from hetero.compiler.build.bundle import read_bundle
from hetero.compiler.emit.registry import emitter_for
from hetero.compiler.frontend.signature import format_signature, parse_signature
from hetero.compiler.build.toolchains import HIPCC, NVCC
from hetero.core.errors import CompileError
from hetero.core.target import FEATURES, Target

SIGNATURES = ["saxpy(f32, f32[:], f32[:])", "jacobi(f32[:,:], f32[:,:])", "histogram(i32[:], i64, i32[:])",
              "apply_smoothstep(f32[:], f32[:])"]
KERNELS = [s.split("(")[0] for s in SIGNATURES]


def _emitter_works(dialect: str) -> bool:
    try:
        emitter_for(dialect)
    except CompileError:
        return False
    return True


def bundle_targets() -> list[str]:
    """cpu and opencl always; cuda:sm_90 and rocm:gfx90a where nvcc/hipcc (and the emitters) are here."""
    targets = ["cpu", "opencl"]
    if NVCC.available() and _emitter_works("cuda"):
        targets.append("cuda:sm_90")
    if HIPCC.available() and _emitter_works("hip"):
        targets.append("rocm:gfx90a")
    return targets


def hetero_cli(*args: str, env: dict[str, str] | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run([sys.executable, "-m", "hetero.cli.main", *args], capture_output=True, text=True,
                            env={**os.environ, **(env or {})}, timeout=600, cwd=ROOT, check=False)
    if check and result.returncode != 0:
        raise AssertionError(f"hetero {' '.join(args)} failed ({result.returncode}):\n{result.stdout}\n{result.stderr}")
    return result


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bundle of four corpus kernels, built by the CLI with its own empty cache."""
    folder = tmp_path_factory.mktemp("bundle")
    out = folder / "corpus.hbundle"
    signatures = [arg for sig in SIGNATURES for arg in ("--signature", sig)]
    result = hetero_cli("compile", "tests/kernels/corpus.py", "--targets", ",".join(bundle_targets()), *signatures,
                        "--kernels", ",".join(KERNELS), "-o", str(out), env={"HETERO_CACHE_DIR": str(folder / "cache")})
    assert f"wrote {out}" in result.stdout and f"[{len(KERNELS) * len(bundle_targets())}/" in result.stderr
    return out


def test_inspect_lists_every_kernel_for_every_target(built: Path) -> None:
    manifest = json.loads(hetero_cli("bundle", "inspect", "--json", str(built)).stdout)
    assert manifest["format"] == "hetero-bundle" and manifest["version"] == 1
    entries = manifest["entries"]
    assert {(e["qualname"], e["target"]) for e in entries} == {(k, t) for k in KERNELS for t in bundle_targets()}
    kinds = {e["target"]: e["artifact_kind"] for e in entries}
    want = {"cpu": "python", "opencl": "opencl-c", "cuda:sm_90": "fatbin", "rocm:gfx90a": "hsaco"}
    assert kinds == {target: want[target] for target in bundle_targets()}
    canonical = {format_signature(*parse_signature(s)) for s in SIGNATURES}  # type: ignore[arg-type]
    for entry in entries:
        assert entry["signature"] in canonical and entry["toolchain_version"]
        assert all(len(entry[f"{part}_sha256"]) == 64 for part in ("artifact", "source", "ir", "python_source"))
    text = hetero_cli("bundle", "inspect", str(built)).stdout
    assert "verified" in text and "corpus.saxpy" in text and "saxpy(f32, f32[:], f32[:])" in text


RUN_BUNDLE = """
import json, sys
sys.path.insert(0, {tests!r})
import numpy as np, hetero
from hetero.compiler.build.stats import stats
hetero.load_bundle({bundle!r})
from kernels import corpus
rng = np.random.default_rng(0)
checked = []
for dev in hetero.devices():
    on = lambda a: hetero.asarray(a, device=dev, copy=True)
    x, y = rng.standard_normal(100, dtype=np.float32), rng.standard_normal(100, dtype=np.float32)
    hy = on(y)
    corpus.saxpy[100](2.0, on(x), hy)
    np.testing.assert_allclose(hy.numpy(), 2 * x + y, rtol=1e-6)
    src = rng.standard_normal((12, 10), dtype=np.float32)
    dst = hetero.zeros((12, 10), device=dev)
    corpus.jacobi[(10, 12)](on(src), dst)
    want = src.copy()
    want[1:-1, 1:-1] = 0.25 * (src[:-2, 1:-1] + src[2:, 1:-1] + src[1:-1, :-2] + src[1:-1, 2:])
    np.testing.assert_allclose(dst.numpy(), want, rtol=1e-6, atol=1e-6)
    values = rng.integers(0, 1000, 500, dtype=np.int32)
    counts = hetero.zeros(16, dtype="int32", device=dev)
    corpus.histogram[500](on(values), 16, counts)
    np.testing.assert_array_equal(counts.numpy(), np.bincount(values % 16, minlength=16))
    v = np.linspace(0, 1, 101, dtype=np.float32)
    out = hetero.zeros(101, device=dev)
    corpus.apply_smoothstep[101](on(v), out)
    t = np.clip((v - 0.25) / 0.5, 0, 1)
    np.testing.assert_allclose(out.numpy(), t * t * (3 - 2 * t), rtol=1e-5, atol=1e-6)
    checked.append(dev.name)
print(json.dumps({{"devices": checked, **{{k: v for k, v in vars(stats).items() if not k.startswith("_")}}}}))
"""


def _run_bundle(bundle: Path, cache: Path) -> dict[str, Any]:
    code = RUN_BUNDLE.format(tests=str(ROOT / "tests"), bundle=str(bundle))
    return json.loads(run_python(code, {"HETERO_CACHE_DIR": str(cache)}).stdout.strip().splitlines()[-1])


def test_fresh_process_runs_the_prebuilt_kernels_on_every_device(built: Path, tmp_path: Path) -> None:
    first = _run_bundle(built, tmp_path)
    launches = len(KERNELS) * len(first["devices"])
    assert first["devices"] == [d.name for d in hetero.devices()]
    # No frontend and no JIT compile: every launch was served by the bundle. OpenCL devices
    # build the bundled OpenCL C (device binaries are device-specific); the CPU emits its
    # module from the bundle's IR (bundles never carry Python that would be run).
    assert first["lowered"] == 0 and first["builds"] == 0
    assert first["bundle_hits"] == launches and first["finalized"] == launches
    assert first["emitted"] == len(KERNELS) * first["devices"].count("cpu")
    again = _run_bundle(built, tmp_path)  # the same cache: the finished kernels come from disk
    assert again["lowered"] == again["builds"] == again["finalized"] == 0
    assert again["bundle_hits"] == again["disk_hits"] == launches


def _rewrite(bundle: Path, out: Path, change: Any) -> Path:
    """Copy ``bundle`` to ``out`` with ``change(members)`` applied (a dict name -> bytes)."""
    with zipfile.ZipFile(bundle) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    change(members)
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return out


def _flip_artifact(members: dict[str, bytes]) -> None:
    name = next(n for n in members if n.startswith("artifacts/") or n.endswith(".cl"))
    data = bytearray(members[name])
    data[len(data) // 2] ^= 0x01
    members[name] = bytes(data)


def _edit_manifest(members: dict[str, bytes]) -> None:
    manifest = json.loads(members["manifest.json"])
    manifest["entries"][0]["artifact_sha256"] = "0" * 64
    members["manifest.json"] = json.dumps(manifest).encode()


def _newer_version(members: dict[str, bytes]) -> None:
    manifest = json.loads(members["manifest.json"])
    manifest["version"] = 2
    members["manifest.json"] = json.dumps(manifest).encode()


def _drop_member(members: dict[str, bytes]) -> None:
    del members[next(n for n in members if n.startswith("ir/"))]


@pytest.mark.parametrize(("change", "message"), [
    (_flip_artifact, "does not match its sha256"),
    (_edit_manifest, "does not match its sha256"),
    (lambda m: m.__setitem__("../evil", b"#!/bin/sh\n"), "outside the bundle layout"),
    (lambda m: m.__setitem__("/etc/evil", b"x"), "outside the bundle layout"),
    (lambda m: m.__setitem__("artifacts/extra.bin", b"x"), "not listed in the manifest"),
    (_newer_version, "newer hetero"),
    (_drop_member, "is missing"),
    (lambda m: m.__setitem__("manifest.json", b"{not json"), "bad manifest.json"),
], ids=["flipped-artifact-byte", "edited-manifest-hash", "path-traversal", "absolute-path", "unlisted-member",
        "newer-format", "missing-member", "broken-manifest"])
def test_tampered_bundle_is_rejected(built: Path, tmp_path: Path, change: Any, message: str) -> None:
    bad = _rewrite(built, tmp_path / "bad.hbundle", change)
    with pytest.raises(hetero.BundleError, match=message) as info:
        hetero.load_bundle(bad)
    assert str(bad) in str(info.value)
    assert not bundle_registry._registry  # nothing of a rejected bundle is registered
    result = hetero_cli("bundle", "inspect", str(bad), check=False)
    assert result.returncode == 1 and "rejected" in result.stderr


def test_corrupted_bytes_in_the_archive_are_rejected(built: Path, tmp_path: Path) -> None:
    data = bytearray(built.read_bytes())
    with zipfile.ZipFile(io.BytesIO(bytes(data))) as archive:
        info = next(i for i in archive.infolist() if i.filename.startswith("ir/"))
    data[info.header_offset + 30 + len(info.filename) + 5] ^= 0xFF  # inside the member's stored data
    bad = tmp_path / "corrupt.hbundle"
    bad.write_bytes(bytes(data))
    with pytest.raises(hetero.BundleError, match="rejected"):
        hetero.load_bundle(bad)


CORPUS_SIGNATURES = {
    "saxpy": "f32, f32[:], f32[:]", "daxpy": "f64, f64[:], f64[:]", "matmul_tiled": "f32[:,:], f32[:,:], f32[:,:]",
    "reduce_sum": "f32[:], f32[:]", "reduce_sum_i64": "i64[:], i64[:]", "jacobi": "f32[:,:], f32[:,:]",
    "histogram": "i32[:], i64, i32[:]", "scan_blocks": "i32[:], i32[:]", "softmax_rows": "f32[:,:], f32[:,:]",
    "transpose_tiled": "f32[:,:], f32[:,:]", "mandelbrot": "i32[:,:], i32", "apply_smoothstep": "f32[:], f32[:]",
    "floor_ops": "i32[:], i32[:], i32[:], i32[:]", "triad": "f32[:], f32[:], f32[:], f32",
}


@pytest.mark.parametrize("name", sorted(CORPUS_SIGNATURES))
def test_ir_survives_json_exactly(name: str) -> None:
    kernel = getattr(corpus, name)
    function = kernel._lowered(parse_signature(CORPUS_SIGNATURES[name])[1])
    back = ir_json.load(json.loads(json.dumps(ir_json.dump(function))))
    assert back == function
    for dialect in ("opencl", "cpu"):  # the emitters print the same program from it
        target = Target(dialect, "any", frozenset(FEATURES))
        assert emitter_for(dialect).emit(back, target) == emitter_for(dialect).emit(function, target)


def test_crafted_ir_is_refused() -> None:
    types = parse_signature("f32, f32[:], f32[:]")[1]
    good = ir_json.dump(corpus.saxpy._lowered(types))
    text = json.dumps(good)
    for bad in (text.replace('"name": "i"', '"name": "__import__"', 1),  # a name that is no plain identifier
                text.replace('"op": "<"', '"op": "<\\"); import os; os.system(\\"x"', 1),
                text.replace('"$": "Loc", "file": "', '"$": "Loc", "file": "\\"\\"\\"\\nimport os\\n', 1),
                text.replace('"$": "WorkItem"', '"$": "Interpreter"', 1)):
        assert bad != text
        with pytest.raises(ir_json.IRFormatError):
            ir_json.load(json.loads(bad))
    assert ir_json.load(json.loads(text)) == corpus.saxpy._lowered(types)


def test_lookup_picks_the_arch_and_falls_back_to_the_ir(built: Path, caplog: pytest.LogCaptureFixture) -> None:
    registry = bundle_registry.BundleRegistry()
    registry.add(read_bundle(built))
    types = parse_signature("f32, f32[:], f32[:]")[1]
    features = frozenset(FEATURES)
    cpu = registry.lookup(corpus.saxpy.py_func, types, Target("cpu", "x86_64", features))
    assert cpu is not None and cpu.entry is not None and cpu.source is None and cpu.binary is None
    opencl = registry.lookup(corpus.saxpy.py_func, types, Target("opencl", "some-device", features))
    assert opencl is not None and opencl.source is not None and "__kernel" in opencl.source.text
    if "cuda:sm_90" in bundle_targets():
        exact = registry.lookup(corpus.saxpy.py_func, types, Target("cuda", "sm_90", features))
        assert exact is not None and exact.entry is not None and exact.entry.arch == "sm_90" and exact.binary
        newer = registry.lookup(corpus.saxpy.py_func, types, Target("cuda", "sm_100", features))
        assert newer is not None and newer.entry is not None and newer.entry.arch == "sm_90"  # its PTX runs there
    with caplog.at_level(logging.INFO, logger="hetero.compiler.build.bundle"):
        for _ in range(2):
            other = registry.lookup(corpus.saxpy.py_func, types, Target("cuda", "sm_75", features))
            assert other is not None and other.entry is None and other.function.name == "saxpy"
    said = [r.getMessage() for r in caplog.records if "no prebuilt artifact" in r.getMessage()]
    assert len(said) == 1 and "sm_75" in said[0] and "bundle's IR" in said[0]  # said once
    assert registry.lookup(corpus.saxpy.py_func, parse_signature("f64, f64[:], f64[:]")[1],
                           Target("cpu", "x86_64", features)) is None  # a signature it lacks: compile from Python


def test_another_target_compiles_from_the_bundled_ir(tmp_path: Path) -> None:
    out = tmp_path / "opencl-only.hbundle"
    hetero_cli("compile", "tests/kernels/corpus.py", "--targets", "opencl", "--kernels", "saxpy",
               "--signature", SIGNATURES[0], "-o", str(out), "-q", env={"HETERO_CACHE_DIR": str(tmp_path / "c1")})
    code = f"""
import json, sys
sys.path.insert(0, {str(ROOT / 'tests')!r})
import numpy as np, hetero
from hetero.compiler.build.stats import stats
hetero.load_bundle({str(out)!r})
from kernels import corpus
y = hetero.zeros(8, device="cpu")
corpus.saxpy[8](2.0, hetero.asarray(np.arange(8, dtype=np.float32), device="cpu"), y)
print(json.dumps({{"y": y.numpy().tolist(), "lowered": stats.lowered, "emitted": stats.emitted, "builds": stats.builds}}))
"""
    result = run_python(code, {"HETERO_CACHE_DIR": str(tmp_path / "c2"), "HETERO_LOG": "INFO"})
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report == {"y": [2.0 * i for i in range(8)], "lowered": 0, "emitted": 1, "builds": 1}
    assert "no prebuilt artifact" in result.stderr and "compiling it from the bundle's IR" in result.stderr


KERNEL_MODULE = '''
import hetero
from hetero import f32

SCALE = 2.0


@hetero.kernel
def scale(x: hetero.Array[f32], out: hetero.Array[f32]):
    i = hetero.global_id(0)
    if i < x.shape[0]:
        out[i] = SCALE * x[i]
'''


def test_a_kernel_edited_after_bundling_is_compiled_from_source(tmp_path: Path) -> None:
    module = tmp_path / "mykernels.py"
    module.write_text(KERNEL_MODULE)
    out = tmp_path / "my.hbundle"
    hetero_cli("compile", str(module), "--targets", "cpu,opencl", "--signature", "f32[:], f32[:]", "-o", str(out), "-q")
    code = f"""
import json, sys
sys.path.insert(0, {str(tmp_path)!r})
import numpy as np, hetero
from hetero.compiler.build.stats import stats
hetero.load_bundle({str(out)!r})
import mykernels
y = hetero.zeros(4, device="cpu")
mykernels.scale[4](hetero.asarray(np.ones(4, dtype=np.float32), device="cpu"), y)
print(json.dumps({{"y": y.numpy().tolist(), "lowered": stats.lowered, "bundle_hits": stats.bundle_hits}}))
"""
    unchanged = json.loads(run_python(code, {"HETERO_CACHE_DIR": str(tmp_path / "c1")}).stdout.strip().splitlines()[-1])
    assert unchanged == {"y": [2.0] * 4, "lowered": 0, "bundle_hits": 1}
    module.write_text(KERNEL_MODULE.replace("SCALE = 2.0", "SCALE = 3.0"))  # a constant the kernel reads
    result = run_python(code, {"HETERO_CACHE_DIR": str(tmp_path / "c2"), "HETERO_LOG": "INFO"})
    edited = json.loads(result.stdout.strip().splitlines()[-1])
    assert edited == {"y": [3.0] * 4, "lowered": 1, "bundle_hits": 0}
    assert "changed since" in result.stderr and "compiling it from its Python source" in result.stderr


def test_compile_asks_for_a_signature_when_annotations_do_not_fix_one() -> None:
    result = hetero_cli("compile", "tests/kernels/corpus.py", "--targets", "cpu", "--kernels", "jacobi", "-o",
                        "/nonexistent/x.hbundle", check=False)
    assert result.returncode == 1 and "jacobi" in result.stderr and "--signature" in result.stderr


def test_compile_names_a_missing_toolchain_and_how_to_install_it(tmp_path: Path) -> None:
    result = hetero_cli("compile", "tests/kernels/corpus.py", "--targets", "cuda:sm_90,cpu", "--kernels", "saxpy",
                        "--signature", SIGNATURES[0], "-o", str(tmp_path / "x.hbundle"), env={"PATH": ""}, check=False)
    assert result.returncode == 1 and "nvcc not found" in result.stderr and "CUDA Toolkit" in result.stderr
    assert not (tmp_path / "x.hbundle").exists()


@pytest.mark.skipif(not HIPCC.available() or not _emitter_works("hip"), reason="needs hipcc and the HIP emitter")
def test_a_failing_target_fails_the_build_unless_keep_going(tmp_path: Path) -> None:
    """This hipcc (ROCm 5.2) does not know gfx942: the error names the target and shows hipcc's log."""
    args = ["compile", "tests/kernels/corpus.py", "--targets", "rocm:gfx942,cpu", "--kernels", "saxpy",
            "--signature", SIGNATURES[0], "-o", str(tmp_path / "x.hbundle"), "-q"]
    failed = hetero_cli(*args, check=False)
    if failed.returncode == 0:
        pytest.skip("this hipcc knows gfx942")
    assert "rocm:gfx942" in failed.stderr and "gfx942" in failed.stderr.split("options:")[-1]
    assert not (tmp_path / "x.hbundle").exists()
    hetero_cli(*args, "--keep-going")
    listing = hetero_cli("bundle", "inspect", str(tmp_path / "x.hbundle")).stdout
    assert "missing" in listing and "rocm:gfx942" in listing.split("missing")[-1]


def test_keep_going_leaves_out_a_kernel_that_failed_everywhere(tmp_path: Path) -> None:
    from hetero.compiler.build.bundle_build import KernelSpec, build_bundle, parse_targets

    good = KernelSpec(corpus.triad.py_func, (parse_signature("f32[:], f32[:], f32[:], f32")[1],))
    bad = KernelSpec(corpus.saxpy.py_func, (parse_signature("f64, f64[:], f64[:]")[1],))  # declared f32
    with pytest.raises(hetero.BundleBuildError, match="declared f32"):
        build_bundle([good, bad], parse_targets("cpu,opencl"), tmp_path / "strict.hbundle", progress=None)
    assert not (tmp_path / "strict.hbundle").exists()
    report = build_bundle([good, bad], parse_targets("cpu,opencl"), tmp_path / "x.hbundle", keep_going=True,
                          progress=None)
    manifest = read_bundle(tmp_path / "x.hbundle").manifest  # verifies: no stray members
    assert {e.qualname for e in manifest.entries} == {"triad"} and len(report.manifest.missing) == 2
    assert all("declared f32" in m.error for m in manifest.missing)


def test_cupy_runtime_loads_prebuilt_images_and_launches_exact_grids() -> None:
    """The CUDA/ROCm loading hook against a stand-in for CuPy (no GPU here): an image goes to
    Module.load, the entry is looked up, and grids cover the global size exactly."""
    import types

    from hetero.backends.cupy.runtime import CuPyRuntime
    from hetero.core.device import DeviceInfo, Kind

    loaded: list[bytes] = []
    launched: list[tuple[Any, ...]] = []

    class Module:
        def load(self, image: bytes) -> None:
            loaded.append(image)

        def get_function(self, name: str) -> Any:
            return lambda grid, block, args: launched.append((name, grid, block, args))

    class Device:
        def __init__(self, index: int) -> None:
            pass

        def __enter__(self) -> None:
            return None

        def __exit__(self, *exc: object) -> None:
            return None

    error = type("CUDAError", (Exception,), {})
    cuda = types.SimpleNamespace(Device=Device, function=types.SimpleNamespace(Module=Module),
                                 driver=types.SimpleNamespace(CUDADriverError=error),
                                 memory=types.SimpleNamespace(OutOfMemoryError=error),
                                 runtime=types.SimpleNamespace(CUDARuntimeError=error))
    info = DeviceInfo(name="rocm:0", backend="rocm", index=0, vendor="AMD", kind=Kind.GPU, model="MI210", memory=1 << 30,
                      compute_units=104, max_work_group_size=1024, fp64=True, driver_version="", stable_id="x",
                      extra={"arch": "gfx90a:sramecc+:xnack-"})
    runtime = CuPyRuntime(types.SimpleNamespace(cuda=cuda), info, "hip 5.2")
    assert runtime.kernel_target() == Target("hip", "gfx90a", frozenset(FEATURES), "hip 5.2")
    source = types.SimpleNamespace(entry="hetero_saxpy", text="", options=())
    kernel, to_cache = runtime.build_kernel(source, b"\x7fELF image", Path("/unused"))
    assert loaded == [b"\x7fELF image"] and to_cache is None
    runtime.launch(kernel, (1000,), None, [1])
    runtime.launch(kernel, (24, 32), (8, 8), [1])
    assert [(grid, block) for _, grid, block, _ in launched] == [((4,), (250,)), ((3, 4), (8, 8))]
