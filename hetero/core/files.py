"""Files hetero replaces so that a reader sees the old contents or the new, never a part: the
project's one atomic write (compile cache, CPU kernel modules, cost model, quarantine store,
heartbeats, fault reports), the one inter-process lock, the one locked JSON store built on both
(:class:`JsonStore`: the quarantine, the cost model), the one removal of a whole directory that
no reader sees half-done (:func:`remove_tree`: the compile cache's generated-module folders),
and the one guarded open of a file hetero reads whole (:func:`open_regular_file`: cache entries,
bundles), which refuses FIFOs and devices. Checkpoints install whole directories instead
(:mod:`hetero.checkpoint.files`).

Ground floor: imports nothing of hetero's.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO, Generic, TypeVar

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


def try_hold(path: Path) -> int | None:
    """A lock held for as long as the caller keeps it (a lease, not a store's transaction): an exclusive
    ``flock`` on ``path`` (made 0600, not followed through a link), taken without waiting. The open
    descriptor, which :func:`let_go` closes (a process's exit does too); None when another holds it.
    Without ``fcntl`` (Windows) every try holds."""
    fd = os.open(path, os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0), 0o600)
    if fcntl is None:
        return fd
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        return None
    return fd


def let_go(fd: int) -> None:
    """Give back a lock :func:`try_hold` took (closing its descriptor releases it)."""
    os.close(fd)


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


T = TypeVar("T")


class StoreCorrupt(Exception):
    """A store's file is not a document of its kind; the message says what is wrong with it."""


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a number JSON allows")


class JsonStore(Generic[T]):
    """One JSON document in one file, shared by processes: the quarantine, the cost model.

    :meth:`read` never locks (a writer replaces the file whole, so a reader sees the old document
    or the new); :meth:`transaction` reads, lets the block change the document and writes it back
    when it changed, all under the store's lock, so concurrent writers lose nothing. Writes are
    atomic and durable (a store is the only copy of its data). ``load`` turns the parsed JSON into
    the document (raising :class:`StoreCorrupt` for one that is not of this kind), ``dump`` turns
    it back, ``empty`` makes the document of a missing file. ``what`` names the store in errors.
    """

    def __init__(self, path: Path, what: str, *, load: Callable[[Any], T], dump: Callable[[T], Any],
                 empty: Callable[[], T], indent: int = 2, sort_keys: bool = False) -> None:
        self.path = path
        self.what = what
        self._load, self._dump, self._empty = load, dump, empty
        self._indent, self._sort_keys = indent, sort_keys

    def read(self) -> T:
        """The document (``empty()`` when there is no file). Raises StoreCorrupt for a file that is
        not UTF-8 JSON of this kind, OSError when it cannot be read."""
        try:
            raw = self.path.read_bytes()
        except FileNotFoundError:
            return self._empty()
        try:
            data = json.loads(raw.decode("utf-8"), parse_constant=_no_constant)
        except UnicodeDecodeError as exc:
            raise StoreCorrupt(f"not UTF-8 text ({exc})") from None
        except ValueError as exc:  # JSONDecodeError, NaN/Infinity
            raise StoreCorrupt(f"not valid JSON ({exc})") from None
        except RecursionError:
            raise StoreCorrupt(f"nested too deep to be a {self.what}") from None
        return self._load(data)

    def write(self, document: T) -> None:
        """Replace the file with ``document`` (call within :meth:`locked` when others may write)."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(self._dump(document), indent=self._indent, sort_keys=self._sort_keys) + "\n"
        atomic_write(self.path, text, durable=True)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """Hold the store's inter-process lock (:func:`locked` on ``NAME.lock``) for the block."""
        with locked(self.path):
            yield

    def set_aside(self) -> Path:
        """Move the file to ``NAME.corrupt-<time>-<pid>`` beside it (under the lock) and return that path."""
        backup = self.path.with_name(f"{self.path.name}.corrupt-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")
        os.replace(self.path, backup)
        return backup

    @contextlib.contextmanager
    def transaction(self, on_corrupt: Callable[[StoreCorrupt], T]) -> Iterator[T]:
        """Read-modify-write under the lock: the document is yielded, and written back when the block
        changed it (compared with a copy taken before). A corrupt file is ``on_corrupt(problem)``'s
        document instead (it may :meth:`set_aside` the file first)."""
        with self.locked():
            try:
                document = self.read()
            except StoreCorrupt as problem:
                document = on_corrupt(problem)
            before = json.dumps(self._dump(document), sort_keys=True)
            yield document
            if json.dumps(self._dump(document), sort_keys=True) != before:
                self.write(document)
