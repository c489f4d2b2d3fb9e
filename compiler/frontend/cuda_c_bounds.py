"""libclang's parse of a translation unit, bounded: it runs first in a child process, within
:data:`~.cuda_c_limits.MAX_PARSE_SECONDS`, :data:`~.cuda_c_limits.MAX_PARSE_MEMORY` and
:data:`~.cuda_c_limits.MAX_PREPROCESSED_TOKENS`, and only a unit that parsed there is parsed in
hetero's process.

libclang has no way to stop a parse: a macro that doubles twenty times over took minutes, one
that doubles twenty-four times took 2.4 GB, and an expression deep enough (written out or made
by macros) overflows its stack, which kills the process. A child process can be stopped and can
die: :func:`check_parse` says which limit was hit, or that libclang crashed, as a
:class:`CompileError` naming the file. The child gets the same arguments and the same file
texts (:mod:`.cuda_c_files`), so the parse that follows in this process does what it did.
The cost is a Python start-up and a second parse: cuda-samples' ``vectorAdd`` went from 11 to
~50 ms of front end.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
from collections.abc import Sequence

from hetero.compiler.frontend import cuda_c_limits
from hetero.core.errors import CompileError

log = logging.getLogger(__name__)

#: The child: argv[1] the limits (JSON), argv[2] the folder holding the ``clang`` package; stdin
#: the parse (JSON). It prints one JSON line: the limit it hit, with what it measured.
_CHILD = r"""
import json, os, re, sys, threading, time
limits = json.loads(sys.argv[1])
sys.path.insert(0, sys.argv[2])
request = json.load(sys.stdin)

def report(**what):
    sys.stdout.write(json.dumps(what) + "\n")
    sys.stdout.flush()

def watch():
    start, page = time.monotonic(), os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096
    while True:
        time.sleep(0.02)
        try:
            with open("/proc/self/statm") as statm:
                resident = int(statm.read().split()[1]) * page
        except (OSError, ValueError, IndexError):
            resident = 0
        if resident > limits["memory"]:
            report(limit="memory", measured=resident)
            os._exit(3)
        if time.monotonic() - start > limits["seconds"]:
            report(limit="time")
            os._exit(3)

threading.Thread(target=watch, daemon=True).start()
try:  # a backstop where /proc is missing: the address space (more than what is resident)
    import resource
    cap = 2 * limits["memory"] + (2 << 30)
    resource.setrlimit(resource.RLIMIT_AS, (cap, cap))
except (ImportError, ValueError, OSError):
    pass
from clang import cindex
if request["library"]:
    cindex.Config.set_library_file(request["library"])
unit = cindex.Index.create().parse(request["path"], args=request["args"],
                                   unsaved_files=[tuple(f) for f in request["files"]])
for diagnostic in unit.diagnostics:
    found = re.search(r"preprocessor source tokens \((\d+)\) exceeds", diagnostic.spelling)
    if found:
        report(limit="tokens", measured=int(found.group(1)))
        os._exit(3)
report(limit=None)
os._exit(0)
"""

_LIMIT_NAMES = {"time": "MAX_PARSE_SECONDS", "memory": "MAX_PARSE_MEMORY", "tokens": "MAX_PREPROCESSED_TOKENS"}


def check_parse(path: str, args: Sequence[str], files: Sequence[tuple[str, str]]) -> None:
    """Parse ``path`` (its text and its headers' in ``files``) with ``args`` in a child process,
    within the limits; a CompileError naming the file and the limit it passed, or the signal
    libclang died of."""
    if not sys.executable:
        log.warning("no Python executable to parse %s in a child process: parsing it unbounded", path)
        return
    from clang import cindex  # optional: only the CUDA C front end needs it

    limits = {"seconds": cuda_c_limits.MAX_PARSE_SECONDS, "memory": cuda_c_limits.MAX_PARSE_MEMORY}
    request = {"path": path, "files": [list(f) for f in files], "library": cindex.Config.library_file,
               "args": [*args, f"-fmax-tokens={cuda_c_limits.MAX_PREPROCESSED_TOKENS}", "-Wmax-tokens"]}
    packages = os.path.dirname(os.path.dirname(os.path.abspath(cindex.__file__)))
    try:
        done = subprocess.run([sys.executable, "-I", "-S", "-c", _CHILD, json.dumps(limits), packages],
                              input=json.dumps(request), capture_output=True, text=True, check=False,
                              timeout=cuda_c_limits.MAX_PARSE_SECONDS + 30)  # the child stops itself first
    except subprocess.TimeoutExpired:
        raise _past(path, "time", None) from None
    except OSError as exc:
        raise CompileError(f"cannot start a process to parse {path} in ({sys.executable}: {exc})", path, 0) from None
    lines = done.stdout.strip().splitlines()
    report = json.loads(lines[-1]) if lines else {}
    if report.get("limit"):
        raise _past(path, report["limit"], report.get("measured"))
    if done.returncode != 0:
        raise _crashed(path, done.returncode, done.stderr)


def _past(path: str, limit: str, measured: int | None) -> CompileError:
    if limit == "time":
        what = f"took longer than {cuda_c_limits.MAX_PARSE_SECONDS:g} s to preprocess and parse"
    elif limit == "memory":
        what = (f"took more than {cuda_c_limits.MAX_PARSE_MEMORY >> 20} MiB of memory to preprocess and parse "
                f"({(measured or 0) >> 20} MiB when stopped)")
    else:
        what = (f"preprocesses to {measured} tokens, more than {cuda_c_limits.MAX_PREPROCESSED_TOKENS} "
                "(macros expanded, headers included)")
    return CompileError(f"{path} {what}: hetero's CUDA C front end stops there (its limit "
                        f"hetero.compiler.frontend.cuda_c_limits.{_LIMIT_NAMES[limit]}); a macro that expands "
                        "itself many times over is the usual cause", path, 0)


def _crashed(path: str, status: int, stderr: str) -> CompileError:
    if status < 0:
        try:
            how = f"died of {signal.Signals(-status).name}"
        except ValueError:
            how = f"died of signal {-status}"
    else:
        how = f"failed (exit status {status}): {stderr.strip().splitlines()[-1] if stderr.strip() else 'no message'}"
    return CompileError(f"libclang {how} parsing {path}: hetero's CUDA C front end refuses it (source nested very "
                        "deep, by macros or in a header, is the usual cause)", path, 0)
