"""Files hetero replaces so that a reader sees the old contents or the new, never a part: the
project's one atomic write (compile cache, CPU kernel modules, cost model, quarantine store,
heartbeats, fault reports), and the one inter-process lock of its JSON stores (quarantine, cost
model). Checkpoints install whole directories instead (:mod:`hetero.checkpoint_files`).

Ground floor: imports nothing of hetero's.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

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
