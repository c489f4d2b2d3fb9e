"""ROCm health from the amdgpu driver's sysfs files, parsed from a fake /sys/class/drm tree, and
from a fake amdsmi; the card is matched to the HIP device by PCI address."""

from __future__ import annotations

import sys
import types
from pathlib import Path
from typing import Any

import pytest

from hetero.backends.cupy import rocm_health
from hetero.backends.cupy.rocm_health import assess, find_card, read_sysfs
from hetero.core.device import HealthState

PCI = "0000:03:00.0"


def make_card(root: Path, number: int, pci: str, *, ras: dict[str, str] | None = None, temp_c: float = 45.0,
              crit_c: float = 100.0) -> Path:
    """A /sys/class/drm/cardN -> device (the PCI device directory) tree as amdgpu lays it out."""
    pci_dir = root / "devices" / pci
    (pci_dir / "hwmon" / "hwmon3").mkdir(parents=True)
    (pci_dir / "gpu_busy_percent").write_text("37\n")
    (pci_dir / "mem_info_vram_total").write_text(f"{64 << 30}\n")
    (pci_dir / "mem_info_vram_used").write_text(f"{3 << 30}\n")
    hwmon = pci_dir / "hwmon" / "hwmon3"
    for index, label in ((1, "edge"), (2, "junction")):
        (hwmon / f"temp{index}_input").write_text(f"{int(temp_c * 1000) + index}\n")
        (hwmon / f"temp{index}_label").write_text(f"{label}\n")
        (hwmon / f"temp{index}_crit").write_text(f"{int(crit_c * 1000)}\n")
    if ras is not None:
        (pci_dir / "ras").mkdir()
        for block, text in ras.items():
            (pci_dir / "ras" / f"{block}_err_count").write_text(text)
    card = root / "drm" / f"card{number}"
    card.mkdir(parents=True)
    (card / "device").symlink_to(pci_dir)
    (root / "drm" / f"card{number}-DP-1").mkdir()  # a connector, not a card
    return pci_dir


def test_sysfs_fields_are_parsed(tmp_path: Path) -> None:
    device = make_card(tmp_path, 0, PCI, ras={"umc": "ue: 0\nce: 5\n", "gfx": "ue: 0\nce: 0\n"})
    fields = read_sysfs(device)
    assert fields["gpu_busy_percent"] == 37 and fields["mem_info_vram_used"] == 3 << 30
    assert fields["ras"] == {"umc": {"ue": 0, "ce": 5}, "gfx": {"ue": 0, "ce": 0}}
    assert fields["temperature"]["edge"] == {"current_c": 45.001, "critical_c": 100.0}
    assert fields["temperature"]["junction"]["current_c"] == 45.002
    assert assess(fields).state is HealthState.OK  # correctable errors alone are fine


def test_uncorrectable_ras_errors_degrade(tmp_path: Path) -> None:
    device = make_card(tmp_path, 0, PCI, ras={"umc": "ue: 2\nce: 9\n", "sdma": "ue: 1\nce: 0\n"})
    health = assess(read_sysfs(device))
    assert health.state is HealthState.DEGRADED and "sdma 1" in health.reason and "umc 2" in health.reason


def test_critical_temperature_degrades(tmp_path: Path) -> None:
    device = make_card(tmp_path, 0, PCI, temp_c=105.0, crit_c=105.0)
    health = assess(read_sysfs(device))
    assert health.state is HealthState.DEGRADED and "junction temperature" in health.reason


def test_the_card_is_found_by_pci_address(tmp_path: Path) -> None:
    make_card(tmp_path, 0, "0000:03:00.0")
    second = make_card(tmp_path, 1, "0000:83:00.0", ras={"umc": "ue: 4\nce: 0\n"})
    assert find_card("0000:83:00.0", tmp_path / "drm") == tmp_path / "drm" / "card1" / "device"
    health, fields = rocm_health.rocm_health("0000:83:00.0", tmp_path / "drm")
    assert health.state is HealthState.DEGRADED and fields["source"] == "sysfs"
    assert fields["path"].endswith("card1/device") and second.is_dir()


def test_no_card_and_unreadable_files_are_unknown(tmp_path: Path) -> None:
    health, fields = rocm_health.rocm_health(PCI, tmp_path / "drm")
    assert health.state is HealthState.UNKNOWN and PCI in health.reason and fields == {}
    empty = tmp_path / "empty"
    empty.mkdir()
    assert assess(read_sysfs(empty)).state is HealthState.UNKNOWN
    broken = make_card(tmp_path / "b", 0, PCI, ras={"umc": "garbage\nue: x\n"})
    assert "ras" not in read_sysfs(broken)


def fake_amdsmi(ue: int) -> Any:
    metric = types.SimpleNamespace(CURRENT="current", CRITICAL="critical")
    temps = {("EDGE", "current"): 50, ("EDGE", "critical"): 100, ("HOTSPOT", "current"): 70, ("HOTSPOT", "critical"): 110}
    return types.SimpleNamespace(
        amdsmi_init=lambda: None,
        amdsmi_get_processor_handles=lambda: ["h0", "h1"],
        amdsmi_get_gpu_device_bdf=lambda h: {"h0": "0000:01:00.0", "h1": PCI}[h],
        amdsmi_get_gpu_total_ecc_count=lambda h: {"correctable_count": 3, "uncorrectable_count": ue, "deferred_count": 0},
        AmdSmiTemperatureType=types.SimpleNamespace(EDGE="EDGE", HOTSPOT="HOTSPOT"),
        AmdSmiTemperatureMetric=metric,
        amdsmi_get_temp_metric=lambda h, kind, which: temps[(kind, which)],
    )


@pytest.mark.parametrize("ue,state", [(0, HealthState.OK), (1, HealthState.DEGRADED)])
def test_amdsmi_is_used_where_importable(monkeypatch: pytest.MonkeyPatch, tmp_path: Path, ue: int,
                                         state: HealthState) -> None:
    monkeypatch.setitem(sys.modules, "amdsmi", fake_amdsmi(ue))
    health, fields = rocm_health.rocm_health(PCI, tmp_path)
    assert health.state is state and fields["source"] == "amdsmi"
    assert fields["temperature"]["hotspot"] == {"current_c": 70.0, "critical_c": 110.0}
