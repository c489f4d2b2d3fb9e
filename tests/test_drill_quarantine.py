"""Fault drills never harm real state: a device quarantined for an *injected* fault stays
quarantined within the drill (this process, or the hetero-run run) and never reaches the user's
persistent store, unless persistence is asked for (HETERO_FAULTS_PERSIST=1). Also: a rule that
never fired is named at exit, and inject() validates its device before any backend is open."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from conftest import ROOT, run_python

import hetero
from hetero.core.errors import ConfigError
from hetero.fault import quarantine

DEVICES = [d.name for d in hetero.devices()]
needs_two = pytest.mark.skipif(len(DEVICES) < 2, reason="a drill that migrates needs two devices")

# A guarded loop whose 3rd allocation on the first device is lost: the guard quarantines that
# device and moves on. It prints what this process sees of the quarantine, as JSON.
GUARDED = textwrap.dedent("""
    import json, sys
    import hetero
    from hetero.fault import quarantine
    first, second = sys.argv[1], sys.argv[2]
    state = {"x": hetero.zeros(4, device=first)}
    with hetero.guard(state, device=first, devices=[first, second]) as g:
        for step in range(6):
            g.run(lambda k: state.__setitem__("x", hetero.ones(4)), step)
    print(json.dumps({"final": g.device.name, "recoveries": len(g.recoveries),
                      "quarantined": hetero.device(first, allow_quarantined=True).stable_id in quarantine.quarantined_ids(),
                      "entries": [e.name for e in quarantine.entries()],
                      "auto": hetero.device("auto").name}))
""")


def store_entries(state: Path) -> list[str]:
    """The device names in the persistent store under ``state``, as a fresh `hetero quarantine list` sees it."""
    done = subprocess.run([sys.executable, "-m", "hetero.cli.main", "quarantine", "list", "--json"], capture_output=True,
                          text=True, env={**os.environ, "HETERO_STATE_DIR": str(state)}, timeout=120, check=True)
    return [entry["name"] for entry in json.loads(done.stdout)["entries"]]


def guarded(state: Path, **env: str) -> dict[str, object]:
    first, second = DEVICES[0], DEVICES[1]
    result = run_python(GUARDED.replace("sys.argv[1], sys.argv[2]", f"{first!r}, {second!r}"),
                        env={"HETERO_STATE_DIR": str(state), "HETERO_FAULTS": f"{first}:alloc:nth=3:lost", **env})
    return json.loads(result.stdout.strip().splitlines()[-1])


@needs_two
def test_an_injected_fault_quarantines_within_the_process_only(tmp_path: Path) -> None:
    state = tmp_path / "state"
    seen = guarded(state)
    first = DEVICES[0]
    assert seen["recoveries"] == 1 and seen["final"] != first
    assert seen["quarantined"] is True and seen["entries"] == [first]  # the drill honours its quarantine
    assert seen["auto"] != first  # and so does device selection
    assert store_entries(state) == []  # the user's store is as it was
    assert not (state / "quarantine.json").exists() or json.loads((state / "quarantine.json").read_text())["entries"] == {}


@needs_two
def test_persistence_of_a_drill_quarantine_is_opt_in(tmp_path: Path) -> None:
    state = tmp_path / "state"
    seen = guarded(state, HETERO_FAULTS_PERSIST="1")
    assert seen["quarantined"] is True
    assert store_entries(state) == [DEVICES[0]]


def test_a_real_fault_still_writes_the_persistent_store(state_dir: Path) -> None:
    cpu = hetero.device("cpu")
    quarantine.add(cpu, "DeviceLostError: real", "device-lost", injected=False)
    try:
        assert store_entries(state_dir) == ["cpu"]
    finally:
        quarantine.release(cpu)


def test_injected_entries_are_honoured_then_released_like_real_ones(state_dir: Path) -> None:
    cpu = hetero.device("cpu")
    entry = quarantine.add(cpu, "DeviceLostError: x (injected by fault rule 'cpu:launch:nth=1:lost')",
                           "device-lost", injected=True)
    assert entry.drill and quarantine.is_quarantined(cpu) and quarantine.entry("cpu") == entry
    assert "drill" in entry.describe()
    assert store_entries(state_dir) == []
    assert quarantine.release("cpu") and not quarantine.is_quarantined(cpu)


@needs_two
def test_a_hetero_run_drill_keeps_its_quarantine_within_the_run(tmp_path: Path) -> None:
    """The supervisor's quarantine for an injected fault report, and the guard's inside the worker,
    stay in the run: later workers of the run honour them, the user's store never sees them."""
    state, run_dir = tmp_path / "state", tmp_path / "run"
    first, second = DEVICES[0], DEVICES[1]
    script = tmp_path / "guarded.py"
    script.write_text(GUARDED)
    env = {**os.environ, "HETERO_STATE_DIR": str(state)}
    env.pop("HETERO_FAULTS", None)
    argv = [sys.executable, "-m", "hetero.launcher.cli", "--devices", f"{first},{second}", "--run-dir", str(run_dir),
            "--inject", f"{first}:alloc:nth=3:lost", str(script), first, second]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["quarantined"] is True and seen["auto"] != first  # the worker's guard quarantined, in the run
    shared = json.loads((run_dir / "drill-quarantine.json").read_text())  # where the run's processes see it
    assert [(e["name"], e["drill"]) for e in shared["entries"].values()] == [(first, True)]
    assert store_entries(state) == []


EXAMPLE_DRILLS = {
    "train_digits.py": ["--inject", f"{DEVICES[0]}:launch:nth=20:lost", "--steps", "12"],
    "train_digits_arrays.py": ["--inject", f"{DEVICES[0]}:launch:nth=30:lost", "--steps", "12"],  # 22 launches a step
    "train_digits_torch.py": ["--inject", "cpu:alloc:nth=5:lost", "--steps", "10"],
}


@pytest.mark.parametrize("example", sorted(EXAMPLE_DRILLS))
@pytest.mark.parametrize("found_by", ["HOME", "HETERO_STATE_DIR"])
def test_an_examples_drill_leaves_the_users_quarantine_as_it_was(tmp_path: Path, example: str, found_by: str) -> None:
    """What a newcomer runs: an example's --inject, with the user's own state dir (found from HOME,
    or set in HETERO_STATE_DIR), which already holds one real entry."""
    home = tmp_path / "home"
    home.mkdir()
    env = {key: value for key, value in os.environ.items() if key not in ("HETERO_STATE_DIR", "XDG_STATE_HOME")}
    env["HOME"] = str(home)
    user_store = home / ".local" / "state" / "hetero"
    if found_by == "HETERO_STATE_DIR":
        user_store = tmp_path / "state"
        env["HETERO_STATE_DIR"] = str(user_store)
    real = "from hetero.fault import quarantine; quarantine.add('GPU-9', 'Xid 79 (real)', 'device-lost', name='cuda:9')"
    run_python(real, env={"HETERO_STATE_DIR": str(user_store)})
    before = (user_store / "quarantine.json").read_bytes()
    done = subprocess.run([sys.executable, str(ROOT / "examples" / example), *EXAMPLE_DRILLS[example], "--json"],
                          env=env, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["recoveries"], done.stdout  # the drill did recover from its fault
    assert (user_store / "quarantine.json").read_bytes() == before
    assert store_entries(user_store) == ["cuda:9"]


def test_a_rule_that_never_fired_is_named_at_exit() -> None:
    result = run_python("import hetero; hetero.zeros(3, device='cpu')",
                        env={"HETERO_FAULTS": "cpu:launch:nth=999999:lost"})
    assert "cpu:launch:nth=999999:lost" in result.stderr and "never fired" in result.stderr
    assert "only reaches hetero operations" in result.stderr


def test_an_inject_block_names_its_unfired_rules_when_it_ends(caplog: pytest.LogCaptureFixture) -> None:
    # Told where the drill ends, not at interpreter exit (when a test runner's or an app's log
    # stream may be closed), and forgotten afterwards: a long process does not collect them.
    from hetero.fault import injection_report

    hetero.zeros(3, device="cpu")
    with caplog.at_level("WARNING", logger="hetero.fault.injection"):
        with hetero.fault.inject("cpu:launch:nth=999999:lost") as injection:
            hetero.zeros(3, device="cpu")
        told = [r.getMessage() for r in caplog.records if "never fired" in r.getMessage()]
    assert len(told) == 1 and "cpu:launch:nth=999999:lost" in told[0] and "only reaches hetero operations" in told[0]
    assert injection not in injection_report.watched()


def test_a_rule_that_fired_is_not_named_at_exit() -> None:
    result = run_python("import hetero\ntry:\n    hetero.zeros(3, device='cpu')\nexcept Exception:\n    pass",
                        env={"HETERO_FAULTS": "cpu:alloc:nth=1:oom"})
    assert "never fired" not in result.stderr


def test_inject_before_any_backend_is_open_validates_the_device() -> None:
    name = next((d.name for d in hetero.devices() if d.backend == "oneapi"), None)
    if name is None:
        pytest.skip("needs the oneapi backend")
    code = textwrap.dedent("""
        import hetero
        from hetero.core.errors import ConfigError
        try:
            hetero.fault.inject("oneapi:7:launch:nth=1:lost")
        except ConfigError as exc:
            print("refused:", exc)
    """)
    result = run_python(code)
    assert "refused:" in result.stdout and "oneapi:7" in result.stdout and name in result.stdout


def test_inject_after_a_backend_is_open_still_validates() -> None:
    hetero.devices()
    with pytest.raises(ConfigError, match="cpu:3"):
        hetero.fault.inject("cpu:3:launch:nth=1:lost")


@needs_two
@pytest.mark.parametrize("persist", [False, True])
def test_a_hetero_run_drill_persists_its_quarantine_only_when_asked(tmp_path: Path, persist: bool) -> None:
    """No guard in the worker: the worker's fault report reaches the supervisor, which quarantines."""
    state, first, second = tmp_path / "state", DEVICES[0], DEVICES[1]
    script = tmp_path / "plain.py"
    script.write_text("import hetero\nfor _ in range(3):\n    hetero.zeros(4)\nprint('on', hetero.device().name)\n")
    env = {**os.environ, "HETERO_STATE_DIR": str(state), **({"HETERO_FAULTS_PERSIST": "1"} if persist else {})}
    env.pop("HETERO_FAULTS", None)
    argv = [sys.executable, "-m", "hetero.launcher.cli", "--devices", f"{first},{second}", "--run-dir",
            str(tmp_path / "run"), "--inject", f"{first}:alloc:nth=2:lost", str(script)]
    done = subprocess.run(argv, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"on {second}" in done.stdout
    assert store_entries(state) == ([first] if persist else [])
    assert "never fired" not in done.stderr  # the restarted worker knows the run's rule fired already
