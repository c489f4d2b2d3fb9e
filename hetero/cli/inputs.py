"""The files a ``hetero`` command is named on its command line: one that is missing, or is a
folder, is a :class:`~hetero.core.exit_status.UsageError` (exit status 2, nothing done)."""

from __future__ import annotations

from pathlib import Path

from hetero.core.exit_status import UsageError


def existing_file(path: Path | str, what: str, hint: str = "") -> Path:
    """``path``, when it is a file; else a UsageError naming ``what`` it should be (``model file``)."""
    found = Path(path)
    if not found.is_file():
        why = "is a directory" if found.is_dir() else "does not exist"
        raise UsageError(f"{what} {found} {why}" + (f"; {hint}" if hint else ""))
    return found


__all__ = ["existing_file"]
