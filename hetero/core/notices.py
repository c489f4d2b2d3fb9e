"""How hetero speaks: its warning categories, its logger's handlers, and notices that are both.

- **Warnings** (:mod:`warnings`): :class:`HeteroWarning` is the base of every warning hetero issues,
  so ``-W error::hetero.HeteroWarning`` or pytest's ``filterwarnings`` catch them all;
  :class:`PerformanceWarning` marks work that runs, but slower than the user would expect (a host
  fallback, an ONNX model on the CPU instead of the device asked for).
- **Logging**: the ``hetero`` logger carries a :class:`logging.NullHandler`, as a library's should,
  and one more handler that prints to stderr *only while the application has configured no
  logging of its own* (the root logger has no handler). Before ``logging.basicConfig`` hetero's
  warnings are seen; after it they go to the application's handlers alone, never twice. The
  ``HETERO_LOG`` level applies to the ``hetero`` logger either way.
- **Notices** (:func:`notice`): a performance notice is a warning *and* a log record. The console
  shows it once (the warning, attributed to the user's line that caused it); the record, at INFO,
  reaches the application's log handlers (the stderr handler above skips it).
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from types import FrameType


class HeteroWarning(UserWarning):
    """The base of every warning hetero issues (filter them all with this category)."""


class PerformanceWarning(HeteroWarning):
    """Work that runs, but not where or how fast the user would expect (e.g. a host fallback)."""


class _UntilConfigured(logging.StreamHandler):  # type: ignore[type-arg]
    """Prints hetero's records to stderr while the application has configured no logging."""

    def __init__(self) -> None:
        super().__init__(sys.stderr)
        self.setFormatter(logging.Formatter("hetero %(levelname)s %(name)s: %(message)s"))

    def emit(self, record: logging.LogRecord) -> None:
        if logging.getLogger().handlers or getattr(record, "hetero_warned", False):
            return  # the application's handlers have it (propagation), or the warning already showed it
        self.stream = sys.stderr  # as it is now (pytest's capsys, a redirected stderr)
        super().emit(record)


def install_handlers(level: int | str) -> None:
    """Set the ``hetero`` logger's level and give it its two handlers, once."""
    logger = logging.getLogger("hetero")
    logger.setLevel(level)
    if not any(isinstance(h, logging.NullHandler) for h in logger.handlers):
        logger.addHandler(logging.NullHandler())
    if not any(isinstance(h, _UntilConfigured) for h in logger.handlers):
        logger.addHandler(_UntilConfigured())


def notice(logger: logging.Logger, message: str, category: type[Warning] = PerformanceWarning) -> None:
    """Issue ``message`` as a warning of ``category``, attributed to the first caller outside hetero
    (raised under ``-W error``), and as an INFO record on ``logger`` for the application's logs (INFO:
    an application logging WARNING to the console is not shown the same words twice)."""
    warnings.warn(message, category, stacklevel=_outside_hetero())
    logger.info("%s", message, extra={"hetero_warned": True})


def _package_roots() -> tuple[str, ...]:
    """The folders hetero's modules load from: the package and the top-level folders it links."""
    package = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    roots = {package + os.sep}
    for name in ("backends", "compiler", "scheduler", "fault"):
        roots.add(os.path.realpath(os.path.join(package, name)) + os.sep)
    return tuple(roots)


_ROOTS = _package_roots()


def _outside_hetero() -> int:
    """The ``stacklevel`` that names the innermost frame outside hetero, seen from :func:`notice`'s caller."""
    frame = sys._getframe(1)  # notice itself
    level = 1
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_ROOTS):
        frame = frame.f_back
        level += 1
    return level


def outside_frame() -> FrameType | None:
    """The innermost frame of the caller's stack that is outside hetero (the user's line), or None."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and os.path.abspath(frame.f_code.co_filename).startswith(_ROOTS):
        frame = frame.f_back
    return frame


__all__ = ["HeteroWarning", "PerformanceWarning", "install_handlers", "notice", "outside_frame"]
