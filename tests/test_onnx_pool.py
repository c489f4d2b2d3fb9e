"""hetero.onnx.Pool under injected device faults: every request answered once, correctly; faulty
devices quarantined (within the drill) and back after release; budgets and timeouts that end."""

from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import hetero
from hetero.fault import quarantine
from tests.onnx_models import mlp, mlp_reference

ort = pytest.importorskip("onnxruntime", reason="hetero.onnx needs onnxruntime (pip install 'hetero[onnx]')")
from hetero.onnx import InferenceFailedError, Pool, providers  # noqa: E402

THREADS, REQUESTS = 8, 500
BOUND_SECONDS = 240  # the load test's time bound (it takes a few seconds here)


def _machine_members() -> tuple[list[str], int]:
    """>= 3 members from this machine's devices: cpu, and oneapi:0 through OpenVINO where installed."""
    names = [d.name for d in hetero.devices() if providers.choose(ort, d) is not None]
    return names, (2 if len(names) > 1 else 3)


def _two_devices_or_skip(devices: list[str]) -> None:
    """Replicas on one device are benched together by a sticky fault there: what follows needs a
    request answered on another device."""
    if len(devices) < 2:
        pytest.skip("needs two devices with an ONNX Runtime provider (cpu, and oneapi:0 through OpenVINO's "
                    "plugin EP, which sees no device on a non-Intel CPU): pip install onnxruntime-ep-openvino "
                    "on an Intel machine")


def _wait(predicate, seconds: float = 10.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.01)
    return False


def test_every_request_answered_once_and_right_under_seeded_faults() -> None:
    model = mlp()
    devices, replicas = _machine_members()
    samples = [model.sample(1, seed=i) for i in range(64)]
    answers = [mlp_reference(model, x) for x in samples]
    results: list[list[object]] = [[] for _ in range(THREADS * REQUESTS)]
    pool = Pool(model.data, devices, replicas=replicas, threads=1, quarantine_ttl=0.05, retries=6)
    assert len(pool.members) >= 3

    def client(t: int) -> None:
        for i in range(REQUESTS):
            k = t * REQUESTS + i
            try:
                results[k].append(pool.run({"x": samples[k % 64]})["y"])
            except Exception as error:  # noqa: BLE001 - counted as lost below
                results[k].append(error)

    with hetero.fault.inject("*:infer:p=0.01,seed=11:sticky") as injection:
        threads = [threading.Thread(target=client, args=(t,), daemon=True) for t in range(THREADS)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=BOUND_SECONDS)
        assert not any(thread.is_alive() for thread in threads), "the load did not finish within its bound"
    pool.close()
    assert all(len(r) == 1 for r in results), "a request was answered twice or not at all"
    lost = [r[0] for r in results if not isinstance(r[0], np.ndarray)]
    assert not lost, f"{len(lost)} lost, first: {lost[0]}"
    wrong = [k for k, r in enumerate(results) if not np.allclose(r[0], answers[k % 64], rtol=1e-5, atol=2e-5)]
    assert not wrong
    stats = pool.stats()
    assert len(injection.fired) > 10 and stats["retries"] + stats["probe_failures"] == len(injection.fired)
    assert stats["answered"] == stats["requests"] == THREADS * REQUESTS and stats["failures"] == 0
    assert sum(m["failures"] for m in stats["members"].values()) == stats["retries"]
    assert all(m["p99_ms"] >= m["p50_ms"] for m in stats["members"].values() if m["requests"])


def test_a_quarantined_device_rejoins_after_release_and_a_probe() -> None:
    model = mlp()
    x = model.sample(2)
    with Pool(model.data, "cpu") as lone:  # a one-device pool
        assert lone.run({"x": x})["y"].shape == (2, 4)
    devices, replicas = _machine_members()
    _two_devices_or_skip(devices)
    pool = Pool(model.data, devices, replicas=replicas)  # default TTL: out until released
    with hetero.fault.events(kind=["pool-member-out", "pool-member-rejoined"]) as events:
        with hetero.fault.inject("cpu:infer:nth=1:sticky"):
            np.testing.assert_allclose(pool.run({"x": x})["y"], mlp_reference(model, x), rtol=1e-5, atol=2e-5)
        out = events.get(timeout=2)
        assert out["kind"] == "pool-member-out" and out["device"] == "cpu"
        assert quarantine.is_quarantined(hetero.device("cpu"))
        assert not any(h["healthy"] for h in pool.health() if h["device"] == "cpu")
        assert pool.ready() == (len(devices) > 1)
        quarantine.release(hetero.device("cpu"))
        back = events.get(timeout=5)
    assert back["kind"] == "pool-member-rejoined" and back["device"] == "cpu"
    assert all(h["healthy"] for h in pool.health())
    before = pool.stats()["members"]["cpu#0"]["requests"]
    for _ in range(2 * len(pool.members)):
        pool.run({"x": x})
    assert pool.stats()["members"]["cpu#0"]["requests"] > before
    assert pool.stats()["rejoins"] == 1
    pool.close()


def test_a_request_that_cannot_complete_raises_with_its_history() -> None:
    model = mlp()
    pool = Pool(model.data, "cpu", replicas=3, retries=2, quarantine_ttl=60)
    with hetero.fault.inject("cpu:infer:every=1:lost"):
        with pytest.raises(InferenceFailedError) as info:
            pool.run({"x": model.sample(1)}, timeout=1.0)
    history = info.value.history
    assert len(history) == 1 and history[0].fault_class == "device-lost"  # the device's members all left
    assert "no healthy member" in str(info.value) and "DeviceLostError" in str(info.value)
    pool.close()


def test_retry_budget_counts_attempts() -> None:
    model = mlp()
    devices, replicas = _machine_members()
    _two_devices_or_skip(devices)
    pool = Pool(model.data, devices, replicas=replicas, retries=1, quarantine_ttl=60)
    with hetero.fault.inject("*:infer:every=1:sticky"):
        with pytest.raises(InferenceFailedError, match="failed on 2 attempts") as info:
            pool.run({"x": model.sample(1)})
    assert [a.fault_class for a in info.value.history] == ["context-corrupting"] * 2
    pool.close()


def test_out_of_memory_moves_the_request_but_keeps_the_device() -> None:
    model = mlp()
    pool = Pool(model.data, "cpu", replicas=2)
    with hetero.fault.inject("cpu:infer:nth=1:oom"):
        pool.run({"x": model.sample(1)})
    assert all(h["healthy"] for h in pool.health()) and pool.stats()["retries"] == 1
    assert not quarantine.is_quarantined(hetero.device("cpu"))
    pool.close()


def test_devices_quarantined_elsewhere_take_no_traffic() -> None:
    model = mlp()
    devices, replicas = _machine_members()
    if len(devices) < 2:
        pytest.skip("needs a second device with an ONNX Runtime provider (pip install onnxruntime-ep-openvino)")
    other = hetero.device(devices[1])
    quarantine.add(other, "quarantined by a test", "degraded", ttl=60, injected=True)
    pool = Pool(model.data, devices, replicas=1)
    for _ in range(10):
        pool.run({"x": model.sample(1)})
    assert pool.stats()["members"][f"{other.name}#0"]["requests"] == 0
    quarantine.release(other)
    assert _wait(lambda: all(h["healthy"] for h in pool.health()))
    pool.close()
