"""Files hetero replaces so that a reader sees the old contents or the new, never a part: the
project's one atomic write (compile cache, CPU kernel modules, cost model, quarantine store,
heartbeats, fault reports), and the one inter-process lock of its JSON stores (quarantine, cost
model), and the one removal of a whole directory that no reader sees half-done (the compile
cache's generated-module folders). Checkpoints install whole directories instead
(:mod:`hetero.checkpoint_files`). And the one guarded open of a file hetero reads whole
(:func:`open_regular_file`: cache entries, bundles), which refuses FIFOs and devices.

Ground floor: imports nothing of hetero's.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # pragma: no cover - Windows: no inter-process lock
    fcntl = None  # type: ignore[assignment]


def atomic_write(path: Path, data: bytes | str, *, durable: bool = False, mode: int | None = None) -> None:
    """Replace ``path`` with ``data`` (``str`` is written as UTF-8) atomically.

    The data goes to a temp file in the same directory (``os.replace`` is atomic only within one
    file system), which is then renamed over ``path``; on any failure the temp file is removed and
    ``path`` is untouched. ``durable``: fsync the file before the rename, so the new contents
    survive a crash (stores that are the only copy of their data: the quarantine, the cost model);
    without it a crash may lose the new contents but never tears them (the compile cache's entries
    carry a checksum; heartbeats and fault reports are rewritten within seconds). The file is
    private to its owner (0600) unless ``mode`` says otherwise.
    """
    payload = data.encode("utf-8") if isinstance(data, str) else data
    fd, temp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(payload)
            if durable:
                out.flush()
                os.fsync(out.fileno())
        if mode is not None:
            os.chmod(temp, mode)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


@contextlib.contextmanager
def locked(path: Path) -> Iterator[None]:
    """Hold the exclusive inter-process lock of the store ``path`` for the block: ``flock`` on its
    sibling ``NAME.lock`` (made 0600 with its folder; the store itself need not exist). Raises
    OSError when the lock file cannot be made (the caller names its remedy). Without ``fcntl``
    (Windows) the block runs unlocked."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path.with_name(path.name + ".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        if fcntl is not None:
            fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing the descriptor releases the lock


def remove_tree(path: Path) -> bool:
    """Remove the directory ``path`` so that no reader finds it half-deleted: it is first renamed
    to a hidden sibling (``.NAME.removing-XXXX``, atomic), then deleted. False when it was not
    there (another process removed it first). A removal cut short leaves only the hidden sibling,
    which :func:`remove_leftovers` deletes later."""
    hidden = Path(tempfile.mkdtemp(dir=path.parent, prefix=f".{path.name}.removing-"))
    try:
        os.rename(path, hidden / path.name)
    except FileNotFoundError:
        hidden.rmdir()
        return False
    except BaseException:
        with contextlib.suppress(OSError):
            hidden.rmdir()
        raise
    shutil.rmtree(hidden, ignore_errors=True)
    return True


def remove_leftovers(folder: Path) -> None:
    """Delete what :func:`remove_tree` calls in ``folder`` left behind when they were cut short."""
    with contextlib.suppress(OSError):
        for leftover in folder.glob(".*.removing-*"):
            shutil.rmtree(leftover, ignore_errors=True)


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
