"""The cluster's quarantine: entries in Ray's key-value store, seen by every node within a poll.

Why Ray's key-value store (the GCS's, ``ray.experimental.internal_kv``) and not a named actor: it
lives in the head node's GCS, so it outlives the loss of any worker node (a named actor is placed
on some node and dies with it, and a restarted actor starts empty); it needs no scheduling, so a
quarantine is recorded even while every worker slot is busy; and one key per device makes each
write independent (no read-modify-write of a shared document across machines).

Keys are ``quarantine/<host>/<stable id>`` in the namespace ``hetero``: ``host`` is
:func:`hetero.ray.node_share.host_id`, because a stable id names a device model and driver on a
machine, not a machine (two hosts with the same Intel CPU have the same OpenCL stable id). Values
are an entry's JSON (:class:`hetero.fault.quarantine.Entry`).

:func:`attach` (called by everything in :mod:`hetero.ray` that runs on a node, and by the driver on
first use) adds this store to the process's quarantine as its cluster layer: a fault classified on
any node (``hetero.fault.quarantine.add``, as the guard, ``hetero-run``, ONNX pools and the fault
monitor call it) is written here at once, and every process on every node sees it within
:data:`POLL` seconds: its device choice (``"auto"``, pools, the guard's candidates) skips it, and
:mod:`hetero.ray.placement` sends no new task or replica to it. A drill's entry (an injected fault)
is recorded as a drill's: it never reaches a node's persistent ``quarantine.json``, and goes when the
cluster does, or when released.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
import time
from collections.abc import Iterator, Mapping

from hetero.fault import quarantine
from hetero.fault.quarantine import Entry
from hetero.ray.node_share import host_id

log = logging.getLogger("hetero.ray.quarantine")

NAMESPACE = "hetero"
PREFIX = "quarantine/"
#: Seconds a process trusts its copy of the cluster's entries before reading the store again.
POLL = 0.25


def _kv() -> tuple[object, object, object, object]:
    from ray.experimental import internal_kv

    if not internal_kv._internal_kv_initialized():
        raise RuntimeError("this process is not connected to a Ray cluster (call ray.init first)")
    return (internal_kv._internal_kv_get, internal_kv._internal_kv_put, internal_kv._internal_kv_del,
            internal_kv._internal_kv_list)


def _key(host: str, stable_id: str) -> bytes:
    return f"{PREFIX}{host}/{stable_id}".encode()


def _decode(raw: bytes | None) -> Entry | None:
    if raw is None:
        return None
    try:
        data = json.loads(raw.decode())
        return Entry.from_dict(data)
    except (ValueError, KeyError, TypeError, UnicodeDecodeError) as exc:
        log.warning("a cluster quarantine entry is not hetero's format (%s); ignored", exc)
        return None


def cluster_entries(host: str | None = None) -> dict[tuple[str, str], Entry]:
    """Every entry in the cluster's store (or one host's), by ``(host, stable id)``."""
    get, _, _, listing = _kv()
    prefix = (PREFIX + (f"{host}/" if host else "")).encode()
    found: dict[tuple[str, str], Entry] = {}
    for key in listing(prefix, namespace=NAMESPACE):  # type: ignore[operator]
        entry = _decode(get(key, namespace=NAMESPACE))  # type: ignore[operator]
        if entry is not None:
            found[(key.decode()[len(PREFIX):].split("/", 1)[0], entry.stable_id)] = entry
    return found


def put(entry: Entry, host: str | None = None) -> None:
    """Record ``entry`` for ``host`` (default: this machine). A later expiry already recorded is kept."""
    get, put_, _, _ = _kv()
    key = _key(host or host_id(), entry.stable_id)
    old = _decode(get(key, namespace=NAMESPACE))  # type: ignore[operator]
    if old is not None and (old.expires is None or (entry.expires is not None and old.expires > entry.expires)):
        entry = Entry(**{**entry.as_dict(), "expires": old.expires})
    put_(key, json.dumps(entry.as_dict()).encode(), overwrite=True, namespace=NAMESPACE)  # type: ignore[operator]


def release(host: str, stable_id: str) -> bool:
    """Remove one entry; True when there was one."""
    _, _, delete, _ = _kv()
    return bool(delete(_key(host, stable_id), namespace=NAMESPACE))  # type: ignore[operator]


class RayLayer(quarantine.ClusterLayer):
    """This machine's entries in the cluster's store, as a layer of :mod:`hetero.fault.quarantine`."""

    def __init__(self, host: str | None = None) -> None:
        self.host = host or host_id()
        self._lock = threading.Lock()
        self._copy: dict[str, Entry] = {}
        self._read_at = -1e9

    def entries(self) -> Mapping[str, Entry]:
        if time.monotonic() - self._read_at < POLL:
            return self._copy
        with self._lock:
            if time.monotonic() - self._read_at >= POLL:
                self._copy = {sid: e for (_, sid), e in cluster_entries(self.host).items()}
                self._read_at = time.monotonic()
        return self._copy

    @contextlib.contextmanager
    def transaction(self) -> Iterator[dict[str, Entry]]:
        before = {sid: e for (_, sid), e in cluster_entries(self.host).items()}
        entries = dict(before)
        yield entries
        _, put_, delete, _ = _kv()
        for sid in before.keys() - entries.keys():
            delete(_key(self.host, sid), namespace=NAMESPACE)  # type: ignore[operator]
        for sid, entry in entries.items():
            if before.get(sid) != entry:
                put_(_key(self.host, sid), json.dumps(entry.as_dict()).encode(), overwrite=True,  # type: ignore[operator]
                     namespace=NAMESPACE)
        self._read_at = -1e9

    def put(self, entry: Entry) -> None:
        put(entry, self.host)
        self._read_at = -1e9


def attach() -> RayLayer:
    """Make the cluster's store a layer of this process's quarantine (once; the process must be
    connected to Ray). Returns the layer."""
    current = quarantine.cluster_layer()
    if isinstance(current, RayLayer):
        return current
    _kv()  # connected, or a clear error
    layer = RayLayer()
    quarantine.set_cluster_layer(layer)
    return layer


def detach() -> None:
    """Take the cluster's layer out of this process's quarantine (after ``ray.shutdown``)."""
    if isinstance(quarantine.cluster_layer(), RayLayer):
        quarantine.set_cluster_layer(None)
