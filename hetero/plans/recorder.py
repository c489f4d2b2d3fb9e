"""Recording a trace: the device operations a jitted function's first call makes, as plan steps.

While a function is traced, the runtimes of the opened devices have their data-moving methods
wrapped per instance (as fault injection wraps them; restored afterwards), for the tracing
thread only: other threads pass straight through. The wrappers let every operation happen, as
the eager call would, and note it:

- ``allocate``: the buffer is the trace's (an intermediate, or an output's);
- ``launch``, ``upload``, ``copy``: a step, its buffers located in the :class:`BufferTable`;
- ``kernel_arg``: which buffer a launch value stands for, so a replay can make the value anew;
- ``call_library``: a step when the call is a ``functools.partial`` of arrays (hetero's BLAS
  calls are), else a :class:`JitError` (the call's buffers cannot be found again);
- ``download``, ``download_many`` and, on host-memory devices, ``native_view`` outside a library
  call: the function reads a value on the host, a :class:`ConcretizationError` naming its line;
- ``alias_host``: declined (None), so host data is copied in, as an upload step.
"""

from __future__ import annotations

import functools
import linecache
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import numpy as np

from hetero.array.ndarray import Array
from hetero.core import tracing_state
from hetero.core.launch_counts import counter as launch_counter
from hetero.core.notices import outside_frame
from hetero.plans.buffers import BufferTable
from hetero.plans.errors import ConcretizationError, JitError
from hetero.plans.steps import ArrayWhere, CopyStep, LaunchStep, LibraryStep, Step, UploadStep, Where

METHODS = ("allocate", "upload", "download", "download_many", "copy", "launch", "call_library",
           "kernel_arg", "native_view", "alias_host")

#: One trace at a time in the process: two would wrap the same runtimes, and the first to finish
#: would take the other's wrappers away with its own.
_TRACE_LOCK = threading.Lock()


def tracing() -> bool:
    """Whether this thread is tracing a jitted function now."""
    return tracing_state.active()


class Recorder:
    """One trace's buffers and steps (see the module docstring)."""

    def __init__(self, name: str, devices: dict[int, tuple[Any, str]]) -> None:
        self.name = name
        self.devices = devices  # id(runtime) -> (runtime, device name)
        self.table = BufferTable()
        #: table index of each buffer the trace allocated -> (id of its runtime, its size in bytes)
        self.allocated: dict[int, tuple[int, int]] = {}
        self.steps: list[Step] = []
        self.kargs: dict[int, tuple[Any, tuple[int, int], tuple[int, ...], Any]] = {}
        self.thread = threading.get_ident()
        self.library_depth = 0
        self._saved: list[tuple[Any, str, Any]] = []

    # -- where buffers are -----------------------------------------------------------
    def where(self, obj: Any) -> Where:
        found = self.table.find(obj)
        return ("object", obj) if found is None else ("buffer", *found)

    def array_where(self, value: Any) -> ArrayWhere:
        if not isinstance(value, Array) or value._buf is None or not value.nbytes:
            return ("object", value)
        owner = value._base if value._base is not None else value
        found = self.table.find(owner._buf)
        if found is None or found[1]:
            return ("object", value)
        return ("array", found[0], value.shape, value.dtype, value._strides, value.offset, owner.shape,
                owner.dtype, value._layout, value._device)

    def _counter(self, runtime: Any) -> Any:
        return launch_counter(self.devices[id(runtime)][1])

    # -- what the wrappers note ------------------------------------------------------
    def launched(self, runtime: Any, kernel: Any, global_size: Any, local_size: Any, values: Any) -> None:
        template = list(values)
        rebinds: list[tuple[int, tuple[Any, ...]]] = []
        for position, value in enumerate(template):
            if isinstance(value, np.ndarray):  # host memory: a view found by its address
                found = self.table.find(value)
                if found is not None:
                    rebinds.append((position, ("view", found[0], found[1], value.shape, value.dtype, value.strides)))
                continue
            noted = self.kargs.get(id(value))
            if noted is not None and noted[0] is value:
                (index, offset), shape, dtype = noted[1], noted[2], noted[3]
                if offset:
                    raise JitError(f"hetero.jit: {self.name}() launched a kernel on a part of a buffer that "
                                   f"this device cannot rebind; call the function without hetero.jit")
                rebinds.append((position, ("karg", index, shape, dtype)))
        self.steps.append(LaunchStep(runtime, kernel, tuple(global_size), None if local_size is None else tuple(local_size),
                                     template, rebinds, self._counter(runtime)))

    def check_library(self, name: str, call: Any) -> None:
        if not isinstance(call, functools.partial):
            raise JitError(f"hetero.jit: {self.name}() calls {name}, which hetero.jit cannot record yet; "
                           f"call it outside the jitted function (or call the function without hetero.jit)")

    def library(self, runtime: Any, name: str, call: functools.partial[Any]) -> None:
        # noted after the call: an operand recorded lazily is computed by then (its launch a step before this one)
        args = [self.array_where(a) for a in call.args]
        keywords = {k: self.array_where(v) for k, v in call.keywords.items()}
        self.steps.append(LibraryStep(runtime, name, call.func, args, keywords, self._counter(runtime)))

    def host_read(self, what: str) -> ConcretizationError:
        frame = outside_frame()
        at = "an unknown line"
        if frame is not None:
            line = linecache.getline(frame.f_code.co_filename, frame.f_lineno).strip()
            at = f"{frame.f_code.co_filename}:{frame.f_lineno}" + (f" (`{line}`)" if line else "")
        return ConcretizationError(
            f"hetero.jit: {self.name}() {what} while it is being traced, at {at}. A jitted function replays "
            f"the same launches whatever its arrays hold, so it cannot depend on their values: return the "
            f"array and read it after the call, move this line out of the jitted function, or call the "
            f"function without hetero.jit")

    # -- installing the wrappers ----------------------------------------------------
    @contextmanager
    def active(self) -> Iterator[Recorder]:
        if tracing():
            raise JitError("hetero.jit: a trace is already running in this thread")
        _TRACE_LOCK.acquire()
        tracing_state.set_active(True)
        try:
            for runtime, _ in self.devices.values():
                for method in METHODS:
                    if not hasattr(runtime, method):
                        continue
                    own = vars(runtime).get(method, _MISSING)
                    self._saved.append((runtime, method, own))
                    setattr(runtime, method, self._wrapper(runtime, method, getattr(runtime, method)))
            yield self
        finally:
            for runtime, method, own in reversed(self._saved):
                if own is _MISSING:
                    vars(runtime).pop(method, None)
                else:
                    setattr(runtime, method, own)
            self._saved.clear()
            tracing_state.set_active(False)
            _TRACE_LOCK.release()

    def _wrapper(self, runtime: Any, method: str, original: Callable[..., Any]) -> Callable[..., Any]:
        recorder, thread = self, self.thread
        get_ident = threading.get_ident

        if method == "allocate":
            def allocate(nbytes: int) -> Any:
                buffer = original(nbytes)
                if get_ident() == thread:
                    recorder.allocated[recorder.table.add(buffer)] = (id(runtime), nbytes)
                return buffer
            return allocate
        if method == "launch":
            def launch(kernel: Any, global_size: Any, local_size: Any, values: Any) -> None:
                if get_ident() == thread:  # also inside a library call: an operand computed on the way in
                    recorder.launched(runtime, kernel, global_size, local_size, values)
                original(kernel, global_size, local_size, values)
            return launch
        if method == "kernel_arg":
            def kernel_arg(buffer: Any, shape: Any, dtype: Any) -> Any:
                value = original(buffer, shape, dtype)
                if get_ident() == thread:
                    found = recorder.table.find(buffer)
                    if found is not None:
                        recorder.kargs[id(value)] = (value, found, shape, dtype)
                return value
            return kernel_arg
        if method == "upload":
            def upload(dst: Any, src: np.ndarray, offset: int = 0) -> None:
                if get_ident() == thread:
                    recorder.steps.append(UploadStep(runtime, recorder.where(dst), np.array(src, copy=True), offset))
                original(dst, src, offset)
            return upload
        if method == "copy":
            def copy(dst: Any, src: Any, nbytes: int) -> None:
                if get_ident() == thread:
                    recorder.steps.append(CopyStep(runtime, recorder.where(dst), recorder.where(src), nbytes))
                original(dst, src, nbytes)
            return copy
        if method == "call_library":
            def call_library(name: str, call: Any) -> Any:
                if get_ident() != thread or recorder.library_depth:
                    return original(name, call)
                recorder.check_library(name, call)
                recorder.library_depth += 1
                try:
                    result = original(name, call)
                finally:
                    recorder.library_depth -= 1
                recorder.library(runtime, name, call)
                return result
            return call_library
        if method in ("download", "download_many"):
            def download(*args: Any, **kwargs: Any) -> Any:
                if get_ident() == thread and not recorder.library_depth:
                    raise recorder.host_read("reads an array's value on the host")
                return original(*args, **kwargs)
            return download
        if method == "native_view":
            def native_view(*args: Any, **kwargs: Any) -> Any:
                if get_ident() == thread and not recorder.library_depth and runtime.host_memory:
                    raise recorder.host_read("reads or writes an array's memory from the host")
                return original(*args, **kwargs)
            return native_view
        # alias_host: declined while tracing, so host data is copied in (an upload step)
        def alias_host(*args: Any, **kwargs: Any) -> Any:
            return None if get_ident() == thread else original(*args, **kwargs)
        return alias_host


_MISSING = object()


__all__ = ["METHODS", "Recorder", "tracing"]
