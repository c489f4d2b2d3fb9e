"""Checkpoints a worker can resume from, on any device: ``save(state, step)`` / ``load()``.

    >>> state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "w": w}
    >>> hetero.checkpoint.store.save(state, step)            # atomic, checksummed, keeps the last 3
    >>> loaded = hetero.checkpoint.store.load()              # newest valid one, or None
    >>> if loaded: state, step = loaded

One checkpoint is a directory ``step-00000120.hckpt/`` under the checkpoint directory
(``directory=``, else ``$HETERO_CHECKPOINT_DIR``, which ``hetero-run`` sets for each worker,
else ``./checkpoints`` for ``save``). Outside ``hetero-run``, ``load()`` and ``latest_step()``
resume only from a directory they are given (or ``$HETERO_CHECKPOINT_DIR``): a second plain
``python train.py`` starts afresh instead of silently picking up what the first left in
``./checkpoints`` (it warns, naming how to resume). Each checkpoint holds a
``manifest.json`` (the state's structure, plain values inline, and the size and sha256 of
every payload file, or of each 16 MiB part of bigger ones so that every core helps to check
them; the manifest checks its own digest too) plus one payload file per
array, tensor, bytes or pickled value. What each value type becomes is documented in
:mod:`hetero.checkpoint.codec`; hetero arrays are stored as host bytes and restored onto
the device ``load`` is given, of any kind (saved on ``oneapi:0``, resumed on ``cpu``).

:func:`save_async` copies the state to host memory and writes it in a background thread.
A save writes into a hidden temporary directory, fsyncs every file, then renames the
whole directory into place, so a crash leaves either the new checkpoint or none; old
checkpoints are pruned only after that. ``load`` verifies checksums and, when the newest
checkpoint is corrupt (or holds a FIFO, a device, a payload the manifest sizes past this
machine's memory, a manifest over 256 MiB), warns naming the bad file and falls back to the
previous one, without blocking and without reading a bad payload whole first. (Under
``hetero-run`` a restarted worker reads the checkpoint the launcher has just verified without
hashing it again, as long as its files are unchanged: see :data:`ENV_VERIFIED`.)
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import socket
import threading
import time
import warnings
from collections.abc import Callable, Mapping, MutableMapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from hetero.core.notices import HeteroWarning
from hetero.checkpoint.codec import CheckpointError, Decoder, PayloadReader, PayloadWriter, PickleRefusedError, encode
from hetero.checkpoint.files import (
    PRIVATE_DIR, PRIVATE_FILE, ConcurrentSaveError, Fingerprint, ParallelWriter, fingerprint, fsync_dir, install,
    payload_name, read_payloads, settled, settled_at, write_remedy,
)
from hetero.checkpoint.files import SETTLED_SECONDS  # noqa: F401 - part of this module's interface (check remembers only settled files)
from hetero.checkpoint.manifest import MAX_BYTES as MAX_MANIFEST_BYTES
from hetero.checkpoint.manifest import check_structure
from hetero.checkpoint.manifest import read as read_manifest
from hetero.core.errors import HeteroError
from hetero.core.sizes import format_size
from hetero.fault.protocol import ENV_CHECKPOINT_DIR, ENV_RESUME_STEP

__all__ = ["CheckpointError", "CheckpointWarning", "ConcurrentSaveError", "PickleRefusedError", "check", "checkpoints",
           "fingerprint", "latest_step", "load", "resume_step", "save", "save_async", "settled", "verified_token", "verify",
           "wait"]

FORMAT = "hetero.checkpoint.store"
VERSION = 1
MANIFEST = "manifest.json"
_NAME = re.compile(r"^step-(\d+)\.hckpt$")
_TEMP = re.compile(r"^\.step-\d+\.hckpt\.(?:tmp|old)-(\d+)-[0-9a-f]+$")
_EXECUTOR: ThreadPoolExecutor | None = None  # save_async's single writer thread, made on first use
_EXECUTOR_LOCK = threading.Lock()
_WRITER_THREAD = "hetero-checkpoint-writer"


def _forget_writer() -> None:
    # A forked child has none of the parent's threads (nor its pending saves): start afresh.
    global _EXECUTOR, _EXECUTOR_LOCK
    _EXECUTOR, _EXECUTOR_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_writer)
# What reading a damaged checkpoint can raise besides CheckpointError (unreadable files, values
# the manifest's checksum vouched for but that do not decode).
_DAMAGE = (OSError, ValueError, KeyError, TypeError)


class CheckpointWarning(HeteroWarning):
    """A checkpoint was skipped because it is corrupt or unreadable."""


def default_directory() -> Path:
    """Where :func:`save` writes without ``directory=``: ``$HETERO_CHECKPOINT_DIR``, else ``./checkpoints``."""
    return Path(os.environ.get(ENV_CHECKPOINT_DIR) or "checkpoints")


def _resume_root(directory: str | os.PathLike[str] | None, caller: str) -> Path | None:
    """Where ``load``/``latest_step`` look: ``directory``, else ``$HETERO_CHECKPOINT_DIR``; None (with a
    warning when ``./checkpoints`` holds checkpoints) outside hetero-run with neither."""
    if directory is not None:
        return Path(directory)
    if os.environ.get(ENV_CHECKPOINT_DIR):
        return Path(os.environ[ENV_CHECKPOINT_DIR])
    found = checkpoints("checkpoints")
    if found:
        warnings.warn(f"hetero.checkpoint.store.{caller}: not resuming from the {len(found)} checkpoint(s) in "
                      f"{Path('checkpoints').absolute()} (newest: step {found[0][0]}): outside hetero-run, "
                      f"{caller} reads only a directory it is given; pass directory='checkpoints' to resume "
                      f"from them", CheckpointWarning, stacklevel=3)
    return None


def resume_step() -> int | None:
    """The step ``hetero-run`` told this (restarted) worker to resume from, or None on a first start."""
    value = os.environ.get(ENV_RESUME_STEP, "").strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError:
        raise CheckpointError(f"{ENV_RESUME_STEP}={value!r} is not a step number; "
                              f"unset it or set it to an integer") from None


def save(state: Mapping[str, Any], step: int, directory: str | os.PathLike[str] | None = None,
         keep: int | None = 3) -> Path:
    """Write ``state`` as the checkpoint of ``step`` and return its path.

    ``keep``: how many checkpoints to keep (the newest by step, and always this one);
    None keeps all. Saving a step that exists replaces it. Nothing is left half-written:
    on any error the temporary files are removed and the previous checkpoints are intact.
    Saves queued by :func:`save_async` before this call finish first."""
    step, root = _checked(step, keep, directory, "save")
    wait()
    return _save(root, step, keep, lambda write: encode(state, write))


def save_async(state: Mapping[str, Any], step: int, directory: str | os.PathLike[str] | None = None,
               keep: int | None = 3) -> Future[Path]:
    """Like :func:`save`, but return as soon as ``state`` is copied to host memory: a background
    thread writes the files, one save at a time, in call order, while training goes on.

    A value that cannot be saved raises here; a failure to write raises from the returned
    future's ``result()`` (and is warned about, in case nobody asks). Pending saves finish
    before the interpreter exits; a process killed meanwhile leaves the previous checkpoints,
    intact. Host memory: one copy of the state per pending save."""
    step, root = _checked(step, keep, directory, "save_async")
    root = root.absolute()  # written later: a chdir meanwhile must not move it
    captured: list[tuple[str, Any]] = []

    def capture(where: str, data: Any) -> str:  # copied: the caller's arrays keep changing
        captured.append((where, np.array(data, copy=True) if isinstance(data, np.ndarray) else bytes(data)))
        return payload_name(len(captured) - 1)

    tree = encode(state, capture)

    def replay(write: PayloadWriter) -> dict[str, Any]:
        for where, data in captured:
            write(where, data)
        return tree

    global _EXECUTOR
    with _EXECUTOR_LOCK:
        if _EXECUTOR is None:
            _EXECUTOR = ThreadPoolExecutor(max_workers=1, thread_name_prefix=_WRITER_THREAD)
        future = _EXECUTOR.submit(_save, root, step, keep, replay)
    future.add_done_callback(_warn_failure)
    return future


def wait() -> None:
    """Block until every save queued by :func:`save_async` so far has finished (or failed)."""
    with _EXECUTOR_LOCK:
        executor = _EXECUTOR
    if threading.current_thread().name.startswith(_WRITER_THREAD + "_"):
        return  # called from the writer thread itself (a done callback): waiting on it would deadlock
    if executor is not None:
        executor.submit(lambda: None).result()  # one worker, first in first out


def load(directory: str | os.PathLike[str] | None = None, device: Any = None, *,
         map_location: Any = None, step: int | None = None,
         allow_pickle: bool = False) -> tuple[dict[str, Any], int] | None:
    """The newest valid checkpoint as ``(state, step)``, or None when there is none.

    Hetero arrays are restored onto ``device`` (default ``hetero.device()``), whatever
    device saved them; torch tensors become CPU tensors, or go to ``map_location``. A
    corrupt or unreadable checkpoint is skipped with a :class:`CheckpointWarning` naming it.
    ``step``: load exactly that checkpoint instead (:class:`CheckpointError` when it is
    missing or corrupt: no fallback to another step).

    ``allow_pickle``: values saved pickled (anything not an array, tensor, container or plain
    value) are refused with :class:`PickleRefusedError` unless this is True, since unpickling
    runs whatever code the file names: pass it only for checkpoints you trust.

    ``directory``: default ``$HETERO_CHECKPOINT_DIR`` (set by ``hetero-run``); outside hetero-run
    without one, nothing is loaded (None; see the module docstring)."""
    if step is not None and directory is None and not os.environ.get(ENV_CHECKPOINT_DIR):
        raise CheckpointError(f"hetero.checkpoint.store.load: step={step} but no checkpoint directory: outside "
                              f"hetero-run pass directory= (or set {ENV_CHECKPOINT_DIR})")
    root = _resume_root(directory, "load")
    if root is None:
        return None
    found = checkpoints(root)
    if step is not None:
        chosen = [(s, path) for s, path in found if s == step]
        if not chosen:
            have = ", ".join(str(s) for s, _ in found) or "none"
            raise CheckpointError(f"hetero.checkpoint.store.load: no checkpoint of step {step} in "
                                  f"{root} (steps there: {have})")
        return _load_one(chosen[0][1], device, map_location, allow_pickle), step
    for each, path in found:
        try:
            return _load_one(path, device, map_location, allow_pickle), each
        except HeteroError as exc:
            if not isinstance(exc, CheckpointError) or isinstance(exc, PickleRefusedError):
                raise  # the device, the array layer or the pickle rule refused (no such device...): not the file's fault
            _warn_skip(path, exc)
    return None


def _load_one(path: Path, device: Any, map_location: Any, allow_pickle: bool) -> dict[str, Any]:
    try:
        manifest = _manifest(path)
        trusted = _trusted(path)
        payloads = read_payloads(path, manifest["files"], hashed=trusted is None)
        if trusted is not None and fingerprint(path) != trusted:  # changed while being read: check it all
            payloads = read_payloads(path, manifest["files"])
        decoder = Decoder(_lookup(path, payloads), device, map_location, allow_pickle=allow_pickle, source=str(path))
        return dict(decoder.decode(manifest["state"]))
    except HeteroError:
        raise
    except _DAMAGE as exc:  # an unreadable file, or values that do not decode: name the checkpoint
        raise CheckpointError(f"{path}: {type(exc).__name__}: {exc}") from exc
    except MemoryError:  # its payloads fit this machine's memory, not what is free of it now
        raise CheckpointError(f"{path}: not enough free host memory to load it") from None


#: Set by ``hetero-run`` for a restarted worker (see :func:`verified_token`): the checkpoint the
#: launcher has just verified and its files' fingerprint; :func:`load` reads that checkpoint
#: without hashing it again while its files are unchanged (a file rewritten, replaced or touched
#: since is verified as usual).
ENV_VERIFIED = "HETERO_CHECKPOINT_VERIFIED"
#: What :func:`check` may remember per checkpoint directory: its files' fingerprint when checked
#: and the error found then (None: valid).
VerifiedCache = MutableMapping[Path, tuple[Fingerprint, BaseException | None]]


def latest_step(directory: str | os.PathLike[str] | None = None, verified: VerifiedCache | None = None) -> int | None:
    """The step of the newest valid checkpoint (checksums verified), or None. Corrupt ones are
    skipped with a warning, as :func:`load` does.

    ``verified``: a cache kept between calls (a dict) so that a checkpoint checked before,
    whose files have not changed since (:func:`fingerprint`), is not hashed again; see
    :func:`check`. ``directory``: as for :func:`load`."""
    root = _resume_root(directory, "latest_step")
    if root is None:
        return None
    for step, path in checkpoints(root):
        try:
            check(path, verified)
        except _DAMAGE as exc:
            _warn_skip(path, exc)
            continue
        return step
    return None


def check(path: str | os.PathLike[str], verified: VerifiedCache | None = None) -> None:
    """:func:`verify` one checkpoint directory, raising what it raises; with ``verified``, the
    outcome is remembered there and reused while the files' :func:`fingerprint` stays the same
    (a file rewritten, replaced, grown or touched since is checked again)."""
    path = Path(path)
    before = fingerprint(path) if verified is not None else None
    if verified is not None and before is not None:
        known = verified.get(path)
        if known is not None and known[0] == before:
            if known[1] is not None:
                raise known[1]
            return
    started = time.time()
    error: BaseException | None = None
    try:
        verify(path)
    except _DAMAGE as exc:
        error = exc
    if verified is not None and before is not None and settled_at(before, started) and fingerprint(path) == before:
        verified[path] = (before, error)
    if error is not None:
        raise error


def verified_token(path: str | os.PathLike[str], verified: VerifiedCache) -> str | None:
    """The value of :data:`ENV_VERIFIED` that lets a worker's :func:`load` read the checkpoint at
    ``path`` without hashing it again: its files as :func:`check` found them valid (None when
    ``verified`` does not remember them valid)."""
    known = verified.get(Path(path))
    if known is None or known[1] is not None:
        return None
    return f"{os.path.realpath(path)}{os.pathsep}{_token(known[0])}"


def _trusted(path: Path) -> Fingerprint | None:
    """The files' fingerprint now, when :data:`ENV_VERIFIED` vouches for exactly these files."""
    value = os.environ.get(ENV_VERIFIED)
    if not value:
        return None
    where, _, token = value.rpartition(os.pathsep)
    if where != os.path.realpath(path):
        return None
    found = fingerprint(path)
    return found if found is not None and _token(found) == token else None


def _token(found: Fingerprint) -> str:
    return hashlib.sha256(repr(found).encode()).hexdigest()


def verify(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Check one checkpoint directory's manifest and every payload's size and sha256; return
    the manifest. Raises :class:`CheckpointError` naming the first bad file."""
    path = Path(path)
    manifest = _manifest(path)
    read_payloads(path, manifest["files"], keep=False)
    return manifest


def checkpoints(directory: str | os.PathLike[str] | None = None) -> list[tuple[int, Path]]:
    """Every checkpoint directory as ``(step, path)``, newest first (not verified)."""
    root = _root(directory)
    try:
        entries = list(os.scandir(root))
    except FileNotFoundError:
        return []
    found = [(int(m.group(1)), root / e.name) for e in entries if (m := _NAME.match(e.name)) and e.is_dir()]
    return sorted(found, reverse=True)


# -- writing -----------------------------------------------------------------------------
def _checked(step: Any, keep: Any, directory: str | os.PathLike[str] | None, caller: str) -> tuple[int, Path]:
    if isinstance(step, bool) or not isinstance(step, (int, np.integer)) or step < 0:
        raise CheckpointError(f"hetero.checkpoint.store.{caller}: step must be a non-negative int, got {step!r}")
    if keep is not None and (not isinstance(keep, int) or keep < 1):
        raise CheckpointError(f"hetero.checkpoint.store.{caller}: keep must be a positive int or None (keep all), got {keep!r}")
    return int(step), _root(directory)


def _root(directory: str | os.PathLike[str] | None) -> Path:
    return Path(directory) if directory is not None else default_directory()


def _save(root: Path, step: int, keep: int | None, build: Callable[[PayloadWriter], dict[str, Any]]) -> Path:
    final = root / f"step-{step:08d}.hckpt"
    temp = root / f".{final.name}.tmp-{os.getpid()}-{os.urandom(4).hex()}"
    try:
        root.mkdir(parents=True, exist_ok=True)
        _clean_stale(root)
        temp.mkdir(mode=PRIVATE_DIR)
    except OSError as exc:
        raise CheckpointError(f"hetero.checkpoint.store.save: cannot write checkpoints to {root}: {exc.strerror or exc}; "
                              f"pass directory= or set {ENV_CHECKPOINT_DIR} to a writable directory") from exc
    try:
        _write(temp, build, step)
        install(temp, final)
    except BaseException as exc:
        shutil.rmtree(temp, ignore_errors=True)
        if isinstance(exc, OSError) and not isinstance(exc, CheckpointError):
            raise CheckpointError(f"hetero.checkpoint.store.save: writing step {step} to {root} failed: {exc}; "
                                  f"the previous checkpoints are intact ({write_remedy(exc)})") from exc
        raise
    if keep is not None:
        _prune(root, keep, final)
    return final


def _warn_failure(future: Future[Path]) -> None:
    if not future.cancelled() and future.exception() is not None:
        warnings.warn(f"hetero.checkpoint.store.save_async failed: {future.exception()}", CheckpointWarning, stacklevel=1)


def _write(temp: Path, build: Callable[[PayloadWriter], dict[str, Any]], step: int) -> None:
    with ParallelWriter(temp) as write:
        tree = build(write)
        files = write.finish()
    body = {"format": FORMAT, "version": VERSION, "step": step, "time": time.time(), "host": socket.gethostname(),
            "pid": os.getpid(), "state": tree, "files": files}
    body["manifest_sha256"] = _digest(body)
    text = json.dumps(body)  # ASCII: as many bytes as characters
    if len(text) > MAX_MANIFEST_BYTES:
        raise CheckpointError(f"hetero.checkpoint.store.save: the state of step {step} makes a manifest of "
                              f"{format_size(len(text))}, more than load reads ({format_size(MAX_MANIFEST_BYTES)}): "
                              f"it holds too many values; keep long lists of numbers as NumPy arrays (one payload "
                              f"each); the previous checkpoints are intact")
    with open(os.open(temp / MANIFEST, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE), "w", encoding="utf-8") as out:
        out.write(text)  # one write: json.dump would make one per token
        out.flush()
        os.fsync(out.fileno())
    fsync_dir(temp)


def _prune(root: Path, keep: int, saved: Path) -> None:
    for _, path in checkpoints(root)[keep:]:
        if path == saved:
            continue
        trash = path.with_name(f".{path.name}.old-{os.getpid()}-{os.urandom(4).hex()}")
        try:
            os.replace(path, trash)  # out of sight first, so no half-deleted checkpoint is ever listed
            shutil.rmtree(trash, ignore_errors=True)
        except OSError:
            pass  # another process pruned it, or it is busy: harmless, the next save retries


def _clean_stale(root: Path) -> None:
    # Temporary directories of processes that died mid-save (the launcher SIGKILLs workers).
    for entry in os.scandir(root):
        match = _TEMP.match(entry.name)
        if match and not _alive(int(match.group(1))):
            shutil.rmtree(root / entry.name, ignore_errors=True)


def _alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _digest(body: Mapping[str, Any]) -> str:
    canonical = {k: v for k, v in body.items() if k != "manifest_sha256"}
    return hashlib.sha256(json.dumps(canonical, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


# -- reading -----------------------------------------------------------------------------
def _manifest(path: Path) -> dict[str, Any]:
    file = path / MANIFEST
    try:
        body = json.loads(read_manifest(file).decode("utf-8"))
    except CheckpointError:
        raise
    except (OSError, ValueError) as exc:
        raise CheckpointError(f"{file} is missing or not valid JSON ({exc})") from exc
    except RecursionError:
        raise CheckpointError(f"{file} is nested too deeply to be a hetero checkpoint manifest (corrupt)") from None
    if not isinstance(body, dict) or body.get("format") != FORMAT:
        raise CheckpointError(f"{file} is not a hetero checkpoint manifest")
    version = body.get("version", 0)
    if not isinstance(version, int) or isinstance(version, bool):
        raise CheckpointError(f"{file} has format version {version!r}, not a number (the manifest is corrupt)")
    if version > VERSION:
        raise CheckpointError(f"{file} has format version {body.get('version')}, newer than this hetero "
                              f"reads ({VERSION}); upgrade hetero")
    try:
        digest = _digest(body)
    except RecursionError:
        raise CheckpointError(f"{file} is nested too deeply to be a hetero checkpoint manifest (corrupt)") from None
    if body.get("manifest_sha256") != digest:
        raise CheckpointError(f"{file} does not match its own checksum (the manifest is corrupt)")
    check_structure(body, file)  # a fresh digest over a crafted tree: state=[], bytes=2**50, deep nesting...
    return body


def _lookup(path: Path, payloads: Mapping[str, memoryview]) -> PayloadReader:
    def read(name: str) -> memoryview:
        if name not in payloads:
            raise CheckpointError(f"{path / name} is referenced but not listed in {path / MANIFEST}")
        return payloads[name]

    return read


def _warn_skip(path: Path, exc: BaseException) -> None:
    warnings.warn(f"hetero.checkpoint.store: skipping {path}: {exc}; falling back to the previous checkpoint",
                  CheckpointWarning, stacklevel=3)
