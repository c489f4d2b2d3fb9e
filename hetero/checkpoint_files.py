"""The payload files of a :mod:`hetero.checkpoint`: written and read by several threads at
once, each hashed (sha256) in the same pass as its I/O, each written file fsynced.

Threads pay off because the slow parts release the GIL: fsync waits on the disk, hashlib
hashes large buffers and file reads copy without it. A model's ``state_dict`` holds hundreds
of tensors; writing them one after another spends most of the time waiting in fsync.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from types import TracebackType
from typing import Any, final

import numpy as np

from hetero.checkpoint_codec import CheckpointError

#: Bytes read, hashed and written at a time: a chunk is hashed while it is still in cache.
CHUNK = 1 << 20
#: Threads for payload I/O: more than cores, since most of their time is spent waiting in fsync.
WORKERS = 8


def payload_name(index: int) -> str:
    return f"{index:06d}.bin"


def write_payload(file: Path, data: Any) -> tuple[str, int]:
    """Write ``data`` (a NumPy array or bytes) to ``file``, fsync it; return (sha256, size)."""
    raw: Any = data.reshape(-1).view(np.uint8) if isinstance(data, np.ndarray) else data
    view = memoryview(raw).cast("B")
    hasher = hashlib.sha256()
    with open(file, "wb") as out:
        for start in range(0, view.nbytes, CHUNK):
            chunk = view[start:start + CHUNK]
            hasher.update(chunk)
            out.write(chunk)
        out.flush()
        os.fsync(out.fileno())
    return hasher.hexdigest(), view.nbytes


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
        self._pending: list[tuple[str, str, Future[tuple[str, int]]]] = []

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
            digest, size = future.result()
            files[name] = {"sha256": digest, "bytes": size, "key": where}
        return files

    def __enter__(self) -> ParallelWriter:
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self._pool.shutdown(wait=True, cancel_futures=True)


def read_payloads(path: Path, files: Mapping[str, Mapping[str, Any]], keep: bool = True) -> dict[str, memoryview]:
    """Every payload of the checkpoint at ``path``, verified against its manifest entry (read by
    several threads); ``keep=False`` only verifies. Raises :class:`CheckpointError` naming the
    first bad file in manifest order."""
    names = list(files)
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


def read_payload(path: Path, name: str, meta: Mapping[str, Any], keep: bool = True) -> memoryview:
    """The verified bytes of one payload (a writable buffer; with ``keep=False`` only checked,
    through one reused chunk, and an empty view returned)."""
    file = path / name
    if "/" in name or name.startswith("."):
        raise CheckpointError(f"{path / 'manifest.json'} names an invalid payload file {name!r}")
    size = int(meta["bytes"])
    buffer: Any = np.empty(size if keep else 0, np.uint8)  # np.empty: no zero-filling to pay for
    data = memoryview(buffer).cast("B")
    scratch = data if keep else memoryview(bytearray(CHUNK))
    hasher = hashlib.sha256()
    total = 0
    with open(file, "rb", buffering=0) as src:
        while True:
            window = scratch[total:total + CHUNK] if keep else scratch
            n = src.readinto(window) if len(window) else 0
            if not n:
                total += len(src.read(1))  # a file longer than the manifest says is corrupt too
                break
            hasher.update(window[:n])
            total += n
    if total != size:
        raise CheckpointError(f"{file} has {total if total <= size else 'more'} bytes, the manifest says {size} "
                              f"(truncated or corrupt)")
    if hasher.hexdigest() != meta["sha256"]:
        raise CheckpointError(f"{file} does not match its sha256 in the manifest (corrupt)")
    return data


def fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
