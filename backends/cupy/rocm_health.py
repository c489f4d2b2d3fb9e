"""AMD GPU health: ``amdsmi`` where it is importable, else the amdgpu driver's sysfs files
(``/sys/class/drm/card*/device/``), matched to a HIP device by PCI address.

sysfs fields read (amdgpu kernel docs, "Misc AMDGPU driver information" and "AMDGPU RAS support"):
``gpu_busy_percent``; ``mem_info_vram_total``/``_used``; ``ras/<block>_err_count`` (``ue: N`` and
``ce: N`` lines: uncorrectable / correctable errors per RAS block such as umc (memory), gfx, sdma);
``hwmon/hwmon*/temp*_input`` with ``temp*_label`` (edge, junction, mem; millidegrees) and
``temp*_crit``. Uncorrectable RAS errors or a temperature at its critical limit make the device
``degraded``; no readable card makes it ``unknown``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hetero.core.device import Health, HealthState

logger = logging.getLogger("hetero.backends.cupy.rocm")

DRM = Path("/sys/class/drm")


def _read(path: Path) -> str | None:
    try:
        return path.read_text().strip()
    except (OSError, UnicodeDecodeError):
        return None


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text is not None else None
    except ValueError:
        return None


def find_card(pci_address: str, root: Path = DRM) -> Path | None:
    """The ``device`` directory of the DRM card at ``pci_address`` (``0000:03:00.0``), or None."""
    wanted = pci_address.lower()
    for card in sorted(root.glob("card[0-9]*")):
        device = card / "device"
        if not device.is_dir() or "-" in card.name:  # card0-DP-1 etc. are connectors
            continue
        if os.path.basename(os.path.realpath(device)).lower() == wanted or _read(device / "pci_address") == wanted:
            return device
    return None


def read_sysfs(device: Path) -> dict[str, Any]:
    """Every health field of one card's ``device`` directory (missing files are left out)."""
    fields: dict[str, Any] = {}
    for name in ("gpu_busy_percent", "mem_info_vram_total", "mem_info_vram_used"):
        value = _int(_read(device / name))
        if value is not None:
            fields[name] = value
    ras: dict[str, dict[str, int]] = {}
    for path in sorted((device / "ras").glob("*_err_count")):
        counts: dict[str, int] = {}
        for line in (_read(path) or "").splitlines():
            key, _, number = line.partition(":")
            value = _int(number.strip())
            if key.strip() in ("ue", "ce", "de") and value is not None:
                counts[key.strip()] = value
        if counts:
            ras[path.name.removesuffix("_err_count")] = counts
    if ras:
        fields["ras"] = ras
    temperatures: dict[str, dict[str, float]] = {}
    for hwmon in sorted((device / "hwmon").glob("hwmon*")):
        for sensor in sorted(hwmon.glob("temp*_input")):
            stem = sensor.name.removesuffix("_input")
            label = _read(hwmon / f"{stem}_label") or stem
            current = _int(_read(sensor))
            if current is None:
                continue
            entry = {"current_c": current / 1000}
            critical = _int(_read(hwmon / f"{stem}_crit"))
            if critical is not None:
                entry["critical_c"] = critical / 1000
            temperatures[label] = entry
    if temperatures:
        fields["temperature"] = temperatures
    return fields


def assess(fields: Mapping[str, Any]) -> Health:
    """Health from :func:`read_sysfs` (or amdsmi) fields."""
    if not fields:
        return Health(HealthState.UNKNOWN, "no amdgpu health fields readable")
    findings: list[str] = []
    uncorrectable = {block: c["ue"] for block, c in fields.get("ras", {}).items() if c.get("ue")}
    if uncorrectable:
        findings.append("uncorrectable RAS errors: " + ", ".join(f"{b} {n}" for b, n in sorted(uncorrectable.items())))
    for label, reading in sorted(fields.get("temperature", {}).items()):
        critical = reading.get("critical_c")
        if critical is not None and reading["current_c"] >= critical:
            findings.append(f"{label} temperature {reading['current_c']:g} C at its critical limit {critical:g} C")
    return Health(HealthState.DEGRADED, "; ".join(findings)) if findings else Health(HealthState.OK)


def read_amdsmi(amdsmi: Any, pci_address: str) -> dict[str, Any] | None:
    """The same fields through amdsmi (ECC totals, edge/hotspot temperature), or None when it
    has no processor at ``pci_address``."""
    amdsmi.amdsmi_init()
    for handle in amdsmi.amdsmi_get_processor_handles():
        if str(amdsmi.amdsmi_get_gpu_device_bdf(handle)).lower() != pci_address.lower():
            continue
        fields: dict[str, Any] = {}
        ecc = amdsmi.amdsmi_get_gpu_total_ecc_count(handle)
        fields["ras"] = {"total": {"ue": int(ecc.get("uncorrectable_count", 0)), "ce": int(ecc.get("correctable_count", 0))}}
        temperatures: dict[str, dict[str, float]] = {}
        for label in ("EDGE", "HOTSPOT"):
            kind = getattr(amdsmi.AmdSmiTemperatureType, label)
            current = amdsmi.amdsmi_get_temp_metric(handle, kind, amdsmi.AmdSmiTemperatureMetric.CURRENT)
            critical = amdsmi.amdsmi_get_temp_metric(handle, kind, amdsmi.AmdSmiTemperatureMetric.CRITICAL)
            temperatures[label.lower()] = {"current_c": float(current), "critical_c": float(critical)}
        fields["temperature"] = temperatures
        return fields
    return None


def rocm_health(pci_address: str, root: Path = DRM) -> tuple[Health, dict[str, Any]]:
    """The health of the AMD GPU at ``pci_address``: amdsmi first, sysfs second."""
    try:
        import amdsmi
    except ImportError:
        amdsmi = None
    if amdsmi is not None:
        try:
            fields = read_amdsmi(amdsmi, pci_address)
            if fields is not None:
                return assess(fields), {"source": "amdsmi", **fields}
        except Exception as exc:  # noqa: BLE001 - amdsmi errors fall back to sysfs, which needs no library
            logger.debug("amdsmi failed for %s (%s); reading sysfs", pci_address, exc)
    device = find_card(pci_address, root)
    if device is None:
        return Health(HealthState.UNKNOWN, f"no amdgpu card at PCI {pci_address} under {root} (and no amdsmi)"), {}
    fields = read_sysfs(device)
    return assess(fields), {"source": "sysfs", "path": str(device), **fields}
