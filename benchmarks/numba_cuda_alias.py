"""A pytest plugin that runs code written for ``numba.cuda`` on hetero, unchanged.

Loaded with ``-p benchmarks.numba_cuda_alias`` by :mod:`benchmarks.numba_cuda_examples`: before
any test module is imported it makes ``numba.cuda`` (and ``numba.cuda.types``, ``.random``) name
:mod:`hetero.compat.cuda`, and supplies the two helper modules numba-cuda's own tests import
(``numba.cuda.testing``, ``numba.cuda.tests.support``) with the meanings they have there. The
device is ``HETERO_COMPAT_DEVICE`` (default: ``hetero.device()``'s choice).

The skip decorators keep numba-cuda's conditions, asked of hetero: ``skip_on_cudasim`` never
skips (this is not Numba's simulator), ``skip_if_cudadevrt_missing`` and ``skip_unless_cc_60``
never skip (hetero needs neither CUDA's device runtime nor a compute capability), and
``skip_on_standalone_numba_cuda`` skips only where ``numba.jit`` is missing.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import math
import os
import sys
import types
import unittest

import numpy as np
from collections.abc import Callable, Iterator
from typing import Any


def _never(*args: Any) -> Any:
    """A skip decorator whose condition never holds here: used bare or with a reason."""
    if len(args) == 1 and callable(args[0]) and not isinstance(args[0], str):
        return args[0]
    return lambda obj: obj


def _kind(value: Any) -> str:
    if isinstance(value, (bool, np.bool_)):
        return "b"
    if isinstance(value, (int, np.integer)):
        return "i"
    if isinstance(value, (float, np.floating)):
        return "f"
    if isinstance(value, (complex, np.complexfloating)):
        return "c"
    return type(value).__name__


def _precise_equal(case: unittest.TestCase, first: Any, second: Any, prec: str, ulps: int, msg: str | None,
                   ignore_sign_on_zero: bool, abs_tol: float | None) -> None:
    """The comparison behind the suite's ``assertPreciseEqual`` (see its docstring)."""
    if isinstance(first, np.ndarray) or isinstance(second, np.ndarray):
        a, b = np.asarray(first), np.asarray(second)
        case.assertEqual(a.shape, b.shape, msg)
        case.assertEqual(a.dtype.kind, b.dtype.kind, msg)
        for x, y in zip(a.ravel().tolist(), b.ravel().tolist()):
            _precise_equal(case, x, y, prec, ulps, msg, ignore_sign_on_zero, abs_tol)
        return
    if isinstance(first, (tuple, list)) and isinstance(second, (tuple, list)):
        case.assertEqual(len(first), len(second), msg)
        for x, y in zip(first, second):
            _precise_equal(case, x, y, prec, ulps, msg, ignore_sign_on_zero, abs_tol)
        return
    case.assertEqual(_kind(first), _kind(second), msg or f"{first!r} and {second!r} are not numbers of one kind")
    if _kind(first) == "c":
        for part in ("real", "imag"):
            _precise_equal(case, getattr(first, part), getattr(second, part), prec, ulps, msg, ignore_sign_on_zero, abs_tol)
        return
    if _kind(first) != "f":
        case.assertEqual(first, second, msg)
        return
    x, y = float(first), float(second)
    if math.isnan(x) or math.isnan(y):
        case.assertTrue(math.isnan(x) and math.isnan(y), msg or f"{x!r} != {y!r}")
        return
    if x == y:
        if x == 0 and not ignore_sign_on_zero and prec == "exact":
            case.assertEqual(math.copysign(1, x), math.copysign(1, y), msg or f"{x!r} != {y!r} (the sign of zero)")
        return
    if abs_tol is not None and abs(x - y) <= abs_tol:
        return
    if prec == "exact" or math.isinf(x) or math.isinf(y):
        case.fail(msg or f"{x!r} != {y!r}")
    dtype = np.float32 if prec == "single" else np.float64
    spacing = float(np.spacing(dtype(max(abs(x), abs(y)))))
    case.assertLessEqual(abs(x - y), ulps * spacing, msg or f"{x!r} and {y!r} differ by more than {ulps} ulp(s) of {prec}")


def _testing_module() -> types.ModuleType:
    module = types.ModuleType("numba.cuda.testing")
    module.unittest = unittest  # type: ignore[attr-defined]

    class CUDATestCase(unittest.TestCase):
        """numba-cuda's base class for tests that use a device."""

        FLOAT16_RTOL = np.finfo(np.float16).eps  # as numba-cuda's: float16 results compared to one ulp

        def assertPreciseEqual(self, first: Any, second: Any, prec: str = "exact", ulps: int = 1,  # noqa: N802
                               msg: str | None = None, ignore_sign_on_zero: bool = False,
                               abs_tol: float | None = None) -> None:
            """numba's TestCase.assertPreciseEqual, as its tests use it: numbers (and arrays of them) of the
            same kind, equal bit for bit with ``prec="exact"`` (NaN equals NaN; 0.0 and -0.0 differ unless
            ``ignore_sign_on_zero``), or within ``ulps`` units in the last place of a float64
            (``"double"``) or float32 (``"single"``), or ``abs_tol``."""
            _precise_equal(self, first, second, prec, ulps, msg, ignore_sign_on_zero, abs_tol)

    module.CUDATestCase = CUDATestCase  # type: ignore[attr-defined]
    module.ContextResettingTestCase = CUDATestCase  # type: ignore[attr-defined]
    for name in ("skip_on_cudasim", "skip_if_cudadevrt_missing", "skip_unless_cc_60", "skip_unless_cc_50",
                 "skip_unless_cc_53", "skip_unless_cc_70", "skip_on_arm"):
        setattr(module, name, _never)
    module.skip_unless_cudasim = lambda reason="": unittest.skip(  # type: ignore[attr-defined]
        f"needs Numba's CUDA simulator: {reason}")
    module.xfail_unless_cudasim = unittest.expectedFailure  # type: ignore[attr-defined]
    for name in ("skip_if_nvjitlink_missing", "skip_on_nvjitlink_13_1_sm_120", "skip_if_external_memmgr",
                 "skip_unless_cc_75", "skip_if_mvc_enabled"):  # CUDA toolkit conditions hetero does not depend on
        setattr(module, name, _never)
    module.skip_if_curand_kernel_missing = unittest.skip(  # type: ignore[attr-defined]
        "needs cuRAND's device headers (curand_kernel.h), which hetero does not provide")

    def cc_X_or_above(major: int, minor: int) -> bool:
        from hetero.compat.cuda import get_current_device

        return get_current_device().compute_capability >= (major, minor)

    module.cc_X_or_above = cc_X_or_above  # type: ignore[attr-defined]
    has_numba_jit = importlib.util.find_spec("numba") is not None
    module.skip_on_standalone_numba_cuda = unittest.skipUnless(  # type: ignore[attr-defined]
        has_numba_jit, "needs numba.jit (not standalone numba-cuda)")
    return module


def _support_module() -> types.ModuleType:
    module = types.ModuleType("numba.cuda.tests.support")

    @contextlib.contextmanager
    def captured_stdout() -> Iterator[io.StringIO]:
        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            yield buffer

    @contextlib.contextmanager
    def override_config(name: str, value: Any) -> Iterator[None]:
        """numba-cuda's: set ``numba.cuda.config.<name>`` for the block (hetero's config where it has one)."""
        from hetero.compat.cuda import config

        missing = object()
        old = getattr(config, name, missing)
        setattr(config, name, value)
        try:
            yield
        finally:
            if old is missing:
                delattr(config, name)
            else:
                setattr(config, name, old)

    module.captured_stdout = captured_stdout  # type: ignore[attr-defined]
    module.override_config = override_config  # type: ignore[attr-defined]
    module.skip_unless_cffi = unittest.skipUnless(  # type: ignore[attr-defined]
        importlib.util.find_spec("cffi") is not None, "needs cffi")
    return module


def _tests_package() -> types.ModuleType:
    module = types.ModuleType("numba.cuda.tests")
    module.__path__ = []  # type: ignore[attr-defined]

    def load_testsuite(loader: unittest.TestLoader, directory: str) -> unittest.TestSuite:
        return loader.discover(directory)

    module.load_testsuite = load_testsuite  # type: ignore[attr-defined]
    return module


def install() -> None:
    """Make ``numba.cuda`` and its test helpers name hetero's modules (idempotent)."""
    import numba

    from hetero.compat import cuda
    from hetero.compat.cuda import types as cuda_types

    if sys.modules.get("numba.cuda") is cuda:  # installed already (by another plugin of this run)
        return

    modules: dict[str, Any] = {
        "numba.cuda": cuda, "numba.cuda.types": cuda_types, "numba.cuda.testing": _testing_module(),
        "numba.cuda.tests": _tests_package(), "numba.cuda.tests.support": _support_module(),
    }
    try:
        from hetero.compat.cuda import random as cuda_random
        modules["numba.cuda.random"] = cuda_random
    except ImportError:
        pass
    # numba-cuda's subpackages that hetero provides, under their numba names (one module object each)
    for name in ("np", "np.numpy_support", "typing", "kernels", "kernels.transpose", "cudadrv", "compiler"):
        modules[f"numba.cuda.{name}"] = importlib.import_module(f"hetero.compat.cuda.{name}")
    # numba.cuda.core's config and errors, as the suite reads them: not the simulator, and a typing
    # error is hetero's CompileError
    from hetero.core.errors import CompileError

    for flag in ("ENABLE_CUDASIM", "CUDA_ENABLE_NRT"):  # not Numba's simulator; no Numba runtime (NRT)
        if not hasattr(cuda.config, flag):
            setattr(cuda.config, flag, False)
    core = types.ModuleType("numba.cuda.core")
    core.__path__ = []  # type: ignore[attr-defined]
    errors = types.ModuleType("numba.cuda.core.errors")
    errors.TypingError = CompileError  # type: ignore[attr-defined]
    core.config, core.errors = cuda.config, errors  # type: ignore[attr-defined]
    modules.update({"numba.cuda.core": core, "numba.cuda.core.config": cuda.config, "numba.cuda.core.errors": errors})
    modules["numba.cuda.cudadrv.devicearray"] = cuda.devicearray
    sys.modules.update(modules)
    numba.cuda = cuda  # type: ignore[attr-defined]


_DEVICE: list[Callable[[], None]] = []


def pytest_configure(config: Any) -> None:
    install()
    name = os.environ.get("HETERO_COMPAT_DEVICE")
    if name:
        import hetero

        scope = hetero.use_device(name)
        scope.__enter__()
        _DEVICE.append(lambda: scope.__exit__(None, None, None))


def pytest_unconfigure(config: Any) -> None:
    while _DEVICE:
        _DEVICE.pop()()
