"""Finding CuPy's GPUs: why a ``cuda``/``rocm`` backend is unavailable (each case its own reason
and remedy, shown by ``hetero devices --all``), and a device's descriptor built from CUDA/HIP
device properties (a plain dict, so discovery is unit-tested with a fake one).
"""

from __future__ import annotations

import ctypes
import dataclasses
import importlib.util
import sys
import uuid as uuid_module
from collections.abc import Mapping
from importlib import metadata
from pathlib import Path
from types import ModuleType
from typing import Any

from hetero.core.device import DeviceInfo, Kind
from hetero.core.errors import BackendUnavailableError

_STACK = {"cuda": "CUDA", "rocm": "ROCm/HIP"}
_BUILDS = {"cuda": "CUDA", "rocm": "ROCm"}
_VISIBLE = {"cuda": "CUDA_VISIBLE_DEVICES", "rocm": "HIP_VISIBLE_DEVICES / ROCR_VISIBLE_DEVICES"}
_SMI = {"cuda": "nvidia-smi", "rocm": "rocm-smi"}
_NO_DRIVER_REMEDY = "install the GPU driver ({smi} must work), or use another backend (hetero devices --all)"


@dataclasses.dataclass(frozen=True)
class Found:
    """What opening CuPy found: the module, version strings and the device count."""

    cupy: ModuleType
    versions: dict[str, str]
    count: int


def import_cupy(backend: str, hint: str) -> ModuleType:
    try:
        import cupy
    except ImportError as exc:
        raise BackendUnavailableError(backend, f"CuPy is not installed ({exc})", hint) from exc
    except Exception as exc:  # a broken CuPy install raises other errors at import
        raise BackendUnavailableError(backend, f"CuPy failed to import: {type(exc).__name__}: {exc}",
                                      f"reinstall CuPy; {hint}") from exc
    return cupy


def precheck(backend: str, hint: str) -> None:
    """The checks that need no CuPy import (~0.1 s, with no GPU to show for it), raising
    BackendUnavailableError as :func:`open_cupy` would: no CuPy; CuPy built for the other vendor
    (told by its distribution's name: ``cupy-cuda13x``, ``cupy-rocm-6-0``); for ``cuda``, no
    driver library (libcuda.so.1). Returns when only importing CuPy can tell more (a CuPy
    already imported, a source build named plain ``cupy``, a driver library present)."""
    if "cupy" in sys.modules:
        return  # imported already: open_cupy's checks cost nothing more
    try:
        spec = importlib.util.find_spec("cupy")
    except (ImportError, ValueError):
        return  # let the import say what is wrong
    if spec is None:
        raise BackendUnavailableError(backend, "CuPy is not installed (no module named 'cupy')", hint)
    found = _distribution(spec.origin)
    if found is None:
        return
    name, version = found
    built = built_for(name)
    if built is None:
        return  # a build whose name does not say its vendor: importing it tells
    if built != backend:
        raise BackendUnavailableError(backend, f"the installed CuPy {version} ({name}) is built for {_BUILDS[built]} "
                                      f"(it serves the {built!r} backend)", hint)
    if backend == "cuda" and sys.platform.startswith("linux"):
        try:
            ctypes.CDLL("libcuda.so.1")  # what the CUDA runtime loads first; CuPy would load it anyway
        except OSError as exc:
            raise BackendUnavailableError(
                backend, f"no NVIDIA driver found ({exc}): CuPy {version} ({name}) cannot "
                "start the CUDA runtime without it (cudaErrorInsufficientDriver)", _NO_DRIVER_REMEDY.format(smi="nvidia-smi"),
            ) from exc


def built_for(distribution: str) -> str | None:
    """The backend a CuPy wheel serves, told by its name: ``cupy-rocm-7-0`` (and every
    ``cupy-rocm-X-Y``) -> ``"rocm"``, ``cupy-cuda13x`` -> ``"cuda"``; None for plain ``cupy``."""
    name = distribution.lower().replace("_", "-")
    return "rocm" if name.startswith("cupy-rocm-") else "cuda" if name.startswith("cupy-cuda") else None


def _distribution(origin: str | None) -> tuple[str, str] | None:
    """``(name, version)`` of the one CuPy distribution installed beside the ``cupy`` package
    (``cupy/__init__.py`` at ``origin``), or None when there is none or several."""
    if not origin:
        return None
    site = Path(origin).parent.parent
    try:
        candidates = [p for p in site.iterdir() if p.name.lower().startswith("cupy")
                      and p.name.endswith((".dist-info", ".egg-info"))]
    except OSError:
        return None
    if len(candidates) != 1:
        return None
    try:
        dist = metadata.PathDistribution(candidates[0])
        name, version = dist.metadata["Name"], dist.version
    except (OSError, KeyError, ValueError):
        return None
    if not name or not version:
        return None
    return str(name).lower().replace("_", "-"), str(version)


def version_text(number: int) -> str:
    """CUDA/HIP encode versions as major*1000 + minor*10 (13020 -> "13.2"); 0 means no driver."""
    return f"{number // 1000}.{(number % 1000) // 10}" if number else "none"


def open_cupy(backend: str, hint: str) -> Found:
    """Import CuPy and count its GPUs, or raise BackendUnavailableError saying which of these it is:
    no CuPy; CuPy built for the other vendor; no driver; a driver older than CuPy's runtime; no GPU."""
    cupy = import_cupy(backend, hint)
    runtime = cupy.cuda.runtime
    built = _BUILDS["rocm" if runtime.is_hip else "cuda"]
    if built != _BUILDS[backend]:
        other = "rocm" if backend == "cuda" else "cuda"
        raise BackendUnavailableError(backend, f"the installed CuPy {cupy.__version__} is built for {built} "
                                      f"(it serves the {other!r} backend)", hint)
    versions = {"cupy": cupy.__version__}
    stack = _STACK[backend]
    try:
        runtime_version = int(runtime.runtimeGetVersion())
        versions["runtime"] = version_text(runtime_version)
        driver_version = int(runtime.driverGetVersion())
        versions["driver"] = version_text(driver_version)
    except runtime.CUDARuntimeError as exc:
        raise BackendUnavailableError(backend, f"CuPy {cupy.__version__} cannot ask the {stack} runtime its "
                                      f"version: {exc}", hint) from exc
    try:
        count = int(runtime.getDeviceCount())
    except runtime.CUDARuntimeError as exc:
        status = getattr(exc, "status", None)
        if status == 100:  # cudaErrorNoDevice / hipErrorNoDevice
            count = 0
        elif status == 35 and driver_version == 0:  # cudaErrorInsufficientDriver, and no driver at all
            library = "libcuda.so.1" if backend == "cuda" else "libamdhip64.so / the amdgpu kernel driver"
            raise BackendUnavailableError(
                backend, f"no {'NVIDIA' if backend == 'cuda' else 'AMD GPU'} driver found ({library} is missing): "
                f"CuPy {cupy.__version__} ({stack} runtime {versions['runtime']}) gets {exc}",
                _NO_DRIVER_REMEDY.format(smi=_SMI[backend]),
            ) from exc
        elif status == 35:  # cudaErrorInsufficientDriver: minor-version compatibility ends at the major
            raise BackendUnavailableError(
                backend, f"the driver supports {stack} {versions['driver']}, too old for CuPy {cupy.__version__}'s "
                f"runtime {versions['runtime']} (cudaErrorInsufficientDriver)",
                f"update the driver, or install the CuPy built for it: pip install cupy-cuda{driver_version // 1000}x",
            ) from exc
        else:
            raise BackendUnavailableError(backend, f"CuPy {cupy.__version__} ({stack} runtime {versions['runtime']}, "
                                          f"driver {versions['driver']}) cannot use a GPU: {exc}",
                                          f"check the driver with {_SMI[backend]}; {hint}") from exc
    if count == 0:
        raise BackendUnavailableError(
            backend, f"the {stack} driver {versions['driver']} sees no GPU",
            f"check {_VISIBLE[backend]} (an empty or wrong list hides every GPU) and {_SMI[backend]}")
    return Found(cupy, versions, count)


def _text(value: Any) -> str:
    return value.decode(errors="replace").rstrip("\0") if isinstance(value, bytes) else str(value)


def stable_id(backend: str, props: Mapping[str, Any]) -> str:
    """The device UUID (``GPU-…`` in nvidia-smi, without the prefix here); the PCI address without one."""
    raw = props.get("uuid")
    if raw:
        data = bytes(raw)[:16] if not isinstance(raw, str) else raw.encode()[:16]
        if any(data):
            return str(uuid_module.UUID(bytes=data.ljust(16, b"\0")))
    return f"{backend}-pci-{pci_address(props)}"


def pci_address(props: Mapping[str, Any]) -> str:
    """``0000:19:00.0``: domain, bus and device from the properties (function 0)."""
    return f"{int(props.get('pciDomainID', 0)):04x}:{int(props.get('pciBusID', 0)):02x}:{int(props.get('pciDeviceID', 0)):02x}.0"


def device_info(backend: str, index: int, props: Mapping[str, Any], versions: Mapping[str, str]) -> DeviceInfo:
    """The descriptor of device ``index`` from its ``getDeviceProperties`` dict."""
    gcn = _text(props.get("gcnArchName", b""))
    major, minor = int(props.get("major", 0)), int(props.get("minor", 0))
    arch = gcn or f"sm_{major}{minor}"
    extra = {
        "arch": arch,
        "compute_capability": f"{major}.{minor}",
        "pci_bus_id": pci_address(props),
        "runtime_version": versions.get("runtime", ""),
        "cupy_version": versions.get("cupy", ""),
        "clock_khz": str(props.get("clockRate", "")),
        "ecc_enabled": str(bool(props.get("ECCEnabled", 0))).lower(),
    }
    return DeviceInfo(
        name=f"{backend}:{index}",
        backend=backend,
        index=index,
        vendor="AMD" if backend == "rocm" else "NVIDIA",
        kind=Kind.GPU,
        model=_text(props.get("name", "")),
        memory=int(props.get("totalGlobalMem", 0)),
        compute_units=int(props.get("multiProcessorCount", 0)),
        max_work_group_size=int(props.get("maxThreadsPerBlock", 1024)),
        fp64=True,
        driver_version=versions.get("driver", ""),
        stable_id=stable_id(backend, props),
        extra={k: v for k, v in extra.items() if v != ""},
        local_memory=int(props.get("sharedMemPerBlock", 0)),  # static shared memory: what a variant declares
    )
