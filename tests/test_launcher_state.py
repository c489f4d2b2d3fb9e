"""hetero-run's records: the one LaunchConfig (its checks, what elastic ignores), the worker-state
machine, how a failed incarnation is classified, and the RunResult a supervised run returns."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from hetero.launcher.assign import OptionError
from hetero.launcher.config import LaunchConfig, Nodes
from hetero.launcher.faults import diagnose, exit_reason
from hetero.launcher.state import TRANSITIONS, RunResult, WorkerState, check_transition
from hetero.fault.protocol import FAULT_EXIT_CODE

TIMEOUT = 120


def config(tmp_path: Path, **fields: object) -> LaunchConfig:
    script = tmp_path / "train.py"
    script.write_text("x = 1\n")
    base: dict[str, object] = {"command": (str(script),), "run_dir": tmp_path / "run",
                               "checkpoint_dir": tmp_path / "run" / "checkpoints", "events": tmp_path / "events.jsonl"}
    return LaunchConfig(**{**base, **fields})  # type: ignore[arg-type]


@pytest.mark.parametrize(("fields", "message"), [
    ({"nproc": 0}, "--nproc must be at least 1"),
    ({"max_restarts": -1}, "--max-restarts must be 0 or more"),
    ({"heartbeat_timeout": float("nan")}, "--heartbeat-timeout must be"),
    ({"grace": -1.0}, "--grace must be 0 or more"),
    ({"policy": "fastest"}, "--policy must be one of spread, binpack"),
    ({"restart": "node"}, "--restart must be one of worker, group"),
    ({"master_port": 70000}, "--master-port must be a TCP port"),
    ({"metrics_addr": "example.org"}, "--metrics-addr must be an IP address"),
    ({"preload": ("torch", "not a module")}, "'not a module' is not one"),
    ({"inject": ("cpu:launch:nth=x:crash",)}, "--inject 'cpu:launch:nth=x:crash'"),
    ({"nodes": Nodes(count=2)}, "--nnodes > 1 needs --rdzv-endpoint"),
    ({"nodes": Nodes(count=2, rank=2, rdzv_endpoint="h:1")}, "--node-rank must be in 0..1"),
    ({"nodes": Nodes(count=2, rdzv_endpoint="host")}, "--rdzv-endpoint must be HOST:PORT"),
    ({"command": ()}, "name a script"),
    ({"command": ("missing.py",)}, "script 'missing.py' not found"),
])
def test_a_config_out_of_range_names_the_option(tmp_path: Path, fields: dict[str, object], message: str) -> None:
    with pytest.raises(OptionError) as raised:
        config(tmp_path, **fields)
    assert message in str(raised.value)


def test_elastic_runs_are_told_which_single_node_options_they_ignore(tmp_path: Path) -> None:
    plain = config(tmp_path, nodes=Nodes(count=2, rank=1, rdzv_endpoint="node0:29400"))
    assert plain.nodes.elastic and plain.ignored_under_elastic() == []
    tuned = config(tmp_path, grace=1.0, restart="group", preload=("torch",), nodes=plain.nodes)
    assert tuned.ignored_under_elastic() == ["--restart", "--grace", "--preload"]
    assert not config(tmp_path).nodes.elastic
    assert config(tmp_path, nodes=Nodes(rdzv_endpoint="node0:29400")).nodes.elastic  # one node, but a rendezvous


def test_every_state_has_its_moves_and_others_are_refused() -> None:
    assert set(TRANSITIONS) == set(WorkerState)
    check_transition(0, WorkerState.STARTING, WorkerState.HEALTHY)
    check_transition(0, WorkerState.SUCCEEDED, WorkerState.RESTARTING)  # a group restart takes it back
    for final in (WorkerState.FAILED, WorkerState.STOPPED):
        assert not TRANSITIONS[final]
    with pytest.raises(RuntimeError, match="worker 3 cannot go from init to healthy"):
        check_transition(3, WorkerState.INIT, WorkerState.HEALTHY)
    assert WorkerState.SUCCEEDED.describe("cpu") == "ok on cpu"
    assert WorkerState.FAILED.describe("oneapi:0") == "failed on oneapi:0"
    assert WorkerState.RESTARTING.describe("cpu") == "not finished"


def test_a_failed_incarnation_is_classified_by_its_report_else_its_exit() -> None:
    assert [exit_reason(c) for c in (0, FAULT_EXIT_CODE, -9, 3)] == ["ok", "fault", "crash", "error"]
    assert diagnose(-9, "crash", None)[:2] == ("crash", {"message": "killed by SIGKILL"})
    assert diagnose(-9, "hang", None).fault_class == "hang"
    assert diagnose(3, "error", None).fields == {"message": "exit status 3"}
    assert diagnose(FAULT_EXIT_CODE, "fault", None).fields == {"message": "exit status 86 without a fault report"}
    told = diagnose(FAULT_EXIT_CODE, "fault", {"fault_class": "device-lost", "quarantine": True, "ttl": None,
                                               "error_type": "DeviceLostError", "message": "gone"})
    assert told.fault_class == "device-lost" and told.verdict is not None and told.verdict.quarantine
    assert told.fields["error_type"] == "DeviceLostError"


def test_exit_codes_come_from_the_run_result() -> None:
    assert RunResult(WorkerState.SUCCEEDED).exit_code == 0
    assert RunResult(WorkerState.FAILED).exit_code == 1
    assert RunResult(WorkerState.FAILED, bad_option=True).exit_code == 2
    assert RunResult(WorkerState.STOPPED, stop_signal=15).exit_code == 143


RUN = '''
import json, sys
from pathlib import Path
from hetero.launcher.config import LaunchConfig
from hetero.launcher.supervisor import run

tmp, script = Path(sys.argv[1]), sys.argv[2]
result = run(LaunchConfig(command=(script,), run_dir=tmp / "run", checkpoint_dir=tmp / "ckpt", events=tmp / "events.jsonl",
                          devices="cpu", max_restarts=1, standby=False, restart_on="any"))
print(json.dumps({"state": result.state.value, "exit_code": result.exit_code, "reason": result.reason,
                  "workers": {r: [w.state.value, w.device, w.returncode, w.restarts] for r, w in result.workers.items()},
                  "failures": [[f.rank, f.fault_class, f.returncode, f.message] for f in result.failures]}))
'''


# restart_on="any": the program's own exit 3 is restarted until --max-restarts is used up (by default it
# ends the run at once: tests/test_launcher_restart_on.py)
@pytest.mark.parametrize(("body", "expected"), [
    ("x = 1\n", {"state": "succeeded", "exit_code": 0, "reason": None, "workers": {"0": ["succeeded", "cpu", 0, 0]},
                 "failures": []}),
    ("import sys; sys.exit(3)\n", {
        "state": "failed", "exit_code": 1,
        "reason": "worker 0 failed (error) and --max-restarts 1 is used up",
        "workers": {"0": ["failed", "cpu", 3, 1]},
        "failures": [[0, "error", 3, "exit status 3"], [0, "error", 3, "exit status 3"]]}),
])
def test_a_supervised_run_returns_how_each_rank_ended(tmp_path: Path, body: str, expected: dict[str, object]) -> None:
    script = tmp_path / "train.py"
    script.write_text(body)
    env = {**os.environ, "HETERO_STATE_DIR": str(tmp_path / "state")}
    env.pop("HETERO_FAULTS", None)
    done = subprocess.run([sys.executable, "-c", RUN, str(tmp_path), str(script)], env=env, capture_output=True,
                          text=True, timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == expected
    assert "hetero-run summary" in done.stderr  # the table is printed as from the command line
