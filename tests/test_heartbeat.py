"""hetero.heartbeat: a no-op outside hetero-run; under it, throttled atomic JSON writes."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import hetero
from hetero.fault import heartbeat as hb
from hetero.fault.protocol import HEARTBEAT_FIELDS


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return 1.7e9 + self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeClock]:
    fake = FakeClock()
    monkeypatch.setattr(hb, "time", fake)
    hb.reset()
    yield fake
    hb.reset()


@pytest.fixture
def beat_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> Path:
    path = tmp_path / "run" / "worker-0.heartbeat"
    monkeypatch.setenv("HETERO_HEARTBEAT_FILE", str(path))
    monkeypatch.delenv("HETERO_DEVICE", raising=False)
    return path


def _read(path: Path) -> dict:
    return json.loads(path.read_text())


def test_outside_hetero_run_it_writes_nothing_and_caches_the_lookup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                    clock: FakeClock) -> None:
    monkeypatch.delenv("HETERO_HEARTBEAT_FILE", raising=False)
    hetero.heartbeat(1)
    assert hb.heartbeat_path() is None
    # The environment is read once: setting it later takes effect only after reset().
    monkeypatch.setenv("HETERO_HEARTBEAT_FILE", str(tmp_path / "late"))
    hetero.heartbeat(2)
    hb.flush()
    assert not (tmp_path / "late").exists()
    hb.reset()
    hetero.heartbeat(3)
    assert _read(tmp_path / "late")["step"] == 3


def test_first_beat_writes_every_protocol_field(beat_file: Path) -> None:
    hetero.heartbeat(7)
    record = _read(beat_file)
    assert tuple(record) == HEARTBEAT_FIELDS
    assert record["step"] == 7 and record["pid"] == __import__("os").getpid()
    assert record["time"] == pytest.approx(1.7e9 + 1000.0)
    assert [p.name for p in beat_file.parent.iterdir()] == [beat_file.name]  # no temp file left


def test_writes_are_throttled_and_flush_writes_the_latest_step(beat_file: Path, clock: FakeClock) -> None:
    hetero.heartbeat(1)
    clock.now += hb.MIN_INTERVAL / 4
    hetero.heartbeat(2)
    hetero.heartbeat(3)
    assert _read(beat_file)["step"] == 1
    clock.now += hb.MIN_INTERVAL
    hetero.heartbeat(4)
    assert _read(beat_file)["step"] == 4
    clock.now += 0.01
    hetero.heartbeat(5)
    hb.flush()
    assert _read(beat_file)["step"] == 5


def test_a_beat_without_step_keeps_the_last_step(beat_file: Path, clock: FakeClock) -> None:
    hetero.heartbeat(9)
    clock.now += 1
    hetero.heartbeat()
    record = _read(beat_file)
    assert record["step"] == 9 and record["time"] == pytest.approx(1.7e9 + 1001.0)


def test_device_is_the_one_in_use(beat_file: Path, monkeypatch: pytest.MonkeyPatch, clock: FakeClock) -> None:
    hetero.heartbeat()
    assert _read(beat_file)["device"] is None
    monkeypatch.setenv("HETERO_DEVICE", "oneapi:0")
    hb.flush()
    assert _read(beat_file)["device"] == "oneapi:0"
    with hetero.use_device("cpu"):
        hb.flush()
    assert _read(beat_file)["device"] == "cpu"


def test_launches_come_from_the_kernel_layer_only_when_loaded(beat_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.core import launch_counts

    monkeypatch.delitem(sys.modules, "hetero.kernels.kernel", raising=False)
    monkeypatch.setattr(launch_counts, "_COUNTERS", {})  # no kernel layer has counted here
    hb.flush()
    assert _read(beat_file)["launches"] is None
    assert "hetero.kernels.kernel" not in sys.modules  # a heartbeat never imports the compiler
    monkeypatch.setattr(launch_counts, "_READS", {})
    for name, launches in (("cpu", 3), ("oneapi:0", 4)):
        counter = launch_counts.counter(name)
        for _ in range(launches):
            next(counter)
    hb.flush()
    assert _read(beat_file)["launches"] == 7
    monkeypatch.setattr(launch_counts, "launch_counts", lambda: 1 / 0)
    hb.flush()
    assert _read(beat_file)["launches"] is None


def test_host_fallbacks_come_from_the_ground_floor_counter(beat_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from hetero.core import launch_counts

    monkeypatch.setattr(launch_counts, "_FALLBACKS", {})
    hb.flush()
    assert _read(beat_file)["host_fallbacks"] == 0
    for name in ("oneapi:0", "oneapi:0", "opencl:0"):
        launch_counts.fell_back(name)
    hb.flush()
    assert _read(beat_file)["host_fallbacks"] == 3
    monkeypatch.setattr(launch_counts, "host_fallbacks", lambda: 1 / 0)
    hb.flush()
    assert _read(beat_file)["host_fallbacks"] is None


def test_an_unwritable_heartbeat_file_does_not_break_the_step(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                              clock: FakeClock, capsys: pytest.CaptureFixture[str]) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv("HETERO_HEARTBEAT_FILE", str(blocker / "beat"))
    hetero.heartbeat(1)
    assert "cannot write heartbeat file" in capsys.readouterr().err
    hb.flush()
    assert capsys.readouterr().err == ""  # said once, not at every beat
