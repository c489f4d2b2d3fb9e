"""The payload files of a :mod:`hetero.checkpoint.store`: written and read by several threads at
once, each hashed (sha256) in the same pass as its I/O, each written file fsynced; and the
rename that installs a finished checkpoint.

Reading trusts no file: only regular files are opened (a FIFO would block, a device never ends),
sizes are checked on the open descriptor before a buffer is allocated, a checkpoint larger than
this machine's memory is refused unread, and a payload is hashed as it is read, so that a wrong
one is rejected before it is read whole into memory (see :func:`read_payload`).

Threads pay off because the slow parts release the GIL: fsync waits on the disk, hashlib
hashes large buffers and file reads copy without it. A model's ``state_dict`` holds hundreds
of tensors; writing them one after another spends most of the time waiting in fsync.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import re
import shutil
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, TypeVar, final

import numpy as np

from hetero.checkpoint.codec import CheckpointError
from hetero.core.files import NotARegularFileError, open_regular_file
from hetero.core.sizes import format_size
from hetero.fault.protocol import ENV_CHECKPOINT_DIR

#: Bytes read, hashed and written at a time: a chunk is hashed while it is still in cache.
CHUNK = 1 << 20
#: Threads for payload I/O: more than cores, since most of their time is spent waiting in fsync.
WORKERS = 8
#: Payloads larger than this are hashed in parts of this size, on every core at once; the
#: manifest then lists each part's sha256 (and ``part_bytes``).
PART = 16 << 20
#: Checkpoint files and folders are private to their owner, like the compile cache's: a
#: checkpoint holds the model and optimizer state, and often data.
PRIVATE_FILE = 0o600
PRIVATE_DIR = 0o700

_HASHERS: ThreadPoolExecutor | None = None  # one thread per core, for the parts of big payloads
_HASHERS_LOCK = threading.Lock()
T = TypeVar("T")


def _forget_threads() -> None:
    # A forked child has none of the parent's threads: a pool inherited from it would never run.
    global _HASHERS, _HASHERS_LOCK
    _HASHERS, _HASHERS_LOCK = None, threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_threads)


def payload_name(index: int) -> str:
    return f"{index:06d}.bin"


def write_payload(file: Path, data: Any) -> dict[str, Any]:
    """Write ``data`` (a NumPy array or bytes) to ``file`` and fsync it; return its manifest entry
    (``bytes``, ``sha256``: one digest, or a list of the parts' for payloads over :data:`PART`)."""
    raw: Any = data.reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) else data
    view = memoryview(raw).cast("B")
    size = view.nbytes
    parts = [view[offset:offset + PART] for offset in range(0, size, PART)] if size > PART else []
    part_digests = _in_parallel(lambda part: hashlib.sha256(part).hexdigest(), parts)  # while we write
    hasher = None if parts else hashlib.sha256()
    with open(os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, PRIVATE_FILE), "wb") as out:
        for start in range(0, size, CHUNK):
            chunk = view[start:start + CHUNK]
            if hasher is not None:
                hasher.update(chunk)  # hashed while the chunk is in cache
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    if hasher is not None:
        return {"bytes": size, "sha256": hasher.hexdigest()}
    return {"bytes": size, "part_bytes": PART, "sha256": part_digests()}


@final
class ParallelWriter:
    """The ``write(where, data) -> file name`` callback the codec calls for each payload: the
    file is written by a worker thread while the codec goes on. At most ``2 * WORKERS`` writes
    wait at a time, which bounds the host copies of device arrays alive at once.

        >>> with ParallelWriter(temp) as write:
        ...     tree = encode(state, write)
        ...     files = write.finish()      # waits; raises the first failure
    """

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self._pool = ThreadPoolExecutor(WORKERS, thread_name_prefix="hetero-checkpoint-io")
        self._slots = threading.BoundedSemaphore(2 * WORKERS)
        self._pending: list[tuple[str, str, Future[dict[str, Any]]]] = []

    def __call__(self, where: str, data: Any) -> str:
        name = payload_name(len(self._pending))
        self._slots.acquire()
        try:
            future = self._pool.submit(write_payload, self.directory / name, data)
        except RuntimeError:  # the interpreter is exiting (a pending save_async): no new threads, write here
            future = Future()
            try:
                future.set_result(write_payload(self.directory / name, data))
            except Exception as exc:  # noqa: BLE001 - kept for finish() to raise, like a thread's failure
                future.set_exception(exc)
        future.add_done_callback(lambda _: self._slots.release())
        self._pending.append((name, where, future))
        return name

    def finish(self) -> dict[str, dict[str, Any]]:
        """Wait for every write; the manifest's ``files`` entries, in payload order."""
        files: dict[str, dict[str, Any]] = {}
        for name, where, future in self._pending:
            files[name] = {**future.result(), "key": where}
        return files

    def __enter__(self) -> ParallelWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def read_payloads(path: Path, files: Mapping[str, Mapping[str, Any]], keep: bool = True,
                  hashed: bool = True) -> dict[str, memoryview]:
    """Every payload of the checkpoint at ``path``, verified against its manifest entry (read by
    several threads); ``keep=False`` only verifies; ``hashed=False`` checks sizes only (for files
    verified already). Raises :class:`CheckpointError` naming the first bad file in manifest order,
    and, before anything is read, for payloads that add up to more than this machine's memory."""
    check_fits_memory(path, files)
    names = list(files)
    if not hashed:
        return {name: read_unhashed(path, name, files[name]) for name in names}
    if len(names) <= 1:
        return {name: read_payload(path, name, files[name], keep) for name in names}
    pool = ThreadPoolExecutor(min(WORKERS, len(names)), thread_name_prefix="hetero-checkpoint-io")
    try:
        try:
            futures = [pool.submit(read_payload, path, name, files[name], keep) for name in names]
        except RuntimeError:  # the interpreter is exiting: no new threads, read here
            return {name: read_payload(path, name, files[name], keep) for name in names}
        return {name: future.result() for name, future in zip(names, futures)}
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def host_memory() -> int | None:
    """This machine's physical memory in bytes, or None where the system does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


def check_fits_memory(path: Path, files: Mapping[str, Mapping[str, Any]]) -> None:
    """Refuse a checkpoint whose payloads add up to more than this machine's memory: ``load`` holds
    them all at once, so it could never load it, and hashing a terabyte the manifest claims (a
    sparse file reads as zeros, whose digests anyone can compute) would take hours."""
    total = sum(int(meta["bytes"]) for meta in files.values())
    memory = host_memory()
    if memory is not None and total > memory:
        raise CheckpointError(f"{path}: its payloads add up to {format_size(total)}, more than this machine's "
                              f"{format_size(memory)} of memory, so it cannot be loaded here (corrupt, or saved "
                              f"by a bigger machine: load it there)")


def _open(file: Path, size: int) -> BinaryIO:
    """``file`` opened for reading, if it is a regular file of ``size`` bytes: checked on the
    descriptor before anything is read or allocated (a FIFO would block the open, a device never
    ends, and a manifest claiming 2**50 bytes must not cost 2**50 bytes)."""
    try:
        src = open_regular_file(file)
    except NotARegularFileError as exc:
        raise CheckpointError(f"{exc}: a checkpoint holds regular files only (damaged, or not written by "
                              f"hetero)") from None
    actual = os.fstat(src.fileno()).st_size
    if actual != size:
        src.close()
        raise CheckpointError(f"{file} has {actual} bytes, the manifest says {size} (truncated or corrupt)")
    return src


def _stream(fd: int, file: Path, span: tuple[int, int], into: memoryview | None, hasher: Any,
            stop: threading.Event | None = None) -> bool:
    """Read the bytes ``span`` (offset, length) of ``file`` in chunks, into ``into`` at the same
    offsets or through one reused chunk, feeding ``hasher`` (None: no hash). False when ``stop``
    was set before the end."""
    offset, length = span
    scratch = memoryview(bytearray(min(CHUNK, length))) if into is None else None
    done = 0
    while done < length:
        if stop is not None and stop.is_set():
            return False
        size = min(CHUNK, length - done)
        window = into[offset + done:offset + done + size] if into is not None else scratch[:size]  # type: ignore[index]
        n = os.preadv(fd, [window], offset + done)
        if n <= 0:
            raise CheckpointError(f"{file} ended early at byte {offset + done} (changed while being read)")
        if hasher is not None:
            hasher.update(window[:n])
        done += n
    return True


def _check_end(fd: int, file: Path, size: int) -> None:
    # a file longer than the manifest says is corrupt too (it grew after the size was checked)
    if os.pread(fd, 1, size):
        raise CheckpointError(f"{file} has more bytes than the manifest says ({size}): changed while being read")


def _buffer(size: int) -> memoryview:
    return memoryview(np.empty(size, np.uint8)).cast("B")  # np.empty: no zero-filling to pay for


def read_unhashed(path: Path, name: str, meta: Mapping[str, Any]) -> memoryview:
    """The bytes of one payload, its size checked but not its sha256 (see :func:`read_payloads`)."""
    file = _payload_file(path, name)
    size = int(meta["bytes"])
    with _open(file, size) as src:
        data = _buffer(size)
        _stream(src.fileno(), file, (0, size), data, None)
        _check_end(src.fileno(), file, size)
    return data


def _payload_file(path: Path, name: str) -> Path:
    if "/" in name or name.startswith("."):
        raise CheckpointError(f"{path / 'manifest.json'} names an invalid payload file {name!r}")
    return path / name


def read_payload(path: Path, name: str, meta: Mapping[str, Any], keep: bool = True) -> memoryview:
    """The verified bytes of one payload (a writable buffer; with ``keep=False`` only checked,
    through one reused chunk, and an empty view returned).

    A wrong payload is rejected before it is read whole into memory wherever the manifest allows:
    parts are checked as they arrive and the first bad one stops the rest; a payload with one
    digest is hashed through one reused chunk first when it is bigger than a part, and only then
    read into memory (hashed again as it is, in case it changed meanwhile)."""
    file = _payload_file(path, name)
    size = int(meta["bytes"])
    digests = meta["sha256"]
    with _open(file, size) as src:
        fd = src.fileno()
        data = _buffer(size if keep else 0)
        if isinstance(digests, list):
            _check_parts(fd, file, size, int(meta.get("part_bytes") or 0), digests, data if keep else None)
        else:
            if not keep or size > PART:
                _check_whole(fd, file, size, digests, None)
            if keep:
                _check_whole(fd, file, size, digests, data)
        _check_end(fd, file, size)
    return data


def _check_whole(fd: int, file: Path, size: int, digest: str, into: memoryview | None) -> None:
    hasher = hashlib.sha256()
    _stream(fd, file, (0, size), into, hasher)
    if hasher.hexdigest() != digest:
        raise CheckpointError(f"{file} does not match its sha256 in the manifest (corrupt)")


def _check_parts(fd: int, file: Path, size: int, part: int, digests: list[str], into: memoryview | None) -> None:
    """Verify a payload hashed in parts (reading it into ``into`` when given), parts in parallel;
    the first part found wrong stops the parts not yet read."""
    ranges = [(offset, min(part, size - offset)) for offset in range(0, size, part)] if part > 0 else []
    if len(ranges) != len(digests):
        raise CheckpointError(f"{file}: the manifest lists {len(digests)} part digests for {size} bytes in parts of "
                              f"{part} (the manifest is inconsistent)")
    stop = threading.Event()

    def matches(index: int) -> bool | None:  # None: not read to its end, another part was wrong first
        hasher = hashlib.sha256()
        try:
            if not _stream(fd, file, ranges[index], into, hasher, stop):
                return None
        except BaseException:
            stop.set()
            raise
        if hasher.hexdigest() != digests[index]:
            stop.set()
            return False
        return True

    found = _in_parallel(matches, range(len(ranges)))()  # every part done or stopped: the file can close
    bad = found.index(False) if False in found else None
    if bad is not None:
        raise CheckpointError(f"{file} does not match its sha256 in the manifest (part {bad + 1} of {len(digests)}, "
                              f"from byte {ranges[bad][0]}; corrupt)")


def _in_parallel(fn: Callable[[Any], T], items: Sequence[Any]) -> Callable[[], list[T]]:
    """Start ``fn`` on each item on the hashing threads; the returned function waits for all of
    them, then returns the results in order (or raises the first item's error, in order). Runs in
    the caller's thread when the interpreter is exiting."""
    if len(items) <= 1:
        return lambda: [fn(item) for item in items]
    global _HASHERS
    try:
        with _HASHERS_LOCK:
            if _HASHERS is None:
                _HASHERS = ThreadPoolExecutor(_cores(), thread_name_prefix="hetero-checkpoint-hash")
            futures = [_HASHERS.submit(fn, item) for item in items]
    except RuntimeError:  # no new threads while the interpreter exits
        return lambda: [fn(item) for item in items]

    def collect() -> list[T]:
        wait(futures)  # none still reading a buffer or a descriptor its caller is about to drop
        return [future.result() for future in futures]

    return collect


def _cores() -> int:
    """The cores this process may run on (its affinity, which a container or ``taskset`` narrows)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


#: How often :func:`install` retries when other processes install the same step at the same time.
INSTALL_ATTEMPTS = 20


class ConcurrentSaveError(CheckpointError):
    """Other processes kept replacing the same step's checkpoint while this one tried to install it."""


def install(temp: Path, final: Path) -> None:
    """Rename ``temp`` to ``final``; a checkpoint of that step already there (an earlier save, or one
    another process installed this very moment: the last one in wins) is moved aside and removed."""
    old = final.with_name(f".{final.name}.old-{os.getpid()}-{os.urandom(4).hex()}")
    for _ in range(INSTALL_ATTEMPTS):
        moved = False
        try:
            os.replace(final, old)  # replacing a step: move the old one aside, remove it once the new one is in
            moved = True
        except FileNotFoundError:
            pass  # no such step yet (or another process just moved it aside)
        try:
            os.replace(temp, final)
        except OSError as exc:
            if exc.errno not in (errno.ENOTEMPTY, errno.EEXIST):
                if moved:
                    with contextlib.suppress(OSError):
                        os.replace(old, final)
                raise
            # another process installed the same step between our two renames: theirs goes aside too
            if moved:
                shutil.rmtree(old, ignore_errors=True)
            continue
        fsync_dir(final.parent)
        if moved:
            shutil.rmtree(old, ignore_errors=True)
        return
    raise ConcurrentSaveError(
        f"hetero.checkpoint.store.save: another process kept saving step {_step_of(final)} to {final.parent} at the same "
        f"time ({INSTALL_ATTEMPTS} tries); nothing of this save was kept. Give each process its own directory "
        f"(directory=, or {ENV_CHECKPOINT_DIR}), or let one rank save")


def _step_of(path: Path) -> str:
    match = re.match(r"^step-(\d+)\.hckpt$", path.name)
    return str(int(match.group(1))) if match else path.name


def write_remedy(exc: OSError) -> str:
    """What to do about a failed write, by what failed."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "the disk or your quota is full: free space, or pass directory= elsewhere"
    if exc.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return f"no permission to write there: pass directory= or set {ENV_CHECKPOINT_DIR} to a writable directory"
    if exc.errno == errno.ENOENT:
        return ("a file or folder of this save vanished while it was written: another process removed it "
                "(a second saver of the same directory, or a cleanup); give each process its own directory")
    return f"{errno.errorcode.get(exc.errno or 0, 'error')}: check the file system"


# -- a checkpoint's identity, for checks remembered while its files are unchanged ------------
#: A checkpoint directory's files as (name, inode, size, mtime in ns, ctime in ns): see :func:`fingerprint`.
Fingerprint = tuple[tuple[str, int, int, int, int], ...]
#: A check is remembered only if every file was last changed at least this long before it began,
#: so that no later change can leave the same change time (file-system timestamps are coarse:
#: one clock tick, 1-10 ms) behind.
SETTLED_SECONDS = 0.02


def fingerprint(path: str | os.PathLike[str]) -> Fingerprint | None:
    """The identity of a checkpoint directory's files as the file system reports them (name,
    inode, size, modification and status-change time in ns), or None when it cannot be listed.

    The status-change time (ctime) is what makes it trustworthy: a program can put a file's
    mtime back after rewriting it (``os.utime``, ``touch -d``, ``rsync -t``), but setting either
    time moves the ctime to now, and nothing but the system clock sets it."""
    try:
        with os.scandir(path) as entries:
            found = []
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    info = entry.stat(follow_symlinks=False)
                    found.append((entry.name, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns))
    except OSError:
        return None
    return tuple(sorted(found))


def settled(path: str | os.PathLike[str]) -> bool:
    """Whether every file of the checkpoint at ``path`` was last changed over
    :data:`SETTLED_SECONDS` ago (a check begun now can be remembered)."""
    found = fingerprint(path)
    return found is not None and settled_at(found, time.time())


def settled_at(found: Fingerprint, at: float) -> bool:
    newest = max((max(mtime, ctime) for *_, mtime, ctime in found), default=0)
    return newest <= (at - SETTLED_SECONDS) * 1e9
