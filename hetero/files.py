"""Files hetero replaces so that a reader sees the old contents or the new, never a part: the
project's one atomic write (compile cache, CPU kernel modules, cost model, quarantine store,
heartbeats, fault reports). Checkpoints install whole directories instead
(:mod:`hetero.checkpoint_files`).

Ground floor: imports nothing of hetero's.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from pathlib import Path


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
