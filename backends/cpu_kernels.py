"""Kernels on the ``cpu`` device: generated Python modules compiled by Numba, run on threads.

The module is written into hetero's cache (atomically) and imported from there, so
Numba's own cache (``__pycache__`` beside it) makes a new process skip compilation.

A launch's work-groups are split into one chunk per thread (``NUMBA_NUM_THREADS``, the
machine's cores unless set); the calling thread runs the first chunk and a pool of threads
the others at once, each calling the kernel's ``nogil`` entry (:mod:`hetero.compiler.emit_cpu`)
for its range, and the launch returns when all have finished. A launch of one chunk (up to
4096 work-items of a plain kernel) runs on the calling thread alone. Before a kernel's first
launch on several threads, a call that runs no work-group compiles it.
"""

from __future__ import annotations

import hashlib
import importlib.util
import re
import sys
import tempfile
import dataclasses
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from hetero.errors import KernelBuildError
from hetero.files import atomic_write

_lock = threading.Lock()
#: Work-items per group when the launch does not say: large enough to amortise the
#: per-group loop, small enough to spread work over cores.
DEFAULT_GROUP = {1: (256,), 2: (16, 16), 3: (8, 8, 4)}


def _write_atomically(path: Path, data: bytes) -> None:
    if path.is_file() and path.read_bytes() == data:  # is_file: a FIFO planted there would block the read
        return
    atomic_write(path, data)


@dataclasses.dataclass(eq=False)
class Entry:
    """A loaded kernel: its Numba entry (a range of work-groups) and its work-group count."""

    run: Any  # numba dispatcher: run(first, last, gs0, gs1, gs2, ls0, ls1, ls2, *params)
    count: Callable[..., int]  # count(gs0, gs1, gs2, ls0, ls1, ls2) -> work-groups
    warm: bool = False  # compiled (by an empty call) before its first launch on several threads


def load(source: Any, artifact: bytes | None, path: Path, target: str) -> tuple[Any, bytes | None]:
    """Import the generated module at ``path`` and return its :class:`Entry`."""
    data = artifact if artifact is not None else source.text.encode()
    module_path = path.with_suffix(".py")
    name = "hetero_cpu_kernel_" + hashlib.sha1(str(module_path).encode()).hexdigest()[:16]
    with _lock:
        if name in sys.modules:
            return entry_of(sys.modules[name], source.entry), None
        try:
            _write_atomically(module_path, data)
        except OSError:
            # An unwritable cache: compile from a private temporary file instead.
            module_path = Path(tempfile.mkdtemp(prefix="hetero-cpu-")) / module_path.name
            module_path.write_bytes(data)
        spec = importlib.util.spec_from_file_location(name, module_path)
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as exc:
            raise KernelBuildError(f"generated CPU module failed to load: {exc}", source=data.decode(),
                                   target=target, log=repr(exc)) from exc
        sys.modules[name] = module
    return entry_of(module, source.entry), (None if artifact is not None else data)


def entry_of(module: Any, name: str) -> Entry:
    """The :class:`Entry` of kernel ``name`` in generated module ``module``."""
    return Entry(getattr(module, name), getattr(module, name + "_count"))


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


_threads: int | None = None


def threads() -> int:
    """How many threads a launch runs on (Numba's setting: the cores, or NUMBA_NUM_THREADS)."""
    global _threads
    if _threads is None:
        import numba

        _threads = max(1, int(getattr(numba.config, "NUMBA_NUM_THREADS")))
    return _threads


def _workers() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                _pool = ThreadPoolExecutor(max_workers=max(1, threads() - 1), thread_name_prefix="hetero-cpu")
    return _pool


def kernel_arg(buffer: np.ndarray, shape: tuple[int, ...], dtype: np.dtype[Any]) -> np.ndarray:
    # Numba has no float16 on the CPU: f16 arrays travel as their uint16 bits.
    view_type = np.uint16 if dtype == np.float16 else dtype
    return buffer.view(view_type).reshape(shape)


_padded: dict[tuple[tuple[int, ...], tuple[int, ...] | None], tuple[int, int, int, int, int, int]] = {}


def _sizes(global_size: tuple[int, ...], local_size: tuple[int, ...] | None) -> tuple[int, int, int, int, int, int]:
    if local_size is None:
        local_size = tuple(min(g, d) or 1 for g, d in zip(global_size, DEFAULT_GROUP[len(global_size)], strict=True))
    g = (*global_size, 1, 1)
    loc = (*local_size, 1, 1)
    return g[0], g[1], g[2], loc[0], loc[1], loc[2]


def launch(kernel: Any, global_size: tuple[int, ...], local_size: tuple[int, ...] | None, args: Sequence[Any]) -> None:
    key = (global_size, local_size)
    sizes = _padded.get(key)
    if sizes is None:
        if len(_padded) >= 4096:  # launch sizes that change every call must not grow this forever
            _padded.clear()
        sizes = _padded[key] = _sizes(global_size, local_size)
    total = kernel.count(*sizes)
    chunks = min(total, threads())
    try:
        if chunks <= 1:
            kernel.run(0, total, *sizes, *args)
            return
        if not kernel.warm:  # compiled here, by a call that runs no work-group, not by several threads at once
            kernel.run(0, 0, *sizes, *args)
            kernel.warm = True
        pending: list[Future[Any]] = [
            _workers().submit(kernel.run, total * c // chunks, total * (c + 1) // chunks, *sizes, *args)
            for c in range(1, chunks)]
        try:
            kernel.run(0, total // chunks, *sizes, *args)
        finally:
            errors = [f.exception() for f in pending]  # waits for every chunk, failed or not
        first = next((e for e in errors if e is not None), None)
        if first is not None:
            raise first
    except Exception as exc:
        if _built_for(kernel.run, (0, total, *sizes), args):
            raise
        raise _build_error(kernel.run, exc) from exc


def _built_for(kernel: Any, sizes: tuple[int, ...], args: Sequence[Any]) -> bool:
    """Has Numba compiled ``kernel`` for these arguments (so a failure was not a build failure)?"""
    try:
        types = tuple(kernel.typeof_pyval(value) for value in (*sizes, *args))
    except Exception:
        return False
    return types in kernel.overloads


_KERNEL_LINE = re.compile(r"CPU code for kernel '(?P<name>[^']*)' \((?P<file>.*):(?P<line>\d+):\d+\)")


def _build_error(kernel: Any, exc: Exception) -> KernelBuildError:
    """Numba's failure to compile generated code, said in the user's terms: which kernel, where
    it is defined, and what to do; Numba's own message goes in the log."""
    module = sys.modules.get(getattr(kernel, "__module__", ""), None)
    doc = (getattr(module, "__doc__", None) or "").splitlines()
    found = _KERNEL_LINE.search(doc[0]) if doc else None
    name = found["name"] if found else getattr(kernel, "__name__", "?")
    where = f" ({found['file']}:{found['line']})" if found else ""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    source = Path(module.__file__).read_text() if module is not None and module.__file__ else ""
    return KernelBuildError(
        f"kernel {name!r}{where} could not be built for the cpu device: Numba rejected the generated code "
        f"({type(exc).__name__}: {first}). This is a gap in hetero's CPU emitter, not in your kernel: please "
        "report it with this message; meanwhile run the kernel on an OpenCL device (opencl:0 or oneapi:0), "
        "or rewrite the construct at that line in a simpler form",
        source=source, target="cpu", log=f"{type(exc).__name__}: {exc}")
