"""Array functions that run on the host for want of a vendor library on the device, never silently.

``hetero.linalg``'s decompositions and solvers call the device's LAPACK: NumPy's on ``cpu`` (the
array's own host memory), cuSOLVER / rocSOLVER through CuPy on ``cuda`` / ``rocm``. OpenCL
devices (``oneapi``, ``opencl``) have no LAPACK hetero binds, so there the operands are
downloaded, NumPy computes, and the results are uploaded: a *host fallback*. The ``fft``
transforms likewise, except that on OpenCL devices VkFFT runs them where ``pyvkfft`` is
installed (:func:`fft_library`). Each fallback is

- counted, per function and device: :func:`counts` (``{("linalg.inv", "oneapi:0"): 3}``), and per
  device in the telemetry (:func:`hetero.core.launch_counts.host_fallbacks`): a worker's heartbeats
  carry it to ``hetero-run``, whose metrics have ``hetero_host_fallbacks_total{device}``;
- announced: the first time a function falls back on a device, a
  :class:`hetero.PerformanceWarning` (``-W error`` and warning filters catch it) and a WARNING record
  on the ``hetero.array.ndarray`` logger name the function, the device and how to silence or forbid it;
- governed by the ``host_fallback`` setting (``HETERO_HOST_FALLBACK``, :mod:`hetero.core.config`):
  ``warn`` (default) as above, ``allow`` without the warning (still counted), ``error`` refuses
  with :class:`hetero.ArrayError` naming the function, the device and the setting.

:func:`host_functions` says, per device, which functions take this path (what an array
namespace's ``capabilities()`` reports).
"""

from __future__ import annotations

import collections
import logging
import threading

from hetero.core.config import get_config
from hetero.core.device import Device
from hetero.core.errors import ArrayError
from hetero.core.launch_counts import fell_back, forget_host_fallbacks
from hetero.core.notices import notice
from hetero.core.registry import device as resolve_device

log = logging.getLogger("hetero.array.ndarray")

#: Backends whose own library (NumPy on the host memory of ``cpu``, CuPy's cuSOLVER/rocSOLVER on
#: ``cuda``/``rocm``) runs the LAPACK-backed functions on the device's memory: no fallback.
LAPACK_LIBRARIES = {"cpu": "numpy", "cuda": "cuSOLVER", "rocm": "rocSOLVER"}

#: The same for the ``fft`` transforms: NumPy's pocketfft, CuPy's cuFFT / hipFFT.
FFT_LIBRARIES = {"cpu": "numpy", "cuda": "cuFFT", "rocm": "hipFFT"}

#: The functions that need LAPACK: on a device without one they run on the host.
#: (``linalg.matrix_norm`` only for ``ord`` 2, -2 and ``"nuc"``, which need singular values.)
LAPACK_FUNCTIONS = ("linalg.cholesky", "linalg.det", "linalg.eigh", "linalg.eigvalsh", "linalg.inv",
                    "linalg.matrix_norm", "linalg.matrix_rank", "linalg.pinv", "linalg.qr", "linalg.slogdet",
                    "linalg.solve", "linalg.svd", "linalg.svdvals")

#: The ``fft`` transforms (:mod:`hetero.arraylib.fft.transforms`): NumPy's pocketfft on ``cpu``, cuFFT / hipFFT through
#: CuPy on ``cuda`` / ``rocm``, the host elsewhere (the same backends as LAPACK's).
FFT_FUNCTIONS = ("fft.fft", "fft.fftn", "fft.hfft", "fft.ifft", "fft.ifftn", "fft.ihfft", "fft.irfft", "fft.irfftn",
                 "fft.rfft", "fft.rfftn")

#: OpenCL backends, whose ``fft`` transforms VkFFT runs (:mod:`hetero.arraylib.fft.vkfft`) where
#: ``pyvkfft`` imports.
VKFFT_BACKENDS = ("oneapi", "opencl")
_vkfft_missing: list[str | None] = []  # [reason] once looked up: None when pyvkfft imports

_lock = threading.Lock()
_counts: collections.Counter[tuple[str, str]] = collections.Counter()
_warned: set[tuple[str, str]] = set()


def vkfft_missing() -> str | None:
    """Why VkFFT cannot run the ``fft`` transforms on OpenCL devices here (``pyvkfft`` absent or
    broken: the remedy included), or None when it can."""
    if not _vkfft_missing:
        try:
            import pyvkfft.opencl  # noqa: F401  (builds nothing: plans are made per transform)
        except Exception as exc:  # noqa: BLE001  (an ImportError, or a library that fails to load)
            _vkfft_missing.append(f"pyvkfft is not usable here ({type(exc).__name__}: {exc}); pip install pyvkfft, "
                                  "which builds against the OpenCL headers (apt-get install ocl-icd-opencl-dev)")
        else:
            _vkfft_missing.append(None)
    return _vkfft_missing[0]


def fft_library(backend: str) -> str | None:
    """The library that runs the ``fft`` transforms on ``backend``'s devices, None for the host."""
    if backend in FFT_LIBRARIES:
        return FFT_LIBRARIES[backend]
    return "VkFFT" if backend in VKFFT_BACKENDS and vkfft_missing() is None else None


def host_functions(device: str | Device) -> tuple[str, ...]:
    """The functions (``"linalg.inv"``, ``"fft.fft"``, ...) that run on the host when given arrays on
    ``device`` (a :class:`hetero.Device` or its name, ``"oneapi:0"``); ``()`` where the device has its
    own LAPACK and FFT libraries."""
    backend = resolve_device(device).backend if isinstance(device, str) else device.backend
    return (() if backend in LAPACK_LIBRARIES else LAPACK_FUNCTIONS) + (() if fft_library(backend) else FFT_FUNCTIONS)


def counts() -> dict[tuple[str, str], int]:
    """Host fallbacks so far in this process, per ``(function, device name)``."""
    with _lock:
        return dict(_counts)


def reset() -> None:
    """Forget the counts and which pairs were announced (the next fallback of each warns again)."""
    with _lock:
        _counts.clear()
        _warned.clear()
    forget_host_fallbacks()


def note(function: str, device: Device) -> None:
    """Record that ``function`` (``"linalg.inv"``) is about to run on the host for arrays on
    ``device``: raises :class:`ArrayError` under ``host_fallback: error``, else counts it and, under
    ``warn``, logs the first time for this pair."""
    mode = get_config().host_fallback
    if mode == "error":
        raise ArrayError(f"hetero.{function}: {device.name} has no library hetero can call for it (LAPACK, FFT), so it would "
                         f"run on the host (download, NumPy, upload), and host_fallback is 'error' in the configuration; "
                         f"set HETERO_HOST_FALLBACK=allow (or host_fallback: allow in hetero.yaml) to permit it, or "
                         f"move the arrays to a device with one (cpu, cuda, rocm) with x.to(...)")
    key = (function, device.name)
    with _lock:
        _counts[key] += 1
        first = key not in _warned
        _warned.add(key)
    fell_back(device.name)
    if first and mode == "warn":
        notice(log, f"hetero.{function} runs on the host for arrays on {device.name}: the device has no library "
                    "hetero can call for it (LAPACK, FFT), so its operands are downloaded, NumPy computes and the "
                    "results are uploaded (said once per "
                    "function and device; every fallback is counted in hetero.arraylib.host_fallback.counts()). "
                    "Set HETERO_HOST_FALLBACK=allow to silence this, or =error to refuse")


__all__ = ["FFT_FUNCTIONS", "FFT_LIBRARIES", "LAPACK_FUNCTIONS", "LAPACK_LIBRARIES", "VKFFT_BACKENDS", "counts", "fft_library",
           "host_functions", "note", "reset", "vkfft_missing"]
