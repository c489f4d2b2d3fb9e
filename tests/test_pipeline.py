"""The one compile pipeline: launches and bundle builds make their cache keys with the same
function, each named part changes the key, and a record never shares a key with an artifact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.compiler.build import pipeline
from hetero.compiler.build.bundle_build import BuildTarget, KernelSpec, build_bundle
from hetero.compiler.build.cache import Cache, MemoryStorage
from hetero.compiler.emit.base import EmittedSource
from hetero.compiler.build.pipeline import ARTIFACT, RECORD, compile_key
from hetero.compiler.frontend.signature import parse_signature
from hetero.compiler.frontend.source import source_fingerprint
from hetero.compiler.build.toolchains import CommandToolchain

BASE: dict[str, Any] = {"dialect": "opencl", "arch": "dev-1", "toolchain": "driver 1", "options": ("-O2",),
                        "signature": "k(f32[:])", "features": ("fp64",), "restrict": True, "tool": "runtime",
                        "kind": ""}


@pytest.mark.parametrize(("part", "other"), [
    ("dialect", "cuda"), ("arch", "dev-2"), ("toolchain", "driver 2"), ("options", ("-O3",)),
    ("signature", "k(f64[:])"), ("features", ("fp64", "int64_atomics")), ("restrict", False), ("tool", "nvcc"),
    ("kind", "fatbin"),
])
def test_every_part_changes_the_key(part: str, other: Any) -> None:
    for stage in (RECORD, ARTIFACT):
        assert compile_key(stage, "a" * 64, **BASE) != compile_key(stage, "a" * 64, **{**BASE, part: other})


def test_what_the_product_is_made_from_and_its_stage_change_the_key() -> None:
    assert compile_key(ARTIFACT, "source one", **BASE).digest != compile_key(ARTIFACT, "source two", **BASE).digest
    assert compile_key(RECORD, "a" * 64, **BASE).digest != compile_key(RECORD, "b" * 64, **BASE).digest
    assert compile_key(RECORD, "a" * 64, **BASE).digest != compile_key(ARTIFACT, "a" * 64, **BASE).digest
    assert compile_key(ARTIFACT, "same", **BASE).digest == compile_key(ARTIFACT, "same", **BASE).digest


def test_the_key_names_its_parts_and_refuses_a_bad_stage() -> None:
    parts = compile_key(ARTIFACT, "text", **{**BASE, "restrict": False}).parts()
    assert parts["stage"] == "artifact" and parts["aliasing"] == "may-alias" and parts["signature"] == "k(f32[:])"
    assert parts["hetero"] == hetero.__version__
    with pytest.raises(ValueError, match="stage must be one of"):
        compile_key("binary", "text", **BASE)
    with pytest.raises(ValueError, match="needs the kernel signature"):
        compile_key(RECORD, "a" * 64, **{**BASE, "signature": ""})


@hetero.kernel
def scale(x: hetero.Array[hetero.f32], y: hetero.Array[hetero.f32]):
    i = hetero.global_id(0)
    if i < x.shape[0]:
        y[i] = 2.0 * x[i]


def _counting(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    stages: list[str] = []
    real = pipeline.compile_key

    def counted(stage: str, *args: Any, **kwargs: Any) -> Any:
        stages.append(stage)
        return real(stage, *args, **kwargs)

    monkeypatch.setattr(pipeline, "compile_key", counted)
    return stages


def test_a_launch_keys_its_record_and_artifact_with_compile_key(monkeypatch: pytest.MonkeyPatch) -> None:
    private = Cache(MemoryStorage())
    monkeypatch.setattr(pipeline, "default_cache", lambda: private)
    stages = _counting(monkeypatch)
    x = hetero.asarray(np.arange(4, dtype=np.float32), device="cpu")
    y = hetero.zeros(4, device="cpu")
    fresh = hetero.kernel(scale.py_func)  # its own dispatch table: this launch compiles
    fresh[4](x, y)
    np.testing.assert_array_equal(y.numpy(), [0.0, 2.0, 4.0, 6.0])
    assert source_fingerprint(scale.py_func).keyed
    assert stages == [RECORD, ARTIFACT]


class UpperCompiler(CommandToolchain):
    """A toolchain that upper-cases the source (a Python one-liner), for an offline build."""

    name = "uppercc"
    dialect = "opencl"
    tools = ()

    def artifact_kind(self, arch: str) -> str:
        return "upper"

    def _query_version(self, paths: Any) -> str:
        return "uppercc 1.0"

    def commands(self, paths: Any, src: Path, out: Path, arch: str, options: Any) -> list[list[str]]:
        import sys

        code = "import sys; open(sys.argv[2], 'w').write(open(sys.argv[1]).read().upper())"
        return [[sys.executable, "-c", code, str(src), str(out)]]


def test_an_offline_build_keys_its_artifact_with_compile_key(monkeypatch: pytest.MonkeyPatch) -> None:
    stages = _counting(monkeypatch)
    cache = Cache(MemoryStorage())
    source = EmittedSource("opencl", "hetero_k", "kernel void hetero_k() {}", ())
    artifact, cached = pipeline.build_artifact(UpperCompiler(), source, "x", cache=cache, signature="k()")
    assert artifact.data == b"KERNEL VOID HETERO_K() {}" and not cached
    assert pipeline.build_artifact(UpperCompiler(), source, "x", cache=cache, signature="k()")[1] is True
    assert stages == [ARTIFACT, ARTIFACT]


def test_a_bundle_build_goes_through_the_pipeline(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    lowered: list[Any] = []
    real = pipeline.lower

    def counted(py_func: Any, types: Any) -> Any:
        lowered.append(types)
        return real(py_func, types)

    monkeypatch.setattr(pipeline, "lower", counted)
    types = parse_signature("f32[:], f32[:]")[1]
    report = build_bundle([KernelSpec(scale.py_func, (types,))], [BuildTarget("cpu", "any")], tmp_path / "b.hbundle",
                          progress=None)
    assert lowered == [types] and [e.target for e in report.manifest.entries] == ["cpu"]


def test_a_record_with_a_malformed_artifact_key_is_ignored() -> None:
    cache = Cache(MemoryStorage())
    key = compile_key(RECORD, "c" * 64, **BASE)
    source = {"dialect": "cpu", "entry": "k", "text": "", "options": [], "abi": []}
    cache.put(key, json.dumps({"source": source, "key": "../../etc/passwd"}).encode())
    assert pipeline._read_record(cache, key) is None
    cache.put(key, json.dumps({"source": source, "key": "d" * 64}).encode())
    recorded = pipeline._read_record(cache, key)
    assert recorded is not None and recorded[1] == "d" * 64
