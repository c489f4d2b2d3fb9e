"""The ``opencl`` backend: every OpenCL platform that is not Intel's (PoCL, rusticl,
AMD's and NVIDIA's OpenCL drivers, …), through PyOpenCL."""

from __future__ import annotations

from typing import Any, NoReturn

from hetero.core.errors import BackendUnavailableError
from hetero.core.plugin import BackendRegistration

from hetero.backends.opencl.runtime import OpenCLBackend

INSTALL_HINT = "pip install 'hetero[opencl]' and an OpenCL driver, e.g. apt-get install pocl-opencl-icd"


def is_intel(platform: Any) -> bool:
    return "intel" in f"{platform.vendor} {platform.name}".lower()


def _missing(platform_names: list[str]) -> NoReturn:
    if platform_names:
        reason = f"no non-Intel OpenCL platform has a device (platforms seen: {', '.join(platform_names)})"
    else:
        reason = "the OpenCL ICD loader found no platform"
    raise BackendUnavailableError("opencl", reason, INSTALL_HINT)


def open_backend() -> OpenCLBackend:
    return OpenCLBackend("opencl", lambda platform: not is_intel(platform), _missing)


registration = BackendRegistration(
    name="opencl",
    factory=open_backend,
    priority=40,
    description="OpenCL platforms other than Intel's (PoCL, rusticl, vendor ICDs) through PyOpenCL",
    install_hint=INSTALL_HINT,
)
