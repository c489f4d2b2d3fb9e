"""How hetero's commands (``hetero`` and ``hetero-run``) end: one table of exit statuses, one line
on stderr for an error, a traceback only when asked for (``--debug``, or ``HETERO_LOG=DEBUG``).

======  ===========================================================================================
status  meaning
======  ===========================================================================================
0       done
1       the command ran and failed: a device or build error, a library missing, a port taken...
2       bad arguments, nothing done: an unknown option, device or backend name, a bad value, a
        file that is missing or not of the kind the command takes
130     interrupted (Ctrl-C); ``hetero-run``: 128+N when stopped by signal N; 141: the reader of
        stdout went away (``hetero completion bash | head``), said quietly as a shell would
======  ===========================================================================================

On the ground floor because both commands use it and ``hetero-run`` (the launcher) sits below
the ``hetero`` command.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from typing import IO, NoReturn

from hetero.core.errors import ConfigError, DeviceNotFoundError, DeviceSpecError, HeteroError

OK = 0
FAILED = 1
USAGE = 2
INTERRUPTED = 130


class UsageError(HeteroError, ValueError):
    """A command-line argument that cannot be acted on: a missing file, a value out of range. The
    command exits :data:`USAGE` (2) having done nothing."""


#: Errors that say the user named something that is not there or wrote it wrong: exit status 2.
USAGE_ERRORS: tuple[type[BaseException], ...] = (UsageError, DeviceNotFoundError, DeviceSpecError, ConfigError)


class Parser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, ``PROG: error: MESSAGE (see 'PROG --help')``,
    and exit status :data:`USAGE` (argparse prints the usage block first; ``--help`` still shows it).
    Subparsers made by ``add_subparsers`` are of this class too."""

    def error(self, message: str) -> NoReturn:
        self.exit(USAGE, f"{self.prog}: error: {message} (see '{self.prog} --help')\n")


def usage_error(prog: str, message: str, stream: IO[str] | None = None) -> int:
    """Say ``prog: error: message (see 'prog --help')`` as :class:`Parser` does; :data:`USAGE`. For a
    handler that finds its arguments wanting after parsing (a command group given no action)."""
    print(f"{prog}: error: {message} (see '{prog} --help')", file=stream or sys.stderr)
    return USAGE


def status_of(error: BaseException) -> int:
    """The exit status ``error`` ends a command with (see the module docstring)."""
    if isinstance(error, KeyboardInterrupt):
        return INTERRUPTED
    return USAGE if isinstance(error, USAGE_ERRORS) else FAILED


def one_line(error: BaseException) -> str:
    """``error`` as one line: hetero's own errors by their message, others with their type (a bug, or
    a library's error hetero did not translate); a message of several lines keeps its first."""
    text = str(error).strip()
    if not isinstance(error, HeteroError) or not text:
        text = f"{type(error).__name__}: {text}" if text else type(error).__name__
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    more = len(lines) - 1
    return lines[0] + (f" ({more} more line{'s' if more > 1 else ''}: run with --debug to see them)" if more else "")


def debug_wanted(flag: bool = False) -> bool:
    """Whether a failing command prints its traceback: ``--debug``, or ``HETERO_LOG=DEBUG``."""
    if flag:
        return True
    from hetero.core.config import get_config

    try:
        return get_config().log == "DEBUG"
    except HeteroError:  # a bad configuration is reported by the command itself
        return False


def report(prog: str, error: BaseException, debug: bool = False, stream: IO[str] | None = None) -> int:
    """Say ``prog: error: ...`` in one line on ``stream`` (stderr), with the traceback first under
    ``debug``; the exit status for ``error``."""
    if isinstance(error, BrokenPipeError):  # stdout's reader is gone: nothing to say, and no one to say it to
        _silence_stdout()
        return 128 + signal.SIGPIPE
    stream = stream or sys.stderr
    if debug:
        traceback.print_exception(error, file=stream)
    if isinstance(error, KeyboardInterrupt):
        print(f"{prog}: interrupted", file=stream)
    else:
        print(f"{prog}: error: {one_line(error)}", file=stream)
    stream.flush()
    return status_of(error)


def _silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush does not fail again at exit."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError):  # no real stdout (a test's capture): nothing will be flushed to a pipe
        pass


__all__ = ["FAILED", "INTERRUPTED", "OK", "USAGE", "USAGE_ERRORS", "Parser", "UsageError", "debug_wanted",
           "one_line", "report", "status_of", "usage_error"]
