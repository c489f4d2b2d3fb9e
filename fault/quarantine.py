"""Persistent device quarantine: devices hetero must not place work on, shared by every process.

The store is ``<state_dir>/quarantine.json`` (``HETERO_STATE_DIR``), keyed by the device's
stable id (it survives reboots and renumbering), each entry with the device name, reason,
fault class, time and expiry. It is a :class:`hetero.core.files.JsonStore`: writers take the
exclusive lock on ``quarantine.json.lock`` and replace the file atomically, so concurrent
processes lose no entry and readers never see half a file.

An entry whose TTL has passed is released only once the device's health reads ``ok``
(:func:`auto_release`; the health monitor calls it every poll, and
:func:`quarantined_ids` does when an entry has expired). A device whose backend reports
no health (``unknown``) stays quarantined until released by hand
(``hetero quarantine release DEVICE``).

A fault drill never harms real state: an entry for an *injected* fault (``add(..., injected=True)``:
the error came from a fault rule) goes to the drill's own layer, which lives as long as the drill
does: this process's memory, or under ``hetero-run`` the run's ``drill-quarantine.json`` in its run
directory, shared by the supervisor and its workers (:func:`drill_scope`, ``HETERO_DRILL_QUARANTINE``).
``HETERO_FAULTS_PERSIST=1`` (config ``faults_persist``) sends them to the persistent store instead.
Every query here (:func:`quarantined_ids`, :func:`entries`, :func:`entry`) and every release sees
both layers, so device selection honours a drill's quarantine for as long as the drill lasts.

A device the user names explicitly (``hetero.device("oneapi:0")``, ``device=...``) is refused while
it is in the persistent store (:func:`refuse_named`, :mod:`hetero.core.named_device`); a drill's
entries never refuse a name.

A cluster can add a third layer (:class:`ClusterLayer`, :func:`set_cluster_layer`): ``hetero.ray``
registers one backed by Ray's key-value store, so that a device quarantined on one node is avoided by
every node of the cluster that shares it, and released everywhere at once. Every :func:`add` is sent
to it too (a drill's entry as a drill's: never written to a node's persistent store).

A corrupt store (not UTF-8, not JSON, nested too deep, not hetero's format, or an entry whose
times are not plausible epoch seconds) is moved aside to
``quarantine.json.corrupt-<time>`` with a warning naming both files, and an empty store
takes its place: a broken file must not stop every process from choosing a device.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from hetero.core.config import get_config
from hetero.core.device import Device, DeviceInfo, HealthState
from hetero.core.errors import DeviceQuarantinedError, HeteroError
from hetero.core.named_device import REFUSE_QUARANTINED
from hetero.fault import event_bus
from hetero.fault.taxonomy import FaultClass, ttl_for
from hetero.core.files import JsonStore, StoreCorrupt
from hetero.scheduler.inputs import QUARANTINED_IDS

log = logging.getLogger("hetero.fault.quarantine")

FORMAT_VERSION = 1
FILE_NAME = "quarantine.json"


class QuarantineError(HeteroError, OSError):
    """The quarantine store cannot be used (unwritable state dir, a newer format). An OSError, so
    that callers which must move on without the store (the guard) catch it with the I/O errors."""


@dataclasses.dataclass(frozen=True)
class Entry:
    """One quarantined device. ``expires`` is a wall-clock time (epoch seconds), or None
    for "until released by hand"."""

    stable_id: str
    name: str
    reason: str
    fault_class: str
    time: float
    expires: float | None
    host: str = ""
    pid: int = 0
    drill: bool = False  # quarantined for an injected fault: kept within the drill, never persisted

    def expired(self, now: float | None = None) -> bool:
        return self.expires is not None and (time.time() if now is None else now) >= self.expires

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Entry:
        """The entry written as ``data``; ValueError for times that are not epoch seconds hetero can show."""
        expires = data.get("expires")
        return cls(stable_id=str(data["stable_id"]), name=str(data.get("name", "")), reason=str(data.get("reason", "")),
                   fault_class=str(data.get("fault_class", "")), time=_epoch("time", data.get("time", 0.0)),
                   expires=None if expires is None else _epoch("expires", expires), host=str(data.get("host", "")),
                   pid=int(data.get("pid", 0)), drill=bool(data.get("drill", False)))

    def describe(self) -> str:
        """``quarantined until 21:05:03 (reason)`` for ``hetero devices``."""
        if self.expires is None:
            until = "until released"
        elif self.expired():
            until = "expired; released once healthy"
        else:
            until = "until " + time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.expires))
        scope = " for this drill (an injected fault: not in the persistent store)" if self.drill else ""
        return f"quarantined{scope} {until} ({self.fault_class}: {self.reason})"


#: The latest time an entry may carry: 9999-12-31, what ``time.localtime`` can show everywhere.
MAX_EPOCH = 253402300799.0


def _epoch(key: str, value: Any) -> float:
    seconds = float(value)
    if not (math.isfinite(seconds) and 0.0 <= seconds <= MAX_EPOCH):
        raise ValueError(f"{key!r} is {value!r}, not epoch seconds between 0 and {MAX_EPOCH:.0f}")
    return seconds


def store_path() -> Path:
    """Where the store lives: ``<state_dir>/quarantine.json``."""
    return Path(get_config().state_dir) / FILE_NAME


# -- reading ------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True)
class _Snapshot:
    """The store as last read, with what quarantined_ids needs precomputed. Never mutated."""

    key: tuple[str, int, int, int]
    entries: Mapping[str, Entry]
    ids: frozenset[str]
    first_expiry: float  # the earliest expiry (inf: none expires)

    @classmethod
    def of(cls, key: tuple[str, int, int, int], entries: Mapping[str, Entry]) -> _Snapshot:
        expiries = [e.expires for e in entries.values() if e.expires is not None]
        return cls(key, dict(entries), frozenset(entries), min(expiries, default=math.inf))


_cache_lock = threading.Lock()
_cache: dict[Path, _Snapshot] = {}  # per store file: the persistent one, a run's drill store
_last_auto_check = 0.0


def _stat_key(path: Path) -> tuple[str, int, int, int]:
    """The file's identity: a write (temp file + rename) changes the inode, whatever the clock."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return (str(path), -1, -1, -1)
    return (str(path), st.st_ino, st.st_mtime_ns, st.st_size)


def _store(path: Path) -> JsonStore[dict[str, Entry]]:
    """The quarantine document in ``path``: ``{"version": 1, "entries": {stable_id: entry}}``."""

    def load(data: Any) -> dict[str, Entry]:
        if not isinstance(data, dict) or not isinstance(data.get("entries"), dict):
            raise StoreCorrupt("not a hetero quarantine store (no 'entries' mapping)")
        version = data.get("version")
        if isinstance(version, int) and version > FORMAT_VERSION:
            raise QuarantineError(f"{path} was written by a newer hetero (format {version}, this one reads "
                                  f"{FORMAT_VERSION}); upgrade hetero, or point HETERO_STATE_DIR elsewhere")
        try:
            return {key: Entry.from_dict({**value, "stable_id": key}) for key, value in data["entries"].items()}
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise StoreCorrupt(f"an entry is malformed ({type(exc).__name__}: {exc})") from None

    def dump(entries: dict[str, Entry]) -> dict[str, Any]:
        return {"version": FORMAT_VERSION,
                "entries": {key: {k: v for k, v in entry.as_dict().items() if k != "stable_id" and (k != "drill" or v)}
                            for key, entry in sorted(entries.items())}}

    return JsonStore(path, "quarantine store", load=load, dump=dump, empty=dict)


def _read(path: Path) -> dict[str, Entry]:
    """The entries in the file (empty when there is none). Never takes the lock."""
    try:
        return _store(path).read()
    except StoreCorrupt:
        raise
    except OSError as exc:
        raise QuarantineError(f"cannot read the quarantine store {path}: {exc}; check its permissions") from None


def _snapshot(path: Path) -> _Snapshot:
    """The store, cached on the file's identity (inode, mtime, size): one stat per call."""
    key = _stat_key(path)
    cached = _cache.get(path)
    if cached is not None and cached.key == key:
        return cached
    try:
        entries = _read(path)
    except StoreCorrupt:
        with _locked(path):
            entries = _read_or_reset(path)
        key = _stat_key(path)
    snapshot = _Snapshot.of(key, entries)
    with _cache_lock:
        _cache[path] = snapshot
    return snapshot


def _load(path: Path) -> Mapping[str, Entry]:
    """The entries (read-only), cached on the file's identity."""
    return _snapshot(path).entries


def _read_or_reset(path: Path) -> dict[str, Entry]:
    """Under the lock: the entries, or (file corrupt) move it aside and start empty."""
    try:
        return _read(path)
    except StoreCorrupt as problem:
        backup = _store(path).set_aside()
        log.warning("quarantine store %s is corrupt: %s; moved it to %s and started an empty store. "
                    "Devices quarantined there are no longer excluded: inspect the backup and re-add them "
                    "with 'hetero quarantine add DEVICE --reason ...' if needed", path, problem, backup)
        event_bus.publish("quarantine-store-reset", path=str(path), backup=str(backup), problem=str(problem))
        return {}


# -- writing ------------------------------------------------------------------------------
@contextlib.contextmanager
def _locked(path: Path) -> Iterator[None]:
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(_store(path).locked())
        except OSError as exc:
            raise QuarantineError(f"cannot create the quarantine store in {path.parent}: {exc}; make the state "
                                  "directory writable or set HETERO_STATE_DIR to one that is") from None
        yield


def _write(path: Path, entries: Mapping[str, Entry]) -> None:
    _store(path).write(dict(entries))
    snapshot = _Snapshot.of(_stat_key(path), entries)
    with _cache_lock:
        _cache[path] = snapshot


@contextlib.contextmanager
def _transaction(path: Path | None = None) -> Iterator[dict[str, Entry]]:
    """Read-modify-write of a store file (the persistent one unless ``path``) under the lock; the
    dict yielded is written back when it changed."""
    path = store_path() if path is None else path
    with _locked(path):
        entries = _read_or_reset(path)
        before = dict(entries)
        yield entries
        if entries != before:
            _write(path, entries)


# -- the drill layer ----------------------------------------------------------------------
DRILL_FILE_NAME = "drill-quarantine.json"
_drill_lock = threading.Lock()
_drill_memory: dict[Path, dict[str, Entry]] = {}  # per persistent store: this process's drill entries
_drill_path: Path | None = None  # set by drill_scope() (hetero-run's supervisor)


def drill_store() -> Path | None:
    """The file a drill's quarantines go to when they are shared by a run (``hetero-run`` sets it
    for itself and, as ``HETERO_DRILL_QUARANTINE``, for its workers); None: this process's memory."""
    return _drill_path if _drill_path is not None else get_config().drill_quarantine


@contextlib.contextmanager
def drill_scope(path: Path) -> Iterator[Path]:
    """Within the block, quarantines for injected faults go to the store file ``path``: the scope of
    a run whose processes all get ``HETERO_DRILL_QUARANTINE=path``."""
    global _drill_path
    previous, _drill_path = _drill_path, path
    try:
        yield path
    finally:
        _drill_path = previous


@contextlib.contextmanager
def run_scope(run_dir: Path) -> Iterator[Path]:
    """The drill scope of a ``hetero-run`` run: the one it inherited (a run inside a run's worker),
    else ``<run_dir>/drill-quarantine.json``, started empty."""
    inherited = drill_store()
    path = inherited or run_dir / DRILL_FILE_NAME
    if inherited is None:
        with contextlib.suppress(FileNotFoundError):
            path.unlink()
    with drill_scope(path):
        yield path


def _drill_entries() -> Mapping[str, Entry]:
    shared = drill_store()
    if shared is not None:
        return _snapshot(shared).entries
    return _drill_memory.get(store_path(), {})


@contextlib.contextmanager
def _drill_transaction() -> Iterator[dict[str, Entry]]:
    shared = drill_store()
    if shared is not None:
        with _transaction(shared) as entries:
            yield entries
        return
    key = store_path()
    with _drill_lock:
        entries = dict(_drill_memory.get(key, {}))
        yield entries
        _drill_memory[key] = entries


def forget_drill() -> None:
    """Drop this process's in-memory drill entries (tests between drills; a run's file is its own)."""
    with _drill_lock:
        _drill_memory.clear()


_Layer = tuple[Callable[[], Mapping[str, Entry]], Callable[[], contextlib.AbstractContextManager[dict[str, Entry]]]]


class ClusterLayer:
    """A store shared by the machines of a cluster (:mod:`hetero.ray.cluster_quarantine`): ``entries``
    are this machine's devices' entries by stable id (cheap: a cached copy), ``transaction`` changes
    them, ``put`` records one entry (an :func:`add` anywhere on the machine)."""

    def entries(self) -> Mapping[str, Entry]:
        raise NotImplementedError

    def transaction(self) -> contextlib.AbstractContextManager[dict[str, Entry]]:
        raise NotImplementedError

    def put(self, entry: Entry) -> None:
        raise NotImplementedError


_cluster: list[ClusterLayer | None] = [None]


def set_cluster_layer(layer: ClusterLayer | None) -> ClusterLayer | None:
    """Add (or, with None, remove) the cluster's layer; returns the one it replaces."""
    old, _cluster[0] = _cluster[0], layer
    return old


def cluster_layer() -> ClusterLayer | None:
    """The cluster's layer, or None outside a cluster."""
    return _cluster[0]


def _layers() -> tuple[_Layer, ...]:
    """(read, transaction) of the persistent store, then of the drill's, then of the cluster's."""
    local: tuple[_Layer, ...] = ((lambda: _load(store_path()), _transaction), (_drill_entries, _drill_transaction))
    cluster = _cluster[0]
    return local if cluster is None else (*local, (cluster.entries, cluster.transaction))


# -- the API ------------------------------------------------------------------------------
def _identify(target: Device | DeviceInfo | str, name: str | None) -> tuple[str, str]:
    """``(stable_id, device name)`` of a device, a descriptor, or a stable id."""
    if isinstance(target, (Device, DeviceInfo)):
        info = target.info if isinstance(target, Device) else target
        return info.stable_id, name or info.name
    if isinstance(target, str) and target:
        return target, name or ""
    raise TypeError(f"quarantine needs a hetero.Device, a DeviceInfo or a stable id string, got {target!r}")


def add(device: Device | DeviceInfo | str, reason: str, fault_class: FaultClass | str,
        ttl: float | None = None, name: str | None = None, injected: bool = False, quiet: bool = False) -> Entry:
    """Quarantine a device for ``ttl`` seconds (None: the class's TTL from the config's
    ``quarantine_ttl`` or :data:`~hetero.fault.taxonomy.DEFAULT_TTL`; ``math.inf``: until
    released by hand). Quarantining a device already quarantined keeps the later expiry and
    takes the new reason. ``injected``: the fault came from a fault rule, so the entry stays within
    the drill (see the module docstring) unless ``faults_persist`` is set. Publishes a
    ``quarantined`` event; returns the entry. It is logged as a warning unless ``quiet`` (a caller
    that tells the user itself, as hetero-run does: at debug level then)."""
    stable_id, device_name = _identify(device, name)
    klass = str(FaultClass(fault_class)) if isinstance(fault_class, FaultClass) else str(fault_class)
    if ttl is None:
        ttl = ttl_for(klass, get_config().quarantine_ttl)
        if ttl is None:
            ttl = ttl_for("context-corrupting", get_config().quarantine_ttl) or 3600.0
    now = time.time()
    expires = None if math.isinf(ttl) else now + max(float(ttl), 0.0)
    drill = injected and not get_config().faults_persist
    cluster = _cluster[0]
    # In a cluster, the cluster's store is a drill's scope: one entry every process sees and releases.
    with (contextlib.nullcontext({}) if drill and cluster is not None else
          _drill_transaction() if drill else _transaction()) as entries:
        old = entries.get(stable_id)
        if old is not None and (old.expires is None or (expires is not None and old.expires > expires)):
            expires = old.expires
        entry = Entry(stable_id, device_name or (old.name if old else stable_id), reason, klass, now, expires,
                      socket.gethostname(), os.getpid(), drill)
        entries[stable_id] = entry
    if cluster is not None:
        try:
            cluster.put(entry)
        except Exception as exc:  # noqa: BLE001 - the local quarantine stands; the cluster's may be gone
            log.warning("%s quarantined on this machine, but not in the cluster's store: %s", entry.name, exc)
    log.log(logging.DEBUG if quiet else logging.WARNING, "%s (%s) %s", entry.name, stable_id, entry.describe())
    event_bus.publish("quarantined", device=entry.name, stable_id=stable_id, reason=reason,
                      fault_class=klass, expires=expires, drill=drill)
    return entry


def _matches(entry: Entry, spec: str) -> bool:
    return spec in (entry.stable_id, entry.name)


def release(spec: Device | DeviceInfo | str, why: str = "released by hand") -> bool:
    """Release a device by Device, descriptor, stable id or device name (``cuda:0``); True when
    it was quarantined. Publishes a ``released`` event."""
    key = spec.info.stable_id if isinstance(spec, Device) else spec.stable_id if isinstance(spec, DeviceInfo) else spec
    gone: list[Entry] = []
    for read, transaction in _layers():
        if any(_matches(e, key) for e in read().values()):
            with transaction() as entries:
                gone += [entries.pop(k) for k in [k for k, e in entries.items() if _matches(e, key)]]
    for entry in gone:
        log.warning("released %s (%s) from quarantine: %s", entry.name, entry.stable_id, why)
        event_bus.publish("released", device=entry.name, stable_id=entry.stable_id, why=why,
                          fault_class=entry.fault_class)
    return bool(gone)


def release_all(why: str = "released by hand") -> list[Entry]:
    """Release every device (the drill's entries too); returns the entries released."""
    gone: list[Entry] = []
    for read, transaction in _layers():
        if read():
            with transaction() as entries:
                gone += entries.values()
                entries.clear()
    for entry in gone:
        event_bus.publish("released", device=entry.name, stable_id=entry.stable_id, why=why,
                          fault_class=entry.fault_class)
    return gone


def entries() -> list[Entry]:
    """Every entry, the drill's (and the cluster's, for this machine's devices) included, expired ones
    included (they stay until the device reports healthy), oldest first; one per device (the
    persistent store's first)."""
    found: dict[str, Entry] = {}
    for read, _ in _layers():
        for e in read().values():
            found.setdefault(e.stable_id, e)
    return sorted(found.values(), key=lambda e: e.time)


def entry(spec: Device | DeviceInfo | str) -> Entry | None:
    """The entry of a device (by Device, descriptor, stable id or name), or None."""
    key = spec.info.stable_id if isinstance(spec, Device) else spec.stable_id if isinstance(spec, DeviceInfo) else spec
    return next((e for read, _ in _layers() for e in read().values() if _matches(e, key)), None)


def _beside_the_store() -> Mapping[str, Entry]:
    """The drill's entries and the cluster's (for this machine), by stable id."""
    drill = _drill_entries()
    cluster = _cluster[0]
    if cluster is None:
        return drill
    try:
        shared = cluster.entries()
    except Exception as exc:  # noqa: BLE001 - a cluster store that went away must not stop device selection
        log.debug("the cluster's quarantine cannot be read: %s", exc)
        return drill
    return {**shared, **drill} if shared else drill


def quarantined_ids() -> frozenset[str]:
    """Stable ids of the devices in quarantine, the drill's included. Cheap: one ``stat`` unless the
    file changed. When an entry has expired, the opened devices are checked (at most once per health
    interval) and the healthy ones released."""
    global _last_auto_check
    path = store_path()
    snapshot = _snapshot(path)
    drill = _beside_the_store()
    first_expiry = min([snapshot.first_expiry, *(e.expires for e in drill.values() if e.expires is not None)])
    if first_expiry <= time.time() and time.monotonic() - _last_auto_check >= get_config().health_interval:
        _last_auto_check = time.monotonic()
        try:
            from hetero.core.registry import opened_devices

            if auto_release(opened_devices()):
                snapshot, drill = _snapshot(path), _beside_the_store()
        except QuarantineError:
            raise
        except Exception:  # a failing health source must not break device selection
            log.debug("auto-release check failed", exc_info=True)
    return snapshot.ids | frozenset(drill) if drill else snapshot.ids


def is_quarantined(stable_id: str | Device | DeviceInfo) -> bool:
    """True when the device (by stable id, Device or descriptor) is in quarantine."""
    key = stable_id.info.stable_id if isinstance(stable_id, Device) else (
        stable_id.stable_id if isinstance(stable_id, DeviceInfo) else stable_id)
    return key in quarantined_ids()


def auto_release(devices: Iterable[Device]) -> list[Entry]:
    """Release the expired entries of those ``devices`` whose health reads ``ok`` now; returns
    the entries released. Devices not given, or not healthy, stay quarantined."""
    now = time.time()
    expired = {e.stable_id for read, _ in _layers() for e in read().values() if e.expired(now)}
    if not expired:
        return []
    healthy: set[str] = set()
    for device in devices:
        if device.stable_id in expired:
            try:
                if device.health().state is HealthState.OK:
                    healthy.add(device.stable_id)
            except Exception as exc:  # noqa: BLE001 - a raising health source is not "ok"
                log.debug("health of %s raised %s; keeping it quarantined", device.name, exc)
    if not healthy:
        return []
    gone: list[Entry] = []
    for read, transaction in _layers():
        if any(k in healthy for k in read()):
            with transaction() as entries:
                gone += [entries.pop(k) for k in list(entries) if k in healthy and entries[k].expired(now)]
    for released in gone:
        log.warning("released %s (%s) from quarantine: expired and healthy", released.name, released.stable_id)
        event_bus.publish("released", device=released.name, stable_id=released.stable_id,
                          why="expired and healthy", fault_class=released.fault_class)
    return gone


#: Seconds a name's check trusts the store as last read (as the "auto" cache's QUARANTINE_RECHECK):
#: this process's own changes are seen at once (they update the cache), other processes' within this.
NAMED_RECHECK = 0.5
_named_read: tuple[Any, Path, float] | None = None  # (the config, its store path, monotonic time of the last stat)


def _named_snapshot() -> _Snapshot:
    """The persistent store for a name's check: a dict lookup, a ``stat`` every NAMED_RECHECK seconds."""
    global _named_read
    config, now, last = get_config(), time.monotonic(), _named_read
    if last is not None and last[0] is config and now - last[2] < NAMED_RECHECK:
        cached = _cache.get(last[1])
        if cached is not None:
            return cached
    path = Path(config.state_dir) / FILE_NAME
    snapshot = _snapshot(path)
    _named_read = (config, path, now)
    return snapshot


def refuse_named(device: Device) -> None:
    """Raise :class:`~hetero.DeviceQuarantinedError` when ``device``, named explicitly by the user,
    is in the persistent store (the drill's layer never refuses a name). An entry whose time is up
    is released first when the device's health reads ``ok`` now. Cheap (well under a microsecond):
    the store is looked at again every :data:`NAMED_RECHECK` seconds, and read only when it changed.
    A store that cannot be read refuses nothing (logged at debug)."""
    try:
        found = _named_snapshot().entries.get(device.info.stable_id)
    except QuarantineError as exc:
        log.debug("the quarantine store cannot be read (%s); %s is not refused", exc, device.name)
        return
    if found is None:
        return
    health = ""
    if found.expired():
        if auto_release([device]):
            return
        try:
            health = str(device.health())
        except Exception as exc:  # noqa: BLE001 - a raising health source is not "ok"
            health = f"its health query raised {type(exc).__name__}: {exc}"
    # The remedy names what `hetero quarantine release` matches: the entry's name, else its stable id.
    release = found.name if found.name == device.name else found.stable_id
    raise DeviceQuarantinedError(device.name, found.stable_id, found.fault_class, found.reason, found.time,
                                 found.expires, health, release=release)


QUARANTINED_IDS.register(quarantined_ids)  # the scheduler's one quarantine query (see hetero.core.hooks)
REFUSE_QUARANTINED.register(refuse_named)  # hetero.device(name) asks it (hetero.core.named_device)
