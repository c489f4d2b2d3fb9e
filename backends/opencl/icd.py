"""Make the OpenCL ICD loader see every installed OpenCL runtime, pip-installed ones too.

The ICD loader reads ``*.icd`` files (each holding a driver library path) from one
folder, ``/etc/OpenCL/vendors`` unless ``OCL_ICD_VENDORS`` names another. Runtimes
installed by pip put their ``.icd`` files under the environment's
``etc/OpenCL/vendors``, where the loader never looks, and Intel's
``intel-opencl-rt`` wheel writes a placeholder path into its file
(``/opt/anaconda1anaconda2anaconda3/lib/libintelocl.so``). Before PyOpenCL first
initialises, :func:`prepare` gathers the system's and the environment's ``.icd``
files, resolves each library to a real path, writes them into a generated folder
and points ``OCL_ICD_VENDORS`` at it. A user's own ``OCL_ICD_VENDORS`` is respected.

This module reads and sets the vendor's variables (``OCL_ICD_VENDORS``,
``OPENCL_VENDOR_PATH``) on purpose: that is its job.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import os
import site
import sys
import tempfile
import threading
from pathlib import Path

log = logging.getLogger("hetero.backends.opencl.generic")

SYSTEM_VENDOR_DIRS = (Path("/etc/OpenCL/vendors"), Path("/usr/local/etc/OpenCL/vendors"))
# Set on the generated folder so a child process knows the value is hetero's, not the user's.
_MARKER = "HETERO_GENERATED_OCL_ICD_VENDORS"


@dataclasses.dataclass(frozen=True)
class Runtime:
    """One ``.icd`` file found, and what its library resolved to."""

    icd: str
    library: str  # as written in the file
    resolved: str | None  # what the loader will be told; None when it cannot be found
    note: str = ""


@dataclasses.dataclass(frozen=True)
class Report:
    """What :func:`prepare` found and did, for ``hetero devices --all``."""

    vendors_dir: str | None
    user_override: bool
    runtimes: tuple[Runtime, ...] = ()

    def as_dict(self) -> dict[str, object]:
        return {
            "vendors_dir": self.vendors_dir,
            "user_override": self.user_override,
            "runtimes": [dataclasses.asdict(r) for r in self.runtimes],
        }


_lock = threading.Lock()
_report: Report | None = None


def environment_vendor_dirs() -> list[Path]:
    """Where pip-installed runtimes put their ``.icd`` files (this environment, user site)."""
    prefixes = [Path(sys.prefix)]
    if sys.base_prefix != sys.prefix:
        prefixes.append(Path(sys.base_prefix))
    user_base = getattr(site, "USER_BASE", None)
    if user_base:
        prefixes.append(Path(user_base))
    return [prefix / "etc" / "OpenCL" / "vendors" for prefix in prefixes]


def _resolve(icd: Path, library: str) -> Runtime:
    path = Path(library)
    if not path.is_absolute():
        return Runtime(str(icd), library, library, "found by the dynamic linker's search path")
    if path.exists():
        return Runtime(str(icd), library, library)
    # A placeholder prefix: look beside the environment the .icd file belongs to.
    prefix = icd.parent.parent.parent.parent  # <prefix>/etc/OpenCL/vendors/x.icd
    for candidate in (prefix / "lib" / path.name, Path(sys.prefix) / "lib" / path.name):
        if candidate.exists():
            return Runtime(str(icd), library, str(candidate), f"placeholder path replaced by {candidate}")
    return Runtime(str(icd), library, None, f"library {path.name} not found at {library} nor in {prefix / 'lib'}")


def scan(dirs: list[Path]) -> list[Runtime]:
    """Every ``.icd`` file in ``dirs``, with its library resolved; duplicates dropped."""
    found: list[Runtime] = []
    seen: set[str] = set()
    for folder in dirs:
        if not folder.is_dir():
            continue
        for icd in sorted(folder.glob("*.icd")):
            try:
                library = icd.read_text(encoding="utf-8", errors="replace").strip().splitlines()[0].strip()
            except (OSError, IndexError):
                continue
            runtime = _resolve(icd, library)
            key = runtime.resolved or runtime.library
            if key in seen:
                continue
            seen.add(key)
            found.append(runtime)
    return found


def _write_vendors_dir(runtimes: list[Runtime], cache_dir: Path) -> Path:
    lines = sorted(f"{Path(r.icd).name}\t{r.resolved}" for r in runtimes if r.resolved)
    digest = hashlib.sha256("\n".join(lines).encode()).hexdigest()[:16]
    for base in (cache_dir, Path(tempfile.gettempdir()) / f"hetero-{os.getuid() if hasattr(os, 'getuid') else 'user'}"):
        target = base / "opencl-vendors" / digest
        if target.is_dir():
            return target
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            staging = Path(tempfile.mkdtemp(prefix=".tmp-", dir=target.parent))
            for line in lines:
                name, library = line.split("\t")
                (staging / name).write_text(library + "\n", encoding="utf-8")
            try:
                os.rename(staging, target)  # atomic: other processes see all files or none
            except OSError:
                if not target.is_dir():
                    raise
                for leftover in staging.iterdir():  # another process won the race
                    leftover.unlink()
                staging.rmdir()
            return target
        except OSError as exc:
            log.debug("cannot write OpenCL vendors folder under %s: %s", base, exc)
    raise OSError("no writable folder for the generated OpenCL vendors list; set HETERO_CACHE_DIR")


def prepare(cache_dir: Path) -> Report:
    """Point the ICD loader at every OpenCL runtime found (once per process). Call before PyOpenCL initialises."""
    global _report
    with _lock:
        if _report is not None:
            return _report
        user_value = os.environ.get("OCL_ICD_VENDORS")
        if user_value and os.environ.get(_MARKER) != user_value:
            log.debug("OCL_ICD_VENDORS=%s set by the user; leaving the ICD loader alone", user_value)
            _report = Report(user_value, True, tuple(scan([Path(user_value)])))
            return _report
        system = [Path(os.environ["OPENCL_VENDOR_PATH"])] if os.environ.get("OPENCL_VENDOR_PATH") else list(SYSTEM_VENDOR_DIRS)
        runtimes = scan(system + environment_vendor_dirs())
        for runtime in runtimes:
            if runtime.resolved is None:
                log.info("OpenCL runtime %s skipped: %s", runtime.icd, runtime.note)
        vendors_dir: str | None = None
        if any(r.resolved for r in runtimes):
            try:
                vendors_dir = str(_write_vendors_dir(runtimes, cache_dir))
            except OSError as exc:
                log.warning("OpenCL runtimes installed by pip stay invisible: %s", exc)
            else:
                os.environ["OCL_ICD_VENDORS"] = vendors_dir
                os.environ[_MARKER] = vendors_dir
                log.debug("OCL_ICD_VENDORS=%s (%d runtimes)", vendors_dir, len(runtimes))
        _report = Report(vendors_dir, False, tuple(runtimes))
        return _report
