"""Facts about the host machine that every CPU-type device shares, whichever runtime
drives it (NumPy, Intel's OpenCL CPU runtime, PoCL): the silicon's vendor and model from
``/proc/cpuinfo``.

No CPU device reports memory in use for placement: the host's (``/proc/meminfo``) is shared
by every CPU device alike, so it would tell none of them apart."""

from __future__ import annotations

import platform
from pathlib import Path

CPUINFO = Path("/proc/cpuinfo")
# /proc/cpuinfo's vendor_id (x86) and the names CPU models carry, as hetero spells vendors.
_VENDOR_IDS = {"GenuineIntel": "Intel", "AuthenticAMD": "AMD", "HygonGenuine": "Hygon", "CentaurHauls": "Centaur"}
_MODEL_WORDS = (("intel", "Intel"), ("amd", "AMD"), ("epyc", "AMD"), ("ryzen", "AMD"), ("hygon", "Hygon"),
                ("apple", "Apple"), ("ampere", "Ampere"), ("neoverse", "Arm"), ("graviton", "Amazon"))
# The "CPU implementer" field on Arm (its MIDR implementer code).
_ARM_IMPLEMENTERS = {"0x41": "Arm", "0x42": "Broadcom", "0x43": "Cavium", "0x46": "Fujitsu", "0x48": "HiSilicon",
                     "0x4e": "NVIDIA", "0x51": "Qualcomm", "0x61": "Apple", "0xc0": "Ampere"}


def cpu_vendor_and_model(cpuinfo: Path | None = None) -> tuple[str, str]:
    """``("AMD", "AMD EPYC 7763 64-Core Processor")``: the vendor of the host's CPU silicon
    and its model, from ``cpuinfo`` (default ``/proc/cpuinfo``); the machine type when unreadable."""
    fields: dict[str, str] = {}
    try:
        for line in (cpuinfo or CPUINFO).read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            fields.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    model = fields.get("model name") or fields.get("Model") or platform.processor() or platform.machine()
    vendor = _VENDOR_IDS.get(fields.get("vendor_id", ""), "") or _ARM_IMPLEMENTERS.get(
        fields.get("CPU implementer", "").lower(), "") or vendor_from_name(model)
    return vendor or fields.get("vendor_id") or platform.machine(), model


def vendor_from_name(name: str) -> str:
    """The vendor a CPU model name says (``"AMD EPYC 7763"`` -> ``"AMD"``), or ``""``."""
    text = name.lower()
    return next((vendor for word, vendor in _MODEL_WORDS if word in text), "")
