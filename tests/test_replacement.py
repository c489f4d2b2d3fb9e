"""hetero.scheduler.replacement: the one answer to "where does the work go now" (guard and launcher)."""

from __future__ import annotations

import pytest
from hetero.core.device import DeviceInfo, Kind
from hetero.scheduler import replacement


def info(name: str, vendor: str, kind: Kind = Kind.GPU) -> DeviceInfo:
    backend, _, index = name.partition(":")
    return DeviceInfo(name=name, backend=backend, index=int(index or 0), vendor=vendor, kind=kind, model=name,
                      memory=1 << 30, compute_units=1, max_work_group_size=256, fp64=True, driver_version="test",
                      stable_id=f"id-{name}")


CUDA0, CUDA1 = info("cuda:0", "NVIDIA"), info("cuda:1", "NVIDIA")
ROCM0 = info("rocm:0", "AMD")
ONEAPI_GPU = info("oneapi:0", "Intel")
ONEAPI_CPU = info("oneapi:1", "Intel", Kind.CPU)
HOST = info("cpu", "Intel", Kind.CPU)
ALL = [HOST, ONEAPI_CPU, ROCM0, ONEAPI_GPU, CUDA1, CUDA0]
NONE: frozenset[str] = frozenset()


def test_nearest_prefers_a_sibling_then_the_vendor_then_any_accelerator_then_the_host() -> None:
    assert replacement(CUDA0, ALL, quarantine=NONE) is CUDA1
    assert replacement(CUDA0, [HOST, ONEAPI_GPU, ROCM0], quarantine=NONE) is ONEAPI_GPU  # first other accelerator
    assert replacement(CUDA0, [HOST, ONEAPI_CPU], quarantine=NONE) is ONEAPI_CPU  # not the host CPU
    assert replacement(ONEAPI_GPU, [HOST, ROCM0, ONEAPI_CPU], quarantine=NONE) is ONEAPI_CPU  # same backend
    assert replacement(HOST, [ROCM0, ONEAPI_CPU, ONEAPI_GPU], quarantine=NONE) is ONEAPI_CPU  # same vendor, kind


def test_never_the_failed_quarantined_or_avoided_device_unless_allowed() -> None:
    assert replacement(CUDA0, [CUDA0], quarantine=NONE) is None
    assert replacement(CUDA0, [CUDA0], quarantine=NONE, allow_failed=True) is CUDA0
    assert replacement(CUDA0, [CUDA0, CUDA1], quarantine=frozenset({"id-cuda:1"}), allow_failed=True) is CUDA0
    assert replacement(CUDA0, ALL, quarantine=frozenset({"id-cuda:1"})) is ROCM0  # a GPU first, in order
    assert replacement(CUDA0, ALL, quarantine=NONE, avoid={"cuda:1", "rocm:0"}) is ONEAPI_GPU
    assert replacement(CUDA0, [CUDA0, CUDA1], quarantine=frozenset({"id-cuda:0"}), allow_failed=True) is CUDA1


def test_spread_and_binpack_read_the_load_and_break_ties_by_order() -> None:
    pool = [CUDA0, CUDA1, ROCM0]
    load = {"cuda:1": 2, "rocm:0": 1}
    assert replacement(CUDA0, pool, prefer="spread", load=load, quarantine=NONE) is ROCM0
    assert replacement(CUDA0, pool, prefer="binpack", load=load, quarantine=NONE) is CUDA1
    assert replacement(CUDA0, pool, prefer="spread", load={}, quarantine=NONE) is CUDA1


def test_health_is_asked_in_order_of_preference_and_only_as_far_as_needed() -> None:
    asked: list[str] = []

    def healthy(device: DeviceInfo) -> bool:
        asked.append(device.name)
        return device.name != "cuda:1"

    assert replacement(CUDA0, ALL, quarantine=NONE, healthy=healthy) is ROCM0
    assert asked == ["cuda:1", "rocm:0"]
    assert replacement(CUDA0, [CUDA1], quarantine=NONE, healthy=healthy) is None


def test_the_quarantine_is_asked_of_the_fault_floor_when_not_given(monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.scheduler import failover as module

    monkeypatch.setattr(module, "quarantined", lambda: frozenset({"id-cuda:1", "id-rocm:0"}))
    assert replacement(CUDA0, ALL) is ONEAPI_GPU


def test_an_unknown_preference_is_refused_with_the_choices() -> None:
    with pytest.raises(ValueError, match="nearest, spread, binpack"):
        replacement(CUDA0, ALL, prefer="closest")
