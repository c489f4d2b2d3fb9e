"""The source text of functions made by ``exec`` of a string, for the front end, which compiles kernels
from their source (Numba reads bytecode and so needs none).

Code that builds kernels from a template (``exec(text.format(op=...), scope, found)``, as numba-cuda's own
tests build their atomics kernels) leaves no file and no ``linecache`` entry behind. :func:`install`
adds an audit hook (:pep:`578`) that sees each ``compile`` of text under a pseudo-file name
(``<string>``, ``<kernel>``) and the ``exec`` of what it compiled, and keeps the text of each function
code object made there (:func:`text_of`): at most :data:`KEPT` functions, the least recently made
going first. :func:`lines_of` checks, before the front end trusts it, that the text compiles again to
the very code of the function (equal code objects: bytecode, names, constants, lines), so text that changed under the
same name is never taken for another function's.

The hook reads names and text only; it executes nothing and keeps no reference to anything but code
objects and strings. Installed by ``hetero.compat.cuda`` (the door where such kernels come from);
audit hooks cannot be removed, so it stays for the process and costs one comparison per audited
event of other kinds.
"""

from __future__ import annotations

import __future__
import collections
import sys
import threading
import types

#: Functions whose text is kept (the least recently made go first).
KEPT = 4096

_lock = threading.Lock()
_compiled: dict[str, str] = {}  # pseudo-file name -> the text compiled under it last
_texts: collections.OrderedDict[types.CodeType, tuple[str, str]] = collections.OrderedDict()
_installed = False
#: The ``from __future__`` flags a code object carries (exec inherits its caller's): compiled again with them.
_FUTURE = 0
for _feature in __future__.all_feature_names:
    _FUTURE |= getattr(__future__, _feature).compiler_flag


def _functions(code: types.CodeType) -> list[types.CodeType]:
    found = []
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            found.append(const)
            found.extend(_functions(const))
    return found


def _hook(event: str, args: tuple[object, ...]) -> None:
    if event == "compile":
        source, filename = args[0], args[1]
        if type(filename) is str and filename.startswith("<") and isinstance(source, (str, bytes)):
            text = source.decode("utf-8", "replace") if isinstance(source, bytes) else source
            with _lock:
                _compiled[filename] = text
                if len(_compiled) > 64:
                    _compiled.pop(next(iter(_compiled)))
    elif event == "exec":
        code = args[0]
        if type(code) is types.CodeType and code.co_filename in _compiled:
            with _lock:
                text = _compiled.get(code.co_filename)
                if text is None:
                    return
                for function in _functions(code):
                    _texts[function] = (code.co_filename, text)
                    _texts.move_to_end(function)
                while len(_texts) > KEPT:
                    _texts.popitem(last=False)


def install() -> None:
    """Add the audit hook (once per process)."""
    global _installed
    with _lock:
        if _installed:
            return
        _installed = True
    sys.addaudithook(_hook)


def text_of(code: types.CodeType) -> tuple[str, str] | None:
    """``(pseudo-file name, text)`` that made the function ``code``, as seen; None if not seen."""
    with _lock:
        return _texts.get(code)


def _same(made: types.CodeType, code: types.CodeType) -> bool:
    # code objects compare by bytecode, constants, names, variables and lines: the same function
    return made == code


def lines_of(code: types.CodeType) -> list[str] | None:
    """The lines of the text that made ``code``, when it was seen and compiles again to that very
    function; else None."""
    found = text_of(code)
    if found is None:
        return None
    filename, text = found
    try:
        again = compile(text, filename, "exec", flags=code.co_flags & _FUTURE, dont_inherit=True)
    except (SyntaxError, ValueError):
        return None
    if not any(_same(made, code) for made in _functions(again)):
        return None
    return text.splitlines(True)
