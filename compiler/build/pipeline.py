"""The one compile pipeline: Python kernel -> IR -> passes -> source for a target -> the
vendor's compiler -> artifact, with one cache-key scheme, for launches (JIT) and bundles (AOT).

:func:`compile_key` is the only place a compile-cache key is made. It has named parts: what
the product is made from (``ir``: the kernel's source fingerprint for a record, the sha256 of
the emitted source for an artifact), dialect, target arch, toolchain version, options, hetero
version, and as extra parts the ``stage`` (``record`` or ``artifact``), the kernel signature,
the target's features (``fp64``, ``fp16``, ``int64_atomics``: what the emitter may use), the
aliasing variant (``restrict`` or ``may-alias``), the compiling tool and the artifact kind.

- A launch (:func:`compile_for_device`) reads a *record* (the emitted source and its artifact
  key, keyed by the source fingerprint, so a warm process skips the frontend and the emitter),
  else lowers and emits; then the device's runtime builds the source, through the cache.
- A kernel made as IR by code (:func:`compile_function`) is keyed by the sha256 of its IR as JSON.
- A bundle (:func:`lower`, :func:`emit`, :func:`build_artifact`) lowers once per signature,
  emits per target, and runs the offline toolchain through the cache.

This module knows targets and runtimes only through :class:`hetero.core.target.Target` and
:class:`hetero.core.plugin.DeviceRuntime`; it never imports a backend.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import sys
import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

from hetero.core.build_progress import building
from hetero.core.config import get_config
from hetero.core.plugin import DeviceRuntime
from hetero.core.target import Target
from hetero.core.types import ArrayType, ScalarType

from hetero.compiler.build import bundle_registry
from hetero.compiler.frontend import python as frontend
from hetero.compiler.ir import nodes as ir, json_form as ir_json, passes
from hetero.compiler.build.cache import Cache, CacheKey, default_cache
from hetero.compiler.build.limits import check_work_group_memory
from hetero.compiler.emit.base import EmittedSource, source_from_json, source_to_json, work_group_arrays
from hetero.compiler.emit.registry import emitter_for
from hetero.compiler.frontend.signature import format_signature
from hetero.compiler.frontend.source import Fingerprint
from hetero.compiler.build.stats import stats
from hetero.compiler.build.toolchains import DEFAULT_TIMEOUT, Artifact, Toolchain

ParamType = ScalarType | ArrayType

#: The ``stage`` key part: a record maps a kernel's fingerprint and signature to its emitted
#: source; an artifact is what a vendor compiler made of one emitted source.
RECORD = "record"
ARTIFACT = "artifact"
#: The ``tool`` key part of artifacts a device runtime builds at launch (NVRTC, hipRTC, an
#: OpenCL driver, Numba); offline builds name their toolchain (``nvcc``, ``hipcc``).
RUNTIME_TOOL = "runtime"
_STAGES = (RECORD, ARTIFACT)
_DIGEST = re.compile(r"[0-9a-f]{64}")


def compile_key(stage: str, made_from: str, *, dialect: str, arch: str, toolchain: str,
                options: Sequence[str] = (), signature: str = "", features: Iterable[str] = (),
                restrict: bool = True, tool: str = RUNTIME_TOOL, kind: str = "", checks: str = "") -> CacheKey:
    """The cache key of one compile product: a ``record`` (``made_from`` is the kernel's source
    fingerprint digest; ``signature`` is required) or an ``artifact`` (``made_from`` is the
    emitted source text, hashed here). ``restrict=False`` is the variant whose array
    parameters may alias; ``tool`` and ``kind`` name who built the artifact and what it is;
    ``checks="bounds"`` is the checked variant (:mod:`hetero.compiler.ir.bounds`), a part only then."""
    if stage not in _STAGES:
        raise ValueError(f"compile_key: stage must be one of {_STAGES}, got {stage!r}")
    if stage == RECORD and not signature:
        raise ValueError("compile_key: a record key needs the kernel signature it was emitted for")
    parts = {"stage": stage, "signature": signature, "features": ",".join(sorted(features)),
             "aliasing": "restrict" if restrict else "may-alias", "tool": tool, "kind": kind}
    if checks:
        parts["checks"] = checks
    if stage == RECORD:  # the source emitted for it depends on the code generator too
        parts["codegen"] = codegen_digest()
        return CacheKey(made_from, dialect, arch, toolchain, tuple(options), extra=tuple(parts.items()))
    return CacheKey.from_ir(made_from, dialect=dialect, target=arch, toolchain=toolchain, options=options, **parts)


def codegen_files() -> list[Path]:
    """The source files whose code decides what a kernel compiles to: every module of the compiler
    (frontend, IR and its passes, emitters, build, the array kernels' builders) and of the kernel
    language (``hetero/language``, ``hetero/math.py``), sorted."""
    compiler = Path(__file__).resolve().parents[1]
    package = Path(sys.modules["hetero"].__file__ or "").resolve().parent
    found = [*compiler.rglob("*.py"), *(package / "language").rglob("*.py"), package / "math.py"]
    return sorted({p.resolve() for p in found if "__pycache__" not in p.parts and p.is_file()})


@functools.cache
def codegen_digest() -> str:
    """The sha256 (16 hex digits) of :func:`codegen_files`. A record of the source emitted for a kernel
    is reused only by the code generator that wrote it, even within one hetero version (a development
    build, another checkout): a changed frontend, pass or emitter re-emits, and the new source text
    keys new artifacts. Read once per process (a few milliseconds)."""
    digest = hashlib.sha256()
    compiler = Path(__file__).resolve().parents[2]
    for path in codegen_files():
        try:
            name = path.relative_to(compiler).as_posix()
        except ValueError:
            name = path.as_posix()
        digest.update(name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


# -- the stages both paths share ------------------------------------------------------------
def lower(py_func: Callable[..., Any], types: tuple[ParamType, ...]) -> ir.Function:
    """The kernel's optimised IR for ``types`` (the frontend, then the passes)."""
    stats.add("lowered")
    return passes.optimize(frontend.lower_kernel(py_func, types))


def emit(function: ir.Function, target: Target, *, restrict: bool = True) -> EmittedSource:
    """Source for ``target``'s dialect; with ``restrict=False`` no array parameter promises not to alias."""
    return emitter_for(target.dialect).emit(function, target, restrict=restrict)


def declares_restrict(dialect: str) -> bool:
    """Whether ``dialect``'s kernels promise the vendor compiler that array parameters never overlap."""
    return emitter_for(dialect).declares_restrict


# -- AOT: offline toolchains --------------------------------------------------------------
def build_artifact(toolchain: Toolchain, source: EmittedSource, arch: str, *, cache: Cache | None = None,
                   signature: str = "", timeout: float = DEFAULT_TIMEOUT) -> tuple[Artifact, bool]:
    """``source`` compiled by ``toolchain`` for ``arch``, through ``cache`` when the toolchain's
    artifacts are worth caching: ``(artifact, came_from_cache)``. The key includes the
    toolchain's version, so a new compiler rebuilds."""
    toolchain.check_arch(arch)
    if not toolchain.caches_artifacts:  # portable source: the artifact is the source itself
        return toolchain.compile(source, arch, timeout=timeout), False
    kind = toolchain.artifact_kind(arch)
    key = compile_key(ARTIFACT, source.text, dialect=toolchain.dialect, arch=arch, toolchain=toolchain.version(),
                      options=toolchain.translate_options(source.options), signature=signature,
                      tool=toolchain.name, kind=kind)
    cached = cache.get(key) if cache is not None else None
    if cached is not None:
        stats.add("disk_hits")
        return Artifact(kind, cached), True
    artifact = toolchain.compile(source, arch, timeout=timeout)
    stats.add("builds")
    if cache is not None:
        cache.put(key, artifact.data)
    return artifact, False


# -- JIT: a launch on one device ------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class Compiled:
    """A kernel built for one device: the source it was built from and the runtime's loaded kernel."""

    source: EmittedSource
    loaded: Any


def compile_for_device(py_func: Callable[..., Any], types: tuple[ParamType, ...], runtime: DeviceRuntime,
                       target: Target, *, fingerprint: Fingerprint, lowered: Callable[[], ir.Function],
                       restrict: bool = True, cache: Cache | None = None, checks: str = "") -> Compiled:
    """Build kernel ``py_func`` for ``types`` on the device of ``runtime`` (whose kernel target is
    ``target``): from a loaded bundle where one holds it, else from a cache record, else by
    lowering (``lowered()``, which the kernel memoizes) and emitting; the runtime then builds the
    source, its artifact coming from the cache when there is one. ``checks="bounds"``: ``lowered()``
    gives the checked IR, keyed apart (a bundle holds unchecked code only)."""
    cache = default_cache() if cache is None else cache
    signature = format_signature(py_func.__name__, types)
    prebuilt = None if checks else bundle_registry.lookup(py_func, types, target)
    if prebuilt is not None and not restrict:  # a bundle's source and binary assume no aliasing
        prebuilt = dataclasses.replace(prebuilt, source=None, binary=None, entry=None)
    # A record of this specialization skips the frontend and the emitter. It is keyed by the
    # source fingerprint, so it is used only when every value the source resolves is keyed.
    use_record = prebuilt is None and fingerprint.keyed
    record_key = compile_key(RECORD, fingerprint.digest, dialect=target.dialect, arch=target.arch,
                             toolchain=target.toolchain, signature=signature, features=target.features,
                             restrict=restrict, checks=checks)
    recorded = _read_record(cache, record_key) if use_record else None
    if recorded is not None:
        source, key_digest = recorded
    else:
        if prebuilt is not None and prebuilt.source is not None:
            # a bundle keeps no sizes of work-group arrays: its IR has them (less hetero's own)
            source = dataclasses.replace(prebuilt.source, local_arrays=work_group_arrays(prebuilt.function))
        else:
            source = emit(lowered() if prebuilt is None else prebuilt.function, target, restrict=restrict)
            stats.add("emitted")
        key_digest = compile_key(ARTIFACT, source.text, dialect=target.dialect, arch=target.arch,
                                 toolchain=target.toolchain, options=source.options, signature=signature,
                                 features=target.features, restrict=restrict, checks=checks).digest
        if use_record:
            cache.put(record_key, json.dumps({"source": source_to_json(source), "key": key_digest}).encode())
    from_bundle = prebuilt is not None and prebuilt.entry is not None
    binary = prebuilt.binary if prebuilt is not None else None
    artifact = binary if binary is not None else cache.get(key_digest)
    loaded, new_artifact = _build(runtime, source, artifact, cache, key_digest, signature)
    if from_bundle:
        stats.add("bundle_hits")
    if artifact is None:
        stats.add("finalized" if from_bundle else "builds")
    elif binary is None:
        stats.add("disk_hits")
    if new_artifact is not None:
        cache.put(key_digest, new_artifact)
    return Compiled(source, loaded)


def compile_function(function: ir.Function, runtime: DeviceRuntime, target: Target, *, restrict: bool = True,
                     cache: Cache | None = None) -> Compiled:
    """Build ``function``, a kernel made as IR by code (not from Python source: the strided copy of
    :mod:`hetero.compiler.array_kernels.strided_copy`), on the device of ``runtime``. Its record is keyed by the
    sha256 of its IR as JSON (:mod:`hetero.compiler.ir.json_form`) in place of a source fingerprint, so a
    warm process skips the emitter; the artifact key is the one every kernel's has."""
    cache = default_cache() if cache is None else cache
    signature = format_signature(function.name, tuple(param.type for param in function.params))
    made_from = hashlib.sha256(json.dumps(ir_json.dump(function), sort_keys=True).encode()).hexdigest()
    record_key = compile_key(RECORD, made_from, dialect=target.dialect, arch=target.arch, toolchain=target.toolchain,
                             signature=signature, features=target.features, restrict=restrict)
    recorded = _read_record(cache, record_key)
    if recorded is not None:
        source, key_digest = recorded
    else:
        source = emit(function, target, restrict=restrict)
        stats.add("emitted")
        key_digest = compile_key(ARTIFACT, source.text, dialect=target.dialect, arch=target.arch,
                                 toolchain=target.toolchain, options=source.options, signature=signature,
                                 features=target.features, restrict=restrict).digest
        cache.put(record_key, json.dumps({"source": source_to_json(source), "key": key_digest}).encode())
    artifact = cache.get(key_digest)
    loaded, new_artifact = _build(runtime, source, artifact, cache, key_digest, signature)
    stats.add("builds" if artifact is None else "disk_hits")
    if new_artifact is not None:
        cache.put(key_digest, new_artifact)
    return Compiled(source, loaded)


def _build(runtime: DeviceRuntime, source: EmittedSource, artifact: bytes | None, cache: Cache, key_digest: str,
           signature: str) -> tuple[Any, bytes | None]:
    """The runtime's build of ``source``, once its work-group memory is known to fit the device;
    without a cached artifact it is a compile, which the user is told of when it takes long
    (:mod:`hetero.core.build_progress`)."""
    check_work_group_memory(source, runtime.info, signature)
    path = cache.path_for(key_digest, ".bin")
    if artifact is not None:
        return runtime.build_kernel(source, artifact, path)
    with building(runtime.info.name, signature, str(get_config().cache_dir)):
        return runtime.build_kernel(source, artifact, path)


def _read_record(cache: Cache, record_key: CacheKey) -> tuple[EmittedSource, str] | None:
    """The emitted source and artifact key digest recorded for a specialization, or None."""
    data = cache.get(record_key)
    if data is None:
        return None
    try:
        record = json.loads(data)
        source, key_digest = source_from_json(record["source"]), record["key"]
    except (ValueError, KeyError, TypeError):
        return None  # a record from another hetero version: compile afresh
    if not isinstance(key_digest, str) or not _DIGEST.fullmatch(key_digest):
        return None
    return source, key_digest


__all__ = ["ARTIFACT", "RECORD", "RUNTIME_TOOL", "Compiled", "build_artifact", "compile_for_device", "compile_function",
           "compile_key", "declares_restrict", "emit", "lower"]
