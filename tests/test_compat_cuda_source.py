"""Numba-CUDA kernels whose source is not in a file: built by ``exec`` from text registered in
``linecache`` (as IPython and Python's own prompt register what is typed), and a clear
CompileError, naming where the function came from, when no source exists at all."""

from __future__ import annotations

import itertools
import types
import linecache
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

import hetero
from hetero.compat import cuda
from hetero.core.errors import CompileError

_SOURCE = '''
def scaled(a, k):
    i = cuda.grid(1)
    if i < a.size:
        a[i] = i * k
'''
_COUNTER = itertools.count()


@pytest.fixture
def on(device: hetero.Device) -> Iterator[hetero.Device]:
    with hetero.use_device(device):
        yield device


def _exec(source: str, mtime: float | None = None, register: bool = True) -> Any:
    """The function ``source`` defines, compiled under a fresh pseudo-file name."""
    name = f"<hetero-test-{next(_COUNTER)}>"
    if register:
        linecache.cache[name] = (len(source), mtime, source.splitlines(True), name)
    namespace: dict[str, Any] = {"cuda": cuda}
    exec(compile(source, name, "exec"), namespace)  # noqa: S102 (a kernel made by exec is the case under test)
    return next(v for k, v in namespace.items() if k != "cuda" and callable(v))


@pytest.mark.parametrize("mtime", [None, 1.0], ids=["prompt", "stale-mtime"])
def test_kernel_from_linecache_runs(on: hetero.Device, mtime: float | None) -> None:
    # an entry with an mtime and no file behind it is one inspect's checkcache drops: hetero
    # reads the entry as Numba reads linecache, before anything can evict it
    kernel = cuda.jit(_exec(_SOURCE.replace("* k", f"* k + {int(mtime or 0)}"), mtime))
    a = np.zeros(16, np.int64)
    kernel[2, 8](a, 3)
    np.testing.assert_array_equal(a, np.arange(16) * 3 + int(mtime or 0))


def test_device_function_from_linecache(on: hetero.Device) -> None:
    twice = cuda.jit(device=True)(_exec("def twice(x):\n    return 2 * x\n"))

    @cuda.jit
    def kernel(a):
        i = cuda.grid(1)
        if i < a.size:
            a[i] = twice(a[i])

    a = np.arange(10, dtype=np.float32)
    kernel[1, 16](a)
    np.testing.assert_array_equal(a, 2 * np.arange(10, dtype=np.float32))


def test_exec_of_text_not_in_linecache_runs_from_the_text_the_hook_saw(on: hetero.Device) -> None:
    kernel = cuda.jit(_exec(_SOURCE, register=False))  # exec_sources' audit hook kept the text
    a = np.zeros(8)
    kernel[1, 8](a, 2.0)
    np.testing.assert_array_equal(a, 2.0 * np.arange(8))


def test_no_source_is_a_clear_compile_error(on: hetero.Device) -> None:
    made = _exec(_SOURCE, register=False)
    # a function whose text nothing kept (made before hetero.compat.cuda was imported, say): its code
    # object is one the hook never saw, and no text compiles to it
    orphan = types.FunctionType(made.__code__.replace(co_firstlineno=3), made.__globals__, made.__name__)
    kernel = cuda.jit(orphan)
    with pytest.raises(CompileError, match=r"no source.*exec") as info:
        kernel[1, 8](np.zeros(8), 1.0)
    assert info.value.file is not None and info.value.file.startswith("<hetero-test-")
    assert info.value.line == 3


def test_source_of_another_function_is_refused(on: hetero.Device) -> None:
    """Two texts compiled under one name: the cache holds the last, which is not this function's."""
    namespace: dict[str, Any] = {"cuda": cuda}
    name = f"<hetero-test-{next(_COUNTER)}>"
    exec(compile(_SOURCE, name, "exec"), namespace)  # noqa: S102
    other = "\ndef other(a, k):\n    a[0] = k\n"
    linecache.cache[name] = (len(other), None, other.splitlines(True), name)
    with pytest.raises(CompileError, match="scaled"):
        cuda.jit(namespace["scaled"])[1, 8](np.zeros(8), 1.0)
