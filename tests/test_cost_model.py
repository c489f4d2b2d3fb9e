"""The cost model: robust fits from noisy samples, persistence, and opt-in launch sampling."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import numpy as np
import pytest

import hetero
from hetero.kernels import calibration_kernels as ck
from hetero.kernels.kernel import Launcher, launch_counts
from hetero.scheduler import cost_model
from hetero.scheduler.cost_fit import RECENT_SAMPLES, bucket_point, fit_power_law, fit_transfer, size_bucket
from hetero.scheduler.cost_model import CostModel


@pytest.fixture
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv("HETERO_STATE_DIR", str(tmp_path / "state"))
    hetero.reload_config()
    cost_model.reset_default_model()
    yield tmp_path / "state"
    monkeypatch.undo()
    hetero.reload_config()
    cost_model.reset_default_model()


def test_size_buckets_are_powers_of_two() -> None:
    assert [size_bucket(n) for n in (0, 1, 2, 3, 4, 1023, 1024, 1025)] == [0, 0, 1, 1, 2, 9, 10, 10]


def test_fit_recovers_a_power_law_from_noisy_samples_with_an_outlier() -> None:
    rng = np.random.default_rng(42)
    a, b = 3e-9, 0.9
    model = CostModel()
    for n in (1 << k for k in range(10, 24, 2)):
        for _ in range(9):
            model.record("k@1", "dev", n, a * n ** b * rng.lognormal(0.0, 0.05))
    # One spike, 1000x the true time, in the biggest bucket: the median ignores it.
    model.record("k@1", "dev", 1 << 22, 1000 * a * (1 << 22) ** b)
    law = model.fit("k@1", "dev")
    assert law is not None
    assert law.b == pytest.approx(b, abs=0.03)
    assert law.a == pytest.approx(a, rel=0.3)
    for n in (1 << 22, 1 << 15, 1 << 26):  # a measured bucket, one between, one beyond
        assert model.predict("k@1", "dev", n) == pytest.approx(a * n ** b, rel=0.1)


def test_a_single_spike_does_not_move_the_prediction() -> None:
    model = CostModel()
    for _ in range(5):
        model.record("k@1", "fast", 1 << 20, 1e-3)
    before = model.predict("k@1", "fast", 1 << 20)
    model.record("k@1", "fast", 1 << 20, 5.0)  # starpu#50: one spike must not send all work elsewhere
    assert model.predict("k@1", "fast", 1 << 20) == pytest.approx(before)


def test_bucket_keeps_only_recent_samples() -> None:
    model = CostModel()
    for _ in range(RECENT_SAMPLES):
        model.record("k@1", "dev", 4096, 1.0)
    for _ in range(RECENT_SAMPLES):
        model.record("k@1", "dev", 4096, 2.0)  # the device got slower: the old samples age out
    assert model.predict("k@1", "dev", 4096) == pytest.approx(2.0)
    assert bucket_point([(4096, 1.0), (4096, 9.0), (4096, 1.1)]) == (4096.0, 1.1)


def test_unknown_kernel_or_device_predicts_none() -> None:
    model = CostModel()
    model.record("k@1", "dev", 100, 1e-6)
    assert model.predict("k@1", "other", 100) is None
    assert model.predict("other@1", "dev", 100) is None
    assert fit_power_law([]) is None


def test_kept_predictions_follow_every_new_sample() -> None:
    """predict() keeps its answers per kernel, device and size (a placement asks for every device):
    a sample recorded afterwards, a new key that makes a bare name ambiguous, or a save that merges
    another process's samples, is seen by the next question."""
    model = CostModel()
    model.record("k@1", "dev", 4096, 1.0)
    assert model.predict("k@1", "dev", 4096) == pytest.approx(1.0)
    assert model.predict("k", "dev", 4096) == pytest.approx(1.0)  # the bare name: the one key of that name
    assert model.predict("k@1", "other", 4096) is None
    for _ in range(RECENT_SAMPLES):
        model.record("k@1", "dev", 4096, 3.0)  # slower now: the kept answers are dropped
    assert model.predict("k@1", "dev", 4096) == pytest.approx(3.0)
    assert model.predict("k", "dev", 4096) == pytest.approx(3.0)
    model.record("k@1", "other", 4096, 5.0)
    assert model.predict("k@1", "other", 4096) == pytest.approx(5.0)  # None was kept, and dropped
    model.record("k@2", "elsewhere", 64, 1.0)  # a second key named k: the bare name resolves to neither
    assert model.predict("k", "dev", 4096) is None
    assert model.predict("k@1", "dev", 4096) == pytest.approx(3.0)


def test_kept_predictions_follow_a_save_that_merges_another_writer(tmp_path: Path) -> None:
    path = tmp_path / "costs.json"
    first, second = CostModel(path), CostModel(path)
    first.record("k@1", "dev", 1024, 1e-4)
    assert first.predict("k@1", "dev", 1024) == pytest.approx(1e-4)
    assert first.predict("k@1", "dev-b", 1024) is None
    first.save()
    second.record("k@1", "dev-b", 1024, 2e-4)
    second.save()
    first.save()  # reads what second saved
    assert first.predict("k@1", "dev-b", 1024) == pytest.approx(2e-4)


def test_transfer_fit_recovers_latency_and_bandwidth() -> None:
    latency, bandwidth = 20e-6, 8e9
    samples = [(n, latency + n / bandwidth) for n in (1 << 16, 1 << 20, 1 << 24) for _ in range(3)]
    samples.append((1 << 20, 1.0))  # an outlier
    law = fit_transfer(samples)
    assert law is not None
    assert law.bandwidth == pytest.approx(bandwidth, rel=0.01)
    assert law.latency_s == pytest.approx(latency, rel=0.05)
    model = CostModel()
    for n, t in samples:
        model.record_transfer("dev", "h2d", n, t)
    assert model.transfer_time("dev", "h2d", 1 << 22) == pytest.approx(latency + (1 << 22) / bandwidth, rel=0.01)
    assert model.transfer_time("dev", "d2h", 1 << 22) is None
    with pytest.raises(ValueError, match="h2d"):
        model.record_transfer("dev", "sideways", 10, 1.0)


def test_model_persists_and_merges_two_writers(tmp_path: Path) -> None:
    path = tmp_path / "costs.json"
    first, second = CostModel(path), CostModel(path)
    first.record("k@1", "dev-a", 1024, 1e-4, signature="k(f32[:])", device_name="cpu")
    second.record("k@1", "dev-b", 1024, 2e-4, device_name="oneapi:0")
    second.record_transfer("dev-b", "h2d", 1 << 20, 1e-4)
    second.record_transfer("dev-b", "h2d", 1 << 22, 4e-4)
    assert first.save() == path
    second.save()  # merges: first's sample survives
    loaded = CostModel(path)
    assert loaded.predict("k@1", "dev-a", 1024) == pytest.approx(1e-4)
    assert loaded.predict("k@1", "dev-b", 1024) == pytest.approx(2e-4)
    assert loaded.transfer("dev-b", "h2d") is not None
    summary = loaded.summary()
    assert set(summary["kernels"]["k@1"]) == {"cpu", "oneapi:0"}
    assert json.loads(path.read_text())["version"] == 1
    assert not list(tmp_path.glob(".costs.json.*"))  # no temp file left behind


@pytest.mark.parametrize("content", ["{not json", '{"version": 99, "kernels": {}, "transfers": {}, "devices": {}}',
                                     ('{"version": 1, "kernels": {"k": {"d": {"s": {"3": [[1]]}}}}, '
                                      '"transfers": {}, "devices": {}}'), "[]"])
def test_corrupt_file_warns_naming_it_and_starts_fresh(tmp_path: Path, content: str) -> None:
    path = tmp_path / "costs.json"
    path.write_text(content)
    with pytest.warns(RuntimeWarning, match=str(path)):
        model = CostModel(path)
    assert model.kernels() == []
    model.record("k@1", "dev", 10, 1e-6)
    model.save()
    assert CostModel(path).predict("k@1", "dev", 10) == pytest.approx(1e-6)


def test_sampling_off_leaves_the_launch_path_untouched(device: hetero.Device, state_dir: Path) -> None:
    assert cost_model.sampling_interval() is None
    assert Launcher.__call__ is Launcher._plain_call  # structurally nothing extra when off
    x = hetero.ones(256, device=device)
    y = hetero.zeros(256, device=device)
    for _ in range(5):
        ck.saxpy[256](2.0, x, y)
    assert cost_model.default_model().kernels() == []
    assert not state_dir.exists()  # and nothing written


def test_sampling_times_every_kth_launch_and_saves(device: hetero.Device, state_dir: Path) -> None:
    x = hetero.ones(1024, device=device)
    y = hetero.zeros(1024, device=device)
    ck.copy[1024](x, y)  # compiled before sampling starts
    with cost_model.sampling(every=3) as model:
        assert Launcher.__call__ is Launcher._sampled_call
        for _ in range(9):
            ck.copy[1024](x, y)
    assert Launcher.__call__ is Launcher._plain_call
    key = ck.copy.cost_key()
    assert model.predict(key, device.stable_id, 1024) is not None
    samples = [s for (k, d, _, _), s in model._kernels.items() if k == key and d == device.stable_id]
    assert sum(len(s) for s in samples) == 3
    assert np.array_equal(y.numpy(), x.numpy())  # sampled launches still do their work
    assert CostModel(state_dir / "costs.json").predict(key, device.stable_id, 1024) is not None


def test_launch_counts_count_launches_per_device(device: hetero.Device) -> None:
    x = hetero.ones(64, device=device)
    y = hetero.zeros(64, device=device)
    ck.copy[64](x, y)
    before = launch_counts()[device.name]
    threads = [threading.Thread(target=lambda: [ck.copy[64](x, y) for _ in range(5)]) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    device.synchronize()
    assert launch_counts()[device.name] - before == 10
    assert isinstance(launch_counts(), dict) and launch_counts() is not launch_counts()
