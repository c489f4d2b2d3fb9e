"""What a kernel's source text yields that depends on that text alone, kept on disk so that a new
process whose compile cache holds the kernel reads it instead of computing it again: where the
function's block ends in its file (``inspect.getsourcelines`` tokenizes the file from the ``def``
on: about a millisecond a kernel) and the free ``name.attr`` chains of its body (an ``ast.parse``
and a walk: up to another millisecond). Both are keyed by a SHA-256 of what they are computed
from (the whole file's text and the function's first line; the function's text and locals), so an
edited file or function never reads another's entry; an entry that cannot be read or does not
parse is computed again and rewritten. Entries live in ``<cache_dir>/source-index/`` as small
JSON files (data only: never executed), written atomically.
"""

from __future__ import annotations

import hashlib
import json
import logging
import shutil
from pathlib import Path
from typing import Any

from hetero.core.config import get_config
from hetero.core.files import atomic_write

log = logging.getLogger("hetero.compiler")
_FORMAT = 1  # bump when what an entry holds changes


def _folder() -> Path:
    return get_config().cache_dir / "source-index"


def _digest(*parts: Any) -> str:
    return hashlib.sha256(json.dumps([_FORMAT, *parts], separators=(",", ":")).encode("utf-8")).hexdigest()


def file_digest(lines: list[str]) -> str:
    """The digest of a file's text as ``linecache`` holds it (tens of microseconds for a module)."""
    return hashlib.sha256("".join(lines).encode("utf-8")).hexdigest()


def lookup(kind: str, *key: Any) -> Any:
    """The value stored for ``kind`` and ``key``, or None (absent, unreadable, or not this key's)."""
    digest = _digest(kind, *key)
    try:
        data = json.loads((_folder() / f"{digest}.json").read_text("utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("key") != digest:
        return None
    return data.get("value")


def store(kind: str, value: Any, *key: Any) -> None:
    """Keep ``value`` (JSON data) for ``kind`` and ``key``; a cache that cannot be written is skipped."""
    digest = _digest(kind, *key)
    folder = _folder()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        atomic_write(folder / f"{digest}.json", json.dumps({"key": digest, "value": value}))
    except OSError as exc:
        log.debug("hetero: could not keep the source index entry %s: %s", digest, exc)


def clear() -> int:
    """Remove every entry (``hetero cache clear``); how many there were."""
    folder = _folder()
    count = sum(1 for _ in folder.glob("*.json")) if folder.is_dir() else 0
    shutil.rmtree(folder, ignore_errors=True)
    return count
