"""What this hetero is and where it runs, as the labels of the ``hetero_build_info`` metric that
``hetero-run`` and ``hetero serve`` both export (on the ground floor, so the two services, which
may not import each other, say it the same way)."""

from __future__ import annotations

import platform
import sys

from hetero._version import __version__

#: The name both services export it under (a gauge, always 1; the labels carry the facts).
BUILD_INFO_METRIC = "hetero_build_info"
BUILD_INFO_HELP = "hetero's version, the Python and the platform it runs on (always 1)"
BUILD_INFO_LABELS = ("version", "python", "platform")


def build_labels() -> dict[str, str]:
    """``{"version": "0.2.0", "python": "3.11.9", "platform": "Linux-6.1-x86_64"}``: hetero's
    version, the interpreter's (``sys.version_info``) and the operating system's name, release
    and machine type."""
    python = ".".join(str(part) for part in sys.version_info[:3])
    return {"version": __version__, "python": python,
            "platform": f"{platform.system()}-{platform.release()}-{platform.machine()}"}
