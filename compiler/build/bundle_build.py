"""Building a kernel bundle: every kernel, for every signature, for every target, in one run.

Kernels are lowered and emitted through :mod:`hetero.compiler.build.pipeline` (Python work, one
thread); the toolchains then run in parallel (they are subprocesses, so threads suffice) with
a progress bar on stderr. Artifacts go through the kernel cache under the pipeline's keys,
which include the toolchain's version.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import datetime
import functools
import json
import os
import re
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

from hetero._version import __version__
from hetero.core.errors import BundleBuildError, CompileError, HeteroError, ToolchainNotFoundError, did_you_mean
from hetero.core.target import FEATURES, Target
from hetero.core.types import ArrayType, ScalarType

from hetero.compiler.frontend import python as frontend
from hetero.compiler.ir import nodes as ir, json_form as ir_json
from hetero.compiler.build import pipeline
from hetero.compiler.build.bundle import BundleEntry, Manifest, MissingEntry, sha256, write_bundle
from hetero.compiler.build.cache import Cache
from hetero.compiler.emit.base import EmittedSource
from hetero.compiler.frontend.signature import format_signature
from hetero.compiler.frontend.source import fingerprint
from hetero.compiler.build.toolchains import DEFAULT_TIMEOUT, Artifact, Toolchain, toolchain_for

ParamType = ScalarType | ArrayType
_PLATFORMS = {"cuda": "cuda", "rocm": "hip", "hip": "hip", "opencl": "opencl", "cpu": "cpu"}
_SOURCE_SUFFIX = {"cuda": ".cu", "hip": ".hip", "opencl": ".cl", "cpu": ".py"}
_TARGET_HELP = "cuda:sm_XX, rocm:gfxXXXX, opencl, opencl:spirv64 or cpu"


@dataclasses.dataclass(frozen=True)
class BuildTarget:
    """What ``--targets`` names: ``cuda:sm_90`` is dialect ``cuda``, arch ``sm_90``; ``rocm:gfx90a``
    is dialect ``hip``; ``opencl`` and ``cpu`` are portable source (arch ``any``)."""

    dialect: str
    arch: str

    @property
    def name(self) -> str:
        platform = "rocm" if self.dialect == "hip" else self.dialect
        return platform if self.arch == "any" else f"{platform}:{self.arch}"

    @property
    def toolchain(self) -> Toolchain:
        return toolchain_for(self.dialect, self.arch)


def parse_target(text: str) -> BuildTarget:
    platform, _, arch = text.strip().partition(":")
    dialect = _PLATFORMS.get(platform.lower())
    if dialect is None:
        raise CompileError(f"unknown target {text!r}; write {_TARGET_HELP}{did_you_mean(platform, _PLATFORMS)}")
    if dialect in ("cuda", "hip") and not arch:
        raise CompileError(f"target {text!r} needs an architecture, e.g. cuda:sm_90 or rocm:gfx90a")
    target = BuildTarget(dialect, arch or "any")
    target.toolchain.check_arch(target.arch)
    return target


def parse_targets(specs: str | Sequence[str]) -> list[BuildTarget]:
    """``"cuda:sm_80,rocm:gfx90a,cpu"`` (or a list of such strings) -> targets, duplicates dropped."""
    texts = [specs] if isinstance(specs, str) else list(specs)
    found: dict[BuildTarget, None] = {}
    for text in texts:
        for part in filter(None, (p.strip() for p in text.split(","))):
            found.setdefault(parse_target(part))
    if not found:
        raise CompileError(f"no targets given; write {_TARGET_HELP}")
    return list(found)


@dataclasses.dataclass(frozen=True)
class KernelSpec:
    """A kernel to bundle: its Python function and the signatures to build it for."""

    py_func: Callable[..., Any]
    signatures: tuple[tuple[ParamType, ...], ...]

    @property
    def qualname(self) -> str:
        return str(self.py_func.__qualname__)

    @property
    def display(self) -> str:
        return f"{self.py_func.__module__}.{self.py_func.__qualname__}"

    @functools.cached_property
    def fingerprint(self) -> str:
        return fingerprint(self.py_func)


def default_signature(py_func: Callable[..., Any]) -> tuple[ParamType, ...] | None:
    """The signature the annotations fix (every parameter annotated, every array's rank known), or None."""
    declared = frontend.declared_types(py_func)
    if any(t is None or (isinstance(t, ArrayType) and t.ndim is None) for t in declared):
        return None
    return tuple(t for t in declared if t is not None)


def check_signature(py_func: Callable[..., Any], types: tuple[ParamType, ...]) -> None:
    """CompileError when ``types`` do not fit the kernel's parameters and annotations."""
    declared = frontend.declared_types(py_func)
    name = py_func.__name__
    shown = format_signature(name, types)
    if len(types) != len(declared):
        raise CompileError(f"signature {shown} has {len(types)} parameter(s); {name} takes {len(declared)}")
    params = [a.arg for a in frontend.function_source(py_func).tree.args.args]
    for param, want, got in zip(params, declared, types, strict=True):
        if isinstance(got, ArrayType) and got.ndim is None:
            raise CompileError(f"signature {shown}: give the rank of array {param!r} (f32[:], f32[:, :], …)")
        fits = want is None or want == got or (
            isinstance(want, ArrayType) and isinstance(got, ArrayType) and want.dtype == got.dtype and want.ndim is None)
        if not fits:
            raise CompileError(f"signature {shown}: parameter {param!r} is declared {want}, not {got}")


@dataclasses.dataclass
class BuildReport:
    """What :func:`build_bundle` did: the manifest written, wall time, per target the seconds
    its toolchain ran (summed over kernels, failed runs included), and how many artifacts
    came from the cache."""

    path: Path
    manifest: Manifest
    wall_seconds: float
    target_seconds: dict[str, float]
    cached: int


@dataclasses.dataclass
class _Job:
    spec: KernelSpec
    signature: str
    target: BuildTarget
    tag: str
    function: ir.Function | None
    ir_path: str
    source: EmittedSource | None = None
    artifact: Artifact | None = None
    cached: bool = False
    seconds: float = 0.0
    error: str = ""

    @property
    def label(self) -> str:
        return f"{self.spec.display}: {self.signature} for {self.target.name}"


def build_bundle(kernels: Sequence[KernelSpec], targets: Sequence[BuildTarget], output: Path | str, *,
                 jobs: int | None = None, keep_going: bool = False, cache: Cache | None = None,
                 progress: TextIO | None = sys.stderr, timeout: float = DEFAULT_TIMEOUT) -> BuildReport:
    """Build every kernel of ``kernels`` for every signature and target, in parallel, and write
    one bundle to ``output``. A failure raises BundleBuildError naming each (kernel, target)
    with its log, and writes nothing; with ``keep_going`` failures are recorded in the
    manifest's ``missing`` list instead."""
    started = time.perf_counter()
    versions, unusable = _toolchain_versions(targets, keep_going)
    members: dict[str, bytes] = {}
    planned: list[_Job] = []
    for spec in kernels:
        for types in spec.signatures:
            planned += _plan_kernel(spec, types, targets, unusable, versions, members)
    failed = [job for job in planned if job.error]
    runnable = [job for job in planned if not job.error]
    bar = _ProgressBar(len(runnable), progress)
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, jobs or os.cpu_count() or 1)) as pool:
        futures = {pool.submit(_run_job, job, cache, timeout): job for job in runnable}
        for future in concurrent.futures.as_completed(futures):
            job = futures[future]
            future.result()
            bar.step(f"{job.spec.qualname} {job.target.name}", ok=not job.error, seconds=job.seconds, cached=job.cached)
            if job.error:
                failed.append(job)
    bar.close()
    if failed and not keep_going:
        raise BundleBuildError([(j.label, j.error) for j in failed], len(planned))
    built = [job for job in planned if not job.error]
    if not built:
        raise BundleBuildError([(j.label, j.error) for j in failed] or
                               [("(nothing)", "no kernels to build")], len(planned))
    entries = sorted((_entry(job, versions[job.target], members) for job in built),
                     key=lambda e: (e.kernel, e.signature, e.target))
    listed = {path for e in entries for path in (e.ir_path, e.source_path, e.artifact_path)}
    members = {name: data for name, data in members.items() if name in listed}  # no IR of kernels that all failed
    missing = tuple(sorted((MissingEntry(j.spec.display, j.signature, j.target.name, j.error) for j in failed),
                           key=lambda m: (m.kernel, m.signature, m.target)))
    manifest = Manifest(__version__, datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                        tuple(t.name for t in targets), tuple(entries), missing)
    path = Path(output)
    write_bundle(path, manifest, members)
    seconds: dict[str, float] = {target.name: 0.0 for target in targets}
    for job in runnable:  # failed runs took time too
        seconds[job.target.name] += job.seconds
    return BuildReport(path, manifest, time.perf_counter() - started, seconds, sum(job.cached for job in built))


def _toolchain_versions(targets: Sequence[BuildTarget], keep_going: bool) -> tuple[dict[BuildTarget, str], dict[BuildTarget, str]]:
    """Each target's toolchain version, asked once; missing toolchains fail now, or with
    ``keep_going`` are returned as unusable (target -> why)."""
    versions: dict[BuildTarget, str] = {}
    unusable: dict[BuildTarget, str] = {}
    for target in targets:
        try:
            versions[target] = target.toolchain.version()
        except ToolchainNotFoundError as exc:
            if not keep_going:
                raise ToolchainNotFoundError(exc.tool, f"for target {target.name} ({exc.purpose})", exc.install_hint) from None
            unusable[target] = str(exc)
    return versions, unusable


def _plan_kernel(spec: KernelSpec, types: tuple[ParamType, ...], targets: Sequence[BuildTarget],
                 unusable: dict[BuildTarget, str], versions: dict[BuildTarget, str],
                 members: dict[str, bytes]) -> list[_Job]:
    """Lower one kernel signature, store its IR, and emit its source for each target."""
    signature = format_signature(spec.py_func.__name__, types)
    tag = f"{_safe(spec.qualname)}/{sha256(signature.encode())[:12]}"
    ir_path = f"ir/{tag}.json"
    try:
        check_signature(spec.py_func, types)
        function = pipeline.lower(spec.py_func, types)
        text = json.dumps(ir_json.dump(function), separators=(",", ":"))
        # Compared as text: NaN constants are never equal to themselves, file names are made safe.
        if json.dumps(ir_json.dump(ir_json.load(json.loads(text))), separators=(",", ":")) != text:
            raise CompileError(f"{signature}: the IR does not survive serialization (a hetero bug; please report it)")
    except (HeteroError, ValueError) as exc:
        return [_Job(spec, signature, target, tag, None, ir_path, error=str(exc)) for target in targets]
    members[ir_path] = text.encode("utf-8")
    jobs = []
    for target in targets:
        job = _Job(spec, signature, target, tag, function, ir_path)
        if target in unusable:
            job.error = unusable[target]
        else:
            try:
                job.source = pipeline.emit(function, Target(target.dialect, target.arch, frozenset(FEATURES),
                                                            versions[target]))
            except HeteroError as exc:
                job.error = str(exc)
        jobs.append(job)
    return jobs


def _run_job(job: _Job, cache: Cache | None, timeout: float) -> None:
    assert job.source is not None  # planned jobs without an error have their source
    start = time.perf_counter()
    try:
        job.artifact, job.cached = pipeline.build_artifact(job.target.toolchain, job.source, job.target.arch, cache=cache,
                                                           signature=job.signature, timeout=timeout)
    except HeteroError as exc:
        job.error = str(exc)
    job.seconds = time.perf_counter() - start


def _entry(job: _Job, version: str, members: dict[str, bytes]) -> BundleEntry:
    assert job.source is not None and job.artifact is not None and job.function is not None
    target_tag = _safe(job.target.name.replace(":", "-"))
    source_bytes = job.source.text.encode("utf-8")
    source_path = f"sources/{job.tag}/{target_tag}{_SOURCE_SUFFIX[job.target.dialect]}"
    members[source_path] = source_bytes
    if job.artifact.data == source_bytes:  # portable source: the artifact is the source
        artifact_path = source_path
    else:
        artifact_path = f"artifacts/{job.tag}/{target_tag}.{job.artifact.kind}"
        members[artifact_path] = job.artifact.data
    requires = sorted(job.function.features & set(FEATURES))
    return BundleEntry(
        kernel=job.spec.display, qualname=job.spec.qualname, python_source_sha256=job.spec.fingerprint,
        signature=job.signature, dialect=job.target.dialect, target=job.target.name, arch=job.target.arch,
        toolchain=job.target.toolchain.name, toolchain_version=version, entry=job.source.entry, abi=job.source.abi,
        options=job.source.options, requires=tuple(requires), ir_path=job.ir_path,
        ir_sha256=sha256(members[job.ir_path]), source_path=source_path, source_sha256=sha256(source_bytes),
        artifact_path=artifact_path, artifact_sha256=sha256(job.artifact.data), artifact_kind=job.artifact.kind,
        artifact_size=len(job.artifact.data))


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", name).lstrip(".") or "_"


class _ProgressBar:
    """``[#######.......] 12/36 saxpy cuda:sm_80`` redrawn in place on a terminal; one line per
    finished build otherwise (logs, CI)."""

    WIDTH = 28

    def __init__(self, total: int, stream: TextIO | None) -> None:
        self.total = total
        self.done = 0
        self.stream = stream
        self.live = bool(stream is not None and getattr(stream, "isatty", lambda: False)())
        self._width = 0

    def step(self, label: str, *, ok: bool, seconds: float, cached: bool) -> None:
        self.done += 1
        if self.stream is None:
            return
        status = "FAILED" if not ok else ("cached" if cached else f"{seconds:.2f} s")
        if self.live:
            filled = self.WIDTH * self.done // max(self.total, 1)
            line = f"[{'#' * filled}{'.' * (self.WIDTH - filled)}] {self.done}/{self.total} {label} ({status})"
            self.stream.write("\r" + line.ljust(self._width))
            self._width = len(line)
        else:
            self.stream.write(f"[{self.done}/{self.total}] {label} ({status})\n")
        self.stream.flush()

    def close(self) -> None:
        if self.stream is not None and self.live and self.done:
            self.stream.write("\n")
            self.stream.flush()


__all__ = ["BuildReport", "BuildTarget", "KernelSpec", "build_bundle", "check_signature", "default_signature",
           "parse_target", "parse_targets"]
