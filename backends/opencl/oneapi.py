"""The ``oneapi`` backend: Intel's OpenCL platforms (the GPU compute runtime and the
``intel-opencl-rt`` CPU runtime), through PyOpenCL."""

from __future__ import annotations

from typing import NoReturn

from hetero.core.config import get_config
from hetero.core.errors import BackendUnavailableError
from hetero.core.plugin import BackendRegistration

from hetero.backends.opencl import icd as opencl_icd
from hetero.backends.opencl.generic import is_intel
from hetero.backends.opencl.runtime import OpenCLBackend, library_load_error

INSTALL_HINT = "pip install 'hetero[oneapi]' (intel-opencl-rt and intel-cmplr-lib-rt), or Intel's GPU compute runtime"


def _missing(platform_names: list[str]) -> NoReturn:
    # Say why an Intel runtime that is installed did not appear: most often a
    # library it links against is missing (libimf.so without intel-cmplr-lib-rt).
    report = opencl_icd.prepare(get_config().cache_dir)
    for runtime in report.runtimes:
        if "intel" not in runtime.library.lower():
            continue
        if runtime.resolved is None:
            raise BackendUnavailableError("oneapi", f"Intel OpenCL runtime {runtime.icd}: {runtime.note}", INSTALL_HINT)
        error = library_load_error(runtime.resolved)
        if error:
            raise BackendUnavailableError(
                "oneapi",
                f"Intel OpenCL runtime {runtime.resolved} does not load: {error}",
                "pip install intel-cmplr-lib-rt" if "libimf" in error or "libsvml" in error else INSTALL_HINT,
            )
    seen = f" (platforms seen: {', '.join(platform_names)})" if platform_names else ""
    raise BackendUnavailableError("oneapi", f"no Intel OpenCL platform found{seen}", INSTALL_HINT)


def open_backend() -> OpenCLBackend:
    return OpenCLBackend("oneapi", is_intel, _missing)


registration = BackendRegistration(
    name="oneapi",
    factory=open_backend,
    priority=50,
    description="Intel OpenCL platforms (GPU compute runtime, intel-opencl-rt CPU runtime) through PyOpenCL",
    install_hint=INSTALL_HINT,
)
