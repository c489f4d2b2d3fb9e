"""The kernel bundle file (``.hbundle``): prebuilt kernels for many targets in one archive
that is verified, member by member, before anything in it is used.

A bundle is a zip archive::

    manifest.json                               what is inside, with a sha256 per member
    ir/<kernel>/<signature tag>.json            each kernel's typed IR, as data
    sources/<kernel>/<signature tag>/<target>.* the generated source for each target
    artifacts/<kernel>/<signature tag>/<target>.* what the target's toolchain made of it

Reading one (:func:`read_bundle`) rejects the whole file, naming the member or entry, when
the format or version is unknown, a member name leaves this layout (``../``, absolute,
unlisted), a listed member is missing, or any hash does not match. Nothing in a bundle is
unpickled or run as Python: the manifest and IR are JSON, the rest is bytes for toolchains
and drivers. The hashes show a bundle is intact, not who made it: load bundles you trust,
as you would any binary.
"""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import re
import zipfile
import zlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hetero.core.errors import BundleError
from hetero.core.files import atomic_write, open_regular_file
from hetero.core.target import DIALECTS
from hetero.core.types import BY_NAME, f16, f32

from hetero.compiler.ir import nodes as ir, json_form as ir_json
from hetero.compiler.emit.base import AbiArg, EmittedSource, default_abi, entry_name

FORMAT_NAME = "hetero-bundle"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
# Guards against zip bombs, far above any kernel, checked from the archive's directory
# before anything is inflated (a 3 MB bomb once inflated to 3.6 GB in ``bundle inspect``).
#: Largest artifact member.
MAX_MEMBER_BYTES = 256 << 20
#: Largest text member (manifest, IR, source): these are parsed whole in memory.
MAX_TEXT_BYTES = 16 << 20
#: Largest sum of every member's uncompressed size.
MAX_TOTAL_BYTES = 1 << 30
_CHUNK = 1 << 20
_MEMBER = re.compile(r"(ir|sources|artifacts)(/[A-Za-z0-9_][A-Za-z0-9_.-]*)+")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_ENTRY_TEXT = ("kernel", "qualname", "python_source_sha256", "signature", "dialect", "target", "arch", "toolchain",
               "toolchain_version", "entry", "ir_path", "ir_sha256", "source_path", "source_sha256",
               "artifact_path", "artifact_sha256", "artifact_kind")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclasses.dataclass(frozen=True)
class BundleEntry:
    """One kernel, for one signature, built for one target.

    ``kernel`` is the module-qualified name (shown to people); ``qualname`` and
    ``python_source_sha256`` (:func:`hetero.compiler.frontend.source.fingerprint`) are what a launch
    matches; ``requires`` the target features the kernel uses; ``abi`` the argument layout.
    """

    kernel: str
    qualname: str
    python_source_sha256: str
    signature: str
    dialect: str
    target: str
    arch: str
    toolchain: str
    toolchain_version: str
    entry: str
    abi: tuple[AbiArg, ...]
    options: tuple[str, ...]
    requires: tuple[str, ...]
    ir_path: str
    ir_sha256: str
    source_path: str
    source_sha256: str
    artifact_path: str
    artifact_sha256: str
    artifact_kind: str
    artifact_size: int

    def as_json(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["abi"] = [{"kind": a.kind, "param": a.param, "dtype": a.dtype.name, "axis": a.axis} for a in self.abi]
        data["options"], data["requires"] = list(self.options), list(self.requires)
        return data

    @classmethod
    def from_json(cls, data: Any, where: str) -> BundleEntry:
        """Parse one manifest entry; ValueError or TypeError naming ``where`` when malformed."""
        if not isinstance(data, dict):
            raise TypeError(f"{where} is not an object")
        for name in _ENTRY_TEXT:
            if not isinstance(data.get(name), str):
                raise TypeError(f"{where} lacks the text field {name!r}")
        for name in ("python_source_sha256", "ir_sha256", "source_sha256", "artifact_sha256"):
            if not _SHA256.fullmatch(data[name]):
                raise ValueError(f"{where}: {name} is not a sha256 hex digest")
        lists = {name: data.get(name) for name in ("abi", "options", "requires")}
        if not all(isinstance(value, list) for value in lists.values()) or type(data.get("artifact_size")) is not int:
            raise ValueError(f"{where}: abi, options and requires must be lists, artifact_size a number")
        if not all(isinstance(text, str) for text in [*data["options"], *data["requires"]]):
            raise ValueError(f"{where}: options and requires must be lists of text")
        abi = []
        for arg in data["abi"]:
            if not (isinstance(arg, dict) and arg.get("kind") in ("scalar", "array", "shape")
                    and isinstance(arg.get("param"), str) and arg.get("dtype") in BY_NAME and type(arg.get("axis")) is int):
                raise ValueError(f"{where}: malformed abi item {arg!r}")
            abi.append(AbiArg(arg["kind"], arg["param"], BY_NAME[arg["dtype"]], arg["axis"]))
        fields = {name: data[name] for name in _ENTRY_TEXT}
        return cls(**fields, abi=tuple(abi), options=tuple(data["options"]), requires=tuple(data["requires"]),
                   artifact_size=data["artifact_size"])


@dataclasses.dataclass(frozen=True)
class MissingEntry:
    """A (kernel, signature, target) that ``hetero compile --keep-going`` could not build, and why."""

    kernel: str
    signature: str
    target: str
    error: str


@dataclasses.dataclass(frozen=True)
class Manifest:
    """What a bundle holds: built entries, entries that failed, the targets asked for."""

    hetero_version: str
    created: str
    targets: tuple[str, ...]
    entries: tuple[BundleEntry, ...]
    missing: tuple[MissingEntry, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "hetero_version": self.hetero_version,
            "created": self.created,
            "targets": list(self.targets),
            "entries": [entry.as_json() for entry in self.entries],
            "missing": [dataclasses.asdict(m) for m in self.missing],
        }

    @classmethod
    def from_json(cls, data: Any) -> Manifest:
        """Parse a manifest; ValueError or TypeError saying what is wrong."""
        if not isinstance(data, dict) or data.get("format") != FORMAT_NAME:
            raise ValueError(f"{MANIFEST} does not describe a {FORMAT_NAME}")
        version = data.get("version")
        if version != FORMAT_VERSION:
            newer = isinstance(version, int) and version > FORMAT_VERSION
            raise ValueError(f"bundle format version {version!r}; this hetero reads version {FORMAT_VERSION}"
                             + (" (the bundle is from a newer hetero: upgrade hetero)" if newer else ""))
        entries, missing = data.get("entries"), data.get("missing", [])
        if not isinstance(entries, list) or not isinstance(missing, list):
            raise TypeError(f"{MANIFEST}: entries and missing must be lists")
        parsed = [BundleEntry.from_json(item, f"entry {i}") for i, item in enumerate(entries)]
        gaps = []
        for i, item in enumerate(missing):
            if not isinstance(item, dict) or not all(isinstance(item.get(k), str) for k in ("kernel", "signature", "target", "error")):
                raise ValueError(f"{MANIFEST}: missing item {i} is malformed")
            gaps.append(MissingEntry(item["kernel"], item["signature"], item["target"], item["error"]))
        targets = data.get("targets", [])
        if not isinstance(targets, list) or not all(isinstance(t, str) for t in targets):
            raise ValueError(f"{MANIFEST}: targets must be a list of text")
        return cls(str(data.get("hetero_version", "?")), str(data.get("created", "?")), tuple(targets),
                   tuple(parsed), tuple(gaps))


@dataclasses.dataclass(frozen=True)
class Bundle:
    """A verified bundle, in memory: its manifest, the bytes of every member and each
    kernel's IR (checked by :func:`hetero.compiler.ir.json_form.load`)."""

    path: Path
    manifest: Manifest
    members: Mapping[str, bytes]
    functions: Mapping[str, ir.Function]

    def source(self, entry: BundleEntry) -> EmittedSource:
        text = self.members[entry.source_path].decode("utf-8")
        return EmittedSource(entry.dialect, entry.entry, text, entry.abi, entry.options)

    def artifact(self, entry: BundleEntry) -> bytes:
        return self.members[entry.artifact_path]

    def function(self, entry: BundleEntry) -> ir.Function:
        return self.functions[entry.ir_path]


def write_bundle(path: Path, manifest: Manifest, members: Mapping[str, bytes]) -> None:
    """Write the archive atomically; every member the manifest names must be in ``members``."""
    for name in members:
        _check_member_name(name)
    named = {p for e in manifest.entries for p in (e.ir_path, e.source_path, e.artifact_path)}
    if named - set(members):
        raise ValueError(f"manifest names members that are not given: {sorted(named - set(members))}")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        archive.writestr(MANIFEST, json.dumps(manifest.as_json(), indent=1, sort_keys=False))
        for name in sorted(members):
            archive.writestr(name, members[name])
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, buffer.getvalue())


def _check_member_name(name: str) -> None:
    if not _MEMBER.fullmatch(name) or any(part in (".", "..") for part in name.split("/")):
        raise ValueError(f"member {name!r} is outside the bundle layout (manifest.json, ir/, sources/, artifacts/)")


def read_bundle(path: Path | str, *, keep_artifacts: bool = True) -> Bundle:
    """Open and verify a bundle; BundleError naming the file and the bad member or entry.

    Everything that can be checked from the archive's directory and the manifest is
    checked before any other member is inflated: names, the per-member and total size
    limits, members the manifest does not list, sizes that disagree. Members are then
    hashed as they stream; with ``keep_artifacts=False`` (``hetero bundle inspect``) an
    artifact that is not also a source is hashed and dropped, never held whole.
    """
    path = Path(path)
    try:
        file = open_regular_file(path)
    except FileNotFoundError:
        raise BundleError(str(path), "no such file") from None
    except OSError as exc:
        raise BundleError(str(path), f"cannot be opened: {exc}") from None
    with file:
        try:
            archive = zipfile.ZipFile(file)
        except (OSError, zipfile.BadZipFile, ValueError) as exc:
            raise BundleError(str(path), f"not a readable zip archive ({exc})") from None
        with archive:
            infos = _check_directory(archive, path)
            raw = _read_member(archive, infos[MANIFEST], None, path, keep=True)
            try:
                manifest = Manifest.from_json(json.loads(raw or b""))
            except (ValueError, TypeError) as exc:  # JSONDecodeError and UnicodeDecodeError are ValueErrors
                raise BundleError(str(path), f"bad {MANIFEST}: {exc}") from None
            digests = _check_listing(manifest, infos, path)
            text = {p for e in manifest.entries for p in (e.ir_path, e.source_path)}
            members: dict[str, bytes] = {}
            for name, digest in digests.items():
                data = _read_member(archive, infos[name], digest, path, keep=keep_artifacts or name in text)
                if data is not None:
                    members[name] = data
    return Bundle(path, manifest, members, _check_contents(path, manifest, members))


def _check_directory(archive: zipfile.ZipFile, path: Path) -> dict[str, zipfile.ZipInfo]:
    """The archive's members by name, after the checks its directory allows (nothing inflated)."""
    infos = archive.infolist()
    by_name = {info.filename: info for info in infos}
    if len(by_name) != len(infos):
        raise BundleError(str(path), "the archive lists a member twice")
    total = 0
    for info in infos:
        if info.filename != MANIFEST:
            try:
                _check_member_name(info.filename)
            except ValueError as exc:
                raise BundleError(str(path), f"{exc} (path traversal or foreign content)") from None
        limit = MAX_TEXT_BYTES if info.filename == MANIFEST or not info.filename.startswith("artifacts/") else MAX_MEMBER_BYTES
        if info.file_size > limit:
            raise BundleError(str(path), f"member {info.filename} is {info.file_size} bytes, over the {limit} byte "
                                         f"limit for {'text' if limit == MAX_TEXT_BYTES else 'a member'}")
        total += info.file_size
    if total > MAX_TOTAL_BYTES:
        raise BundleError(str(path), f"its members hold {total} bytes in all, over the {MAX_TOTAL_BYTES} byte limit "
                                     "(a zip bomb, or not a kernel bundle)")
    if MANIFEST not in by_name:
        raise BundleError(str(path), f"no {MANIFEST}: not a hetero kernel bundle")
    return by_name


def _check_listing(manifest: Manifest, infos: Mapping[str, zipfile.ZipInfo], path: Path) -> dict[str, str]:
    """Each member the manifest lists, with its sha256: every one present, nothing else in
    the archive, one digest per member, and artifact sizes as the directory says."""
    digests: dict[str, str] = {}
    for entry in manifest.entries:
        where = f"entry {entry.kernel} {entry.signature} for {entry.target}"
        for member, digest in ((entry.ir_path, entry.ir_sha256), (entry.source_path, entry.source_sha256),
                               (entry.artifact_path, entry.artifact_sha256)):
            if member not in infos:
                raise BundleError(str(path), f"{where}: member {member} is missing")
            if digests.setdefault(member, digest) != digest:
                raise BundleError(str(path), f"{where}: member {member} does not match its sha256 in the manifest "
                                             "(two entries give it different hashes: the bundle was modified)")
        if infos[entry.artifact_path].file_size != entry.artifact_size:
            raise BundleError(str(path), f"{where}: artifact size differs from the manifest ({entry.artifact_size} "
                                         f"bytes listed, {infos[entry.artifact_path].file_size} in the archive)")
    unlisted = sorted(set(infos) - set(digests) - {MANIFEST})
    if unlisted:
        raise BundleError(str(path), f"members not listed in the manifest: {', '.join(unlisted)}")
    return digests


def _check_contents(path: Path, manifest: Manifest, members: Mapping[str, bytes]) -> dict[str, ir.Function]:
    """Each entry's source is text and its IR a kernel whose parameters match the ABI."""
    functions: dict[str, ir.Function] = {}
    for entry in manifest.entries:
        where = f"entry {entry.kernel} {entry.signature} for {entry.target}"
        try:
            members[entry.source_path].decode("utf-8")
            if entry.ir_path not in functions:
                functions[entry.ir_path] = ir_json.load(json.loads(members[entry.ir_path]))
        except (ValueError, UnicodeDecodeError) as exc:  # IRFormatError and JSONDecodeError are ValueErrors
            raise BundleError(str(path), f"{where}: {exc}") from None
        problem = _abi_problem(entry, functions[entry.ir_path])
        if problem is not None:
            raise BundleError(str(path), f"{where}: {problem}")
    return functions


def _abi_problem(entry: BundleEntry, fn: ir.Function) -> str | None:
    """Why ``entry`` cannot be launched as the kernel its IR describes, or None.

    A launch packs arguments by the entry's ABI and calls its entry point, so a manifest
    whose hashes hold but whose ABI was reordered or cut would fail there with a raw
    TypeError or IndexError, or pass the wrong bytes: it is refused here instead.
    """
    if entry.dialect not in DIALECTS:
        return f"unknown dialect {entry.dialect!r}; this hetero knows {', '.join(DIALECTS)}"
    if not fn.is_kernel:
        return f"its IR {fn.name!r} is a device function, not a kernel"
    if entry.entry != entry_name(fn):
        return f"entry point {entry.entry!r} is not the kernel's ({entry_name(fn)!r})"
    expected = default_abi(fn, with_shapes=entry.dialect != "cpu")
    if len(entry.abi) == len(expected) and all(_same_arg(got, want, entry.dialect) for got, want in zip(entry.abi, expected)):
        return None
    return (f"its abi ({_abi_text(entry.abi)}) does not match the kernel's parameters, which take "
            f"({_abi_text(expected)}): arguments reordered, dropped, added or with a wrong axis or dtype")


def _same_arg(got: AbiArg, want: AbiArg, dialect: str) -> bool:
    if (got.kind, got.param, got.axis) != (want.kind, want.param, want.axis):
        return False
    # Numba has no float16 scalars: the CPU emitter passes an f16 scalar as f32 (see emit_cpu).
    return got.dtype == want.dtype or (dialect == "cpu" and got.kind == "scalar" and (want.dtype, got.dtype) == (f16, f32))


def _abi_text(abi: tuple[AbiArg, ...]) -> str:
    return ", ".join(f"{a.param}.shape[{a.axis}]" if a.kind == "shape" else f"{a.kind} {a.param}: {a.dtype.name}"
                     for a in abi)


def _read_member(archive: zipfile.ZipFile, info: zipfile.ZipInfo, digest: str | None, path: Path, *,
                 keep: bool) -> bytes | None:
    """Stream one member, checking its size against the directory and its sha256 against
    ``digest`` (None: no digest); its bytes when ``keep``."""
    hasher = hashlib.sha256()
    kept = bytearray()
    size = 0
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(_CHUNK):
                size += len(chunk)
                if size > info.file_size:
                    break
                hasher.update(chunk)
                if keep:
                    kept += chunk
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError, RuntimeError) as exc:
        # bad CRC, corrupt compressed data, truncated, encrypted or an unknown compression
        raise BundleError(str(path), f"member {info.filename} cannot be read ({exc})") from None
    if size != info.file_size:
        raise BundleError(str(path), f"member {info.filename} inflates to a size other than the {info.file_size} "
                                     "bytes its directory entry says (the archive was modified)")
    if digest is not None and hasher.hexdigest() != digest:
        raise BundleError(str(path), f"member {info.filename} does not match its sha256 in the manifest "
                                     "(the bundle was modified or corrupted)")
    return bytes(kept) if keep else None


def inspect_bundle(path: Path | str) -> Manifest:
    """The manifest of a bundle, after verifying the whole bundle (artifacts hashed, not kept)."""
    return read_bundle(path, keep_artifacts=False).manifest


__all__ = ["FORMAT_NAME", "FORMAT_VERSION", "Bundle", "BundleEntry", "Manifest", "MissingEntry", "inspect_bundle",
           "read_bundle", "write_bundle"]
