"""The compiled-kernel cache: a process-level memory layer in front of a swappable storage.

A :class:`CacheKey` is built from named parts (IR hash, dialect, target, toolchain,
options, hetero version; :func:`hetero.compiler.build.pipeline.compile_key` is the one place keys
are made); :class:`DiskStorage` keeps one self-checking, versioned file per key and writes
it atomically, so concurrent processes and crashes never leave a half-written entry that a
reader would trust.

Both layers are bounded (:class:`~hetero.compiler.cache_bounds.CacheBounds`, from the
``cache_*`` settings): the memory layer drops its least recently used entries; on disk, a
store that takes the cache past its bound removes the least recently used entries (kernels
and generated-module folders, by the mtime each load and store sets) under the cache's lock
file, whole files and whole folders only.
"""

from __future__ import annotations

import abc
import collections
import contextlib
import dataclasses
import functools
import hashlib
import json
import logging
import os
import re
import shutil
import struct
import tempfile
import threading
import time
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, TypeAlias

from hetero._version import __version__
from hetero.core.config import CacheBounds, get_config
from hetero.core.notices import HeteroWarning
from hetero.core.files import NotARegularFileError, atomic_write, locked, open_regular_file, remove_leftovers, remove_tree  # not durable: a crash may lose an entry, the checksum catches a torn one

logger = logging.getLogger("hetero.compiler.build.cache")

#: Bumped when the on-disk entry layout changes; older entries are discarded and rebuilt.
FORMAT_VERSION = 1
MAGIC = b"HETEROK\x00"
# magic, format version, reserved, key digest, payload length, payload sha256
_HEADER = struct.Struct("<8sHH32sQ32s")
_ENTRY_SUFFIX = ".bin"
_DIGEST = re.compile(r"[0-9a-f]{64}")
_MODULES_DIR = "modules"
#: The lock file (``.evict.lock`` in the cache root) that one evicting process holds at a time.
_EVICT_LOCK = ".evict"
#: Stores between full rescans of the disk cache (other processes write to it too).
_RESCAN_EVERY = 64
_NAMED_PARTS = ("ir", "dialect", "target", "toolchain", "options", "hetero")


class CacheWarning(HeteroWarning):
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
    """One cached artifact: a compiled ``kernel`` blob or a generated ``module`` directory;
    ``used`` is when it was last loaded or stored (seconds since the epoch)."""

    digest: str
    size: int
    kind: str
    path: Path | None = None
    used: float = 0.0


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

    def remove(self, entry: CacheEntry) -> bool:
        """Remove ``entry`` (from :meth:`entries`) unless it was used since it was listed."""
        return False

    def writable(self) -> bool:
        """False once the storage has given up on writing (then there is nothing to evict)."""
        return True

    def clear(self) -> int:
        return 0


class MemoryStorage(Storage):
    """A storage in a dict: for tests, and for running with no disk cache at all."""

    def __init__(self) -> None:
        self._data: dict[str, tuple[bytes, float]] = {}
        self._lock = threading.Lock()
        self._clock = 0.0  # a use counter: ties of time.time() would make LRU order arbitrary

    def _tick(self) -> float:
        self._clock = max(self._clock + 1e-6, time.time())
        return self._clock

    def load(self, key_digest: str) -> bytes | None:
        with self._lock:
            found = self._data.get(key_digest)
            if found is None:
                return None
            self._data[key_digest] = (found[0], self._tick())
            return found[0]

    def store(self, key_digest: str, data: bytes) -> None:
        with self._lock:
            self._data[key_digest] = (bytes(data), self._tick())

    def entries(self) -> Iterator[CacheEntry]:
        with self._lock:
            items = list(self._data.items())
        return iter([CacheEntry(digest, len(data), "kernel", used=used) for digest, (data, used) in items])

    def remove(self, entry: CacheEntry) -> bool:
        with self._lock:
            found = self._data.get(entry.digest)
            if found is None or found[1] != entry.used:
                return False
            del self._data[entry.digest]
            return True

    def clear(self) -> int:
        with self._lock:
            removed = len(self._data)
            self._data.clear()
        return removed


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
            _touch(path)  # its use time, for least-recently-used eviction
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
                info = path.stat()
            except OSError:  # removed by another process meanwhile
                continue
            yield CacheEntry(path.name[: -len(_ENTRY_SUFFIX)], info.st_size, "kernel", path, info.st_mtime)

    def writable(self) -> bool:
        return not self._disabled

    def remove(self, entry: CacheEntry) -> bool:
        # Whole files only, and not one that was loaded or rewritten since it was listed.
        path = self.path_of(entry.digest)
        try:
            if os.stat(path).st_mtime != entry.used:
                return False
            os.unlink(path)
        except OSError:
            return False
        return True

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


def _touch(path: Path) -> None:
    """Set ``path``'s mtime to now: the cache's record of its last use (atimes are often off)."""
    try:
        os.utime(path)
    except OSError:  # removed meanwhile, or a read-only cache: its use time stays older
        pass


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


#: Generated-module folders used this recently are never evicted: a process may be between
#: writing the module and importing it (kernel entries are read whole in one call, so they
#: need no such grace).
MODULE_GRACE_SECONDS = 60.0


class LruMemory:
    """Bytes by key digest in this process, least recently used evicted past ``bounds``
    (an entry larger than the byte bound alone is not kept). Thread-safe."""

    def __init__(self, bounds: CacheBounds) -> None:
        self.bounds = bounds
        self._data: collections.OrderedDict[str, bytes] = collections.OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._data)

    @property
    def nbytes(self) -> int:
        return self._bytes

    def get(self, digest: str) -> bytes | None:
        with self._lock:
            data = self._data.get(digest)
            if data is not None:
                self._data.move_to_end(digest)
            return data

    def put(self, digest: str, data: bytes) -> None:
        with self._lock:
            old = self._data.pop(digest, None)
            if old is not None:
                self._bytes -= len(old)
            if len(data) > self.bounds.max_bytes:
                return
            self._data[digest] = data
            self._bytes += len(data)
            while self.bounds.exceeded(self._bytes, len(self._data)):
                _, evicted = self._data.popitem(last=False)
                self._bytes -= len(evicted)

    def keys(self) -> list[str]:
        """Digests, least recently used first."""
        with self._lock:
            return list(self._data)

    def clear(self) -> None:
        with self._lock:
            self._data.clear()
            self._bytes = 0


def choose_evictions(entries: Sequence[CacheEntry], bounds: CacheBounds, *, now: float | None = None,
                     grace: dict[str, float] | None = None) -> list[CacheEntry]:
    """The entries to remove so the rest fit ``bounds``, least recently used (``entry.used``)
    first. ``grace`` maps an entry kind to seconds: entries of that kind used more recently are
    kept even past the bound."""
    total = sum(entry.size for entry in entries)
    count = len(entries)
    if not bounds.exceeded(total, count):
        return []
    now = time.time() if now is None else now
    grace = grace or {}
    chosen = []
    for entry in sorted(entries, key=lambda e: e.used):
        if not bounds.exceeded(total, count):
            break
        if now - entry.used < grace.get(entry.kind, 0.0):
            continue
        chosen.append(entry)
        total -= entry.size
        count -= 1
    return chosen


class Cache:
    """Compiled artifacts by key: a bounded, thread-safe memory layer for this process in
    front of a storage, itself bounded by ``disk_bounds`` (both default to the defaults of the
    ``cache_*`` settings, :mod:`hetero.core.config`).

    ``modules_root`` is where generated module files go (:meth:`path_for`); by default
    ``<storage root>/modules``, or a private temp directory when the storage has no root.
    """

    def __init__(self, storage: Storage, *, modules_root: Path | None = None,
                 memory_bounds: CacheBounds | None = None, disk_bounds: CacheBounds | None = None) -> None:
        self.storage = storage
        self.disk_bounds = CacheBounds.disk_default() if disk_bounds is None else disk_bounds
        self._memory = LruMemory(CacheBounds.memory_default() if memory_bounds is None else memory_bounds)
        self._lock = threading.Lock()
        if modules_root is None and storage.root is not None:
            modules_root = storage.root / _MODULES_DIR
        self._modules_root = modules_root
        self._modules_fallback: Path | None = None
        # What the last full scan found (bytes, entries) plus what was stored since: eviction
        # rescans when this passes the bound, and every _RESCAN_EVERY stores (others write too).
        self._tally: tuple[int, int] | None = None
        self._stores_since_scan = 0

    @property
    def memory_bounds(self) -> CacheBounds:
        return self._memory.bounds

    @property
    def root(self) -> Path | None:
        return self.storage.root

    def get(self, key: KeyLike) -> bytes | None:
        digest = _digest_of(key)
        data = self._memory.get(digest)
        if data is not None:
            logger.debug("cache hit (memory) %s", digest)
            return data
        data = self.storage.load(digest)
        logger.debug("cache %s (storage) %s", "hit" if data is not None else "miss", digest)
        if data is not None:
            self._memory.put(digest, data)
        return data

    def put(self, key: KeyLike, data: bytes) -> None:
        digest = _digest_of(key)
        data = bytes(data)
        self._memory.put(digest, data)
        self.storage.store(digest, data)
        self._stored(len(data))

    def _stored(self, nbytes: int) -> None:
        """Count a new entry; evict when the cache may now be past its bound."""
        with self._lock:
            self._stores_since_scan += 1
            if self._tally is not None and self._stores_since_scan < _RESCAN_EVERY:
                total, count = self._tally[0] + nbytes, self._tally[1] + 1
                self._tally = (total, count)
                if not self.disk_bounds.exceeded(total, count):
                    return
        self.evict()

    def evict(self) -> int:
        """Remove the least recently used entries until the cache fits :attr:`disk_bounds`
        (generated-module folders used in the last minute stay); how many were removed. One
        process evicts at a time (the cache root's ``.evict.lock``); a reader finds an entry
        whole or absent, never part of one."""
        root = self.storage.root
        if not self.storage.writable():  # it said why when it gave up; nothing was stored to evict
            return 0
        try:
            with locked(root / _EVICT_LOCK) if root is not None else contextlib.nullcontext():
                found = list(self.entries())
                victims = choose_evictions(found, self.disk_bounds, grace={"module": MODULE_GRACE_SECONDS})
                removed = [entry for entry in victims if self._remove(entry)]
                if self._modules_root is not None:
                    remove_leftovers(self._modules_root)
        except OSError as exc:
            logger.warning("cannot evict from the kernel cache %s: %s; it may grow past its bound until a later "
                           "store succeeds (check the permissions of HETERO_CACHE_DIR)", root, exc)
            with self._lock:
                self._tally, self._stores_since_scan = (0, 0), 0  # try again after _RESCAN_EVERY stores
            return 0
        gone = {entry.digest for entry in removed}
        kept = [entry for entry in found if entry.digest not in gone]
        with self._lock:
            self._tally = (sum(entry.size for entry in kept), len(kept))
            self._stores_since_scan = 0
        if removed:
            logger.debug("evicted %d cache entries (%d bytes)", len(removed), sum(e.size for e in removed))
        return len(removed)

    def _remove(self, entry: CacheEntry) -> bool:
        if entry.kind == "module":
            return entry.path is not None and remove_tree(entry.path)
        return self.storage.remove(entry)

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
                if folder.is_dir():
                    _touch(folder)  # its use time, for least-recently-used eviction
                    return folder
                folder.mkdir(parents=True, exist_ok=True)
                self._stored(0)
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
            try:
                used = folder.stat().st_mtime
            except OSError:  # removed meanwhile
                continue
            yield CacheEntry(folder.name, _tree_size(folder), "module", folder, used)

    def info(self) -> dict[str, Any]:
        """``root``, ``entries`` and ``bytes`` (total size), counts by kind, what the memory
        layer holds, and ``bounds`` (``disk`` and ``memory``: ``max_bytes``, ``max_entries``)."""
        found = list(self.entries())
        return {
            "root": None if self.root is None else str(self.root),
            "entries": len(found),
            "bytes": sum(entry.size for entry in found),
            "kernels": sum(entry.kind == "kernel" for entry in found),
            "modules": sum(entry.kind == "module" for entry in found),
            "in_memory": len(self._memory),
            "in_memory_bytes": self._memory.nbytes,
            "bounds": {"disk": self.disk_bounds.as_dict(), "memory": self.memory_bounds.as_dict()},
        }

    def clear(self) -> int:
        """Forget everything, in memory and in storage; returns how many entries were removed."""
        self._memory.clear()
        with self._lock:
            self._tally = None
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
    config = get_config()
    return Cache(DiskStorage(config.cache_dir / "kernels"), memory_bounds=config.cache_memory_bounds,
                 disk_bounds=config.cache_disk_bounds)


def default_cache() -> Cache:
    """The process's kernel cache under ``cache_dir/kernels``, built on first use."""
    with _default_lock:
        return _build_default_cache()


def reset_default_cache() -> None:
    """Forget the default cache (after :func:`hetero.core.config.reload_config`); files stay."""
    with _default_lock:
        _build_default_cache.cache_clear()


__all__ = [
    "FORMAT_VERSION",
    "Cache",
    "CacheBounds",
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
