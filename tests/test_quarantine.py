"""The persistent quarantine store: add/release, TTL expiry and auto-release when healthy,
persistence across processes, concurrent writers, a corrupt file, and the CLI."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import hetero
from hetero.cli.main import main
from hetero.core.device import Health, HealthState
from hetero.core.errors import ConfigError
from hetero.fault import quarantine
from tests.conftest import run_python


@pytest.fixture(autouse=True)
def state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    monkeypatch.setenv("HETERO_STATE_DIR", str(tmp_path / "state"))
    hetero.reload_config()
    yield tmp_path / "state"
    monkeypatch.delenv("HETERO_STATE_DIR")
    hetero.reload_config()


class FakeDevice:
    """What auto_release needs of a device: its stable id and health."""

    def __init__(self, stable_id: str, state: HealthState = HealthState.OK, raises: bool = False) -> None:
        self.stable_id, self.name, self.state, self.raises = stable_id, stable_id, state, raises

    def health(self) -> Health:
        if self.raises:
            raise RuntimeError("health query failed")
        return Health(self.state)


def test_add_persists_an_entry_keyed_by_stable_id(state_dir: Path) -> None:
    cpu = hetero.device("cpu")
    entry = quarantine.add(cpu, "injected device-lost", "device-lost")
    assert entry.stable_id == cpu.stable_id and entry.name == "cpu" and entry.fault_class == "device-lost"
    assert entry.expires is not None and entry.expires - entry.time == pytest.approx(24 * 3600)
    assert quarantine.is_quarantined(cpu.stable_id) and quarantine.is_quarantined(cpu)
    assert cpu.stable_id in quarantine.quarantined_ids()
    data = json.loads((state_dir / "quarantine.json").read_text())
    assert data["version"] == 1 and data["entries"][cpu.stable_id]["reason"] == "injected device-lost"
    assert cpu in hetero.devices()  # quarantined devices are still listed


def test_add_with_a_stable_id_and_name_and_explicit_ttl() -> None:
    entry = quarantine.add("GPU-1234", "Xid 79", hetero.fault.FaultClass.DEVICE_LOST, ttl=10, name="cuda:1")
    assert (entry.name, entry.fault_class) == ("cuda:1", "device-lost")
    assert entry.expires == pytest.approx(entry.time + 10)
    assert quarantine.entry("cuda:1") == entry == quarantine.entry("GPU-1234")
    forever = quarantine.add("GPU-5", "maintenance", "degraded", ttl=math.inf)
    assert forever.expires is None and not forever.expired(time.time() + 1e9)


def test_add_again_keeps_the_later_expiry_and_takes_the_new_reason() -> None:
    first = quarantine.add("GPU-1", "first", "device-lost", ttl=1000)
    second = quarantine.add("GPU-1", "second", "context-corrupting", ttl=10)
    assert second.expires == first.expires and second.reason == "second"
    assert len(quarantine.entries()) == 1


def test_bad_target_is_rejected() -> None:
    with pytest.raises(TypeError, match="stable id"):
        quarantine.add(42, "x", "degraded")  # type: ignore[arg-type]


def test_release_by_name_or_stable_id_publishes_events() -> None:
    with hetero.fault.events(kind=("quarantined", "released"), timeout=0.2) as sub:
        quarantine.add("GPU-A", "ecc", "degraded", name="cuda:0")
        quarantine.add("GPU-B", "lost", "device-lost", name="cuda:1")
        assert quarantine.release("cuda:0") and quarantine.release("GPU-B")
        assert not quarantine.release("cuda:0")
        kinds = [(e["kind"], e["device"]) for e in sub]
    assert kinds == [("quarantined", "cuda:0"), ("quarantined", "cuda:1"), ("released", "cuda:0"), ("released", "cuda:1")]
    assert quarantine.entries() == [] and quarantine.quarantined_ids() == frozenset()


def test_release_all() -> None:
    for n in range(3):
        quarantine.add(f"GPU-{n}", "x", "degraded")
    assert len(quarantine.release_all()) == 3 and quarantine.entries() == []


def test_expired_entry_is_released_only_when_the_device_is_healthy() -> None:
    quarantine.add("GPU-ok", "x", "device-lost", ttl=0.01)
    quarantine.add("GPU-sick", "x", "device-lost", ttl=0.01)
    quarantine.add("GPU-raises", "x", "device-lost", ttl=0.01)
    quarantine.add("GPU-unknown", "x", "device-lost", ttl=0.01)
    quarantine.add("GPU-fresh", "x", "device-lost", ttl=1000)
    time.sleep(0.05)
    devices: list[Any] = [FakeDevice("GPU-ok"), FakeDevice("GPU-sick", HealthState.UNHEALTHY),
                          FakeDevice("GPU-raises", raises=True), FakeDevice("GPU-unknown", HealthState.UNKNOWN),
                          FakeDevice("GPU-fresh")]
    released = quarantine.auto_release(devices)
    assert [e.stable_id for e in released] == ["GPU-ok"]
    left = {e.stable_id for e in quarantine.entries()}
    assert left == {"GPU-sick", "GPU-raises", "GPU-unknown", "GPU-fresh"}
    assert all(quarantine.entry(s).expired() for s in left - {"GPU-fresh"})  # type: ignore[union-attr]
    assert "expired; released once healthy" in quarantine.entry("GPU-sick").describe()  # type: ignore[union-attr]


def test_quarantined_ids_releases_an_expired_opened_device_that_is_healthy(monkeypatch: pytest.MonkeyPatch) -> None:
    cpu = hetero.device("cpu")  # opened: its backend reports it healthy
    quarantine.add(cpu, "drill", "context-corrupting", ttl=0.01)
    time.sleep(0.05)
    monkeypatch.setattr(quarantine, "_last_auto_check", time.monotonic())  # checked a moment ago
    assert cpu.stable_id in quarantine.quarantined_ids()  # expired, but not checked again yet
    monkeypatch.setattr(quarantine, "_last_auto_check", time.monotonic() - hetero.get_config().health_interval)
    assert cpu.stable_id not in quarantine.quarantined_ids()


def test_quarantined_ids_is_cached_on_the_file(state_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    quarantine.add("GPU-1", "x", "degraded")
    quarantine.quarantined_ids()
    reads: list[Path] = []
    original = quarantine._read

    def counting_read(path: Path) -> dict[str, quarantine.Entry]:
        reads.append(path)
        return original(path)

    monkeypatch.setattr(quarantine, "_read", counting_read)
    for _ in range(100):
        assert quarantine.quarantined_ids() == frozenset({"GPU-1"})
    assert reads == []  # unchanged file: a stat, no read
    path = state_dir / "quarantine.json"
    data = json.loads(path.read_text())
    data["entries"]["GPU-2"] = {**data["entries"]["GPU-1"], "name": "cuda:2"}
    tmp = path.with_suffix(".edit")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)  # another process wrote it
    assert quarantine.quarantined_ids() == frozenset({"GPU-1", "GPU-2"}) and len(reads) == 1


def test_persists_across_processes() -> None:
    env = {"HETERO_STATE_DIR": os.environ["HETERO_STATE_DIR"]}
    run_python("from hetero.fault import quarantine; quarantine.add('GPU-x', 'Xid 79', 'device-lost', name='cuda:3')",
               env)
    entry = quarantine.entry("GPU-x")
    assert entry is not None and entry.name == "cuda:3" and entry.pid != os.getpid()
    quarantine.release("cuda:3")
    out = run_python("from hetero.fault import quarantine; print(sorted(quarantine.quarantined_ids()))", env).stdout
    assert out.strip() == "[]"


ADD_MANY = """
import sys
from hetero.fault import quarantine
worker, count = int(sys.argv[1]), int(sys.argv[2])
for n in range(count):
    quarantine.add(f"GPU-{worker}-{n}", f"worker {worker}", "degraded", name=f"cuda:{worker}")
"""


def test_concurrent_writers_lose_no_entry(state_dir: Path) -> None:
    workers, each = 4, 15
    env = {**os.environ, "HETERO_STATE_DIR": str(state_dir)}
    processes = [subprocess.Popen([sys.executable, "-c", ADD_MANY, str(w), str(each)], env=env,
                                  stderr=subprocess.PIPE, text=True) for w in range(workers)]
    for process in processes:
        _, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
    ids = quarantine.quarantined_ids()
    assert ids == {f"GPU-{w}-{n}" for w in range(workers) for n in range(each)}
    assert not [p for p in state_dir.iterdir() if p.suffix == ".tmp"]  # no temp file left behind


def test_corrupt_store_is_moved_aside_with_a_warning(state_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    state_dir.mkdir(parents=True)
    path = state_dir / "quarantine.json"
    path.write_text("{not json")
    with caplog.at_level("WARNING", logger="hetero.fault.quarantine"):
        assert quarantine.quarantined_ids() == frozenset()
    backups = list(state_dir.glob("quarantine.json.corrupt-*"))
    assert len(backups) == 1 and backups[0].read_text() == "{not json"
    message = " ".join(r.getMessage() for r in caplog.records)
    assert str(path) in message and str(backups[0]) in message and "hetero quarantine add" in message
    quarantine.add("GPU-1", "x", "degraded")  # the store works again
    assert quarantine.quarantined_ids() == frozenset({"GPU-1"})


def test_a_store_from_a_newer_hetero_is_refused_not_overwritten(state_dir: Path) -> None:
    state_dir.mkdir(parents=True)
    path = state_dir / "quarantine.json"
    path.write_text(json.dumps({"version": 99, "entries": {}}))
    with pytest.raises(quarantine.QuarantineError, match="newer hetero"):
        quarantine.add("GPU-1", "x", "degraded")
    assert json.loads(path.read_text())["version"] == 99


def test_unwritable_state_dir_names_the_remedy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setenv("HETERO_STATE_DIR", str(blocker / "state"))
    # Since the configuration checks its directories, a state dir under a file is refused when the
    # setting is read (a ConfigError), before the store tries to write; either way it names the variable.
    with pytest.raises((quarantine.QuarantineError, ConfigError), match="HETERO_STATE_DIR"):
        hetero.reload_config()
        quarantine.add("GPU-1", "x", "degraded")


def test_config_ttl_per_class(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    config = tmp_path / "hetero.yaml"
    config.write_text("quarantine_ttl:\n  degraded: 42\n")
    monkeypatch.setenv("HETERO_CONFIG", str(config))
    hetero.reload_config()
    try:
        entry = quarantine.add("GPU-1", "x", "degraded")
        assert entry.expires == pytest.approx(entry.time + 42)
    finally:
        monkeypatch.delenv("HETERO_CONFIG")
        hetero.reload_config()


# -- the CLI ---------------------------------------------------------------------------------
def test_cli_list_release_and_add(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["quarantine", "list"]) == 0
    assert "no device is quarantined" in capsys.readouterr().out
    assert main(["quarantine", "add", "cpu", "--reason", "maintenance", "--ttl", "0"]) == 0
    quarantine.add("GPU-9", "Xid 48", "degraded", name="cuda:9")
    capsys.readouterr()
    assert main(["quarantine", "list"]) == 0
    out = capsys.readouterr().out
    assert "cuda:9" in out and "Xid 48" in out and "maintenance" in out and "never" in out
    assert main(["quarantine", "list", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert {e["name"] for e in listed["entries"]} == {"cpu", "cuda:9"} and not listed["entries"][0]["expired"]
    assert main(["quarantine", "release", "cuda:9"]) == 0
    assert main(["quarantine", "release", "cuda:9"]) == 1
    assert "not quarantined" in capsys.readouterr().err
    assert main(["quarantine", "release"]) == 2
    assert main(["quarantine", "release", "--all"]) == 0
    assert "released 1 device(s): cpu" in capsys.readouterr().out
    assert quarantine.entries() == []


def test_hetero_devices_shows_quarantined_devices(capsys: pytest.CaptureFixture[str]) -> None:
    cpu = hetero.device("cpu")
    quarantine.add(cpu, "injected lost", "device-lost")
    assert main(["devices"]) == 0
    line = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("cpu "))
    assert "quarantined until" in line and "injected lost" in line
    assert main(["devices", "--json"]) == 0
    devices = {d["name"]: d for d in json.loads(capsys.readouterr().out)["devices"]}
    assert devices["cpu"]["quarantined"] and devices["cpu"]["quarantine"]["reason"] == "injected lost"
    assert all(not d["quarantined"] and d["quarantine"] is None for name, d in devices.items() if name != "cpu")


def test_hetero_devices_still_lists_devices_when_the_store_is_unusable(
        state_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state_dir.mkdir(parents=True)
    (state_dir / "quarantine.json").write_text(json.dumps({"version": 99, "entries": {}}))
    assert main(["devices"]) == 0
    captured = capsys.readouterr()
    assert "cpu" in captured.out and "quarantine not shown" in captured.err and "newer hetero" in captured.err


# -- a store broken in ways json.loads alone does not catch -----------------------------------
CPU_ID = hetero.device("cpu").stable_id


def _store(entry: dict[str, Any]) -> bytes:
    return json.dumps({"version": 1, "entries": {CPU_ID: {"name": "cpu", "reason": "x",
                                                            "fault_class": "degraded", "time": 1.0, **entry}}}).encode()


BROKEN_STORES = {
    "non-utf8": b'{"version": 1, "entries": {"GPU-\xff": {"name": "cuda:1"}}}',
    "100k-deep": b"[" * 100_000 + b"]" * 100_000,
    "expires-nan": _store({"expires": math.nan}),
    "expires-infinity": _store({"expires": math.inf}),
    "time-huge": _store({"time": 1e300, "expires": None}),
    "expires-huge": _store({"expires": 1e300}),
}
USE_THE_DEVICES = ("import hetero; from hetero.cli.main import main; hetero.ones(3); "
                   "from hetero.fault import quarantine; print(sorted(quarantine.quarantined_ids())); "
                   "main(['quarantine', 'list']); raise SystemExit(main(['devices']))")


@pytest.mark.parametrize("kind", sorted(BROKEN_STORES))
def test_a_broken_store_is_treated_as_corrupt(state_dir: Path, kind: str) -> None:
    state_dir.mkdir(parents=True)
    (state_dir / "quarantine.json").write_bytes(BROKEN_STORES[kind])
    result = run_python(USE_THE_DEVICES, env={"HETERO_STATE_DIR": str(state_dir)}, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("[]") and "cpu" in result.stdout  # hetero.ones and `hetero devices` work
    assert "corrupt" in result.stderr and "moved it to" in result.stderr
    backups = list(state_dir.glob("quarantine.json.corrupt-*"))
    assert len(backups) == 1 and backups[0].read_bytes() == BROKEN_STORES[kind]


@pytest.mark.parametrize("kind", ["non-utf8", "100k-deep"])
def test_hetero_run_starts_with_a_broken_store(state_dir: Path, tmp_path: Path, kind: str) -> None:
    state_dir.mkdir(parents=True)
    (state_dir / "quarantine.json").write_bytes(BROKEN_STORES[kind])
    script = tmp_path / "ok.py"
    script.write_text("import hetero; hetero.ones(3); print('worker ran')\n")
    done = subprocess.run([sys.executable, "-m", "hetero.launcher.cli", "--devices", "cpu", "--run-dir",
                           str(tmp_path / "run"), str(script)], capture_output=True, text=True, timeout=120,
                          env={**os.environ, "HETERO_STATE_DIR": str(state_dir)}, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "worker ran" in done.stdout


def test_cli_add_validates_the_class_and_refuses_a_negative_ttl(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["quarantine", "add", "cpu", "--reason", "x", "--class", "degarded"])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert "degarded" in err and "degraded" in err and "device-lost" in err
    with pytest.raises(SystemExit) as exited:
        main(["quarantine", "add", "cpu", "--reason", "x", "--ttl", "-5"])
    assert exited.value.code == 2
    assert "--ttl" in capsys.readouterr().err
    assert quarantine.entries() == []


def test_quarantine_help_names_every_action(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["quarantine", "--help"])
    out = capsys.readouterr().out
    assert "list" in out and "release" in out and "add" in out
    with pytest.raises(SystemExit):
        main(["--help"])
    top = capsys.readouterr().out
    assert "list, release or add" in top
