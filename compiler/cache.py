"""The compiled-kernel cache: a process-level memory layer in front of a swappable storage.

A :class:`CacheKey` is built from named parts (IR hash, dialect, target, toolchain,
options, hetero version); :class:`DiskStorage` keeps one self-checking, versioned file
per key and writes it atomically, so concurrent processes and crashes never leave a
half-written entry that a reader would trust.
"""

from __future__ import annotations

import abc
import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import stat
import struct
import tempfile
import threading
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, BinaryIO, TypeAlias

from hetero._version import __version__
from hetero.config import get_config
from hetero.files import atomic_write  # not durable: a crash may lose an entry, the checksum catches a torn one

logger = logging.getLogger("hetero.compiler.cache")

#: Bumped when the on-disk entry layout changes; older entries are discarded and rebuilt.
FORMAT_VERSION = 1
MAGIC = b"HETEROK\x00"
# magic, format version, reserved, key digest, payload length, payload sha256
_HEADER = struct.Struct("<8sHH32sQ32s")
_ENTRY_SUFFIX = ".bin"
_DIGEST = re.compile(r"[0-9a-f]{64}")
_MODULES_DIR = "modules"
_NAMED_PARTS = ("ir", "dialect", "target", "toolchain", "options", "hetero")


class CacheWarning(UserWarning):
    """The cache could not be used as asked (corrupt entry, unwritable directory); work goes on without it."""


HeteroCacheWarning = CacheWarning


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _canonical(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


@dataclasses.dataclass(frozen=True)
class CacheKey:
    """What a compiled artifact depends on, as named parts.

    ``ir`` is the sha256 of the printed IR (:meth:`from_ir` computes it); ``target`` is the
    architecture or the device's stable id; ``toolchain`` the vendor compiler/driver version;
    ``options`` the compile options in the order given; ``extra`` any further named parts.
    """

    ir: str
    dialect: str
    target: str
    toolchain: str
    options: tuple[str, ...] = ()
    hetero: str = __version__
    extra: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        object.__setattr__(self, "options", tuple(str(option) for option in self.options))
        extra = dict(self.extra)  # also accepts a mapping, for convenience
        clash = sorted(set(extra) & set(_NAMED_PARTS))
        if clash:
            raise ValueError(f"cache key extra parts {clash} clash with the named parts {_NAMED_PARTS}; rename them")
        object.__setattr__(self, "extra", tuple(sorted((str(k), str(v)) for k, v in extra.items())))

    @classmethod
    def from_ir(
        cls,
        printed_ir: str,
        *,
        dialect: str,
        target: str,
        toolchain: str,
        options: Sequence[str] = (),
        **extra: str,
    ) -> CacheKey:
        """The key for a kernel whose printed IR is ``printed_ir``."""
        return cls(_sha256(printed_ir.encode("utf-8")), dialect, target, toolchain, tuple(options), extra=tuple(extra.items()))

    def parts(self) -> dict[str, Any]:
        """The named parts, as they enter the digest."""
        named: dict[str, Any] = {
            "ir": self.ir,
            "dialect": self.dialect,
            "target": self.target,
            "toolchain": self.toolchain,
            "options": list(self.options),
            "hetero": self.hetero,
        }
        return {**named, **dict(self.extra)}

    @functools.cached_property
    def digest(self) -> str:
        """sha256 hex of the canonical JSON of :meth:`parts`; logs each part's own hash at DEBUG."""
        parts = self.parts()
        value = _sha256(_canonical(parts))
        if logger.isEnabledFor(logging.DEBUG):
            for name, part in parts.items():
                logger.debug("cache key %s: part %s hash %s (%.60r)", value[:16], name, _sha256(_canonical(part)), part)
        return value


KeyLike: TypeAlias = "CacheKey | str"


def _digest_of(key: KeyLike) -> str:
    return key.digest if isinstance(key, CacheKey) else key


@dataclasses.dataclass(frozen=True)
class CacheEntry:
    """One cached artifact: a compiled ``kernel`` blob or a generated ``module`` directory."""

    digest: str
    size: int
    kind: str
    path: Path | None = None


class Storage(abc.ABC):
    """Where entries live beyond the process. Two methods make a storage; the
    housekeeping ones (``entries``, ``clear``, ``root``) default to "nothing to show"."""

    root: Path | None = None

    @abc.abstractmethod
    def load(self, key_digest: str) -> bytes | None:
        """The stored bytes, or None when absent or unusable (the caller rebuilds)."""

    @abc.abstractmethod
    def store(self, key_digest: str, data: bytes) -> None:
        """Keep ``data`` under ``key_digest``; never raises for a storage problem."""

    def entries(self) -> Iterator[CacheEntry]:
        return iter(())

    def clear(self) -> int:
        return 0


class MemoryStorage(Storage):
    """A storage in a dict: for tests, and for running with no disk cache at all."""

    def __init__(self) -> None:
        self._data: dict[str, bytes] = {}
        self._lock = threading.Lock()

    def load(self, key_digest: str) -> bytes | None:
        with self._lock:
            return self._data.get(key_digest)

    def store(self, key_digest: str, data: bytes) -> None:
        with self._lock:
            self._data[key_digest] = bytes(data)

    def entries(self) -> Iterator[CacheEntry]:
        with self._lock:
            items = list(self._data.items())
        return iter([CacheEntry(digest, len(data), "kernel") for digest, data in items])

    def clear(self) -> int:
        with self._lock:
            removed = len(self._data)
            self._data.clear()
        return removed


class NotARegularFileError(OSError):
    """A path hetero would read is a FIFO, device, socket or directory, not a file."""


def open_regular_file(path: Path) -> BinaryIO:
    """``path`` opened for binary reading, refusing anything but a regular file.

    Opened non-blocking, then checked on the descriptor: a FIFO would block ``open`` until
    a writer came, and ``/dev/zero`` never ends. Regular files ignore ``O_NONBLOCK``.
    """
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = ("a directory" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode)
                    else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "a socket or other special file")
            raise NotARegularFileError(f"{path} is not a regular file ({kind})")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


class DiskStorage(Storage):
    """One file per key under ``root/<first 2 hex>/<digest>.bin``: header (magic, format
    version, key, payload length, payload sha256) then payload.

    A bad entry is deleted with a :class:`CacheWarning` and reads as absent. A root that
    cannot be written warns once; the storage then stays out of the way.
    """

    root: Path

    def __init__(self, root: Path) -> None:
        self.root = Path(root)
        self._disabled = False
        self._lock = threading.Lock()

    def path_of(self, key_digest: str) -> Path:
        if not _DIGEST.fullmatch(key_digest):
            raise ValueError(f"cache key digest must be 64 lowercase hex characters, got {key_digest!r}")
        return self.root / key_digest[:2] / f"{key_digest}{_ENTRY_SUFFIX}"

    def load(self, key_digest: str) -> bytes | None:
        path = self.path_of(key_digest)
        if self._disabled:
            return None
        try:
            with open_regular_file(path) as file:
                blob = file.read()
                opened = os.fstat(file.fileno())
        except (FileNotFoundError, NotADirectoryError):
            return None
        except NotARegularFileError as exc:  # left alone (not ours to delete); a store replaces it
            warnings.warn(f"ignored cache entry {path}: {exc}; the kernel will be rebuilt", CacheWarning, stacklevel=3)
            return None
        except OSError as exc:
            self._give_up(f"cannot read {path}: {exc}")
            return None
        problem = _check_entry(blob, key_digest)
        if problem is None:
            return blob[_HEADER.size:]
        self._discard(path, opened, problem)
        return None

    def store(self, key_digest: str, data: bytes) -> None:
        path = self.path_of(key_digest)
        if self._disabled:
            return
        header = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, bytes.fromhex(key_digest), len(data), hashlib.sha256(data).digest())
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, header + bytes(data))
        except OSError as exc:
            self._give_up(f"cannot write {path}: {exc}")

    def entries(self) -> Iterator[CacheEntry]:
        for path in self._entry_files():
            try:
                size = path.stat().st_size
            except OSError:  # removed by another process meanwhile
                continue
            yield CacheEntry(path.name[: -len(_ENTRY_SUFFIX)], size, "kernel", path)

    def clear(self) -> int:
        removed = 0
        for path in self._entry_files():
            try:
                path.unlink()
                removed += 1
            except OSError:
                pass
        for shard in self._shards():
            for leftover in shard.glob(".*.tmp"):  # temp files of writers that were killed
                leftover.unlink(missing_ok=True)
            try:
                shard.rmdir()
            except OSError:  # not empty: a writer is busy there
                pass
        return removed

    def _shards(self) -> list[Path]:
        try:
            return [p for p in self.root.iterdir() if len(p.name) == 2 and p.is_dir()]
        except OSError:
            return []

    def _entry_files(self) -> list[Path]:
        return [p for shard in self._shards() for p in shard.glob(f"*{_ENTRY_SUFFIX}")
                if _DIGEST.fullmatch(p.name[: -len(_ENTRY_SUFFIX)])]

    def _discard(self, path: Path, opened: os.stat_result, problem: str) -> None:
        # Delete only the file we read: a writer may have replaced it with a good one since.
        try:
            current = os.stat(path)
            if (current.st_dev, current.st_ino) == (opened.st_dev, opened.st_ino):
                os.unlink(path)
        except OSError:
            pass
        warnings.warn(f"discarded cache entry {path}: {problem}; the kernel will be rebuilt", CacheWarning, stacklevel=4)

    def _give_up(self, reason: str) -> None:
        with self._lock:
            if self._disabled:
                return
            self._disabled = True
        warnings.warn(
            f"kernel disk cache disabled: {reason}; compiling without it "
            "(set HETERO_CACHE_DIR or cache_dir in hetero.yaml to a writable directory)",
            CacheWarning,
            stacklevel=4,
        )


def _check_entry(blob: bytes, key_digest: str) -> str | None:
    """What is wrong with an entry file's bytes, or None when it is whole and for this key."""
    if len(blob) < _HEADER.size:
        return f"truncated: {len(blob)} bytes, shorter than the {_HEADER.size}-byte header"
    magic, version, _, key, length, checksum = _HEADER.unpack_from(blob)
    if magic != MAGIC:
        return "not a hetero cache entry (bad magic bytes)"
    if version != FORMAT_VERSION:
        return f"format version {version}, this hetero reads version {FORMAT_VERSION}"
    if key.hex() != key_digest:
        return f"holds key {key.hex()}, not {key_digest}"
    payload = memoryview(blob)[_HEADER.size:]
    if len(payload) != length:
        return f"truncated: payload has {len(payload)} of {length} bytes"
    if hashlib.sha256(payload).digest() != checksum:
        return "checksum mismatch (payload corrupted)"
    return None


class Cache:
    """Compiled artifacts by key: a thread-safe dict for this process in front of a storage.

    ``modules_root`` is where generated module files go (:meth:`path_for`); by default
    ``<storage root>/modules``, or a private temp directory when the storage has no root.
    """

    def __init__(self, storage: Storage, *, modules_root: Path | None = None) -> None:
        self.storage = storage
        self._memory: dict[str, bytes] = {}
        self._lock = threading.Lock()
        if modules_root is None and storage.root is not None:
            modules_root = storage.root / _MODULES_DIR
        self._modules_root = modules_root
        self._modules_fallback: Path | None = None

    @property
    def root(self) -> Path | None:
        return self.storage.root

    def get(self, key: KeyLike) -> bytes | None:
        digest = _digest_of(key)
        with self._lock:
            data = self._memory.get(digest)
        if data is not None:
            logger.debug("cache hit (memory) %s", digest)
            return data
        data = self.storage.load(digest)
        logger.debug("cache %s (storage) %s", "hit" if data is not None else "miss", digest)
        if data is not None:
            with self._lock:
                self._memory[digest] = data
        return data

    def put(self, key: KeyLike, data: bytes) -> None:
        digest = _digest_of(key)
        data = bytes(data)
        with self._lock:
            self._memory[digest] = data
        self.storage.store(digest, data)

    def path_for(self, key: KeyLike, suffix: str, *, name: str | None = None) -> Path:
        """A stable path ``<modules root>/<digest>/<name><suffix>`` whose directory exists.

        For artifacts that are files on disk (a generated Python module that Numba then
        caches beside itself). ``name`` defaults to an importable ``hk_<digest prefix>``.
        Write the file with :func:`atomic_write`. Falls back to a temp directory, with one
        :class:`CacheWarning`, when the cache directory cannot be written.
        """
        digest = _digest_of(key)
        name = f"hk_{digest[:16]}" if name is None else name
        for part in (name, suffix):
            if "/" in part or "\\" in part or part in (".", ".."):
                raise ValueError(f"path_for: {part!r} must be a plain file name part, without directories")
        folder = self._module_dir(digest)
        return folder / f"{name}{suffix}"

    def _module_dir(self, digest: str) -> Path:
        if self._modules_root is not None:
            folder = self._modules_root / digest
            try:
                folder.mkdir(parents=True, exist_ok=True)
                return folder
            except OSError as exc:
                warnings.warn(
                    f"cannot create {folder}: {exc}; generated modules go to a temporary directory "
                    "(set HETERO_CACHE_DIR or cache_dir in hetero.yaml to a writable directory)",
                    CacheWarning,
                    stacklevel=4,
                )
                self._modules_root = None
        with self._lock:
            if self._modules_fallback is None:
                self._modules_fallback = Path(tempfile.mkdtemp(prefix="hetero-modules-"))
            folder = self._modules_fallback / digest
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    def entries(self) -> Iterator[CacheEntry]:
        """Every stored kernel, then every generated-module directory."""
        yield from self.storage.entries()
        for folder in self._module_dirs():
            yield CacheEntry(folder.name, _tree_size(folder), "module", folder)

    def info(self) -> dict[str, Any]:
        """``root``, ``entries`` and ``bytes`` (total size), plus counts by kind."""
        found = list(self.entries())
        return {
            "root": None if self.root is None else str(self.root),
            "entries": len(found),
            "bytes": sum(entry.size for entry in found),
            "kernels": sum(entry.kind == "kernel" for entry in found),
            "modules": sum(entry.kind == "module" for entry in found),
            "in_memory": len(self._memory),
        }

    def clear(self) -> int:
        """Forget everything, in memory and in storage; returns how many entries were removed."""
        with self._lock:
            self._memory.clear()
        removed = self.storage.clear()
        for folder in self._module_dirs():
            shutil.rmtree(folder, ignore_errors=True)
            removed += 1
        return removed

    def _module_dirs(self) -> list[Path]:
        roots = [r for r in (self._modules_root, self._modules_fallback) if r is not None]
        found: list[Path] = []
        for root in roots:
            try:
                found += [p for p in root.iterdir() if p.is_dir() and _DIGEST.fullmatch(p.name)]
            except OSError:
                pass
        return found


def _tree_size(folder: Path) -> int:
    total = 0
    for path in folder.rglob("*"):
        try:
            if path.is_file():
                total += path.stat().st_size
        except OSError:  # removed meanwhile
            pass
    return total


_default_lock = threading.Lock()


@functools.lru_cache(maxsize=1)
def _build_default_cache() -> Cache:
    return Cache(DiskStorage(get_config().cache_dir / "kernels"))


def default_cache() -> Cache:
    """The process's kernel cache under ``cache_dir/kernels``, built on first use."""
    with _default_lock:
        return _build_default_cache()


def reset_default_cache() -> None:
    """Forget the default cache (after :func:`hetero.config.reload_config`); files stay."""
    with _default_lock:
        _build_default_cache.cache_clear()


__all__ = [
    "FORMAT_VERSION",
    "Cache",
    "CacheEntry",
    "CacheKey",
    "CacheWarning",
    "DiskStorage",
    "HeteroCacheWarning",
    "MemoryStorage",
    "Storage",
    "atomic_write",
    "default_cache",
    "reset_default_cache",
]
