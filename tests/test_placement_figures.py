"""Placement uses the figures hetero has (issue 12, item 15): ``fastest`` uses what
``hetero calibrate`` measured, under the name calibrate prints, and ``explain()`` says which
model scored the devices; ``spread``/``binpack`` count memory allocated outside any task
and what the device itself reports in use."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import pytest

import hetero
from hetero.kernels import calibration
from hetero.kernels.calibration import Plan, calibrate, calibration_devices
from hetero.scheduler import placement
from hetero.scheduler.cost_model import CostModel, default_path, reset_default_model
from hetero.scheduler.usage import LEDGER

TINY = Plan(stream_sizes=(1 << 10, 1 << 12), matmul_sizes=(16,), copy_sizes=(4096,), repeats=2)


@pytest.fixture
def calibrated(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> CostModel:
    """A real (tiny) ``hetero calibrate`` of every device into a private state dir."""
    monkeypatch.setattr(calibration, "QUICK", TINY)
    model = CostModel(default_path())
    calibrate(calibration_devices(), model, quick=True)
    model.save()
    reset_default_model()
    placement.use_cost_model(placement.DEFAULT)
    yield model
    reset_default_model()


@pytest.mark.parametrize("kernel", ["saxpy", "triad", "copy", "matmul"])
def test_fastest_uses_the_calibration_under_the_name_calibrate_prints(calibrated: CostModel, kernel: str) -> None:
    explanation = hetero.scheduler.explain(policy="fastest", kernel=kernel, n=1 << 12)
    text = str(explanation)
    assert "static" not in text and "no prediction" not in text, text
    assert all(row.score.startswith("predicted ") for row in explanation.rows if row.rank is not None), text
    assert explanation.model.startswith(f"cost model in {default_path()}: times measured for {kernel}@"), text
    assert f"model: {explanation.model}" in text


def test_fastest_with_the_kernel_object_says_the_same_model(calibrated: CostModel) -> None:
    from hetero.kernels.calibration_kernels import saxpy

    explanation = hetero.scheduler.explain(policy="fastest", kernel=saxpy, n=1 << 12)
    assert saxpy.cost_key() in explanation.model and explanation.as_dict()["model"] == explanation.model


def test_a_kernel_never_measured_is_ranked_by_the_calibrated_device_speed(calibrated: CostModel) -> None:
    explanation = hetero.scheduler.explain(policy="fastest", kernel="never-measured", n=1 << 12)
    assert explanation.model.startswith(f"calibrated device speed in {default_path()}: geometric mean of "
                                        "hetero calibrate's "), explanation.model
    assert "because the cost model has no prediction for" in explanation.model
    assert "static" not in str(explanation).replace(explanation.model, "")
    assert all(row.score.startswith("calibrated ") for row in explanation.rows if row.rank is not None)
    # Without kernel= and n= as well: the calibration still ranks the devices.
    assert hetero.scheduler.explain(policy="fastest").model.startswith("calibrated device speed")
    assert set(CostModel(default_path()).calibration_keys()) == set(calibrated.calibration_keys()) != set()


def test_explain_names_the_static_estimate_when_it_is_used(state_dir: Path) -> None:
    reset_default_model()
    try:
        explanation = hetero.scheduler.explain(policy="fastest", kernel="never-measured", n=10)
        assert explanation.model.startswith("static speed estimate (compute units x kind weight), because the cost "
                                            "model has no prediction for"), explanation.model
        assert str(explanation).splitlines()[-1] == f"model: {explanation.model}"
        assert hetero.scheduler.explain(policy="spread").model == ""  # no model in play
    finally:
        reset_default_model()


def test_a_bare_name_with_two_fingerprints_is_not_guessed() -> None:
    model = CostModel()
    model.record("k@aaaa", "dev", 1024, 1e-3)
    model.record("k@bbbb", "dev", 1024, 2e-3)
    assert model.resolve("k") == "k" and model.predict("k", "dev", 1024) is None
    assert model.predict("k@bbbb", "dev", 1024) == pytest.approx(2e-3)
    model.record("solo@cccc", "dev", 1024, 3e-3)
    assert model.predict("solo", "dev", 1024) == pytest.approx(3e-3)


def test_allocations_outside_a_task_count_for_placement(device: hetero.Device) -> None:
    before = LEDGER.outside(device.name)
    kept = hetero.empty(8 << 20, hetero.uint8, device=device)
    assert LEDGER.outside(device.name) == before + (8 << 20)
    assert placement.candidate(device).used >= before + (8 << 20)
    del kept
    gc.collect()
    assert LEDGER.outside(device.name) == before


class _Reporting:
    """Wraps a runtime, reporting ``used`` bytes in use (as NVML or CuPy would on CUDA)."""

    def __init__(self, runtime: Any, used: int | None) -> None:
        self._runtime, self._used = runtime, used

    def memory_used(self) -> int | None:
        return self._used

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)


def test_spread_and_binpack_count_what_the_device_reports(monkeypatch: pytest.MonkeyPatch) -> None:
    devices = hetero.devices()
    if len(devices) < 2:
        pytest.skip("needs two devices")
    first, second = devices[0], devices[1]
    busy = hetero.Device(first.info, _Reporting(first.runtime, first.memory * 9 // 10))  # type: ignore[arg-type]
    idle = hetero.Device(second.info, _Reporting(second.runtime, 1 << 20))  # type: ignore[arg-type]
    spread = hetero.scheduler.explain(policy="spread", candidates=[busy, idle])
    assert spread.winner == second.name, str(spread)
    assert hetero.scheduler.explain(policy="binpack", candidates=[busy, idle]).winner == first.name
    # A backend that cannot tell (None) or fails leaves hetero's own count.
    silent = hetero.Device(first.info, _Reporting(first.runtime, None))  # type: ignore[arg-type]
    assert placement.candidate(silent).used == LEDGER.load(first.name).used + LEDGER.outside(first.name)


def test_spread_moves_off_a_device_filled_outside_any_task() -> None:
    if len(hetero.devices()) < 2:
        pytest.skip("needs two devices")
    before = hetero.device("auto", policy="spread")
    kept = hetero.empty(64 << 20, hetero.uint8, device=before)  # no scheduler.task around it
    after = hetero.device("auto", policy="spread")
    assert after.name != before.name
    assert hetero.device("auto", policy="binpack") is before
    del kept
    gc.collect()
    assert hetero.device("auto", policy="spread") is before


def test_cuda_and_rocm_report_what_the_driver_counts_in_use() -> None:
    from hetero.backends.cupy.runtime import CuPyRuntime

    runtime = object.__new__(CuPyRuntime)  # no GPU here: only memory_info (cudaMemGetInfo) is faked
    runtime.memory_info = lambda: (30 << 30, 80 << 30)  # type: ignore[method-assign]
    assert runtime.memory_used() == 50 << 30
