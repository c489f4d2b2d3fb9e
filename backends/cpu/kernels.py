"""Kernels on the ``cpu`` device: generated Python modules compiled by Numba, run on threads.

The module is written into hetero's cache (atomically) and imported from there, so
Numba's own cache (``__pycache__`` beside it) makes a new process skip compilation. After a
fresh compile, the machine code of each launch signature is also kept beside the module
(:mod:`.cpu_native`): a new process runs a cached kernel from it without importing Numba.
A kernel launched often (:data:`MOVE_AFTER`) then moves to its Numba dispatcher, the faster
call, loaded on a background thread (:func:`wait_for_numba` waits for the moves asked so far).

A launch's work-groups are split into one chunk per thread (``NUMBA_NUM_THREADS``, the
machine's cores unless set); the calling thread runs the first chunk and a pool of threads
the others at once, each calling the kernel's ``nogil`` entry (:mod:`hetero.compiler.emit.cpu`)
for its range, and the launch returns when all have finished. A launch of one chunk (up to
4096 work-items of a plain kernel) runs on the calling thread alone. Before a kernel's first
launch on several threads, a call that runs no work-group compiles it.
"""

from __future__ import annotations

import ast
import hashlib
import importlib.util
import math
import os
import re
import sys
import tempfile
import dataclasses
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, cast

import numpy as np

from hetero.core.build_progress import building
from hetero.core.config import get_config
from hetero.core.errors import KernelBuildError
from hetero.core.files import atomic_write

from hetero.backends.cpu import native as cpu_native, native_build as cpu_native_build

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
    """A loaded kernel: its Numba entry (a range of work-groups), its work-group count, and,
    where the cache holds them, native entries per launch signature (:mod:`.cpu_native`).

    ``run`` is Numba's dispatcher; a kernel loaded lazily (its module has native files) imports
    its module on first use of ``run``, which the launch avoids while a native entry serves."""

    dispatcher: Any  # numba dispatcher: run(first, last, gs0, gs1, gs2, ls0, ls1, ls2, *params), or None until imported
    count: Callable[..., int]  # count(gs0, gs1, gs2, ls0, ls1, ls2) -> work-groups
    warm: bool = False  # compiled (by an empty call) before its first launch on several threads
    module_path: Path | None = None  # the generated module (native files sit beside it)
    module_name: str = ""
    name: str = ""
    target: str = "cpu"
    compiled: int = 0  # Numba overloads seen: one more means a fresh compile, whose native file is written
    native_launches: int = 0  # launches its native entries ran (the move to Numba starts at MOVE_AFTER)
    native: dict[Any, cpu_native.NativeKernel | None] = dataclasses.field(default_factory=dict)
    #: launch plans by (global size, local size): see :func:`launch`
    plans: dict[tuple[tuple[int, ...], tuple[int, ...] | None], Plan] = dataclasses.field(default_factory=dict)
    #: the last launch's sizes (the very tuples) and plan: a launcher passing its own again skips the lookup
    last: tuple[Any, Any, Plan] = (None, None, ((), 0))

    @property
    def run(self) -> Any:
        if self.dispatcher is None:
            _import(self)
        return self.dispatcher


def load(source: Any, artifact: bytes | None, path: Path, target: str) -> tuple[Any, bytes | None]:
    """Write the generated module to ``path`` (as ``.py``) and return its :class:`Entry`: imported
    now, unless native files of it are there (then on first need, see :class:`Entry`)."""
    data = artifact if artifact is not None else source.text.encode()
    module_path = path.with_suffix(".py")
    name = "hetero_cpu_kernel_" + hashlib.sha1(str(module_path).encode()).hexdigest()[:16]
    with _lock:
        if name in sys.modules:
            entry = entry_of(sys.modules[name], source.entry)
            entry.module_path = module_path
            return entry, None
        try:
            _write_atomically(module_path, data)
        except OSError:
            # An unwritable cache: compile from a private temporary file instead.
            module_path = Path(tempfile.mkdtemp(prefix="hetero-cpu-")) / module_path.name
            module_path.write_bytes(data)
        entry = Entry(None, _count_function(data, source.entry), module_path=module_path, module_name=name,
                      name=source.entry, target=target)
    if not cpu_native.has_any(module_path):
        _import(entry)
    return entry, (None if artifact is not None else data)


def _import(entry: Entry) -> None:
    """Import ``entry``'s generated module (Numba compiles its functions on their first call)."""
    with _lock:
        if entry.dispatcher is not None:
            return
        module = sys.modules.get(entry.module_name)
        if module is None:
            assert entry.module_path is not None
            spec = importlib.util.spec_from_file_location(entry.module_name, entry.module_path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            try:
                spec.loader.exec_module(module)
            except Exception as exc:
                raise KernelBuildError(f"generated CPU module failed to load: {exc}", source=entry.module_path.read_text(),
                                       target=entry.target, log=repr(exc)) from exc
            sys.modules[entry.module_name] = module
        entry.dispatcher = getattr(module, entry.name)
        entry.compiled = len(entry.dispatcher.overloads)


def _count_function(data: bytes, name: str) -> Callable[..., int]:
    """The generated module's plain-Python ``<name>_count``, without importing the module (which
    imports Numba)."""
    head = f"\ndef {name}_count(".encode()
    start = data.find(head)
    end = start + 1
    while start >= 0:  # its lines: up to the next top-level line (parsing the whole module costs ms)
        end = data.find(b"\n", end)
        if end < 0 or data[end + 1:end + 2] not in (b" ", b"\t", b"\n", b"#"):
            break
        end += 1
    piece = data[start + 1:end if end >= 0 else len(data)] if start >= 0 else b""
    found: list[ast.stmt] = [node for node in ast.parse(piece).body
                             if isinstance(node, ast.FunctionDef) and node.name == name + "_count"]
    if not found:
        raise KernelBuildError(f"generated CPU module has no {name}_count", source=data.decode(), target="cpu")
    namespace: dict[str, Any] = {"math": math, "np": np}
    exec(compile(ast.Module(body=found, type_ignores=[]), f"<{name}_count>", "exec"), namespace)  # noqa: S102 -- hetero's own generated code, as the module itself
    return cast(Callable[..., int], namespace[name + "_count"])


def entry_of(module: Any, name: str) -> Entry:
    """The :class:`Entry` of kernel ``name`` in generated module ``module`` (imported)."""
    dispatcher = getattr(module, name)
    return Entry(dispatcher, getattr(module, name + "_count"), module_name=module.__name__, name=name,
                 compiled=len(dispatcher.overloads))


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


_threads: int | None = None


def threads() -> int:
    """How many threads a launch runs on (Numba's setting: the cores, or NUMBA_NUM_THREADS)."""
    global _threads
    if _threads is None:
        numba = sys.modules.get("numba")
        if numba is not None:
            _threads = max(1, int(getattr(numba.config, "NUMBA_NUM_THREADS")))
        else:  # Numba's own default, without importing it (the first native launch must not)
            setting = os.environ.get("NUMBA_NUM_THREADS", "").strip()
            _threads = max(1, int(setting) if setting.isdigit() else len(os.sched_getaffinity(0)))
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


def _sizes(global_size: tuple[int, ...], local_size: tuple[int, ...] | None) -> tuple[int, int, int, int, int, int]:
    if local_size is None:
        local_size = tuple(min(g, d) or 1 for g, d in zip(global_size, DEFAULT_GROUP[len(global_size)], strict=True))
    g = (*global_size, 1, 1)
    loc = (*local_size, 1, 1)
    return g[0], g[1], g[2], loc[0], loc[1], loc[2]


#: A launch's plan: the entry's leading arguments ``(0, work-groups, gs0, gs1, gs2, ls0, ls1, ls2)``
#: and the chunks it runs in (one: on the calling thread alone).
Plan = tuple[tuple[int, ...], int]


def _plan(kernel: Entry, global_size: tuple[int, ...], local_size: tuple[int, ...] | None) -> Plan:
    sizes = _sizes(global_size, local_size)
    total = kernel.count(*sizes)
    if len(kernel.plans) >= 4096:  # launch sizes that change every call must not grow this forever
        kernel.plans.clear()
    plan = kernel.plans[global_size, local_size] = ((0, total, *sizes), min(total, threads()))
    return plan


def launch(kernel: Any, global_size: tuple[int, ...], local_size: tuple[int, ...] | None, args: Sequence[Any]) -> None:
    """Run ``kernel`` over ``global_size`` work-items in groups of ``local_size`` (None: the
    default group) on ``args``; returns when every work-group has run."""
    runtime_launch(None, kernel, global_size, local_size, args)


def runtime_launch(_runtime: Any, kernel: Any, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
                   args: Sequence[Any]) -> None:
    """:func:`launch` with a first argument it ignores: the cpu runtime's ``launch`` method
    itself (:class:`backends.cpu.CpuRuntime`), one Python call less on every launch."""
    last = kernel.last  # one attribute, set in one store: threads launching other sizes never mix two
    if last[0] is global_size and last[1] is local_size:  # a launcher passing its own tuples again
        plan = last[2]
    else:
        plan = kernel.plans.get((global_size, local_size))
        if plan is None:
            plan = _plan(kernel, global_size, local_size)
        kernel.last = (global_size, local_size, plan)
    run = kernel.dispatcher
    if plan[1] > 1 and _small(args):  # too little data to pay for waking the pool's threads
        plan = (plan[0], 1)
    if run is not None and plan[1] <= 1:  # the common small launch: Numba's entry on this thread
        head = plan[0]
        if not kernel.compiled:  # Numba compiles in this first call: said when it takes long
            with building("cpu", kernel.name or "kernel", str(get_config().cache_dir)):
                _launch_chunks(kernel, plan, args)
            return
        try:
            run(*head, *args)
        except Exception as exc:
            if _built_for(run, head, args):
                raise
            raise _build_error(run, exc) from exc
        if len(run.overloads) != kernel.compiled:
            _note_compiled(kernel, run, (*head, *args))
        return
    _launch_chunks(kernel, plan, args)


#: Bytes of array arguments below which a launch runs on the calling thread only: handing
#: chunks to the pool and waiting for them costs tens of microseconds, more than such a launch
#: takes on one core (the digits step's launches ran 10x faster so on the 2-core VM, issue 46).
PARALLEL_MIN_BYTES = 1 << 19


def _small(args: Sequence[Any]) -> bool:
    """Whether ``args``' arrays hold fewer than :data:`PARALLEL_MIN_BYTES` bytes together."""
    total = 0
    for value in args:
        if type(value) is np.ndarray:
            total += value.nbytes
            if total >= PARALLEL_MIN_BYTES:
                return False
    return True


def _launch_chunks(kernel: Entry, plan: Plan, args: Sequence[Any]) -> None:
    head, chunks = plan
    total, sizes = head[1], head[2:]
    run = kernel.dispatcher
    if run is None:
        if _launch_native(kernel, total, chunks, sizes, args):
            return
        run = kernel.run
    try:
        if chunks <= 1:
            run(*head, *args)
        else:
            if not kernel.warm:  # compiled here, by a call that runs no work-group, not by several threads at once
                with building("cpu", kernel.name or "kernel", str(get_config().cache_dir)):
                    run(0, 0, *sizes, *args)
                kernel.warm = True
            _chunked(run, total, chunks, sizes, args)
    except Exception as exc:
        if _built_for(run, head, args):
            raise
        raise _build_error(run, exc) from exc
    _note_compiled(kernel, run, (*head, *args))


def prepare(kernel: Entry, values: Sequence[Any]) -> None:
    """Have ``kernel`` ready for launches like ``values`` (the arguments only) without running a
    work-group: its native entry loaded where the cache has one, else compiled by Numba (a call
    of no work-group) and its native file written."""
    values = [kernel_arg(v, v.shape, v.dtype) if isinstance(v, np.ndarray) else v for v in values]
    if kernel.dispatcher is None and _native_for(kernel, cpu_native.launch_signature(values)) is not None:
        return
    run = kernel.run
    empty = (0, 0, 1, 1, 1, 1, 1, 1)
    with building("cpu", kernel.name or "kernel", str(get_config().cache_dir)):
        run(*empty, *values)
    kernel.warm = True
    _note_compiled(kernel, run, (*empty, *values))


def _chunked(run: Callable[..., Any], total: int, chunks: int, sizes: Sequence[int], args: Sequence[Any]) -> None:
    """Run work-groups 0..total-1 in ``chunks`` ranges at once: this thread the first, the pool the others."""
    pending: list[Future[Any]] = [
        _workers().submit(run, total * c // chunks, total * (c + 1) // chunks, *sizes, *args)
        for c in range(1, chunks)]
    try:
        run(0, total // chunks, *sizes, *args)
    finally:
        errors = [f.exception() for f in pending]  # waits for every chunk, failed or not
    first = next((e for e in errors if e is not None), None)
    if first is not None:
        raise first


class _NativeStatus(Exception):
    """A native entry returned an error status: the launch reruns on Numba's path, which raises."""


def _launch_native(kernel: Entry, total: int, chunks: int, sizes: Sequence[int], args: Sequence[Any]) -> bool:
    """Run the launch on ``kernel``'s native entry for these arguments, if there is one; False
    (nothing run, or a failure to rerun) sends it down Numba's path."""
    signature = cpu_native.launch_signature(args)
    native = _native_for(kernel, signature)
    if native is None:
        return False
    kernel.native_launches += 1
    if kernel.native_launches == MOVE_AFTER or (_numba_ready and kernel.native_launches == 1):
        _numba_later(kernel, signature)
    arguments = native.arguments(args)

    def run(first: int, last: int, *_: Any) -> None:
        if native(first, last, sizes, arguments):
            raise _NativeStatus
    try:
        run(0, total) if chunks <= 1 else _chunked(run, total, chunks, sizes, args)
    except _NativeStatus:
        kernel.native[signature] = None
        return False
    return True


def _native_for(kernel: Entry, signature: Any) -> cpu_native.NativeKernel | None:
    """``kernel``'s native entry for launch ``signature``, loaded from the cache on first ask; None
    when there is none (the launch takes Numba's path)."""
    if signature is None or kernel.module_path is None:
        return None
    if signature not in kernel.native:
        kernel.native[signature] = cpu_native.load(cpu_native.native_path(kernel.module_path, signature))
    return kernel.native[signature]


def _note_compiled(kernel: Entry, run: Any, values: Sequence[Any]) -> None:
    """After a call on Numba's path: when Numba compiled afresh (one more overload), keep its machine
    code for the next process (written in the background)."""
    if len(run.overloads) == kernel.compiled:
        return
    kernel.compiled = len(run.overloads)
    signature = cpu_native.launch_signature(values[8:])
    if signature is not None and kernel.module_path is not None:
        cpu_native_build.build_later(run, values, cpu_native.native_path(kernel.module_path, signature))


#: Native launches of a kernel after which it moves to Numba's dispatcher in the background: a
#: process launching a kernel that often gains from Numba's faster call (~1 us against ctypes'
#: 3-5 us); one that launches each a few times never pays Numba's start-up (~0.5 s of CPU, most
#: of it holding the GIL). Once Numba is loaded, every kernel moves at its first native launch.
MOVE_AFTER = 64
_numba_ready = False
_later: list[tuple[Entry, Any]] = []
_later_lock = threading.Lock()
_later_thread: threading.Thread | None = None
#: Set when the background thread has nothing left to move to Numba (see :func:`wait_for_numba`).
_later_idle = threading.Event()
_later_idle.set()


def _numba_later(kernel: Entry, signature: Any) -> None:
    """Have ``kernel`` move to its Numba dispatcher for ``signature`` in the background (Numba's
    call is faster than ctypes'; importing Numba takes ~0.5 s, off the launching thread)."""
    global _later_thread
    with _later_lock:
        if (kernel, signature) in _later:
            return
        _later.append((kernel, signature))
        _later_idle.clear()
        if _later_thread is None or not _later_thread.is_alive():
            _later_thread = threading.Thread(target=_move_to_numba, name="hetero-cpu-numba", daemon=True)
            _later_thread.start()


def _move_to_numba() -> None:
    global _numba_ready
    import numba  # noqa: F401 -- the slow part, off the launching thread

    done = 0
    while True:
        with _later_lock:
            if done == len(_later):
                _later_idle.set()
                return
            kernel, signature = _later[done]
        done += 1
        try:
            dispatcher = _imported_dispatcher(kernel)
            dispatcher.compile(tuple(dispatcher.typeof_pyval(v) for v in _values_like(signature)))
            kernel.compiled = len(dispatcher.overloads)
            kernel.dispatcher = dispatcher
            _numba_ready = True
        except Exception:  # noqa: BLE001 -- the native entry keeps serving; a real launch on Numba's path raises
            continue


def _imported_dispatcher(kernel: Entry) -> Any:
    with _lock:
        module = sys.modules.get(kernel.module_name)
    if module is None:
        probe = dataclasses.replace(kernel, dispatcher=None)
        _import(probe)  # into sys.modules; ``kernel`` keeps its native entries until compiled
        return probe.dispatcher
    return getattr(module, kernel.name)


def _values_like(signature: Any) -> list[Any]:
    """Values Numba types as a launch of ``signature`` (the range and sizes, then the arguments)."""
    python = {"bool": False, "int": 0, "float": 0.0}
    values: list[Any] = [0] * 8
    for part in signature:
        if isinstance(part, tuple):
            values.append(np.empty((0,) * part[1], dtype=np.dtype(part[0])))
        else:
            values.append(python[part] if part in python else np.dtype(part).type(0))
    return values


def wait_for_numba(timeout: float | None = None) -> bool:
    """Wait until every kernel launched natively has moved to Numba (benchmarks measure that path)."""
    return _later_idle.wait(timeout)


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
