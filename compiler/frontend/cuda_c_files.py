"""The files of a CUDA C translation unit, read for the front end: the source and every header it
``#include``\\ s, and empty stand-ins for the headers found nowhere.

Only regular files are read (:func:`hetero.core.files.open_regular_file`): a FIFO never ends its
``open``, ``/dev/zero`` never ends its data, and libclang, left to open them itself, hung or
grew to gigabytes. So the front end resolves each ``#include`` as clang does (an absolute path
as it is; ``"name"`` beside the including file first; then the include folders in order), reads
what it finds within :data:`~.cuda_c_limits.MAX_SOURCE_BYTES` for the whole unit, and hands the
text to libclang, which then reads no header from disk. A path that names a FIFO, a device or a
socket is a :class:`CompileError` naming it and the ``#include`` line.

A header found nowhere (``<cuda_runtime.h>``, ``<helper_cuda.h>``: host code's) reads as empty,
so that the host code of a sample file parses far enough to be skipped. The stand-ins live in a
private folder (:func:`tempfile.mkdtemp`, removed with the translation unit's files), never where
the ``#include`` points: ``"../../x.h"`` is answered from a folder nested deep enough inside the
private one, and an absolute path is answered in libclang's memory only.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import stat
import tempfile
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

from hetero.compiler.frontend import cuda_c_limits
from hetero.core.errors import CompileError
from hetero.core.files import NotARegularFileError, open_regular_file

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*(?:include|include_next|import)[ \t]*([<"])([^>"\n]+)[>"]', re.MULTILINE)


def read_source(path: str, budget: int | None = None, where: tuple[str, int] | None = None) -> str:
    """The text of the CUDA C file ``path``: a regular file of at most ``budget`` bytes (by default
    :data:`~.cuda_c_limits.MAX_SOURCE_BYTES`), else a CompileError naming it (at ``where``, the
    file and line of the ``#include`` that named it)."""
    limit = cuda_c_limits.MAX_SOURCE_BYTES if budget is None else budget
    at = where or (path, 0)
    try:
        with open_regular_file(Path(path)) as source:
            data = source.read(limit + 1)
    except NotARegularFileError as exc:
        raise CompileError(f"{exc}: hetero's CUDA C front end reads only regular files", *at) from None
    except OSError as exc:
        raise CompileError(f"cannot read {path}: {exc.strerror or exc}", *at) from None
    if len(data) > limit:
        raise CompileError(f"{path} takes the source past {cuda_c_limits.MAX_SOURCE_BYTES} bytes, the most hetero's "
                           "CUDA C front end reads for one translation unit, headers included (its limit "
                           "hetero.compiler.frontend.cuda_c_limits.MAX_SOURCE_BYTES)", *at)
    return data.decode("utf-8", errors="replace")


@dataclasses.dataclass
class Inputs:
    """What libclang is given besides the source: each header's text by the path clang looks it
    up at (``files``), the folder of the stand-ins (the last include folder), and the names that
    were found nowhere and read as empty (``missing``, those with :data:`known` content aside)."""

    files: list[tuple[str, str]]
    stand_ins: str
    missing: list[str]


def gather(code: str, path: str, folders: Sequence[str], known: Mapping[str, str], owner: object) -> Inputs:
    """The headers ``code`` (the file ``path``) includes, directly or through each other, searched
    beside their includer and in ``folders``; stand-ins for those found nowhere (``known`` gives
    some content), in a private folder removed when ``owner`` is."""
    budget = cuda_c_limits.MAX_SOURCE_BYTES - len(code.encode("utf-8", errors="replace"))
    if budget < 0:
        raise CompileError(f"the source is larger than {cuda_c_limits.MAX_SOURCE_BYTES} bytes, the most hetero's "
                           "CUDA C front end reads (its limit hetero.compiler.frontend.cuda_c_limits.MAX_SOURCE_BYTES)",
                           path, 0)
    files: list[tuple[str, str]] = []
    absent: dict[str, None] = {}  # the names found nowhere, in order
    seen: set[str] = set()
    pending = [(path, code)]
    while pending:
        includer, text = pending.pop()
        for match in _INCLUDE.finditer(text):
            quote, name = match.groups()
            line = text.count("\n", 0, match.start()) + 1
            found = _find(name, quote == '"', includer, folders, (includer, line))
            if found is None:
                absent[name] = None
                continue
            key = os.path.realpath(found)
            if key in seen:
                continue
            seen.add(key)
            header = read_source(found, budget, (includer, line))
            budget -= len(header.encode("utf-8", errors="replace"))
            files.append((found, header))
            pending.append((found, header))
    folder = tempfile.mkdtemp(prefix="hetero-cuda-c-stand-ins-")
    weakref.finalize(owner, shutil.rmtree, folder, True)
    stand_ins = _write_stand_ins(folder, [n for n in absent if not os.path.isabs(n)], known)
    files += [(name, known.get(name, "")) for name in absent if os.path.isabs(name)]  # in libclang's memory only
    return Inputs(files, stand_ins, [name for name in absent if name not in known])


def _find(name: str, quoted: bool, includer: str, folders: Sequence[str], where: tuple[str, int]) -> str | None:
    """Where clang finds ``#include "name"`` (``quoted``) or ``<name>``: the first candidate that is
    there and not a folder; a CompileError when that is no regular file (clang would open it)."""
    if os.path.isabs(name):
        candidates = [name]
    else:
        beside = [os.path.join(os.path.dirname(os.path.abspath(includer)), name)] if quoted else []
        candidates = [*beside, *(os.path.join(folder, name) for folder in folders)]
    for candidate in candidates:
        try:
            mode = os.stat(candidate).st_mode
        except OSError:
            continue
        if stat.S_ISDIR(mode):
            continue
        if not stat.S_ISREG(mode):
            kind = "a FIFO" if stat.S_ISFIFO(mode) else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) \
                else "a socket or other special file"
            raise CompileError(f"#include {name!r} names {candidate}, {kind}: hetero's CUDA C front end reads only "
                               "regular files", *where)
        return candidate
    return None


def _write_stand_ins(folder: str, names: list[str], known: Mapping[str, str]) -> str:
    """Empty headers (or ``known`` ones) for the relative ``names``, under ``folder``; the include
    folder that finds them. That folder sits as deep inside ``folder`` as the names climb out
    (``../../x.h``: two levels), so every stand-in lands inside."""
    climb = max((_climb(name) for name in names), default=0)
    include = os.path.join(folder, "stand-ins", *["up"] * climb)
    os.makedirs(include)
    root = os.path.join(folder, "")
    for name in names:
        target = os.path.normpath(os.path.join(include, name))
        if not target.startswith(root):  # cannot happen with `climb`; never write outside
            continue
        try:
            os.makedirs(os.path.dirname(target), exist_ok=True)
            with open(target, "x") as out:
                out.write(known.get(name, ""))
        except OSError:
            continue  # a name that clashes with another's folder: clang reports it not found
    return include


def _climb(name: str) -> int:
    """How many folders above its include folder ``name`` reaches (``../../x.h``: 2)."""
    level = lowest = 0
    for part in re.split(r"[/\\]", name):
        if part == "..":
            level -= 1
            lowest = min(lowest, level)
        elif part not in ("", "."):
            level += 1
    return -lowest
