"""``hetero top [--interval S] [--once] [--metrics URL]... [--run-dir DIR]``: a live terminal view
of this machine's devices (health, quarantine, memory, launches), the quarantine's entries with
the time they have left, and, when pointed at them, a running ``hetero-run`` (its workers,
restarts, faults) and ``hetero serve`` (request rates, pool members).

The view is ``rich.live.Live`` on the terminal's alternate screen; ``q`` (or Ctrl-C, or SIGTERM)
quits and gives the terminal back as it was. ``--once`` prints one frame and exits.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import select
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType, TracebackType
from typing import IO, Any

#: The shortest refresh ``--interval`` takes (each frame asks every device its health).
MIN_INTERVAL = 0.1
QUIT_KEYS = (b"q", b"Q")


def _interval(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= MIN_INTERVAL):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds >= {MIN_INTERVAL:g}")
    return seconds


def _metrics_url(text: str) -> str:
    from hetero.cli.prometheus_text import metrics_url  # imported when used: every `hetero` builds this parser

    return metrics_url(text)


class Keys:
    """The terminal's keys while the view runs: stdin in cbreak mode (each key arrives at once and is
    not echoed; Ctrl-C still interrupts), put back as it was on exit. Without a terminal on stdin
    (a pipe, a service) no key is read and only signals stop the view."""

    def __init__(self, stream: IO[Any]) -> None:
        self.fd: int | None = None
        self._saved: Any = None
        try:
            if stream.isatty():
                self.fd = stream.fileno()
        except (AttributeError, ValueError, OSError):  # closed or replaced stdin
            self.fd = None

    def __enter__(self) -> Keys:
        if self.fd is not None:
            try:
                import termios
                import tty

                self._saved = termios.tcgetattr(self.fd)
                tty.setcbreak(self.fd)
            except (ImportError, OSError):  # termios is POSIX only, and a tty may refuse it
                self.fd = None
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if self.fd is not None and self._saved is not None:
            import termios

            with contextlib.suppress(OSError):
                termios.tcsetattr(self.fd, termios.TCSADRAIN, self._saved)

    def quit_within(self, seconds: float) -> bool:
        """Wait up to ``seconds``; True as soon as a quit key is pressed."""
        if self.fd is None:
            time.sleep(seconds)
            return False
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            ready, _, _ = select.select([self.fd], [], [], left)
            if not ready:
                return False
            pressed = os.read(self.fd, 64)
            if not pressed or any(key in pressed for key in QUIT_KEYS):  # EOF: the terminal went away
                return True
        return False


@contextlib.contextmanager
def _sigterm_exits() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the terminal is given back (a kill would leave it in cbreak)."""

    def stop(signum: int, frame: FrameType | None) -> None:
        raise SystemExit(128 + signum)

    try:
        previous = signal.signal(signal.SIGTERM, stop)
    except ValueError:  # not the main thread: leave SIGTERM as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def cmd_top(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.live import Live
    from rich.text import Text

    from hetero.cli.top_gather import Gatherer
    from hetero.cli.top_view import render

    gatherer = Gatherer(args.run_dir, args.metrics, timeout=min(2.0, max(0.5, args.interval)))
    console = Console()
    if args.once:
        console.print(render(gatherer.frame()))
        return 0
    try:
        with _sigterm_exits(), Keys(sys.stdin) as keys, \
                Live(Text("hetero top: finding devices..."), console=console, screen=True, auto_refresh=False) as live:
            live.refresh()
            while True:
                live.update(render(gatherer.frame(), args.interval), refresh=True)
                if keys.quit_within(args.interval):
                    break
    except KeyboardInterrupt:
        pass
    return 0


def add_commands(sub: Any) -> dict[str, Callable[[argparse.Namespace], int]]:
    """Add ``top`` to ``sub`` (from ``add_subparsers``); returns ``{"top": handler}``."""
    what = "a live view: devices, quarantine, hetero-run workers, hetero serve requests"
    parser = sub.add_parser(
        "top", help=what,
        description="A live view of this machine's devices (health, quarantine, memory, kernel launches), the "
                    "quarantine with the time each entry has left, and, when pointed at them, a hetero-run's "
                    "workers and restarts and a hetero serve's request rates. q or Ctrl-C quits. Example: "
                    "hetero top --metrics 127.0.0.1:9400 --run-dir runs/latest")
    parser.add_argument("--interval", type=_interval, default=1.0, metavar="SECONDS",
                        help=f"seconds between refreshes (default: 1; at least {MIN_INTERVAL:g})")
    parser.add_argument("--once", action="store_true", help="print one frame and exit (for scripts)")
    parser.add_argument("--metrics", action="append", type=_metrics_url, default=[], metavar="URL",
                        help="a Prometheus endpoint of hetero-run (--metrics-port) or hetero serve (/metrics), "
                             "e.g. 127.0.0.1:9400 (http:// and /metrics are added when missing); may repeat")
    parser.add_argument("--run-dir", type=Path, metavar="DIR",
                        help="a hetero-run run directory: its events file and its workers' heartbeats")
    return {"top": cmd_top}
