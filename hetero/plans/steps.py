"""The steps of a launch plan, each one device operation recorded while tracing and run again
at every replay with the call's own buffers.

Each step names its buffers by index into the call's buffer list (see
:mod:`hetero.plans.buffers`): the inputs' (bound anew), the outputs' (allocated anew), and the
plan's own (the intermediates the trace allocated, and arrays from outside the function).
A step runs through the runtime's methods as they are at replay time, so fault injection
(which wraps them per instance) sees a replayed launch, and it counts on the device's launch
counter as an eager launch does.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from hetero.array.ndarray import Array

#: How a step finds a buffer at replay: ("buffer", index, byte offset) or ("object", the object itself).
Where = tuple[Any, ...]


def locate(where: Where, buffers: Sequence[Any]) -> Any:
    """The buffer-like object ``where`` names among this call's ``buffers``."""
    if where[0] == "object":
        return where[1]
    buffer = buffers[where[1]]
    return buffer[where[2]:] if where[2] else buffer  # an offset only into host memory (NumPy)


class LaunchStep:
    """A kernel launch: the values recorded, with the positions whose buffer changes per call.

    Where the runtime offers a :meth:`bound_launch` (OpenCL: a kernel object of the step's own,
    its arguments set once), replays after the first reset only the changed buffers; while
    anything wraps the runtime's ``launch`` (fault injection, a trace around this replay) the
    step goes through ``launch`` itself, so that wrapper sees it."""

    __slots__ = ("bound", "counter", "global_size", "kernel", "local_size", "rebinds", "runtime", "template", "tried")

    def __init__(self, runtime: Any, kernel: Any, global_size: tuple[int, ...], local_size: tuple[int, ...] | None,
                 template: list[Any], rebinds: list[tuple[int, tuple[Any, ...]]], counter: itertools.count[int]) -> None:
        self.runtime = runtime
        self.kernel = kernel
        self.global_size = global_size
        self.local_size = local_size
        self.template = template
        #: (position, key): key ("view", index, byte offset, shape, dtype, strides) is a NumPy view
        #: rebuilt over the call's buffer; ("karg", index, shape, dtype) the runtime's kernel_arg of it.
        self.rebinds = rebinds
        self.counter = counter
        self.bound: Callable[[Sequence[tuple[int, Any]]], None] | None = None
        self.tried = False

    def run(self, buffers: Sequence[Any], kargs: dict[tuple[Any, ...], Any]) -> None:
        changed = []
        for position, key in self.rebinds:
            made = kargs.get(key)
            if made is None:
                if key[0] == "view":
                    _, index, offset, shape, dtype, strides = key
                    made = np.ndarray(shape, dtype, buffers[index], offset, strides)
                else:
                    _, index, shape, dtype = key
                    made = self.runtime.kernel_arg(buffers[index], shape, dtype)
                kargs[key] = made  # the same value for every launch of this call that takes it
            changed.append((position, made))
        runtime = self.runtime
        if self.bound is not None and "launch" not in vars(runtime):
            self.bound(changed)
        else:
            values = self.template.copy()
            for position, made in changed:
                values[position] = made
            runtime.launch(self.kernel, self.global_size, self.local_size, values)
            if not self.tried and "launch" not in vars(runtime):
                self.tried = True
                self.bound = runtime.bound_launch(self.kernel, self.global_size, self.local_size, values)
        next(self.counter)


class UploadStep:
    """Host data written into a buffer (a constant of the plan: the trace's bytes, kept)."""

    __slots__ = ("data", "dst", "offset", "runtime")

    def __init__(self, runtime: Any, dst: Where, data: np.ndarray, offset: int) -> None:
        self.runtime, self.dst, self.data, self.offset = runtime, dst, data, offset

    def run(self, buffers: Sequence[Any], kargs: dict[tuple[Any, ...], Any]) -> None:
        self.runtime.upload(locate(self.dst, buffers), self.data, self.offset)


class CopyStep:
    """A copy between two buffers of one device."""

    __slots__ = ("dst", "nbytes", "runtime", "src")

    def __init__(self, runtime: Any, dst: Where, src: Where, nbytes: int) -> None:
        self.runtime, self.dst, self.src, self.nbytes = runtime, dst, src, nbytes

    def run(self, buffers: Sequence[Any], kargs: dict[tuple[Any, ...], Any]) -> None:
        self.runtime.copy(locate(self.dst, buffers), locate(self.src, buffers), self.nbytes)


#: An array a library call is given: ("array", index, shape, dtype, strides, offset, root shape,
#: root dtype, layout, device) rebuilt over the call's buffer, or ("object", value) as it was.
ArrayWhere = tuple[Any, ...]


def view_of(owner: Array, shape: tuple[int, ...], dtype: Any, strides: tuple[int, ...] | None, offset: int,
            layout: int) -> Array:
    """``owner`` itself where the recorded layout is its own, else a view of its buffer with that
    layout (marked for a kernel's copy where the recorded array was)."""
    if strides is None and offset == 0 and shape == owner.shape and dtype == owner.dtype:
        return owner
    made = Array(owner._buf, owner._device, shape, dtype, strides, offset, owner)
    if layout != made._layout:
        made._copied_by_kernels()
    return made


def rebuild(where: ArrayWhere, buffers: Sequence[Any]) -> Any:
    """The array (or other argument) ``where`` describes, over this call's buffers."""
    if where[0] == "object":
        return where[1]
    _, index, shape, dtype, strides, offset, root_shape, root_dtype, layout, device = where
    return view_of(Array(buffers[index], device, root_shape, root_dtype), shape, dtype, strides, offset, layout)


class LibraryStep:
    """A vendor library call (a GEMM of CLBlast, cuBLAS or NumPy), recorded as a function of arrays."""

    __slots__ = ("args", "counter", "function", "keywords", "name", "runtime")

    def __init__(self, runtime: Any, name: str, function: Callable[..., Any], args: list[ArrayWhere],
                 keywords: dict[str, ArrayWhere], counter: itertools.count[int]) -> None:
        self.runtime, self.name, self.function = runtime, name, function
        self.args, self.keywords, self.counter = args, keywords, counter

    def run(self, buffers: Sequence[Any], kargs: dict[tuple[Any, ...], Any]) -> None:
        args = [rebuild(where, buffers) for where in self.args]
        keywords = {key: rebuild(where, buffers) for key, where in self.keywords.items()}
        # a partial, as the library's own call is: a trace around this replay records it again
        self.runtime.call_library(self.name, functools.partial(self.function, *args, **keywords))
        next(self.counter)


Step = LaunchStep | UploadStep | CopyStep | LibraryStep

__all__ = ["ArrayWhere", "CopyStep", "LaunchStep", "LibraryStep", "Step", "UploadStep", "Where", "locate", "rebuild", "view_of"]
